"""The junction tree's SDCA primitives (``crfsdca.kernels.primitives``) on
:class:`JunctionBlocks`.

A junction block (example i) is its region of the flat table array: clique tables (+1), then
separator tables (-1), held in the dual state's ``log_edge`` (``log_node`` is empty). The oracle
is the scaled sum-product of ``crfsdca.kernels.junction_scaled``, with the exact log-space one
of ``crfsdca.kernels.junction_batch`` where an entry underflows. The primal direction lives on
the example's distinct attributes (node differences projected from the clique tables), the bias
rows and the factor blocks (clique differences projected onto each factor's scope).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit
from numba.extending import overload

from crfsdca.kernels import primitives as P
from crfsdca.kernels.junction import projection
from crfsdca.kernels.junction_batch import marginals
from crfsdca.kernels.junction_scaled import exp_blocks, scaled_marginals


class JunctionBlocks(NamedTuple):
    """Packed junction trees: the nodes' arrays ``data``, ``jt``, ``assign`` and ``feat`` as in
    ``kernels.junction_batch``, ``dims`` = (A, K, n_bias), the run table, the largest block,
    and ``sizes`` = (largest table, most cliques, longest example, most attribute entries,
    factor weights, factor types) of the workspace."""

    data: tuple
    jt: tuple
    assign: tuple
    feat: tuple
    dims: tuple
    runs: P.RunTable
    max_block: int
    sizes: tuple


def _is_junction(s):
    return P.is_structure(s, JunctionBlocks)


@njit(cache=True, nogil=True)
def _workspace(R, K, sizes):
    """(message workspace, batch workspace, exponentiated factor blocks, direction buffers,
    number of distinct attributes of the last direction)."""
    table, cliques, max_len, max_attrs, n_factor, n_types = sizes
    mws = (np.empty(R), np.empty(R), np.empty(table), np.empty(table), np.empty(cliques),
           np.empty(table, np.int64))  # fmt: skip
    bws = (np.empty((max(max_len, 1), K)), np.empty(R), np.empty(R), np.empty(table),
           np.empty(K))  # fmt: skip
    ews = (np.empty(n_factor), np.empty(n_types))
    a = max(max_attrs, 1)
    dws = (np.empty(a, np.int64), np.empty((a, K)), np.empty((3, K)), np.empty(n_factor),
           np.empty(K))  # fmt: skip
    return mws, bws, ews, dws, np.zeros(1, np.int64)


@overload(P.step_workspace, jit_options={"cache": True})
def _ov_step_workspace(s):
    if _is_junction(s):
        return lambda s: _workspace(max(s.max_block, 1), s.dims[1], s.sizes)


@overload(P.block_oracle, jit_options={"cache": True})
def _ov_block_oracle(s, i, w, sws, bufs):
    if _is_junction(s):

        def impl(s, i, w, sws, bufs):
            mws, bws, ews = sws[0], sws[1], sws[2]
            R = s.jt[1][i + 1] - s.jt[1][i]
            nu, lnu, marg = bufs[1], bufs[2], bws[2]
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

        return impl


@njit(cache=True, nogil=True)
def _direction(s, i, mu, nu, dws, pidx):
    """B delta on the example's distinct attributes (rows), the bias rows and the factor blocks
    (fdiff, from feat's first offset); returns (number of distinct attributes, |B delta|^2)."""
    seq_offsets, attr_offsets, attr_ids, attr_values = s.data[:4]
    jt, assign = s.jt, s.assign
    ex_cliques, var_start, tab_off = jt[0], jt[2], jt[8]
    node_start, node_ids, node_pos, fac_start, fac_type, fac_pos_start, fac_pos = assign[:7]
    woff = s.feat[0]
    ids, rows, bias, fdiff, pk = dws
    A, K, n_bias = s.dims
    a, b = seq_offsets[i], seq_offsets[i + 1]
    uniq = np.unique(attr_ids[attr_offsets[a] : attr_offsets[b]])
    U = uniq.size
    ids[:U] = uniq
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
            g = a + v
            for q in range(attr_offsets[g], attr_offsets[g + 1]):
                row, x = np.searchsorted(uniq, attr_ids[q]), attr_values[q]
                for k in range(K):
                    rows[row, k] += x * pk[k]
            if n_bias:
                for k in range(K):
                    bias[0, k] += pk[k]
                    if v == 0:
                        bias[1, k] += pk[k]
                    if v == b - a - 1:
                        bias[2, k] += pk[k]
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


@overload(P.block_direction, jit_options={"cache": True})
def _ov_block_direction(s, i, bufs, sws, kappa):
    if _is_junction(s):

        def impl(s, i, bufs, sws, kappa):
            U, sq = _direction(s, i, bufs[0], bufs[1], sws[3], sws[0][5])
            sws[4][0] = U
            return kappa * kappa * sq

        return impl


@overload(P.add_block_direction, jit_options={"cache": True})
def _ov_add_block_direction(s, i, coef, sws, w):
    if _is_junction(s):

        def impl(s, i, coef, sws, w):
            ids, rows, bias, fdiff, _ = sws[3]
            A, K, n_bias = s.dims
            for r in range(sws[4][0]):
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

        return impl


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


def make_blocks(problem, runs: P.RunTable) -> JunctionBlocks:
    """The :class:`JunctionBlocks` of a junction problem."""
    data, oracle, fm = problem.train, problem.oracle, problem.feature_map
    n_factor = fm.n_features - fm.factor_offset(0) if fm.factor_arities else 0
    max_attrs = int(np.diff(data.attr_offsets[data.seq_offsets]).max(initial=1))
    sizes = (
        int(data.max_table), max(g.n_cliques for g in data.graphs), int(data.max_length),
        max(max_attrs, 1), int(n_factor), len(fm.factor_arities),
    )  # fmt: skip
    return JunctionBlocks(
        data=oracle._data, jt=oracle._jt, assign=oracle._assign, feat=oracle._feat,
        dims=oracle._dims, runs=runs, max_block=int(data.region_sizes.max()), sizes=sizes,
    )  # fmt: skip
