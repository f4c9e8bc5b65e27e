"""The junction tree's SDCA primitives (``crfsdca.kernels.primitives``) on
:class:`JunctionBlocks`.

A junction block (example i) is its region of the flat table array: clique tables (+1), then
separator tables (-1), held in the dual state's ``log_edge`` (``log_node`` is empty). The oracle
is the scaled sum-product of ``crfsdca.kernels.structures.junction_scaled``, with the exact
log-space one of ``crfsdca.kernels.structures.junction_batch`` where an entry underflows. The primal
direction lives on the example's distinct attributes (node differences projected from the clique
tables), the bias rows and the factor blocks (clique differences projected onto each factor's
scope).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from crfsdca.kernels import primitives as P
from crfsdca.kernels.jit import njit
from crfsdca.kernels.primitives import SAGVisit, make_visit
from crfsdca.kernels.structures import hamming as H
from crfsdca.kernels.structures import order2
from crfsdca.kernels.structures.items import add_item_rows, add_item_scores
from crfsdca.kernels.structures.junction import _strides, project, projection, viterbi
from crfsdca.kernels.structures.junction_batch import (
    clique_tables,
    marginals,
    node_unary,
    potentials,
)
from crfsdca.kernels.structures.junction_scaled import (
    exp_blocks,
    potential_marginals,
    scaled_marginals,
)
from crfsdca.kernels.structures.order2 import add_node_difference


class JunctionBlocks(NamedTuple):
    """Packed junction trees: the nodes' arrays ``data`` and their ``SequenceLayout``, ``jt``,
    ``assign`` and ``feat`` as in ``kernels.structures.junction_batch``, ``dims`` = (A, K, n_bias),
    the run table, the largest block, ``sizes`` = (largest table, most cliques, longest example,
    most attribute entries, factor weights, factor types) of the workspace, the rows of K
    weights of the factor blocks, and whether every example is a second-order chain (the fast
    path of ``crfsdca.kernels.structures.order2`` for those of >= 3 nodes)."""

    data: tuple
    layout: tuple
    jt: tuple
    assign: tuple
    feat: tuple
    dims: tuple
    runs: P.RunTable
    max_block: int
    sizes: tuple
    n_factor_rows: int
    order2: bool


class JunctionStepWorkspace(NamedTuple):
    """A junction step's buffers: the message workspace (its last array: projection indices),
    the batch workspace, the exponentiated factor blocks, the direction's buffers (ids, rows,
    bias rows, factor rows, a projected row), the number of distinct attributes of the last
    direction and ``kernels.structures.order2``'s workspace."""

    messages: tuple
    batch: tuple
    factors: tuple
    direction: tuple
    n_rows: np.ndarray
    fast: tuple


def _workspace(R, K, sizes, fast2):
    """The :class:`JunctionStepWorkspace` of blocks of up to R entries."""
    table, cliques, max_len, max_attrs, n_factor, n_types = sizes
    mws = (np.empty(R), np.empty(R), np.empty(table), np.empty(table), np.empty(cliques),
           np.empty(table, np.int64))  # fmt: skip
    bws = (np.empty((max(max_len, 1), K)), np.empty(R), np.empty(R), np.empty(table),
           np.empty(K))  # fmt: skip
    ews = (np.empty(n_factor), np.empty(n_types))
    a = max(max_attrs, 1)
    dws = (np.empty(a, np.int64), np.empty((a, K)), np.empty((3, K)), np.empty(n_factor),
           np.empty(K))  # fmt: skip
    fast = order2.make_workspace(max_len, K, fast2)
    return JunctionStepWorkspace(mws, bws, ews, dws, np.zeros(1, np.int64), fast)


@P.builds_workspace(JunctionBlocks)
def _step_workspace(s):
    return _workspace(max(s.max_block, 1), s.dims[1], s.sizes, s.order2)


