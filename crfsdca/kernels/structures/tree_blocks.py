"""The tree's SDCA primitives (``crfsdca.kernels.primitives``) on :class:`TreeBlocks`.

A tree block (example i, n nodes, K labels) is laid out edges first: row v of its n K^2 edge
entries is the edge parent(v)-v (roots' rows are in no run), then its n K node entries. The
oracle is the scaled upward-downward pass of ``crfsdca.kernels.structures.tree_scaled``, with the
exact log-space recursions of ``crfsdca.kernels.structures.tree`` where an entry underflows. The
primal direction lives on the example's distinct attributes (the nodes' ``SequenceLayout``), the
bias rows (count, root, leaf) and the transition block of each edge type.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from crfsdca.kernels import primitives as P
from crfsdca.kernels.jit import njit
from crfsdca.kernels.numerics.fastmath import fast_exp, fast_log
from crfsdca.kernels.numerics.rowops import scale_rows_into
from crfsdca.kernels.primitives import SAGVisit, make_visit
from crfsdca.kernels.structures import hamming as H
from crfsdca.kernels.structures.direction import (
    _axpy,
    _squared_norm,
    add_direction,
    direction_entries,
)
from crfsdca.kernels.structures.items import add_item_rows, add_item_scores, scale_scores
from crfsdca.kernels.structures.tree import _example, gold_score, tree_unary, tree_viterbi
from crfsdca.kernels.structures.tree_scaled import exp_tables, scaled_downward, scaled_upward
from crfsdca.kernels.structures.tree_scaled import log_partition as sag_log_partition
from crfsdca.kernels.structures.tree_scaled import marginal_sums as sag_marginal_sums

VEC = {"cache": True, "nogil": True, "error_model": "numpy"}


class TreeBlocks(NamedTuple):
    """Packed trees: ``layout`` the nodes' ``SequenceLayout``, ``graph`` = (parents, types,
    order, child_start, children) as in ``kernels.structures.tree``, ``dims`` = (A, K, n_bias,
    n_types), the run table, and the largest example's nodes, distinct attributes and block size."""

    layout: tuple
    graph: tuple
    dims: tuple
    runs: P.RunTable
    max_n: int
    max_U: int
    max_block: int


class TreeStepWorkspace(NamedTuple):
    """A tree step's buffers: the oracle's (log space, whose last array holds the node scores;
    scaled; root log Z), the direction's rows of the distinct attributes and its bias and
    transition rows, the exponentiated transition tables and their maxima."""

    log_space: tuple
    scaled: tuple
    root_z: np.ndarray
    rows: np.ndarray
    rest: np.ndarray
    exp_pair: np.ndarray
    pair_max: np.ndarray


def _workspace(max_n, K, max_U, n_bias, n_types):
    """The :class:`TreeStepWorkspace` of examples of up to max_n nodes."""
    n = max(max_n, 1)
    oracle = (
        np.empty((n, K)), np.empty((n, K)), np.empty((n, K)), np.empty((n, K)), np.empty(K),
        np.empty((n, K)),
    )  # fmt: skip
    scaled = (np.empty((n, K)), np.empty((n, K)), np.empty((n, K)), np.empty((n, K)), np.empty(n))
    rows = np.empty((max(max_U, 1), K))
    rest = np.empty((n_bias + n_types * K, K))
    tables = (np.empty((n_types, K, K)), np.empty(n_types))
    return TreeStepWorkspace(oracle, scaled, np.empty(n), rows, rest, *tables)


@P.builds_workspace(TreeBlocks)
def _step_workspace(s):
    return _workspace(s.max_n, s.dims[1], s.max_U, s.dims[2], s.dims[3])


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
    unary = sws.log_space[5]
    tree_unary(data[:5], graph, a, b, w, s.dims, unary)
    off = (A + n_bias) * K
    log_pair = w[off : off + n_types * K * K].reshape(n_types, K, K)
    exp_pair, pair_max = sws.exp_pair, sws.pair_max
    for t in range(n_types):
        pair_max[t] = log_pair[t].max()
        for j in range(K):
            for k in range(K):
                exp_pair[t, j, k] = np.exp(log_pair[t, j, k] - pair_max[t])
    args = (parents[a:b], types[a:b], order[a:b])
    _, ok = scaled_upward(unary[: b - a], exp_pair, pair_max, *args, sws.scaled)
    if not ok:
        return False
    return scaled_downward(exp_pair, *args, sws.scaled, nu_n, nu_e, False)


