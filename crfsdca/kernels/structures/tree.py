"""Sum-product and max-product on trees and forests, in log space, driven by a node order.

Notation: an example has ``n`` nodes and ``K`` labels. ``parents`` (n,) int64 holds each node's
parent (-1 for a root) and ``order`` (n,) int64 lists the nodes with every parent before its
children (:class:`crfsdca.structures.graphs.Tree` computes it). The edge of a non-root node v joins
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

from crfsdca.kernels.jit import njit
from crfsdca.kernels.numerics.logspace import logsumexp
from crfsdca.kernels.structures.items import item_scores


@njit(cache=True, nogil=True)
def upward(unary, log_pair, parents, types, order, ws, backptr=None):
    """Fill inside and msg (children before parents); return log Z (sum over the roots).

    inside[v] = unary[v] + sum of the children's messages; msg[v][j] = logsumexp_k(
    log_pair[types[v]][j, k] + inside[v, k]) for a non-root v. Given ``backptr`` (n, K) int64,
    the max-product pass of :func:`tree_viterbi` instead: the messages are maxima,
    backptr[v, j] their argmax, and 0 is returned (the roots are left to the decoder).
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
            if backptr is None:
                log_z += logsumexp(inside[v, :K])
            continue
        table = log_pair[types[v]]
        for j in range(K):
            if backptr is None:
                for k in range(K):
                    scratch[k] = table[j, k] + inside[v, k]
                msg[v, j] = logsumexp(scratch)
            else:
                top, arg = -np.inf, 0
                for k in range(K):
                    s = table[j, k] + inside[v, k]
                    if s > top:
                        top, arg = s, k
                msg[v, j] = top
                backptr[v, j] = arg
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

    best[v] = unary[v] + sum over children of max-messages (:func:`upward` with ``backptr``);
    backptr[v, j] = argmax_k of log_pair[types[v]][j, k] + best[v, k]; decoded from the roots
    down.
    """
    upward(unary, log_pair, parents, types, order, ws, backptr)
    best = ws[0]
    n, K = unary.shape
    total = 0.0
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
def _tree_terms(log_mu_node, log_mu_edge, log_nu_node, log_nu_edge, parents, degrees, relative):
    """sum_edges t(edge) - sum_nodes (degree - 1) t(node) with t = sum mu (log mu - log nu)
    if ``relative``, else sum mu log mu (0 log 0 = 0)."""
    n, K = log_mu_node.shape
    total = 0.0
    for v in range(n):
        tv = 0.0
        for k in range(K):
            lp = log_mu_node[v, k]
            if lp > -np.inf:
                tv += np.exp(lp) * (lp - log_nu_node[v, k] if relative else lp)
        total -= (degrees[v] - 1) * tv
        if parents[v] >= 0:
            for j in range(K):
                for k in range(K):
                    lp = log_mu_edge[v, j, k]
                    if lp > -np.inf:
                        total += np.exp(lp) * (lp - log_nu_edge[v, j, k] if relative else lp)
    return total


@njit(cache=True, nogil=True)
def tree_entropy_terms(log_node, log_edge, parents, degrees):
    """H = sum_edges H(edge) - sum_nodes (degree - 1) H(node), the junction-tree entropy
    (0 log 0 = 0); degrees (n,) int64 counts each node's edges."""
    return -_tree_terms(log_node, log_edge, log_node, log_edge, parents, degrees, False)


@njit(cache=True, nogil=True)
def tree_kl_terms(log_mu_node, log_mu_edge, log_nu_node, log_nu_edge, parents, degrees):
    """KL(mu || nu) of two tree-structured laws given by their marginals: edges minus nodes
    weighted by (degree - 1), each term sum mu (log mu - log nu) with 0 log 0 = 0."""
    return _tree_terms(log_mu_node, log_mu_edge, log_nu_node, log_nu_edge, parents, degrees, True)


# -- batches of examples: node scores, value and gradient, prediction --------------------------
# ``data = (seq_offsets, attr_offsets, attr_ids, attr_values, labels)`` as in SequenceData (an
# example's nodes are its items); ``graph = (parents, types, order, child_start, children)``
# packed over all nodes: parents, order and children hold indices local to each example,
# child_start (N + 1,) is a global CSR into children. ``dims = (A, K, n_bias, n_types)``.