@P.implements(P.block_oracle, JunctionBlocks)
def _block_oracle(s, i, w, sws, bufs):
    mws, bws, ews = sws.messages, sws.batch, sws.factors
    R = s.jt[1][i + 1] - s.jt[1][i]
    nu, lnu, marg = bufs.nu, bufs.log_nu, bws[2]
    if s.order2 and s.data[0][i + 1] - s.data[0][i] >= 3:
        log_z, ok = order2.block_marginals(s, i, w, sws.fast, bws[0], nu, lnu)
        if ok:
            return log_z
    exp_blocks(w, s.feat, s.dims[1], ews)
    log_z, ok = scaled_marginals(s.data, s.jt, s.assign, s.feat, i, w, s.dims,
                                 (mws, bws), ews)  # fmt: skip
    if ok:  # probabilities, each >= TINY
        for j in range(R):
            nu[j] = min(marg[j], 1.0)
            lnu[j] = np.log(nu[j])
        return log_z
    log_z = marginals(s.data, s.jt, s.assign, s.feat, i, w, s.dims, (mws, bws))
    if not np.isfinite(log_z):
        return log_z
    for j in range(R):
        lnu[j] = min(marg[j], 0.0)
        nu[j] = np.exp(lnu[j])
    return log_z


@njit(cache=True, nogil=True)
def _direction(s, i, mu, nu, dws, pidx):
    """B delta on the example's distinct attributes (rows), the bias rows and the factor blocks
    (fdiff, from feat's first offset); returns (number of distinct attributes, |B delta|^2)."""
    seq_offsets = s.data[0]
    jt, assign = s.jt, s.assign
    ex_cliques, var_start, tab_off = jt[0], jt[2], jt[8]
    node_start, node_ids, node_pos, fac_start, fac_type, fac_pos_start, fac_pos = assign[:7]
    woff = s.feat[0]
    ids, rows, bias, fdiff, pk = dws
    A, K, n_bias = s.dims
    a, b = seq_offsets[i], seq_offsets[i + 1]
    u0, u1 = s.layout.uattr_offsets[i], s.layout.uattr_offsets[i + 1]
    U = u1 - u0
    ids[:U] = s.layout.slot_attrs[u0:u1]
    rows[:U] = 0.0
    bias[:] = 0.0
    fdiff[:] = 0.0
    for c in range(ex_cliques[i], ex_cliques[i + 1]):
        m = var_start[c + 1] - var_start[c]
        size = K**m
        t0 = tab_off[c]
        for r in range(node_start[c], node_start[c + 1]):
            v = node_ids[r]
            proj = projection(assign[7][r], m, K, node_pos, r, r + 1, pidx, jt)
            pk[:] = 0.0
            for idx in range(size):
                pk[proj[idx]] += nu[t0 + idx] - mu[t0 + idx]
            add_node_difference(s, a, v, b - a, pk, dws)
        for f in range(fac_start[c], fac_start[c + 1]):
            base = woff[fac_type[f]] - woff[0]
            lo, hi = fac_pos_start[f], fac_pos_start[f + 1]
            proj = projection(assign[8][f], m, K, fac_pos, lo, hi, pidx, jt)
            for idx in range(size):
                fdiff[base + proj[idx]] += nu[t0 + idx] - mu[t0 + idx]
    sq = 0.0
    for r in range(U):
        for k in range(K):
            sq += rows[r, k] * rows[r, k]
    for r in range(3):
        for k in range(K):
            sq += bias[r, k] * bias[r, k]
    for j in range(fdiff.size):
        sq += fdiff[j] * fdiff[j]
    return U, sq


@P.implements(P.block_direction, JunctionBlocks)
def _block_direction(s, i, bufs, sws, kappa):
    if s.order2 and s.layout.seq_offsets[i + 1] - s.layout.seq_offsets[i] >= 3:
        U, sq = order2.direction(s, i, bufs.mu, bufs.nu, sws.direction, sws.fast)
    else:
        U, sq = _direction(s, i, bufs.mu, bufs.nu, sws.direction, sws.messages[5])
    sws.n_rows[0] = U
    return kappa * kappa * sq


