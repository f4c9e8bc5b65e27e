"""The chain's SDCA primitives (``crfsdca.kernels.primitives``) on :class:`ChainBlocks`.

A chain block (sequence i, T positions, K labels) is laid out edges first: its (T-1) K^2 edge
entries, then its T K node entries (``crfsdca.kernels.solvers.sdca.chain_runs``). The oracle is the
scaled forward-backward of ``crfsdca.kernels.structures.chain_oracle`` (probabilities and logs in
one pass); the primal direction lives on the sequence's distinct attributes (rows ``v_emit``,
``crfsdca.features.layout.SequenceLayout``), the bias rows and the transition matrix (``v_rest``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from crfsdca.kernels import primitives as P
from crfsdca.kernels.jit import njit
from crfsdca.kernels.primitives import SAGVisit, make_visit
from crfsdca.kernels.structures import hamming as H
from crfsdca.kernels.structures.chain import (
    gold_score,
    log_partition,
    marginal_sums,
    sequence_potentials,
    transition_exp,
    unary_scores,
    viterbi,
)
from crfsdca.kernels.structures.chain_oracle import (
    block_forward_backward,
    sequence_block_marginals,
)
from crfsdca.kernels.structures.direction import (
    _edge_difference_sum,
    add_direction,
    direction_entries,
    primal_direction,
)
from crfsdca.kernels.structures.items import add_item_rows, add_item_scores, scale_scores
from crfsdca.kernels.structures.tree import tree_viterbi


class ChainBlocks(NamedTuple):
    """Packed chains: ``layout`` a ``SequenceLayout``, ``dims`` = (A, K, n_bias), the run
    table, and the longest sequence's length, distinct attributes and block size."""

    layout: tuple
    dims: tuple
    runs: P.RunTable
    max_T: int
    max_U: int
    max_block: int


@njit(cache=True, nogil=True)
def _block_views(bufs, T, K):
    """(logs, probs) = ((node (T, K), edge (T-1, K, K)), same) views of bufs' log_nu and nu,
    where the block oracle writes nu_i (flat block layout: edges, then nodes)."""
    E = (T - 1) * K * K
    lnu, nu = bufs.log_nu, bufs.nu
    logs = (lnu[E : E + T * K].reshape((T, K)), lnu[:E].reshape((T - 1, K, K)))
    probs = (nu[E : E + T * K].reshape((T, K)), nu[:E].reshape((T - 1, K, K)))
    return logs, probs


class ChainStepWorkspace(NamedTuple):
    """A chain step's buffers: the oracle's (``block_oracle``), the direction's rows of the
    distinct attributes and its bias and transition rows."""

    fb: tuple
    rows: np.ndarray
    rest: np.ndarray


def _workspace(max_T, K, max_U):
    """The :class:`ChainStepWorkspace` of sequences of up to max_T items."""
    T = max(max_T, 1)
    fb_ws = (
        np.empty((T, K)), np.empty((K, K)), np.empty((T, K)), np.empty((T, K)),
        np.empty((T, K)), np.empty(T), np.empty(T),
    )  # fmt: skip
    return ChainStepWorkspace(fb_ws, np.empty((max(max_U, 1), K)), np.empty((3 + K, K)))


@P.builds_workspace(ChainBlocks)
def _step_workspace(s):
    return _workspace(s.max_T, s.dims[1], s.max_U)


@P.implements(P.block_oracle, ChainBlocks)
def _block_oracle(s, i, w, sws, bufs):
    lay = s.layout
    T = lay.seq_offsets[i + 1] - lay.seq_offsets[i]
    data = (lay.seq_offsets, lay.attr_offsets, lay.attr_ids, lay.attr_values, lay.labels)
    logs, probs = _block_views(bufs, T, s.dims[1])
    return sequence_block_marginals(data, i, w, s.dims, sws.fb, logs, probs)


