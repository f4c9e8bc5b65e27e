"""Tree sum-product in scaled probability space: the fast path of the tree oracle's batch value
and gradient (the log-space kernels of :mod:`crfsdca.kernels.structures.tree` are the exact
fallback).

As for chains (``kernels/structures/chain.py``), potentials are exponentiated once: e[v, k] =
exp(unary[v, k] - max_k unary[v]) per node and E_t = exp(W_t - max W_t) per edge type. Upward
(children first), with every vector normalised to sum 1 and its log scale kept:

    in[v] = e[v] * prod_{c child of v} msg[c] / c_v,   L_v = max u[v] + log c_v + sum_c Lm_c,
    msg[v][j] = sum_k E[j, k] in[v, k] / s_v,          Lm_v = L_v + max W + log s_v,

so log Z = sum over roots of L_root. Downward (parents first): rest[j] = out[p, j] in[p, j] /
msg[v, j] (the parent's belief without v's message) and out[v, k] ~ sum_j rest[j] E[j, k];
p(y_v = k) ~ in[v, k] out[v, k] and p(y_p = j, y_v = k) ~ rest[j] E[j, k] in[v, k], each
normalised to sum 1. An example whose scaled entries fall below ``TINY`` (or are not finite) is
redone in log space by the caller.

Workspace ``sws = (e, inside, outside, msg, scale)``: four (>=n, K) and one (>=n,) float64.
"""

from __future__ import annotations

import numpy as np

from crfsdca.kernels.jit import njit
from crfsdca.kernels.numerics.fastmath import add_reassoc
from crfsdca.kernels.numerics.threads import chunk_bounds, map_chunks
from crfsdca.kernels.structures.tree import _example, downward, gold_score, tree_unary, upward

TINY = 1e-280


@njit(cache=True, nogil=True, error_model="numpy")
def _dot(x, y, K):
    """sum_k x[k] y[k], summed in any order (vectorised)."""
    acc = 0.0
    for k in range(K):
        acc = add_reassoc(acc, x[k] * y[k])
    return acc


@njit(cache=True, nogil=True, error_model="numpy")
def _outside(rest, table, out, K):
    """out[k] = sum_j rest[j] table[j, k], row by row of the table (unit stride)."""
    for k in range(K):
        out[k] = 0.0
    for j in range(K):
        r = rest[j]
        row = table[j]
        for k in range(K):
            out[k] += r * row[k]


@njit(cache=True, nogil=True)
def scaled_upward(unary, exp_pair, pair_max, parents, types, order, sws):
    """Fill e, inside, msg and the message log scales; return (log Z, ok)."""
    e, inside, _, msg, lscale = sws
    n, K = unary.shape
    for v in range(n):
        m = unary[v, 0]
        for k in range(1, K):
            m = max(m, unary[v, k])
        lscale[v] = m  # the node's log scale, to which the children's message scales are added
        for k in range(K):
            e[v, k] = np.exp(unary[v, k] - m)
            inside[v, k] = e[v, k]
    log_z = 0.0
    for idx in range(n - 1, -1, -1):
        v = order[idx]
        c = 0.0
        for k in range(K):
            c += inside[v, k]
        if not (c > TINY and c < np.inf):
            return 0.0, False
        inv = 1.0 / c
        for k in range(K):
            inside[v, k] *= inv
        lv = lscale[v] + np.log(c)
        p = parents[v]
        if p < 0:
            log_z += lv
            continue
        table = exp_pair[types[v]]
        s = 0.0
        for j in range(K):
            acc = _dot(table[j], inside[v], K)
            msg[v, j] = acc
            s += acc
        if not (s > TINY and s < np.inf):
            return 0.0, False
        inv = 1.0 / s
        for j in range(K):
            msg[v, j] *= inv
            if msg[v, j] < TINY:
                return 0.0, False  # the downward pass divides by it
            inside[p, j] *= msg[v, j]
        lscale[p] += lv + pair_max[types[v]] + np.log(s)
    return log_z, True


