"""Sum-product and max-product on trees and forests, in log space, driven by a node order.

Notation: an example has ``n`` nodes and ``K`` labels. ``parents`` (n,) int64 holds each node's
parent (-1 for a root) and ``order`` (n,) int64 lists the nodes with every parent before its
children (:class:`crfsdca.graphs.Tree` computes it). The edge of a non-root node v joins
``parents[v]`` and v; its score table is ``log_pair[types[v]]`` (K, K), indexed
[label of the parent, label of v]. ``unary`` (n, K) holds the node scores, so that

    p(y | x) = exp(sum_v unary[v, y_v] + sum_{v not a root} log_pair[types[v]][y_p(v), y_v]) / Z.

Upward pass (children before parents): inside[v] = unary[v] + sum_{c child of v} m_c with the
message m_v[j] = logsumexp_k(log_pair[types[v]][j, k] + inside[v, k]); log Z = sum over roots of
logsumexp(inside[root]). Downward pass (parents first): outside[root] = 0 and
outside[v, k] = logsumexp_j(outside[p, j] + inside[p, j] - m_v[j] + log_pair[types[v]][j, k]).
Then log p(y_v = k) = inside[v, k] + outside[v, k] - log Z_r (Z_r of v's tree) and
log p(y_p = j, y_v = k) = outside[p, j] + inside[p, j] - m_v[j] + log_pair[..][j, k]
+ inside[v, k] - log Z_r. ``inside - m`` is the parent's inside without v's message: it is
computed as the sum of the other messages, never by subtraction, so -inf scores stay exact.

The workspace ``ws = (inside, outside, msg, rest, scratch)``: four (>=n, K) float64 and one
(K,) float64, caller-owned. Kernels neither raise nor print: a non-finite log Z is returned.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from crfsdca.kernels.logspace import logsumexp


@njit(cache=True, nogil=True)
def upward(unary, log_pair, parents, types, order, ws):
    """Fill inside and msg (children before parents); return log Z (sum over the roots).

    inside[v] = unary[v] + sum of the children's messages; msg[v][j] = logsumexp_k(
    log_pair[types[v]][j, k] + inside[v, k]) for a non-root v.
    """
    inside, _, msg, _, scratch = ws
    n, K = unary.shape
    for v in range(n):
        for k in range(K):
            inside[v, k] = unary[v, k]
    log_z = 0.0
    for idx in range(n - 1, -1, -1):
        v = order[idx]
        p = parents[v]
        if p < 0:
            log_z += logsumexp(inside[v, :K])
            continue
        table = log_pair[types[v]]
        for j in range(K):
            for k in range(K):
                scratch[k] = table[j, k] + inside[v, k]
            msg[v, j] = logsumexp(scratch)
        for j in range(K):
            inside[p, j] += msg[v, j]
    return log_z


@njit(cache=True, nogil=True)
def _rest(v, p, unary, parents, msg, children_start, children, rest):
    """rest[j] = inside[p, j] without the message of child v (sum of the others, exact)."""
    K = unary.shape[1]
    for j in range(K):
        rest[j] = unary[p, j]
    for c_idx in range(children_start[p], children_start[p + 1]):
        c = children[c_idx]
        if c != v:
            for j in range(K):
                rest[j] += msg[c, j]


@njit(cache=True, nogil=True)
def downward(unary, log_pair, parents, types, order, children, ws, root_log_z, log_node, log_edge):
    """Fill outside, log_node (n, K) and log_edge (n, K, K) (row v: the edge parent(v)-v;
    rows of roots are left untouched). ``root_log_z`` (n,) holds log Z of each node's tree
    (filled here from the inside of its root). ``children = (children_start, children)``."""
    inside, outside, msg, rest_all, scratch = ws
    children_start, child_list = children
    n, K = unary.shape
    for idx in range(n):
        v = order[idx]
        p = parents[v]
        if p < 0:
            root_log_z[v] = logsumexp(inside[v, :K])
            for k in range(K):
                outside[v, k] = 0.0
        else:
            root_log_z[v] = root_log_z[p]
            rest = rest_all[v]
            _rest(v, p, unary, parents, msg, children_start, child_list, rest)
            table = log_pair[types[v]]
            for j in range(K):
                rest[j] += outside[p, j]
            for k in range(K):
                for j in range(K):
                    scratch[j] = rest[j] + table[j, k]
                outside[v, k] = logsumexp(scratch)
            for j in range(K):
                for k in range(K):
                    log_edge[v, j, k] = rest[j] + table[j, k] + inside[v, k] - root_log_z[v]
        for k in range(K):
            log_node[v, k] = inside[v, k] + outside[v, k] - root_log_z[v]


@njit(cache=True, nogil=True)
def tree_viterbi(unary, log_pair, parents, types, order, ws, backptr, out):
    """MAP labels into out (n,) int64; returns the best total score (sum over the roots).

    best[v] = unary[v] + sum over children of max-messages; backptr[v, j] = argmax_k of
    log_pair[types[v]][j, k] + best[v, k]; decoded from the roots down.
    """
    best, _, msg, _, _ = ws
    n, K = unary.shape
    for v in range(n):
        for k in range(K):
            best[v, k] = unary[v, k]
    total = 0.0
    for idx in range(n - 1, -1, -1):
        v = order[idx]
        p = parents[v]
        if p < 0:
            continue
        table = log_pair[types[v]]
        for j in range(K):
            top, arg = -np.inf, 0
            for k in range(K):
                s = table[j, k] + best[v, k]
                if s > top:
                    top, arg = s, k
            msg[v, j] = top
            backptr[v, j] = arg
        for j in range(K):
            best[p, j] += msg[v, j]
    for idx in range(n):
        v = order[idx]
        p = parents[v]
        if p < 0:
            top, arg = -np.inf, 0
            for k in range(K):
                if best[v, k] > top:
                    top, arg = best[v, k], k
            out[v] = arg
            total += top
        else:
            out[v] = backptr[v, out[p]]
    return total


@njit(cache=True, nogil=True)
def tree_entropy_terms(log_node, log_edge, parents, degrees):
    """H = sum_edges H(edge) - sum_nodes (degree - 1) H(node), the junction-tree entropy
    (0 log 0 = 0); degrees (n,) int64 counts each node's edges."""
    n, K = log_node.shape
    h = 0.0
    for v in range(n):
        hv = 0.0
        for k in range(K):
            lp = log_node[v, k]
            if lp > -np.inf:
                hv -= np.exp(lp) * lp
        h -= (degrees[v] - 1) * hv
        if parents[v] >= 0:
            for j in range(K):
                for k in range(K):
                    lp = log_edge[v, j, k]
                    if lp > -np.inf:
                        h -= np.exp(lp) * lp
    return h


@njit(cache=True, nogil=True)
def tree_kl_terms(log_mu_node, log_mu_edge, log_nu_node, log_nu_edge, parents, degrees):
    """KL(mu || nu) of two tree-structured laws given by their marginals: edges minus nodes
    weighted by (degree - 1), each term sum mu (log mu - log nu) with 0 log 0 = 0."""
    n, K = log_mu_node.shape
    kl = 0.0
    for v in range(n):
        kv = 0.0
        for k in range(K):
            lp = log_mu_node[v, k]
            if lp > -np.inf:
                kv += np.exp(lp) * (lp - log_nu_node[v, k])
        kl -= (degrees[v] - 1) * kv
        if parents[v] >= 0:
            for j in range(K):
                for k in range(K):
                    lp = log_mu_edge[v, j, k]
                    if lp > -np.inf:
                        kl += np.exp(lp) * (lp - log_nu_edge[v, j, k])
    return kl