@P.implements(P.add_block_direction, JunctionBlocks)
def _add_block_direction(s, i, coef, sws, w):
    ids, rows, bias, fdiff, _ = sws.direction
    A, K, n_bias = s.dims
    for r in range(sws.n_rows[0]):
        base = ids[r] * K
        for k in range(K):
            w[base + k] += coef * rows[r, k]
    if n_bias:
        for r in range(3):
            for k in range(K):
                w[A * K + r * K + k] += coef * bias[r, k]
    fbase = s.feat[0][0]
    for j in range(fdiff.size):
        w[fbase + j] += coef * fdiff[j]


@P.implements(P.block_direction_entries, JunctionBlocks)
def _block_direction_entries(s, i, sws, idx, val):
    ids, rows, bias, fdiff, _ = sws.direction
    A, K, n_bias = s.dims
    m = 0
    for r in range(sws.n_rows[0]):
        for k in range(K):
            idx[m] = ids[r] * K + k
            val[m] = rows[r, k]
            m += 1
    if n_bias:
        for r in range(3):
            for k in range(K):
                idx[m] = A * K + r * K + k
                val[m] = bias[r, k]
                m += 1
    fbase = s.feat[0][0]
    for j in range(fdiff.size):
        idx[m] = fbase + j
        val[m] = fdiff[j]
        m += 1
    return m


@P.implements(P.direction_capacity, JunctionBlocks)
def _direction_capacity(s, sws):
    _, rows, bias, fdiff, _ = sws.direction
    return rows.size + bias.size + fdiff.size


# -- SAG-NUS ------------------------------------------------------------------------------------
# y_i is stored as the node marginals (n_i, K) and the factor sums (F,) of the last visit: for
# every factor type t, the marginals of its factors' scopes summed over the example, laid out like
# the factor blocks of w. A gradient is held compactly as the rows of the example's distinct
# attributes ``emit`` (U, K) and the flat ``rest`` (n_bias K + F,). The clique potentials are
# linear in w, so those of w = c z are c times those of z; each line-search trial is one collect
# pass on phi(w) - phi(g) / L.
@njit(cache=True, nogil=True)
def _gold_score(i, s, phi, jt, labels, K):
    """Score of the gold labelling of example i (first node s) under clique tables phi."""
    var_start, vars_, tab_off = jt[2], jt[3], jt[8]
    total = 0.0
    for c in range(jt[0][i], jt[0][i + 1]):
        j = 0
        for q in range(var_start[c], var_start[c + 1]):
            j = j * K + labels[s + vars_[q]]
        total += phi[tab_off[c] + j]
    return total


@njit(cache=True, nogil=True)
def clique_entries(i, jt, K):
    """Entries of example i's clique tables (they come first in its region)."""
    var_start, total = jt[2], 0
    for c in range(jt[0][i], jt[0][i + 1]):
        total += K ** (var_start[c + 1] - var_start[c])
    return total


@njit(cache=True, nogil=True)
def block_stats(i, log_marg, struct, K, node, fsum, prob, pidx):
    """Node marginals node (n, K) and factor sums fsum (F,) of example i from its clique
    log-marginals log_marg (region-local); prob, pidx: table-sized scratch."""
    jt, assign, feat = struct
    var_start, tab_off = jt[2], jt[8]
    node_start, node_ids, node_pos, fac_start, fac_type, fac_pos_start, fac_pos = assign[:7]
    woff = feat[0]
    fsum[:] = 0.0
    for c in range(jt[0][i], jt[0][i + 1]):
        m = var_start[c + 1] - var_start[c]
        size, t0 = K**m, tab_off[c]
        for idx in range(size):
            prob[idx] = np.exp(log_marg[t0 + idx])
        for r in range(node_start[c], node_start[c + 1]):
            v = node_ids[r]
            proj = projection(assign[7][r], m, K, node_pos, r, r + 1, pidx, jt)
            node[v, :] = 0.0
            for idx in range(size):
                node[v, proj[idx]] += prob[idx]
        for f in range(fac_start[c], fac_start[c + 1]):
            base = woff[fac_type[f]] - woff[0]
            lo, hi = fac_pos_start[f], fac_pos_start[f + 1]
            proj = projection(assign[8][f], m, K, fac_pos, lo, hi, pidx, jt)
            for idx in range(size):
                fsum[base + proj[idx]] += prob[idx]