@njit(cache=True, nogil=True)
def scaled_downward(exp_pair, parents, types, order, sws, node, edge, sum_by_type):
    """After :func:`scaled_upward`: node marginals into node (n, K); edge marginals (row v: the
    edge parent(v)-v, [parent label, v's label]) added into ``edge[type]`` (n_types, K, K) when
    ``sum_by_type``, else written into ``edge[v]`` (n, K, K; roots' rows untouched).

    Returns False when an entry underflowed (the caller redoes the example in log space).
    """
    _, inside, outside, msg, _ = sws
    n, K = order.shape[0], inside.shape[1]
    rest = np.empty(K)
    for idx in range(n):
        v = order[idx]
        p = parents[v]
        if p < 0:
            for k in range(K):
                outside[v, k] = 1.0
        else:
            table = exp_pair[types[v]]
            for j in range(K):
                rest[j] = outside[p, j] * inside[p, j] / msg[v, j]
            _outside(rest, table, outside[v], K)
            z = _dot(outside[v], inside[v], K)
            if not (z > TINY and z < np.inf):
                return False
            inv = 1.0 / z
            if sum_by_type:
                out = edge[types[v]]
                for j in range(K):
                    r = rest[j] * inv
                    for k in range(K):
                        out[j, k] += r * table[j, k] * inside[v, k]
            else:
                out = edge[v]
                for j in range(K):
                    r = rest[j] * inv
                    for k in range(K):
                        out[j, k] = r * table[j, k] * inside[v, k]
        z = 0.0
        for k in range(K):
            node[v, k] = inside[v, k] * outside[v, k]
            z += node[v, k]
        if not (z > TINY and z < np.inf):
            return False
        inv = 1.0 / z
        for k in range(K):
            node[v, k] *= inv
            outside[v, k] *= inv  # keeps the outside vectors O(1) down the tree
    return True


@njit(cache=True, nogil=True)
def batch_value_and_gradient(data, graph, w, dims, ws, sws, log_node, log_edge, root_z, grad):
    """sum_i (log Z_i - w^T F_i) and its gradient (into grad, zeroed here), scaled space with
    the log-space fallback per example; returns (loss, first non-finite example or -1)."""
    seq_offsets, attr_offsets, attr_ids, attr_values, labels = data
    parents, types, order, child_start, _ = graph
    A, K, n_bias, n_types = dims
    grad[:] = 0.0
    off = (A + n_bias) * K
    log_pair = w[off : off + n_types * K * K].reshape(n_types, K, K)
    pair_max = np.empty(n_types)
    exp_pair = np.empty((n_types, K, K))
    for t in range(n_types):
        pair_max[t] = log_pair[t].max()
        for j in range(K):
            for k in range(K):
                exp_pair[t, j, k] = np.exp(log_pair[t, j, k] - pair_max[t])
    edge_sum = np.zeros((n_types, K, K))
    example_edges = np.zeros((n_types, K, K))
    node = ws[1]  # probabilities of the node marginals (the log-space work arrays are free)
    unary = ws[5]
    loss = 0.0
    b = A * K
    for i in range(seq_offsets.size - 1):
        s, e = seq_offsets[i], seq_offsets[i + 1]
        n = e - s
        tree_unary(data, graph, s, e, w, dims, unary)
        u = unary[:n]
        args = (parents[s:e], types[s:e], order[s:e])
        log_z, ok = scaled_upward(u, exp_pair, pair_max, *args, sws)
        if ok:
            example_edges[:] = 0.0
            ok = scaled_downward(exp_pair, *args, sws, node, example_edges, True)
            if ok:
                edge_sum += example_edges
        if not ok:
            log_z, _, _ = _example(data, graph, i, w, dims, ws, log_node, log_edge, root_z)
            if not np.isfinite(log_z):
                return loss, i
            for v in range(n):
                for k in range(K):
                    node[v, k] = np.exp(log_node[v, k])
                if parents[s + v] >= 0:
                    t = types[s + v]
                    for j in range(K):
                        for k in range(K):
                            edge_sum[t, j, k] += np.exp(log_edge[v, j, k])
        gold = gold_score(u, log_pair, labels, parents, types, s)
        for v in range(n):
            g = s + v
            y = labels[g]
            p = parents[g]
            if p >= 0:
                grad[off + types[g] * K * K + labels[s + p] * K + y] -= 1.0
            leaf = child_start[g + 1] == child_start[g]
            for k in range(K):
                m = node[v, k] - (1.0 if k == y else 0.0)
                if n_bias:
                    grad[b + k] += m
                    if p < 0:
                        grad[b + K + k] += m
                    if leaf:
                        grad[b + 2 * K + k] += m
            for q in range(attr_offsets[g], attr_offsets[g + 1]):
                row = attr_ids[q] * K
                x = attr_values[q]
                for k in range(K):
                    grad[row + k] += x * (node[v, k] - (1.0 if k == y else 0.0))
        loss += log_z - gold
    for t in range(n_types):
        for j in range(K):
            for k in range(K):
                grad[off + t * K * K + j * K + k] += edge_sum[t, j, k]
    return loss, -1