@P.implements(P.block_direction, ChainBlocks)
def _block_direction(s, i, bufs, sws, kappa):
    lay = s.layout
    A, K, n_bias = s.dims
    t0, t1 = lay.seq_offsets[i], lay.seq_offsets[i + 1]
    vr = sws.rest[: n_bias + K]
    trans = vr[n_bias:].reshape((K * K,))
    _edge_difference_sum(bufs.nu, bufs.mu, trans, t1 - t0 - 1, K * K)
    sa = lay.slot_attrs[lay.uattr_offsets[i] : lay.uattr_offsets[i + 1]]
    seq = (t0, t1, lay.attr_offsets, lay.attr_ids, lay.attr_values, lay.entry_slot, sa)
    return primal_direction(seq, (bufs.mu, bufs.nu), (A, K, n_bias, kappa), sws.rows, vr)


@P.implements(P.add_block_direction, ChainBlocks)
def _add_block_direction(s, i, coef, sws, w):
    lay = s.layout
    A, K, n_bias = s.dims
    sa = lay.slot_attrs[lay.uattr_offsets[i] : lay.uattr_offsets[i + 1]]
    add_direction(coef, sa, sws.rows, sws.rest[: n_bias + K], w, K, A)


@P.implements(P.block_direction_entries, ChainBlocks)
def _block_direction_entries(s, i, sws, idx, val):
    lay = s.layout
    A, K, n_bias = s.dims
    sa = lay.slot_attrs[lay.uattr_offsets[i] : lay.uattr_offsets[i + 1]]
    return direction_entries(sa, sws.rows, sws.rest[: n_bias + K], K, A, idx, val)


@P.implements(P.direction_capacity, ChainBlocks)
def _direction_capacity(s, sws):
    return sws.rows.size + sws.rest.size


# -- SAG-NUS ------------------------------------------------------------------------------------
# y_i is stored as the node marginals (T_i, K) and the summed edge marginals (K, K) of the last
# visit; a gradient is held compactly as the rows of the sequence's distinct attributes ``emit``
# (U, K) and ``rest`` (n_bias + K, K): the bias rows, then the transition matrix. The oracle
# calls are ``chain.marginal_sums`` at w and ``chain.log_partition`` per line-search trial.
@njit(cache=True, nogil=True)
def _scores(attrs, t0, t1, z, c, dims, unary, log_trans):
    """Node scores (T, K) and transition scores (K, K) of w = c z for tokens t0..t1-1."""
    A, K, n_bias = dims
    unary_scores(attrs, t0, t1, z, A, K, n_bias, unary)
    scale_scores(c, t1 - t0, K, unary, z, (A + n_bias) * K, log_trans)


@njit(cache=True, nogil=True)
def add_features(seq, node, edge_sum, coef, gold_coef, emit, rest):
    """emit, rest += coef E_node[F(x_i, .)] - gold_coef F(x_i, y_i) on the support of sequence i.

    seq = (t0, t1, attr_offsets, attr_values, entry_slot, labels); node (T, K) and edge_sum (K, K)
    marginals; emit (U, K) rows of the sequence's distinct attributes (entry_slot order), rest
    (n_bias + K, K) the bias rows then the transition matrix.
    """
    t0, t1, attr_offsets, attr_values, entry_slot, labels = seq
    T, K = t1 - t0, node.shape[1]
    nb = rest.shape[0] - K
    for t in range(T):
        y = labels[t0 + t]
        add_item_rows(attr_offsets, attr_values, entry_slot, t0 + t, node[t], y, coef, gold_coef,
                      emit)  # fmt: skip
        for k in range(K if nb else 0):
            rest[0, k] += coef * node[t, k]
            rest[1, k] += coef * node[t, k] if t == 0 else 0.0
            rest[2, k] += coef * node[t, k] if t == T - 1 else 0.0
        if nb:
            rest[0, y] -= gold_coef
            rest[1, y] -= gold_coef if t == 0 else 0.0
            rest[2, y] -= gold_coef if t == T - 1 else 0.0
        if t + 1 < T:
            rest[nb + y, labels[t0 + t + 1]] -= gold_coef
    for k in range(K):
        for l in range(K):
            rest[nb + k, l] += coef * edge_sum[k, l]