@njit(**VEC)
def _clip_log(p, lp):
    """p <- min(p, 1) and lp <- log p (<= 0) on a row of probabilities."""
    for j in range(p.shape[0]):
        q = min(p[j], 1.0)
        p[j] = q
        lp[j] = min(fast_log(q), 0.0)


@njit(**VEC)
def _clip_exp(lp, p):
    """lp <- min(lp, 0) and p <- exp(lp) on a row of log-probabilities."""
    for j in range(p.shape[0]):
        v = min(lp[j], 0.0)
        lp[j] = v
        p[j] = fast_exp(v)


@P.implements(P.block_oracle, TreeBlocks)
def _block_oracle(s, i, w, sws, bufs):
    a, b = s.layout.seq_offsets[i], s.layout.seq_offsets[i + 1]
    n, K = b - a, s.dims[1]
    par = s.graph[0][a:b]
    nu, lnu = bufs.nu, bufs.log_nu
    nu_n, nu_e = _views(nu, n, K)
    ln_n, ln_e = _views(lnu, n, K)
    E, KK = n * K * K, K * K
    log_z = 0.0
    scaled = _scaled_oracle(s, i, w, sws, nu_n, nu_e)
    if not scaled:  # an entry underflowed: the exact log-space recursions
        log_z, _, _ = _example(s.layout[:5], s.graph, i, w, s.dims, sws.log_space, ln_n, ln_e,
                               sws.root_z)  # fmt: skip
        if not np.isfinite(log_z):
            return log_z
    for v in range(n):  # roots' edge rows are in no run
        if scaled:
            _clip_log(nu[E + v * K : E + v * K + K], lnu[E + v * K : E + v * K + K])
            if par[v] >= 0:
                _clip_log(nu[v * KK : v * KK + KK], lnu[v * KK : v * KK + KK])
        else:
            _clip_exp(lnu[E + v * K : E + v * K + K], nu[E + v * K : E + v * K + K])
            if par[v] >= 0:
                _clip_exp(lnu[v * KK : v * KK + KK], nu[v * KK : v * KK + KK])
    return log_z


@P.implements(P.block_direction, TreeBlocks)
def _block_direction(s, i, bufs, sws, kappa):
    lay, graph = s.layout, s.graph
    parents, types, child_start = graph[0], graph[1], graph[3]
    A, K, n_bias, n_types = s.dims
    a, b = lay.seq_offsets[i], lay.seq_offsets[i + 1]
    n = b - a
    U = lay.uattr_offsets[i + 1] - lay.uattr_offsets[i]
    rows, rest = sws.rows, sws.rest
    rows[:U] = 0.0
    rest[:] = 0.0
    flat_rows = rows.reshape(rows.shape[0] * K)
    E = n * K * K
    mu, nu = bufs.mu, bufs.nu
    d = np.empty(K)
    dd = np.empty(K * K)
    for v in range(n):
        g = a + v
        for k in range(K):
            d[k] = nu[E + v * K + k] - mu[E + v * K + k]
        scale_rows_into(
            d,
            flat_rows,
            lay.entry_slot,
            lay.attr_values,
            lay.attr_offsets[g],
            lay.attr_offsets[g + 1],
            K,
        )
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


@P.implements(P.add_block_direction, TreeBlocks)
def _add_block_direction(s, i, coef, sws, w):
    lay = s.layout
    sa = lay.slot_attrs[lay.uattr_offsets[i] : lay.uattr_offsets[i + 1]]
    add_direction(coef, sa, sws.rows, sws.rest, w, s.dims[1], s.dims[0])


@P.implements(P.block_direction_entries, TreeBlocks)
def _block_direction_entries(s, i, sws, idx, val):
    lay = s.layout
    sa = lay.slot_attrs[lay.uattr_offsets[i] : lay.uattr_offsets[i + 1]]
    return direction_entries(sa, sws.rows, sws.rest, s.dims[1], s.dims[0], idx, val)


@P.implements(P.direction_capacity, TreeBlocks)
def _direction_capacity(s, sws):
    return sws.rows.size + sws.rest.size