@njit(cache=True, nogil=True)
def tree_unary(data, graph, s, e, w, dims, unary):
    """Node scores of the example on nodes s..e-1 into unary[:e-s]: sum_j value_j E[j] + bias
    rows (count on every node, root on roots, leaf on nodes without children)."""
    _, attr_offsets, attr_ids, attr_values, _ = data
    parents, _, _, child_start, _ = graph
    for v in range(e - s):
        g = s + v
        leaf = child_start[g + 1] == child_start[g]
        item_scores(attr_offsets, attr_ids, attr_values, g, w, dims, parents[g] < 0, leaf,
                    unary[v])  # fmt: skip


@njit(cache=True, nogil=True)
def _example(data, graph, i, w, dims, ws, log_node, log_edge, root_z):
    """log Z of example i; fills its log marginals (rows 0..n-1 of log_node, log_edge)."""
    seq_offsets = data[0]
    parents, types, order, child_start, children = graph
    s, e = seq_offsets[i], seq_offsets[i + 1]
    A, K, _, n_types = dims
    unary = ws[5]
    tree_unary(data, graph, s, e, w, dims, unary)
    u = unary[: e - s]
    off = (A + dims[2]) * K
    log_pair = w[off : off + n_types * K * K].reshape(n_types, K, K)
    args = (u, log_pair, parents[s:e], types[s:e], order[s:e])
    log_z = upward(*args, ws[:5])
    downward(*args, (child_start[s : e + 1], children), ws[:5], root_z, log_node, log_edge)
    return log_z, u, log_pair


@njit(cache=True, nogil=True)
def gold_score(u, log_pair, labels, parents, types, s):
    """w^T F(x, y) of the example whose nodes start at row ``s``: the unary scores ``u`` (n, K)
    of its labels plus the edge scores of its (parent label, label) pairs."""
    gold = 0.0
    for v in range(u.shape[0]):
        g = s + v
        y = labels[g]
        gold += u[v, y]
        p = parents[g]
        if p >= 0:
            gold += log_pair[types[g], labels[s + p], y]
    return gold


@njit(cache=True, nogil=True)
def tree_value_and_gradient(data, graph, w, dims, ws, log_node, log_edge, root_z, grad):
    """sum_i (log Z_i - w^T F(x_i, y_i)) and its gradient sum_i E_nu_i F - F_i (into grad,
    zeroed here); returns (loss, index of the first example with a non-finite log Z or -1)."""
    seq_offsets, attr_offsets, attr_ids, attr_values, labels = data
    parents, types, _, child_start, _ = graph
    A, K, n_bias, _ = dims
    grad[:] = 0.0
    loss = 0.0
    b, off = A * K, (A + n_bias) * K
    for i in range(seq_offsets.size - 1):
        s, e = seq_offsets[i], seq_offsets[i + 1]
        log_z, u, log_pair = _example(data, graph, i, w, dims, ws, log_node, log_edge, root_z)
        if not np.isfinite(log_z):
            return loss, i
        gold = gold_score(u, log_pair, labels, parents, types, s)
        for v in range(e - s):
            g = s + v
            y = labels[g]
            p = parents[g]
            for k in range(K):
                m = np.exp(log_node[v, k]) - (1.0 if k == y else 0.0)
                if n_bias:
                    grad[b + k] += m
                    if p < 0:
                        grad[b + K + k] += m
                    if child_start[g + 1] == child_start[g]:
                        grad[b + 2 * K + k] += m
                for q in range(attr_offsets[g], attr_offsets[g + 1]):
                    grad[attr_ids[q] * K + k] += attr_values[q] * m
            if p >= 0:
                t0 = off + types[g] * K * K
                yp = labels[s + p]
                for j in range(K):
                    for k in range(K):
                        grad[t0 + j * K + k] += np.exp(log_edge[v, j, k])
                grad[t0 + yp * K + y] -= 1.0
        loss += log_z - gold
    return loss, -1


@njit(cache=True, nogil=True)
def tree_predict(data, graph, w, dims, ws, backptr, out):
    """MAP labels of every node of every example into out (N,) int64."""
    seq_offsets = data[0]
    parents, types, order, _, _ = graph
    A, K, n_bias, n_types = dims
    off = (A + n_bias) * K
    log_pair = w[off : off + n_types * K * K].reshape(n_types, K, K)
    for i in range(seq_offsets.size - 1):
        s, e = seq_offsets[i], seq_offsets[i + 1]
        unary = ws[5]
        tree_unary(data, graph, s, e, w, dims, unary)
        args = (unary[: e - s], log_pair, parents[s:e], types[s:e], order[s:e])
        tree_viterbi(*args, ws[:5], backptr, out[s:e])