@njit(cache=True, nogil=True)
def _direction_scores(seq, emit, rest, ug):
    """Node scores ug (T, K) of the compact vector (emit, rest) (its transitions: rest[nb:])."""
    t0, t1, attr_offsets, attr_values, entry_slot, _ = seq
    T, K = t1 - t0, emit.shape[1]
    nb = rest.shape[0] - K
    for t in range(T):
        for k in range(K):
            ug[t, k] = rest[0, k] if nb else 0.0
            if nb and t == 0:
                ug[t, k] += rest[1, k]
            if nb and t == T - 1:
                ug[t, k] += rest[2, k]
        add_item_scores(attr_offsets, attr_values, entry_slot, t0 + t, emit, ug[t])


@njit(cache=True, nogil=True)
def _seq(s, i):
    lay = s.layout
    return (
        lay.seq_offsets[i],
        lay.seq_offsets[i + 1],
        lay.attr_offsets,
        lay.attr_values,
        lay.entry_slot,
        lay.labels,
    )


@P.implements(P.sag_rest_rows, ChainBlocks)
def _sag_rest_rows(s):
    return s.dims[2] + s.dims[1]


class ChainSagWorkspace(NamedTuple):
    """Buffers of a SAG-NUS visit (``sag_workspace``): forward-backward buffers, the scores at
    w, the log edge marginals, the trial scores and the visit's ``primitives.SAGVisit`` (node and
    summed edge marginals, g and the change of d as emit and rest rows)."""

    fb: tuple
    unary: np.ndarray
    log_trans: np.ndarray
    log_edge: np.ndarray
    trial_unary: np.ndarray
    trial_trans: np.ndarray
    visit: SAGVisit


@P.implements(P.sag_oracle, ChainBlocks)
def _sag_oracle(s, i, z, c, sws):
    lay = s.layout
    unary, log_trans = sws.unary, sws.log_trans
    t0, t1 = lay.seq_offsets[i], lay.seq_offsets[i + 1]
    T = t1 - t0
    attrs = (lay.attr_offsets, lay.attr_ids, lay.attr_values)
    _scores(attrs, t0, t1, z, c, s.dims, unary, log_trans)
    visit = sws.visit
    log_z = marginal_sums(unary[:T], log_trans, sws.fb, visit.node, sws.log_edge, visit.sums)
    if not np.isfinite(log_z):
        return log_z, 0.0
    return log_z, log_z - gold_score(unary[:T], log_trans, lay.labels[t0:t1])


@P.implements(P.sag_add_features, ChainBlocks)
def _sag_add_features(s, i, node, sums, coef, gold_coef, emit, rest):
    add_features(_seq(s, i), node, sums, coef, gold_coef, emit, rest)


@P.implements(P.sag_prepare_trials, ChainBlocks)
def _sag_prepare_trials(s, i, sws):
    _direction_scores(_seq(s, i), sws.visit.g_emit, sws.visit.g_rest, sws.visit.ug)


@P.implements(P.sag_trial, ChainBlocks)
def _sag_trial(s, i, inv, sws):
    fb = sws.fb
    t0, t1 = s.layout.seq_offsets[i], s.layout.seq_offsets[i + 1]
    T = t1 - t0
    unary, log_trans, ug = sws.unary[:T], sws.log_trans, sws.visit.ug[:T]
    tg = sws.visit.g_rest[s.dims[2] :]
    tu, tt = sws.trial_unary, sws.trial_trans
    K = unary.shape[1]
    for t in range(T):
        for k in range(K):
            tu[t, k] = unary[t, k] - inv * ug[t, k]
    for k in range(K):
        for l in range(K):
            tt[k, l] = log_trans[k, l] - inv * tg[k, l]
    trans_max = transition_exp(tt, fb[0])
    log_z = log_partition(tu[:T], tt, fb[0], trans_max, fb[1:])
    return log_z - gold_score(tu[:T], tt, s.layout.labels[t0:t1])


def sag_workspace(max_T: int, dims: tuple[int, int, int], max_U: int) -> ChainSagWorkspace:
    """The :class:`ChainSagWorkspace` of sequences of up to max_T items and max_U distinct
    attributes."""
    A, K, n_bias = dims
    T, U, R = max(int(max_T), 1), max(int(max_U), 1), n_bias + K
    fb = (np.empty((K, K)), *(np.empty((T, K)) for _ in range(3)), np.empty(T), np.empty(T))
    log_edge = np.empty((max(T - 1, 1), K, K))
    trial = (np.empty((T, K)), np.empty((K, K)))
    visit = make_visit(T, K, U, (K, K), (R, K))
    return ChainSagWorkspace(fb, np.empty((T, K)), np.empty((K, K)), log_edge, *trial, visit)