@njit(cache=True, nogil=True)
def add_features(ex, node, fsum, coef, gold_coef, emit, rest):
    """emit, rest += coef E[F(x_i, .)] - gold_coef F(x_i, y_i) on the support of example i.

    ex = (i, s, e, layout, struct); node (n, K) marginals and fsum (F,) factor sums; emit (U, K)
    rows of the distinct attributes (entry_slot order); rest (n_bias K + F,) flat.
    """
    i, s, e, layout, struct = ex
    attr_offsets, attr_values = layout.attr_offsets, layout.attr_values
    labels, entry_slot = layout.labels, layout.entry_slot
    K, F = node.shape[1], fsum.shape[0]
    nbk, n = rest.shape[0] - F, e - s
    for v in range(n):
        g = s + v
        y = labels[g]
        add_item_rows(attr_offsets, attr_values, entry_slot, g, node[v], y, coef, gold_coef, emit)
        for k in range(K if nbk else 0):
            mk = coef * node[v, k] - (gold_coef if k == y else 0.0)
            rest[k] += mk
            rest[K + k] += mk if v == 0 else 0.0
            rest[2 * K + k] += mk if v == n - 1 else 0.0
    for j in range(F):
        rest[nbk + j] += coef * fsum[j]
    if gold_coef != 0.0:
        jt, assign, feat = struct[0], struct[1], struct[2]
        var_start, vars_ = jt[2], jt[3]
        fac_start, fac_type, fac_pos_start, fac_pos = assign[3], assign[4], assign[5], assign[6]
        woff = feat[0]
        for c in range(jt[0][i], jt[0][i + 1]):
            for f in range(fac_start[c], fac_start[c + 1]):
                j = 0
                for q in range(fac_pos_start[f], fac_pos_start[f + 1]):
                    j = j * K + labels[s + vars_[var_start[c] + fac_pos[q]]]
                rest[nbk + woff[fac_type[f]] - woff[0] + j] -= gold_coef


@njit(cache=True, nogil=True)
def _sag_direction_scores(ex, emit, rest, nbk, ug):
    """Node scores ug (n, K) of the compact vector (emit, rest) with nbk bias entries."""
    _, s, e, layout, _ = ex
    attr_offsets, attr_values, entry_slot = (
        layout.attr_offsets,
        layout.attr_values,
        layout.entry_slot,
    )
    K, n = emit.shape[1], e - s
    for v in range(n):
        for k in range(K):
            u = 0.0
            if nbk:
                u = rest[k] + (rest[K + k] if v == 0 else 0.0)
                u += rest[2 * K + k] if v == n - 1 else 0.0
            ug[v, k] = u
        add_item_scores(attr_offsets, attr_values, entry_slot, s + v, emit, ug[v])


@njit(cache=True, nogil=True)
def _sag_ex(s, i):
    a, b = s.layout.seq_offsets[i], s.layout.seq_offsets[i + 1]
    return (i, a, b, s.layout, (s.jt, s.assign, s.feat))


@P.implements(P.sag_rest_rows, JunctionBlocks)
def _sag_rest_rows(s):
    return s.dims[2] + s.n_factor_rows


class JunctionSagWorkspace(NamedTuple):
    """Buffers of a SAG-NUS visit (``sag_workspace``): node scores and clique potentials phi at
    w, the log marginals, the potentials of g, the trial potentials, a table of probabilities,
    (the message workspace, scratch) of the oracle, its projection index buffer ``pidx`` and
    the visit's ``primitives.SAGVisit`` (node marginals, factor sums, g and the change of d with a
    flat rest)."""

    unary: np.ndarray
    phi: np.ndarray
    marg: np.ndarray
    phi_g: np.ndarray
    trial: np.ndarray
    prob: np.ndarray
    messages: tuple
    pidx: np.ndarray
    visit: SAGVisit