# -- SAG-NUS ------------------------------------------------------------------------------------
# y_i is stored as the node marginals (n_i, K) and, per edge type, the summed edge marginals
# (n_types, K, K) of the last visit; a gradient is held compactly as the rows of the example's
# distinct attributes ``emit`` (U, K) and ``rest`` (n_bias + n_types K, K): the bias rows (count,
# root, leaf), then the transition block of every edge type. The oracle calls are
# ``tree_scaled.marginal_sums`` at w (log-space fallback) and one upward pass per trial.
@njit(cache=True, nogil=True)
def _sag_scores(layout, graph, s, e, z, c, dims, unary, log_pair):
    """Node scores unary (n, K) and transition tables log_pair (n_types, K, K) of w = c z."""
    A, K, n_bias, n_types = dims
    tree_unary(layout[:5], graph, s, e, z, dims, unary)
    scale_scores(c, e - s, K, unary, z, (A + n_bias) * K, log_pair)


@njit(cache=True, nogil=True)
def _gold_score(ex, unary, log_pair):
    """Score of the gold labelling of example ex = (s, e, layout, graph)."""
    s, e, layout, graph = ex
    labels, parents, types = layout.labels, graph[0], graph[1]
    total = 0.0
    for v in range(e - s):
        y = labels[s + v]
        total += unary[v, y]
        p = parents[s + v]
        if p >= 0:
            total += log_pair[types[s + v], labels[s + p], y]
    return total


@njit(cache=True, nogil=True)
def add_features(ex, node, edge_sum, coef, gold_coef, emit, rest):
    """emit, rest += coef E[F(x_i, .)] - gold_coef F(x_i, y_i) on the support of example i.

    ex = (s, e, layout, graph); node (n, K) and edge_sum (n_types, K, K) marginals; emit (U, K)
    rows of the distinct attributes (entry_slot order); rest the bias rows then the blocks.
    """
    s, e, layout, graph = ex
    attr_offsets, attr_values, labels, entry_slot = (
        layout.attr_offsets,
        layout.attr_values,
        layout.labels,
        layout.entry_slot,
    )
    parents, types, _, child_start, _ = graph
    K, n_types = node.shape[1], edge_sum.shape[0]
    nb = rest.shape[0] - n_types * K
    for v in range(e - s):
        g = s + v
        y = labels[g]
        add_item_rows(attr_offsets, attr_values, entry_slot, g, node[v], y, coef, gold_coef, emit)
        if nb:
            root, leaf = parents[g] < 0, child_start[g + 1] == child_start[g]
            for k in range(K):
                m = coef * node[v, k] - (gold_coef if k == y else 0.0)
                rest[0, k] += m
                rest[1, k] += m if root else 0.0
                rest[2, k] += m if leaf else 0.0
        if parents[g] >= 0:
            rest[nb + types[g] * K + labels[s + parents[g]], y] -= gold_coef
    for t in range(n_types):
        for j in range(K):
            for k in range(K):
                rest[nb + t * K + j, k] += coef * edge_sum[t, j, k]


@njit(cache=True, nogil=True)
def _sag_direction_scores(ex, emit, rest, nb, ug):
    """Node scores ug (n, K) of the compact vector (emit, rest) with nb bias rows."""
    s, e, layout, graph = ex
    attr_offsets, attr_values, entry_slot = (
        layout.attr_offsets,
        layout.attr_values,
        layout.entry_slot,
    )
    parents, _, _, child_start, _ = graph
    K = emit.shape[1]
    for v in range(e - s):
        g = s + v
        root, leaf = parents[g] < 0, child_start[g + 1] == child_start[g]
        for k in range(K):
            u = 0.0
            if nb:
                u = rest[0, k] + (rest[1, k] if root else 0.0) + (rest[2, k] if leaf else 0.0)
            ug[v, k] = u
        add_item_scores(attr_offsets, attr_values, entry_slot, g, emit, ug[v])


@njit(cache=True, nogil=True)
def _ex(s, i):
    return (s.layout.seq_offsets[i], s.layout.seq_offsets[i + 1], s.layout, s.graph)


@njit(cache=True, nogil=True)
def _local(s, i):
    parents, types, order, child_start, children = s.graph
    a, b = s.layout.seq_offsets[i], s.layout.seq_offsets[i + 1]
    return (parents[a:b], types[a:b], order[a:b], (child_start[a : b + 1], children))


@P.implements(P.sag_rest_rows, TreeBlocks)
def _sag_rest_rows(s):
    return s.dims[2] + s.dims[3] * s.dims[1]


