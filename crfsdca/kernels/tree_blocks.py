"""The tree's SDCA primitives (``crfsdca.kernels.primitives``) on :class:`TreeBlocks`.

A tree block (example i, n nodes, K labels) is laid out edges first: row v of its n K^2 edge
entries is the edge parent(v)-v (roots' rows are in no run), then its n K node entries. The
oracle is the scaled upward-downward pass of ``crfsdca.kernels.tree_scaled``, with the exact
log-space recursions of ``crfsdca.kernels.tree`` where an entry underflows. The primal
direction lives on the example's distinct attributes (the nodes' ``SequenceLayout``), the
bias rows (count, root, leaf) and the transition block of each edge type.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit
from numba.extending import overload

from crfsdca.kernels import primitives as P
from crfsdca.kernels.rowops import scale_rows_into
from crfsdca.kernels.sdca import _axpy, _squared_norm, add_direction
from crfsdca.kernels.tree import _example, tree_unary
from crfsdca.kernels.tree_scaled import scaled_marginals, scaled_upward


class TreeBlocks(NamedTuple):
    """Packed trees: ``layout`` the nodes' ``SequenceLayout``, ``graph`` = (parents, types,
    order, child_start, children) as in ``kernels.tree``, ``dims`` = (A, K, n_bias, n_types),
    the run table, and the largest example's nodes, distinct attributes and block size."""

    layout: tuple
    graph: tuple
    dims: tuple
    runs: P.RunTable
    max_n: int
    max_U: int
    max_block: int


def _is_tree(s):
    return P.is_structure(s, TreeBlocks)


@njit(cache=True, nogil=True)
def _workspace(max_n, K, max_U, n_bias, n_types):
    """Oracle buffers (log space, scaled, root log Z), the direction's rows and its bias and
    transition rows."""
    n = max(max_n, 1)
    oracle = (
        np.empty((n, K)), np.empty((n, K)), np.empty((n, K)), np.empty((n, K)), np.empty(K),
        np.empty((n, K)),
    )  # fmt: skip
    scaled = (np.empty((n, K)), np.empty((n, K)), np.empty((n, K)), np.empty((n, K)), np.empty(n))
    rows = np.empty((max(max_U, 1), K))
    rest = np.empty((n_bias + n_types * K, K))
    return oracle, scaled, np.empty(n), rows, rest


@overload(P.step_workspace, jit_options={"cache": True})
def _ov_step_workspace(s):
    if _is_tree(s):
        return lambda s: _workspace(s.max_n, s.dims[1], s.max_U, s.dims[2], s.dims[3])


@njit(cache=True, nogil=True)
def _views(buf, n, K):
    """(node (n, K), edge (n, K, K)) views of a flat block buffer."""
    E = n * K * K
    return buf[E : E + n * K].reshape((n, K)), buf[:E].reshape((n, K, K))


@njit(cache=True, nogil=True)
def _scaled_oracle(s, i, w, sws, nu_n, nu_e):
    """nu_i's probabilities by the scaled recursions; False when they underflow."""
    data, graph = s.layout, s.graph
    parents, types, order = graph[0], graph[1], graph[2]
    A, K, n_bias, n_types = s.dims
    a, b = data[0][i], data[0][i + 1]
    unary = sws[0][5]
    tree_unary(data[:5], graph, a, b, w, s.dims, unary)
    off = (A + n_bias) * K
    log_pair = w[off : off + n_types * K * K].reshape(n_types, K, K)
    pair_max = np.empty(n_types)
    exp_pair = np.empty((n_types, K, K))
    for t in range(n_types):
        pair_max[t] = log_pair[t].max()
        for j in range(K):
            for k in range(K):
                exp_pair[t, j, k] = np.exp(log_pair[t, j, k] - pair_max[t])
    args = (parents[a:b], types[a:b], order[a:b])
    _, ok = scaled_upward(unary[: b - a], exp_pair, pair_max, *args, sws[1])
    if not ok:
        return False
    return scaled_marginals(exp_pair, *args, sws[1], nu_n, nu_e)


@overload(P.block_oracle, jit_options={"cache": True})
def _ov_block_oracle(s, i, w, sws, bufs):
    if _is_tree(s):

        def impl(s, i, w, sws, bufs):
            a, b = s.layout[0][i], s.layout[0][i + 1]
            n, K = b - a, s.dims[1]
            par = s.graph[0][a:b]
            nu_n, nu_e = _views(bufs[1], n, K)
            ln_n, ln_e = _views(bufs[2], n, K)
            log_z = 0.0
            if _scaled_oracle(s, i, w, sws, nu_n, nu_e):
                for v in range(n):
                    for k in range(K):
                        ln_n[v, k] = np.log(nu_n[v, k])
                    if par[v] >= 0:
                        for j in range(K):
                            for k in range(K):
                                ln_e[v, j, k] = np.log(nu_e[v, j, k])
            else:  # an entry underflowed: the exact log-space recursions
                log_z, _, _ = _example(s.layout[:5], s.graph, i, w, s.dims, sws[0], ln_n, ln_e,
                                       sws[2])  # fmt: skip
                if not np.isfinite(log_z):
                    return log_z
            for v in range(n):  # clip the logs at 0; roots' edge rows are in no run
                for k in range(K):
                    ln_n[v, k] = min(ln_n[v, k], 0.0)
                    nu_n[v, k] = np.exp(ln_n[v, k])
                if par[v] >= 0:
                    for j in range(K):
                        for k in range(K):
                            ln_e[v, j, k] = min(ln_e[v, j, k], 0.0)
                            nu_e[v, j, k] = np.exp(ln_e[v, j, k])
            return log_z

        return impl