# -- one example at given potentials: the oracle calls of the stochastic solvers -----------------
# ``local = (parents, types, order, (children_start, children))`` of the example (its slices of
# the packed graph); ``tables = (log_pair, exp_pair, pair_max)`` one (K, K) table per type (or
# per edge, with types[v] = v); ``ws`` the log-space work arrays of kernels.structures.tree, ``sws``
# this module's; ``logs = (log_node (n, K), log_edge (n, K, K), root_z (n,))`` for the fallback.


@njit(cache=True, nogil=True)
def exp_tables(log_pair, exp_pair, pair_max):
    """exp_pair[t] = exp(log_pair[t] - pair_max[t]), pair_max[t] = max log_pair[t]."""
    T, K = log_pair.shape[0], log_pair.shape[1]
    for t in range(T):
        m = log_pair[t, 0, 0]
        for j in range(K):
            for k in range(K):
                m = max(m, log_pair[t, j, k])
        pair_max[t] = m
        for j in range(K):
            for k in range(K):
                exp_pair[t, j, k] = np.exp(log_pair[t, j, k] - m)


@njit(cache=True, nogil=True)
def log_partition(unary, tables, local, ws, sws):
    """log Z of one example: scaled upward pass, the log-space one when it leaves its range."""
    log_pair, exp_pair, pair_max = tables
    parents, types, order, _ = local
    log_z, ok = scaled_upward(unary, exp_pair, pair_max, parents, types, order, sws)
    if ok:
        return log_z
    return upward(unary, log_pair, parents, types, order, ws)


@njit(cache=True, nogil=True)
def marginal_sums(unary, tables, local, ws, sws, logs, node, edge_sum):
    """log Z of one example, node marginals into node (n, K) and its edge marginals summed by
    type into edge_sum (n_types, K, K) (zeroed here): scaled space, log space as fallback."""
    log_pair, exp_pair, pair_max = tables
    parents, types, order, children = local
    edge_sum[:] = 0.0
    log_z, ok = scaled_upward(unary, exp_pair, pair_max, parents, types, order, sws)
    if ok and scaled_downward(exp_pair, parents, types, order, sws, node, edge_sum, True):
        return log_z
    log_node, log_edge, root_z = logs
    edge_sum[:] = 0.0
    log_z = upward(unary, log_pair, parents, types, order, ws)
    if not np.isfinite(log_z):
        return log_z
    downward(unary, log_pair, parents, types, order, children, ws, root_z, log_node, log_edge)
    block_stats(log_node, log_edge, parents, types, node, edge_sum)
    return log_z


@njit(cache=True, nogil=True)
def block_stats(log_node, log_edge, parents, types, node, edge_sum):
    """Node marginals node (n, K) and edge marginals summed by type edge_sum (n_types, K, K)."""
    n, K = parents.shape[0], log_node.shape[1]
    edge_sum[:] = 0.0
    for v in range(n):
        for k in range(K):
            node[v, k] = np.exp(log_node[v, k])
        if parents[v] >= 0:
            out = edge_sum[types[v]]
            for j in range(K):
                for k in range(K):
                    out[j, k] += np.exp(log_edge[v, j, k])