@P.implements(P.sag_oracle, JunctionBlocks)
def _sag_oracle(s, i, z, c, sws):
    K = s.dims[1]
    phi, marg, pidx = sws.phi, sws.marg, sws.pidx
    potentials(s.data, s.jt, s.assign, s.feat, i, z, s.dims, sws.unary, phi, pidx)
    size = clique_entries(i, s.jt, K)
    for t in range(size):
        phi[t] *= c
    log_z = potential_marginals(i, phi, s.jt, K, sws.messages, marg, True)
    if not np.isfinite(log_z):
        return log_z, 0.0
    f = log_z - _gold_score(i, s.layout.seq_offsets[i], phi, s.jt, s.layout.labels, K)
    visit = sws.visit
    block_stats(i, marg, (s.jt, s.assign, s.feat), K, visit.node, visit.sums, sws.prob, pidx)
    return log_z, f


@P.implements(P.sag_add_features, JunctionBlocks)
def _sag_add_features(s, i, node, sums, coef, gold_coef, emit, rest):
    add_features(_sag_ex(s, i), node, sums, coef, gold_coef, emit, rest)


@P.implements(P.sag_prepare_trials, JunctionBlocks)
def _sag_prepare_trials(s, i, sws):
    A, K, nb = s.dims
    visit = sws.visit
    _sag_direction_scores(_sag_ex(s, i), visit.g_emit, visit.g_rest, nb * K, visit.ug)
    woff = s.feat[0]
    clique_tables(s.jt, s.assign, woff, woff[0] - nb * K, i, visit.ug, visit.g_rest, K, sws.phi_g,
                  sws.pidx)  # fmt: skip


@P.implements(P.sag_trial, JunctionBlocks)
def _sag_trial(s, i, inv, sws):
    K = s.dims[1]
    phi, phi_g, trial = sws.phi, sws.phi_g, sws.trial
    for t in range(clique_entries(i, s.jt, K)):
        trial[t] = phi[t] - inv * phi_g[t]
    log_z = potential_marginals(i, trial, s.jt, K, sws.messages, sws.marg, False)
    return log_z - _gold_score(i, s.layout.seq_offsets[i], trial, s.jt, s.layout.labels, K)


def sag_workspace(s: JunctionBlocks, max_U: int, mws: tuple) -> JunctionSagWorkspace:
    """The :class:`JunctionSagWorkspace` of the blocks ``s``; ``mws`` the junction message
    workspace (its sixth array is the projection index buffer)."""
    K, n_bias = s.dims[1], s.dims[2]
    n, U, F = max(s.sizes[2], 1), max(int(max_U), 1), s.n_factor_rows * K
    R, table = s.max_block, s.sizes[0]
    visit = make_visit(n, K, U, F, n_bias * K + F)
    bufs = (np.empty((n, K)), np.empty(R), np.empty(R), np.empty(R), np.empty(R), np.empty(table))
    return JunctionSagWorkspace(*bufs, (mws, np.empty(R)), mws[5], visit)


def junction_run_table(region, seg_start, seg_off, seg_len, seg_coef) -> P.RunTable:
    """The runs of every junction block: its segment table (offsets local to its region),
    pointing into the flat tables held in ``log_edge``."""
    n = region.size - 1
    counts = np.diff(seg_start)
    lo = np.asarray(seg_off, np.int64)
    return P.RunTable(
        np.asarray(seg_start, np.int64), lo, lo + np.asarray(seg_len, np.int64),
        np.asarray(seg_coef, np.float64), np.zeros(lo.size, np.int64),
        lo + np.repeat(np.asarray(region[:n], np.int64), counts),
    )  # fmt: skip