class TreeSagWorkspace(NamedTuple):
    """Buffers of a SAG-NUS visit (``sag_workspace``): the scores at w (unary, log_pair),
    exp_pair and pair_max of log_pair, the oracle's buffers (log-space, scaled, the fallback's
    log marginals), the trial's (unary, log_pair, exp_pair, pair_max) and the visit's
    ``primitives.SAGVisit`` (node marginals, edge marginals summed by type, g and the change of
    d)."""

    unary: np.ndarray
    log_pair: np.ndarray
    exp_pair: np.ndarray
    pair_max: np.ndarray
    oracle: tuple
    trial: tuple
    visit: SAGVisit


@P.implements(P.sag_oracle, TreeBlocks)
def _sag_oracle(s, i, z, c, sws):
    unary, log_pair = sws.unary, sws.log_pair
    a, b = s.layout.seq_offsets[i], s.layout.seq_offsets[i + 1]
    n = b - a
    _sag_scores(s.layout, s.graph, a, b, z, c, s.dims, unary, log_pair)
    tables = (log_pair, sws.exp_pair, sws.pair_max)
    exp_tables(log_pair, sws.exp_pair, sws.pair_max)
    ws_log, scaled, logs = sws.oracle
    node, sums = sws.visit.node[:n], sws.visit.sums
    log_z = sag_marginal_sums(unary[:n], tables, _local(s, i), ws_log, scaled, logs, node, sums)
    if not np.isfinite(log_z):
        return log_z, 0.0
    return log_z, log_z - _gold_score(_ex(s, i), unary, log_pair)


@P.implements(P.sag_add_features, TreeBlocks)
def _sag_add_features(s, i, node, sums, coef, gold_coef, emit, rest):
    add_features(_ex(s, i), node, sums, coef, gold_coef, emit, rest)


@P.implements(P.sag_prepare_trials, TreeBlocks)
def _sag_prepare_trials(s, i, sws):
    visit = sws.visit
    _sag_direction_scores(_ex(s, i), visit.g_emit, visit.g_rest, s.dims[2], visit.ug)


@P.implements(P.sag_trial, TreeBlocks)
def _sag_trial(s, i, inv, sws):
    n = s.layout.seq_offsets[i + 1] - s.layout.seq_offsets[i]
    unary, log_pair, ug = sws.unary[:n], sws.log_pair, sws.visit.ug[:n]
    g_pairs = sws.visit.g_rest[s.dims[2] :]
    tu, tp, texp, tmax = sws.trial
    K = unary.shape[1]
    for v in range(n):
        for k in range(K):
            tu[v, k] = unary[v, k] - inv * ug[v, k]
    for t in range(log_pair.shape[0]):
        for a in range(K):
            for b in range(K):
                tp[t, a, b] = log_pair[t, a, b] - inv * g_pairs[t * K + a, b]
    exp_tables(tp, texp, tmax)
    ws_log, scaled, _ = sws.oracle
    log_z = sag_log_partition(tu[:n], (tp, texp, tmax), _local(s, i), ws_log, scaled)
    return log_z - _gold_score(_ex(s, i), tu, tp)


def sag_workspace(max_n: int, dims: tuple[int, int, int, int], max_U: int) -> TreeSagWorkspace:
    """The :class:`TreeSagWorkspace` of examples of up to max_n nodes and max_U distinct
    attributes."""
    A, K, n_bias, n_types = dims
    n, U, R = max(int(max_n), 1), max(int(max_U), 1), n_bias + n_types * K
    tables = (np.empty((n_types, K, K)), np.empty((n_types, K, K)), np.empty(n_types))
    ws_log = (*(np.empty((n, K)) for _ in range(4)), np.empty(K))
    scaled = (*(np.empty((n, K)) for _ in range(4)), np.empty(n))
    logs = (np.empty((n, K)), np.empty((n, K, K)), np.empty(n))
    trial = (np.empty((n, K)), *(np.empty((n_types, K, K)) for _ in range(2)), np.empty(n_types))
    visit = make_visit(n, K, U, (n_types, K, K), (R, K))
    return TreeSagWorkspace(np.empty((n, K)), *tables, (ws_log, scaled, logs), trial, visit)