@njit(cache=True, nogil=True)
def potential_marginals(node_pot, edge_pot, local, ws, sws, probs, log_node, log_edge):
    """log Z and log marginals of p(y) propto exp(sum_v node_pot[v, y_v] + sum_{v not a root}
    edge_pot[v, y_p(v), y_v]): potentials of every node and every edge (not tied by type).

    local = (parents, order, children, identity (n,) = 0..n-1); probs = (exp_edge (n, K, K),
    edge_max (n,), node (n, K), edge (n, K, K), root_z (n,)). Scaled space when every marginal
    stays >= TINY, else the exact log-space recursions of kernels.structures.tree. Roots' rows of
    edge_pot are ignored; those of log_edge are left untouched.
    """
    parents, order, children, identity = local
    exp_edge, edge_max, node, edge, root_z = probs
    n, K = node_pot.shape
    for v in range(n):
        if parents[v] >= 0:
            exp_tables(edge_pot[v : v + 1], exp_edge[v : v + 1], edge_max[v : v + 1])
    log_z, ok = scaled_upward(node_pot, exp_edge, edge_max, parents, identity, order, sws)
    if ok:
        ok = scaled_downward(exp_edge, parents, identity, order, sws, node, edge, False)
    for v in range(n if ok else 0):
        for k in range(K):
            ok &= node[v, k] >= TINY
            log_node[v, k] = min(np.log(node[v, k]), 0.0)
        for j in range(K if parents[v] >= 0 else 0):
            for k in range(K):
                ok &= edge[v, j, k] >= TINY
                log_edge[v, j, k] = min(np.log(edge[v, j, k]), 0.0)
    if ok:
        return log_z
    log_z = upward(node_pot, edge_pot, parents, identity, order, ws)
    if not np.isfinite(log_z):
        return log_z
    downward(node_pot, edge_pot, parents, identity, order, children, ws, root_z, log_node, log_edge)
    for v in range(n):  # rounding can leave a log marginal a hair above 0
        for k in range(K):
            log_node[v, k] = min(log_node[v, k], 0.0)
        for j in range(K if parents[v] >= 0 else 0):
            for k in range(K):
                log_edge[v, j, k] = min(log_edge[v, j, k], 0.0)
    return log_z


@njit(cache=True, nogil=True)
def _chunk_loss(data, graph, w, dims, lo, hi, tables):
    """sum of log Z_i - w^T F(x_i, y_i) over examples lo..hi-1 (upward passes only, in
    workspaces of its own); returns (loss, first example with a non-finite log Z or -1)."""
    seq_offsets, labels = data[0], data[4]
    parents, types, order, _, _ = graph
    K = dims[1]
    n = 1
    for i in range(lo, hi):
        n = max(n, seq_offsets[i + 1] - seq_offsets[i])
    ws = (np.empty((n, K)), np.empty((n, K)), np.empty((n, K)), np.empty((n, K)), np.empty(K))
    sws = (np.empty((n, K)), np.empty((n, K)), np.empty((n, K)), np.empty((n, K)), np.empty(n))
    unary = np.empty((n, K))
    loss = 0.0
    for i in range(lo, hi):
        s, e = seq_offsets[i], seq_offsets[i + 1]
        tree_unary(data, graph, s, e, w, dims, unary)
        u = unary[: e - s]
        local = (parents[s:e], types[s:e], order[s:e], 0)
        log_z = log_partition(u, tables, local, ws, sws)
        if not np.isfinite(log_z):
            return loss, i
        loss += log_z - gold_score(u, tables[0], labels, parents, types, s)
    return loss, -1


def batch_loss(data, graph, w, dims, n_chunks):
    """(sum_i log Z_i - w^T F(x_i, y_i), first example with a non-finite log Z or -1): the loss
    of :func:`batch_value_and_gradient` without the gradient, in at most ``n_chunks`` chunks of
    examples on threads (``numerics.threads.map_chunks``), summed in chunk order."""
    A, K, n_bias, n_types = dims
    off = (A + n_bias) * K
    log_pair = w[off : off + n_types * K * K].reshape(n_types, K, K)
    exp_pair, pair_max = np.empty((n_types, K, K)), np.empty(n_types)
    exp_tables(log_pair, exp_pair, pair_max)
    bounds = chunk_bounds(data[0], n_chunks)
    tables = (log_pair, exp_pair, pair_max)
    calls = [
        (data, graph, w, dims, int(bounds[c]), int(bounds[c + 1]), tables)
        for c in range(bounds.size - 1)
    ]
    loss, first_bad = 0.0, -1
    for part, bad in map_chunks(_chunk_loss, calls):
        loss += part
        if bad >= 0 and first_bad < 0:
            first_bad = bad
    return loss, first_bad