def chain_run_table(seq_offsets: np.ndarray, K: int) -> P.RunTable:
    """The runs of every chain block (``crfsdca.kernels.solvers.sdca.chain_runs``), vectorised: edge
    run (+1), first node (0), interior nodes (-1), last node (0); a single node has +1."""
    so = np.asarray(seq_offsets, np.int64)
    n = so.size - 1
    T = np.diff(so)
    E = (T - 1) * K * K
    e_off = (so[:-1] - np.arange(n)) * K * K
    n_off = so[:-1] * K
    one = T == 1
    # candidate runs per block, in order; empty ones are dropped below
    lo = np.stack([np.zeros(n, np.int64), E, E + K, E + (T - 1) * K], axis=1)
    hi = np.stack([E, E + K, E + (T - 1) * K, E + T * K], axis=1)
    coef = np.tile(np.array([1.0, 0.0, -1.0, 0.0]), (n, 1))
    dst = np.tile(np.array([0, 1, 1, 1], np.int64), (n, 1))
    off = np.stack([e_off, n_off, n_off + K, n_off + (T - 1) * K], axis=1)
    # a single node: one run of K entries with coefficient 1
    lo[one] = [0, 0, 0, 0]
    hi[one] = [0, K, 0, 0]
    coef[one] = [1.0, 1.0, 0.0, 0.0]
    dst[one] = [0, 1, 1, 1]
    off[one, 1] = n_off[one]
    keep = hi > lo
    counts = keep.sum(axis=1)
    start = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=start[1:])
    return P.RunTable(
        start, lo[keep].astype(np.int64), hi[keep].astype(np.int64), coef[keep],
        dst[keep], off[keep].astype(np.int64),
    )  # fmt: skip


@njit(cache=True, nogil=True)
def _expected_features(data, log_node, log_edge, dims, out):
    """out += sum_i E_{mu_i}[F(x_i, .)] from log-marginals (layout of
    crfsdca.features.feature_map); without edges (``log_edge`` of length 0) the node features
    only."""
    seq_offsets, attr_offsets, attr_ids, attr_values = data
    edges = log_edge.shape[0] > 0
    A, K, n_bias = dims
    trans = A * K + n_bias * K
    n = seq_offsets.shape[0] - 1
    mu = np.empty(K)
    for i in range(n):
        t0, t1 = seq_offsets[i], seq_offsets[i + 1]
        for t in range(t0, t1):
            for k in range(K):
                mu[k] = np.exp(log_node[t, k])
            # one attribute row at a time: each entry of out still receives its terms in the
            # order (t, p), so the sums are those of a label-major loop, bit for bit
            for p in range(attr_offsets[t], attr_offsets[t + 1]):
                row, v = attr_ids[p] * K, attr_values[p]
                for k in range(K):
                    out[row + k] += v * mu[k]
            for k in range(K):
                m = mu[k]
                if n_bias > 0:
                    out[A * K + k] += m
                    if t == t0:
                        out[A * K + K + k] += m
                    if t == t1 - 1:
                        out[A * K + 2 * K + k] += m
        if not edges:
            continue
        for e in range(t0 - i, t1 - i - 1):
            for k in range(K):
                for l in range(K):
                    out[trans + k * K + l] += np.exp(log_edge[e, k, l])