@njit(cache=True, nogil=True)
def expected_features(data, graph, log_node, log_edge, dims, out):
    """out += sum_i E_mu_i F(x_i, .) for marginals stored like the dual state; an empty
    ``log_edge`` (no rows) leaves the edge features out (a caller that knows their sums)."""
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
        if parents[g] >= 0 and log_edge.shape[0] > 0:
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


# -- the structured hinge loss (``crfsdca.kernels.solvers.hinge``) ------------------------------
@njit(cache=True, nogil=True)
def _away(s, i, unary, log_pair, mu, sws, bufs, hws):
    """The linear value <mu_i, augmented scores> and, in WITH_AWAY mode, the away corner of the
    tree (into hws.out and bufs.log_mix); edge v has its own masked table (types = ids)."""
    data, graph = s.layout, s.graph
    parents, types = graph[0], graph[1]
    K = s.dims[1]
    a, b = data.seq_offsets[i], data.seq_offsets[i + 1]
    n = b - a
    E, KK = n * K * K, K * K
    lin = 0.0
    for v in range(n):
        for k in range(K):
            lin += mu[E + v * K + k] * unary[v, k]
        if parents[a + v] >= 0:
            for j in range(K):
                for k in range(K):
                    lin += mu[v * KK + j * K + k] * log_pair[types[a + v], j, k]
    hws.out[2] = lin
    if hws.mode[0] != H.WITH_AWAY:
        return
    pair = hws.pair[:E].reshape((n, K, K))
    for v in range(n):
        for k in range(K):
            unary[v, k] = -unary[v, k] if mu[E + v * K + k] > 0.0 else -np.inf
        for j in range(K if parents[a + v] >= 0 else 0):
            for k in range(K):
                m = mu[v * KK + j * K + k]
                pair[v, j, k] = -log_pair[types[a + v], j, k] if m > 0.0 else -np.inf
    path = hws.path[:n]
    back = hws.backptr[: n * K].reshape((n, K))
    args = (parents[a:b], hws.ids[:n], graph[2][a:b])
    hws.out[1] = -tree_viterbi(unary, pair, *args, sws.log_space[:5], back, path)
    hws.out[0] = H.hamming(path, data.labels[a:b])
    for v in range(n):
        p = parents[a + v]
        H.corner_values(bufs.log_mix, v * KK, KK, (path[p] * K if p >= 0 else 0) + path[v])
        H.corner_values(bufs.log_mix, E + v * K, K, path[v])


@P.implements(P.loss_augmented_map, TreeBlocks)
def _loss_augmented_map(s, i, w, sws, bufs, hws):
    data, graph = s.layout, s.graph
    parents, types = graph[0], graph[1]
    A, K, n_bias, n_types = s.dims
    a, b = data.seq_offsets[i], data.seq_offsets[i + 1]
    n = b - a
    unary = sws.log_space[5][:n]
    tree_unary(data[:5], graph, a, b, w, s.dims, unary)
    off = (A + n_bias) * K
    log_pair = w[off : off + n_types * K * K].reshape(n_types, K, K)
    gold = data.labels[a:b]
    H.hamming_augment(unary, gold)  # the gold labelling's score is unchanged
    path = hws.path[:n]
    back = hws.backptr[: n * K].reshape((n, K))
    args = (parents[a:b], types[a:b], graph[2][a:b])
    top = tree_viterbi(unary, log_pair, *args, sws.log_space[:5], back, path)
    E = n * K * K
    for v in range(n):
        p = parents[a + v]
        H.corner_entry(bufs.nu, bufs.log_nu, v * K * K, K * K, (path[p] * K if p >= 0 else 0) +
                       path[v])  # fmt: skip
        H.corner_entry(bufs.nu, bufs.log_nu, E + v * K, K, path[v])
    loss = H.hamming(path, gold)
    g = gold_score(unary, log_pair, data.labels, parents, types, a)
    if hws.mode[0] != H.MAP_ONLY:
        _away(s, i, unary, log_pair, bufs.mu, sws, bufs, hws)
        hws.out[1] -= g
        hws.out[2] -= g
    return loss, top - g


@P.implements(P.smoothed_oracle, TreeBlocks)
def _smoothed_oracle(s, i, w, sws, bufs, hws):
    """No smoothed oracle here yet: a failure (nan), which ``structures.hinge.smoothed_start``
    never lets a run reach (it refuses hinge_step='smooth' on anything but chains)."""
    return np.nan