@overload(P.block_direction, jit_options={"cache": True})
def _ov_block_direction(s, i, bufs, sws, kappa):
    if _is_tree(s):

        def impl(s, i, bufs, sws, kappa):
            lay, graph = s.layout, s.graph
            parents, types, child_start = graph[0], graph[1], graph[3]
            A, K, n_bias, n_types = s.dims
            a, b = lay[0][i], lay[0][i + 1]
            n = b - a
            U = lay[6][i + 1] - lay[6][i]
            rows, rest = sws[3], sws[4]
            rows[:U] = 0.0
            rest[:] = 0.0
            flat_rows = rows.reshape(rows.shape[0] * K)
            E = n * K * K
            mu, nu = bufs[0], bufs[1]
            d = np.empty(K)
            dd = np.empty(K * K)
            for v in range(n):
                g = a + v
                for k in range(K):
                    d[k] = nu[E + v * K + k] - mu[E + v * K + k]
                scale_rows_into(d, flat_rows, lay[5], lay[3], lay[1][g], lay[1][g + 1], K)
                if n_bias > 0:
                    _axpy(1.0, d, rest[0], K)
                    if parents[g] < 0:
                        _axpy(1.0, d, rest[1], K)
                    if child_start[g + 1] == child_start[g]:
                        _axpy(1.0, d, rest[2], K)
                if parents[g] >= 0:
                    for j in range(K * K):
                        dd[j] = nu[v * K * K + j] - mu[v * K * K + j]
                    block = rest[n_bias + types[g] * K : n_bias + (types[g] + 1) * K]
                    _axpy(1.0, dd, block.reshape(K * K), K * K)
            norm = _squared_norm(rows[:U].reshape(U * K)) + _squared_norm(rest.reshape(-1))
            return kappa * kappa * norm

        return impl


@overload(P.add_block_direction, jit_options={"cache": True})
def _ov_add_block_direction(s, i, coef, sws, w):
    if _is_tree(s):

        def impl(s, i, coef, sws, w):
            lay = s.layout
            sa = lay[7][lay[6][i] : lay[6][i + 1]]
            add_direction(coef, sa, sws[3], sws[4], w, s.dims[1], s.dims[0])

        return impl


@njit(cache=True, nogil=True)
def expected_features(data, graph, log_node, log_edge, dims, out):
    """out += sum_i E_mu_i F(x_i, .) for marginals stored like the dual state."""
    seq_offsets, attr_offsets, attr_ids, attr_values, _ = data
    parents, types, _, child_start, _ = graph
    A, K, n_bias, _ = dims
    off = (A + n_bias) * K
    for g in range(seq_offsets[-1]):
        for k in range(K):
            m = np.exp(log_node[g, k])
            for q in range(attr_offsets[g], attr_offsets[g + 1]):
                out[attr_ids[q] * K + k] += attr_values[q] * m
            if n_bias:
                out[A * K + k] += m
                if parents[g] < 0:
                    out[A * K + K + k] += m
                if child_start[g + 1] == child_start[g]:
                    out[A * K + 2 * K + k] += m
        if parents[g] >= 0:
            t0 = off + types[g] * K * K
            for j in range(K):
                for k in range(K):
                    out[t0 + j * K + k] += np.exp(log_edge[g, j, k])


def tree_run_table(seq_offsets: np.ndarray, parents: np.ndarray, degrees: np.ndarray, K: int):
    """The runs of every tree block: maximal stretches of non-root edge rows (+1), then the
    node tables with 1 - degree(v), adjacent nodes of one coefficient merged."""
    start, lo, hi, coef, dst, off = [0], [], [], [], [], []
    for i in range(seq_offsets.size - 1):
        a, b = int(seq_offsets[i]), int(seq_offsets[i + 1])
        n = b - a
        v = 0
        while v < n:  # edge rows of non-root nodes
            if parents[a + v] < 0:
                v += 1
                continue
            u = v
            while u < n and parents[a + u] >= 0:
                u += 1
            lo.append(v * K * K), hi.append(u * K * K), coef.append(1.0)
            dst.append(0), off.append((a + v) * K * K)
            v = u
        E = n * K * K
        v = 0
        while v < n:  # node tables, merged by coefficient
            c = 1.0 - float(degrees[a + v])
            u = v + 1
            while u < n and 1.0 - float(degrees[a + u]) == c:
                u += 1
            lo.append(E + v * K), hi.append(E + u * K), coef.append(c)
            dst.append(1), off.append((a + v) * K)
            v = u
        start.append(len(lo))
    as64 = lambda x: np.array(x, np.int64)  # noqa: E731
    return P.RunTable(as64(start), as64(lo), as64(hi), np.array(coef), as64(dst), as64(off))