@njit(cache=True, nogil=True)
def _radii(layout, dims, max_U):
    """R_i = ||F(x_i, y_i) - F(x_i, z...z)||^2 with z absent from y_i (else least frequent)."""
    seq_offsets, attr_offsets, _, attr_values, labels, entry_slot, uattr_offsets, _ = layout
    A, K, n_bias = dims
    n = seq_offsets.shape[0] - 1
    out = np.empty(n)
    rows = np.zeros((max(max_U, 1), K))
    rest = np.zeros((3 + K, K))
    counts = np.zeros(K, np.int64)
    for i in range(n):
        t0, t1 = seq_offsets[i], seq_offsets[i + 1]
        counts[:] = 0
        for t in range(t0, t1):
            counts[labels[t]] += 1
        z = np.argmin(counts)
        rows[:] = 0.0
        rest[:] = 0.0
        for t in range(t0, t1):
            y = labels[t]
            for p in range(attr_offsets[t], attr_offsets[t + 1]):
                rows[entry_slot[p], y] += attr_values[p]
                rows[entry_slot[p], z] -= attr_values[p]
            if n_bias > 0:
                rest[0, y] += 1.0
                rest[0, z] -= 1.0
            if t < t1 - 1:
                rest[n_bias + y, labels[t + 1]] += 1.0
                rest[n_bias + z, z] -= 1.0
        if n_bias > 0:
            rest[1, labels[t0]] += 1.0
            rest[1, z] -= 1.0
            rest[2, labels[t1 - 1]] += 1.0
            rest[2, z] -= 1.0
        U = uattr_offsets[i + 1] - uattr_offsets[i]
        out[i] = np.sum(rows[:U] ** 2) + np.sum(rest**2)
    return out


def expected_features(data, log_node, log_edge, dims, out):
    """out += sum_i E_{mu_i}[F(x_i, .)] of chain marginals stored like the dual state."""
    _expected_features(data, log_node, log_edge, dims, out)
    return out


def radii(layout, dims, max_U):
    """R_i of every sequence (``_radii``)."""
    return _radii(layout, dims, max_U)


# -- the structured hinge loss (``crfsdca.kernels.solvers.hinge``) ------------------------------
@njit(cache=True, nogil=True)
def _away(unary, log_trans, mu, gold, T, K, sws, bufs, hws):
    """The linear value <mu_i, augmented scores> and, in WITH_AWAY mode, the away corner of the
    chain (into hws.out and bufs.log_mix)."""
    E = (T - 1) * K * K
    lin = 0.0
    for t in range(T):
        for k in range(K):
            lin += mu[E + t * K + k] * unary[t, k]
    for t in range(T - 1):
        for k in range(K):
            for l in range(K):
                lin += mu[t * K * K + k * K + l] * log_trans[k, l]
    hws.out[2] = lin
    if hws.mode[0] == H.WITH_ATOMS:
        _atom_away(unary, log_trans, gold, T, K, bufs, hws)
    if hws.mode[0] != H.WITH_AWAY:
        return
    # the chain as a tree (parent of t: t - 1) whose edge into t has its own masked table
    pair = hws.pair[: T * K * K].reshape((T, K, K))
    for t in range(T - 1):
        for k in range(K):
            for l in range(K):
                m = mu[t * K * K + k * K + l]
                pair[t + 1, k, l] = -log_trans[k, l] if m > 0.0 else -np.inf
    for t in range(T):
        for k in range(K):
            unary[t, k] = -unary[t, k] if mu[E + t * K + k] > 0.0 else -np.inf
    path, ids = hws.path[:T], hws.ids[:T]
    parents = hws.chosen[:T]
    for t in range(T):
        parents[t] = t - 1
    back = hws.backptr[: T * K].reshape((T, K))
    fb = sws.fb  # (T, K) rows 2-4 and a K row of exp_trans: the max-product's messages
    ws = (fb[2], fb[3], fb[4], fb[3], fb[1][0])
    hws.out[1] = -tree_viterbi(unary, pair, parents, ids, ids, ws, back, path)
    hws.out[0] = H.hamming(path, gold)
    for t in range(T - 1):
        H.corner_values(bufs.log_mix, t * K * K, K * K, path[t] * K + path[t + 1])
    for t in range(T):
        H.corner_values(bufs.log_mix, E + t * K, K, path[t])


@njit(cache=True, nogil=True)
def _atom_score(unary, log_trans, atoms, s, t0, T):
    """The score of the stored labelling atoms[s, t0:t0 + T] (unary: augmented)."""
    a = atoms[s, t0]
    score = unary[0, a]
    for t in range(1, T):
        b = atoms[s, t0 + t]
        score += unary[t, b] + log_trans[a, b]
        a = b
    return score