# -- the structured hinge loss (``crfsdca.kernels.solvers.hinge``) ------------------------------
@njit(cache=True, nogil=True)
def _corner(s, i, path, buf, log_buf):
    """The corner of labelling ``path`` into buf (and log_buf, unless None) on the example's
    cliques and separators; returns nothing."""
    jt, K = s.jt, s.dims[1]
    var_start, vars_, parent, tab_off, sep_off, sep_start, sep_child = (
        jt[2], jt[3], jt[4], jt[8], jt[9], jt[10], jt[11],
    )  # fmt: skip
    strides = np.empty(4, np.int64)
    for c in range(jt[0][i], jt[0][i + 1]):
        m = var_start[c + 1] - var_start[c]
        size = _strides(m, K, strides)
        hit = 0
        for p in range(m):
            hit += path[vars_[var_start[c] + p]] * strides[p]
        lo, hi = sep_start[c], sep_start[c + 1]
        sep = project(hit, strides, K, sep_child, lo, hi)
        if log_buf is None:
            H.corner_values(buf, tab_off[c], size, hit)
            if parent[c] >= 0:
                H.corner_values(buf, sep_off[c], K ** (hi - lo), sep)
        else:
            H.corner_entry(buf, log_buf, tab_off[c], size, hit)
            if parent[c] >= 0:
                H.corner_entry(buf, log_buf, sep_off[c], K ** (hi - lo), sep)


@njit(cache=True, nogil=True)
def _clique_sum(s, i, phi, labels):
    """Sum over the example's cliques of phi at the labelling's entry (its total score)."""
    jt, K = s.jt, s.dims[1]
    var_start, vars_, tab_off = jt[2], jt[3], jt[8]
    total = 0.0
    for c in range(jt[0][i], jt[0][i + 1]):
        idx = 0
        for p in range(var_start[c], var_start[c + 1]):
            idx = idx * K + labels[vars_[p]]
        total += phi[tab_off[c] + idx]
    return total


@P.implements(P.loss_augmented_map, JunctionBlocks)
def _loss_augmented_map(s, i, w, sws, bufs, hws):
    mws, bws = sws.messages, sws.batch
    jt = s.jt
    K = s.dims[1]
    a, b = s.data[0][i], s.data[0][i + 1]
    unary, phi = bws[0], bws[1]
    node_unary(s.data, a, b, w, s.dims, unary)
    gold = s.data[4][a:b]
    H.hamming_augment(unary[: b - a], gold)  # the gold labelling's score is unchanged
    clique_tables(jt, s.assign, s.feat[0], 0, i, unary, w, K, phi, mws[5])
    path = hws.path[: b - a]
    top = viterbi(i, phi, jt, K, mws, hws.backptr, hws.chosen, path)
    _corner(s, i, path, bufs.nu, bufs.log_nu)
    loss = H.hamming(path, gold)
    g = _clique_sum(s, i, phi, gold)
    if hws.mode[0] == H.MAP_ONLY:
        return loss, top - g
    mu, tab_off, var_start = bufs.mu, jt[8], jt[2]
    lin = 0.0
    for c in range(jt[0][i], jt[0][i + 1]):
        t0 = tab_off[c]
        size = K ** (var_start[c + 1] - var_start[c])
        for idx in range(size):
            lin += mu[t0 + idx] * phi[t0 + idx]
        if hws.mode[0] == H.WITH_AWAY:
            H.masked_negation(phi[t0 : t0 + size], mu[t0 : t0 + size], size)
    hws.out[2] = lin - g
    if hws.mode[0] == H.WITH_AWAY:
        hws.out[1] = -viterbi(i, phi, jt, K, mws, hws.backptr, hws.chosen, path) - g
        hws.out[0] = H.hamming(path, gold)
        _corner(s, i, path, bufs.log_mix, None)
    return loss, top - g


@P.implements(P.smoothed_oracle, JunctionBlocks)
def _smoothed_oracle(s, i, w, sws, bufs, hws):
    """No smoothed oracle here yet: a failure (nan), which ``structures.hinge.smoothed_start``
    never lets a run reach (it refuses hinge_step='smooth' on anything but chains)."""
    return np.nan