@njit(cache=True, nogil=True)
def _atom_away(unary, log_trans, gold, T, K, bufs, hws):
    """The away corner over the block's atoms (``hws.pick`` = (block, -, MAP atom or -1, token
    offset, T) on entry): the atom of least augmented score, its index into pick[1] (-1 and
    out[1] = -inf without atoms), its Hamming loss and score into out[0], out[1] and its
    corner into bufs.log_mix."""
    i, t0 = hws.pick[0], hws.pick[3]
    atoms, count = hws.atoms, hws.count[i]
    best, away = np.inf, -1
    for s in range(count):
        score = _atom_score(unary, log_trans, atoms, s, t0, T)
        if score < best:
            best, away = score, s
    hws.pick[1] = away
    hws.out[1] = -np.inf
    if away < 0:
        return
    hws.out[0] = H.atom_hamming(atoms, away, t0, gold)
    hws.out[1] = best
    E = (T - 1) * K * K
    for t in range(T - 1):
        hit = atoms[away, t0 + t] * K + atoms[away, t0 + t + 1]
        H.corner_values(bufs.log_mix, t * K * K, K * K, hit)
    for t in range(T):
        H.corner_values(bufs.log_mix, E + t * K, K, atoms[away, t0 + t])


@njit(cache=True, nogil=True)
def _augmented(s, i, w, sws):
    """(T, token offset, augmented unary scores (T, K) in sws, log transitions, gold labels)
    of sequence i: the Hamming loss added to its node scores."""
    lay = s.layout
    t0 = lay.seq_offsets[i]
    data = (lay.seq_offsets, lay.attr_offsets, lay.attr_ids, lay.attr_values, lay.labels)
    T, log_trans, _ = sequence_potentials(data, i, w, s.dims, sws.fb)
    unary, gold = sws.fb[0][:T], lay.labels[t0 : t0 + T]
    H.hamming_augment(unary, gold)  # the gold labelling's score is unchanged
    return T, t0, unary, log_trans, gold


@P.implements(P.loss_augmented_map, ChainBlocks)
def _loss_augmented_map(s, i, w, sws, bufs, hws):
    K = s.dims[1]
    T, t0, unary, log_trans, gold = _augmented(s, i, w, sws)
    path = hws.path[:T]
    delta = hws.scores[: T * K].reshape((T, K))
    back = hws.backptr[: T * K].reshape((T, K))
    top = viterbi(unary, log_trans, delta, back, path)
    E = (T - 1) * K * K
    for t in range(T - 1):
        H.corner_entry(bufs.nu, bufs.log_nu, t * K * K, K * K, path[t] * K + path[t + 1])
    for t in range(T):
        H.corner_entry(bufs.nu, bufs.log_nu, E + t * K, K, path[t])
    loss = H.hamming(path, gold)
    g = gold_score(unary, log_trans, gold)
    if hws.mode[0] == H.WITH_ATOMS:
        hws.pick[0], hws.pick[1], hws.pick[3], hws.pick[4] = i, -1, t0, T
        hws.pick[2] = H.find_atom(hws.atoms, hws.count[i], t0, path)
    if hws.mode[0] != H.MAP_ONLY:
        _away(unary, log_trans, bufs.mu, gold, T, K, sws, bufs, hws)
        hws.out[1] -= g
        hws.out[2] -= g
    return loss, top - g


@P.implements(P.smoothed_oracle, ChainBlocks)
def _smoothed_oracle(s, i, w, sws, bufs, hws):
    K = s.dims[1]
    T, _, unary, log_trans, gold = _augmented(s, i, w, sws)
    inv = 1.0 / hws.temp[0]
    H.scale(unary.reshape(-1), inv)
    trans = hws.pair[: K * K]
    trans[:] = log_trans.reshape(-1)
    H.scale(trans, inv)
    trans = trans.reshape((K, K))
    trans_max = transition_exp(trans, sws.fb[1])
    logs, probs = _block_views(bufs, T, K)
    log_z = block_forward_backward(unary, trans, sws.fb[1], trans_max, sws.fb[2:], logs, probs)
    hws.out[0] = H.expected_hamming(probs[0], gold)
    return log_z
