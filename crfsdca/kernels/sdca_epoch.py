"""Compiled SDCA epochs: sampling, oracle, block step and sparse primal update in one loop.

``run_steps`` draws sequences from the sampler tree, calls the chain oracle once per step
(``crfsdca.kernels.block_oracle``: log-marginals and probabilities in one pass),
records the block gap, runs the Newton line search and applies the step (see
``crfsdca.kernels.sdca`` for the math). The same step serves serial SDCA (scale = 1) and the
local rounds of DisDCA (scale = number of workers). The thin Python wrappers at the bottom check
shapes once and unpack results.
"""

from typing import NamedTuple

import numpy as np
from numba import get_num_threads, njit, prange

from crfsdca.kernels import trees
from crfsdca.kernels.block_oracle import sequence_block_marginals
from crfsdca.kernels.cycles import cycles
from crfsdca.kernels.sdca import (
    add_direction,
    block_entropy,
    block_gap_given_nu,
    line_search,
    model_start,
    primal_direction,
    segments,
    update_block,
)

UNIFORM, IMPORTANCE, GAP, GAP_IMPORTANCE, MAX = 0, 1, 2, 3, 4
HALF, PREVIOUS, MODEL = 0, 1, 2  # line-search starting points (SDCAConfig.line_search_start)


class StepParams(NamedTuple):
    """Scalars of an SDCA run (types fixed so one compiled specialisation serves every run)."""

    lam_n: float  # the global lambda n
    scale: float  # 1 for serial SDCA, the number of partitions for DisDCA's practical variant
    tol: float  # line-search tolerance on |f'|
    max_newton: int
    fixed_step: float  # > 0: that step size, no line search
    non_uniformity: float  # probability of drawing from the scheme's law (else uniform)
    stop_gap: float  # stop once the running gap estimate is <= this (< 0: never)
    line_search_start: int  # HALF, PREVIOUS or MODEL


class DualArrays(NamedTuple):
    """A chain dual state as flat arrays: log mu of nodes (N K,) and edges ((N - n) K^2,), and
    per sequence its entropy, gap estimate and last step size."""

    log_node: np.ndarray
    log_edge: np.ndarray
    entropies: np.ndarray
    gaps: np.ndarray
    step_sizes: np.ndarray


class Sampler(NamedTuple):
    """The sampling scheme's code, its sum/max tree and the importance multipliers."""

    code: int
    tree: np.ndarray
    multipliers: np.ndarray


class EpochArgs(NamedTuple):
    """Everything ``run_steps`` reads (``layout``: a ``crfsdca.layout.SequenceLayout``;
    ``dims`` = (A, K, n_bias); ``ws`` from ``make_workspace``)."""

    layout: tuple
    dual: DualArrays
    w: np.ndarray
    sampler: Sampler
    dims: tuple
    params: StepParams
    draws: np.ndarray
    ws: tuple


@njit(cache=True, nogil=True)
def _choose(code, p_nu, tree, u0, u1, n):
    """Index of the next sequence: the scheme's law with probability p_nu, else uniform."""
    if code != UNIFORM and u0 < p_nu:
        if code == MAX:
            return trees.argmax(tree)
        if tree[1] > 0.0:
            return trees.draw(tree, u1, n)
    return min(int(u1 * n), n - 1)


@njit(cache=True, nogil=True)
def line_search_start(code, previous, kl, fprime0, cb):
    """First point of the line search: 0.5, the sequence's previous step size, or the root of
    the quadratic model of f' (``crfsdca.kernels.sdca.model_start``)."""
    if code == MODEL:
        return model_start(kl, fprime0, cb)
    return previous if code == PREVIOUS else 0.5


@njit(cache=True, nogil=True)
def _step(i, layout, dual, w, dims, params, ws):
    """One SDCA step on sequence i; returns (gap before the step, gamma, evaluations, status,
    cycles = (oracle, block gap, line search) cycles, single-precision predictor evaluations).

    ``dual`` is a :class:`DualArrays`, ``params`` a :class:`StepParams`.
    """
    seq_offsets, attr_offsets, attr_ids, attr_values, _, entry_slot, uattr_offsets, slot_attrs = (
        layout
    )
    log_node, log_edge, entropies, step_sizes = (
        dual.log_node,
        dual.log_edge,
        dual.entropies,
        dual.step_sizes,
    )
    A, K, n_bias = dims
    lam_n, scale, tol = params.lam_n, params.scale, params.tol
    max_newton, fixed_step = params.max_newton, params.fixed_step
    fb_ws, bufs, v_emit, v_rest, b32 = ws
    t0, t1 = seq_offsets[i], seq_offsets[i + 1]
    T = t1 - t0
    data = (seq_offsets, attr_offsets, attr_ids, attr_values, layout[4])
    c0 = cycles()
    log_z = sequence_block_marginals(data, i, w, dims, fb_ws, *_block_views(bufs, T, K))
    c1 = cycles()
    if not np.isfinite(log_z):
        return 0.0, 0.0, 0, 1, (c1 - c0, 0, 0), 0
    mu_src = (log_node, log_edge, t0 * K, (t0 - i) * K * K)
    vr = v_rest[: n_bias + K]
    trans = vr[n_bias:].reshape((K * K,))
    if fixed_step > 0.0:  # no line search: no float32 copies
        gap, fp0, n_low = block_gap_given_nu(mu_src, T, K, bufs, None, trans)
    else:
        gap, fp0, n_low = block_gap_given_nu(mu_src, T, K, bufs, b32, trans)
    c2 = cycles()
    sa = slot_attrs[uattr_offsets[i] : uattr_offsets[i + 1]]
    seq = (t0, t1, attr_offsets, attr_ids, attr_values, entry_slot, sa)
    kappa = -scale / lam_n
    b = primal_direction(seq, (bufs[0], bufs[1]), (A, K, n_bias, kappa), v_emit, vr)
    its, status, have_logs, ls_cycles, h, n32 = 0, 0, False, 0, 0.0, 0
    in_place = False  # whether the line search wrote the new logs into the dual state
    if fixed_step > 0.0:
        gamma = fixed_step
    else:
        cb = lam_n / scale * b
        g0 = line_search_start(params.line_search_start, step_sizes[i], gap, fp0, cb)
        c3 = cycles()
        in_place = n_low == 0.0  # no entry near 0 (``IN_PLACE_LOG_MIN``)
        if in_place:
            E, lo, hi, _, _ = segments(T, K)
            e_off, n_off = mu_src[3], mu_src[2] + lo - E
            outs = (log_edge[e_off : e_off + E], log_node[n_off : n_off + hi - lo])
            gamma, its, status, have_logs, h, n32 = line_search(
                bufs, b32, T, K, cb, fp0, g0, tol, max_newton, outs
            )
        else:
            gamma, its, status, have_logs, h, n32 = line_search(
                bufs, b32, T, K, cb, fp0, g0, tol, max_newton
            )
        ls_cycles = cycles() - c3
    if gamma > 0.0:
        entropies[i] = update_block(gamma, mu_src, T, K, bufs, have_logs, h, in_place)
        add_direction(gamma * kappa, sa, v_emit, vr, w, K, A)
    step_sizes[i] = gamma
    return gap, gamma, its, 2 * status, (c1 - c0, c2 - c1, ls_cycles), n32


@njit(cache=True, nogil=True)
def _run_steps(layout, dual, w, sampler, dims, params, draws, ws):
    """Run draws.shape[0] steps (or fewer once the gap estimate <= params.stop_gap).

    Returns (steps done, status, stats) with status 0 = ok, i + 1 = non-finite oracle on
    sequence i, and stats = [newton iterations, line searches, line-search failures, cycles in
    the line search, cycles in all, cycles in the oracle, cycles in the block gap,
    single-precision predictor evaluations]. The cycle counts let the caller split its wall time.
    """
    code, tree, mult = sampler.code, sampler.tree, sampler.multipliers
    gaps = dual.gaps
    n = gaps.shape[0]
    p_nu, stop_gap = params.non_uniformity, params.stop_gap
    stats = np.zeros(8)
    start = cycles()
    gap_sum = gaps.sum()
    for s in range(draws.shape[0]):
        i = _choose(code, p_nu, tree, draws[s, 0], draws[s, 1], n)
        g, gamma, its, status, phase_cycles, n32 = _step(i, layout, dual, w, dims, params, ws)
        stats[4] = cycles() - start
        stats[5] += phase_cycles[0]
        stats[6] += phase_cycles[1]
        if status == 1:
            return s, i + 1, stats
        stats[0] += its
        stats[7] += n32
        stats[1] += 1.0 if its > 0 else 0.0
        stats[2] += 1.0 if status == 2 else 0.0
        stats[3] += phase_cycles[2]
        gap_sum += g - gaps[i]
        gaps[i] = g
        if code in (GAP, MAX):
            trees.update(tree, i, g, code == MAX)
        elif code == GAP_IMPORTANCE:
            trees.update(tree, i, g * mult[i], False)
        if gap_sum <= stop_gap * n:
            return s + 1, 0, stats
    return draws.shape[0], 0, stats


@njit(cache=True, nogil=True)
def _block_views(bufs, T, K):
    """(logs, probs) = ((node (T, K), edge (T-1, K, K)), same) views of bufs' log_nu and nu, where
    the block oracle writes nu_i (flat block layout: edges, then nodes)."""
    E = (T - 1) * K * K
    lnu, nu = bufs[2], bufs[1]
    logs = (lnu[E : E + T * K].reshape((T, K)), lnu[:E].reshape((T - 1, K, K)))
    probs = (nu[E : E + T * K].reshape((T, K)), nu[:E].reshape((T - 1, K, K)))
    return logs, probs


@njit(cache=True, nogil=True)
def _make_ws(max_T, K, max_U):
    """Workspace: oracle buffers, block buffers (mu, nu, log_nu, log_mix), primal direction,
    float32 block buffers (mu, nu, log_nu) of the line-search predictor."""
    T = max(max_T, 1)
    size = (T - 1) * K * K + T * K
    fb_ws = (
        np.empty((T, K)),
        np.empty((K, K)),
        np.empty((T, K)),
        np.empty((T, K)),
        np.empty((T, K)),
        np.empty(T),
        np.empty(T),
    )
    bufs = (np.empty(size), np.empty(size), np.empty(size), np.empty(size))
    b32 = (np.empty(size, np.float32), np.empty(size, np.float32), np.empty(size, np.float32))
    return fb_ws, bufs, np.empty((max(max_U, 1), K)), np.empty((3 + K, K)), b32


@njit(cache=True, nogil=True, parallel=True)
def _exact_gaps(layout, log_mu, w, dims, max_T, max_U, n_chunks):
    """g_i = KL~(mu_i || nu_i(w)) for every sequence (one oracle call each), in parallel.

    log_mu = (log_node_flat, log_edge_flat) of the dual state.
    """
    seq_offsets = layout[0]
    log_node, log_edge = log_mu
    K = dims[1]
    n = seq_offsets.shape[0] - 1
    gaps = np.empty(n)
    data = (layout[0], layout[1], layout[2], layout[3], layout[4])
    for c in prange(n_chunks):
        fb_ws, bufs, _, _, _ = _make_ws(max_T, K, max_U)
        trans = np.empty(K * K)
        for i in range(c * n // n_chunks, (c + 1) * n // n_chunks):
            t0, t1 = seq_offsets[i], seq_offsets[i + 1]
            T = t1 - t0
            log_z = sequence_block_marginals(data, i, w, dims, fb_ws, *_block_views(bufs, T, K))
            if not np.isfinite(log_z):
                gaps[i] = np.nan
                continue
            mu_src = (log_node, log_edge, t0 * K, (t0 - i) * K * K)
            gaps[i] = block_gap_given_nu(mu_src, T, K, bufs, None, trans)[0]
    return gaps


@njit(cache=True, nogil=True)
def _all_entropies(seq_offsets, log_node, log_edge):
    n = seq_offsets.shape[0] - 1
    out = np.empty(n)
    for i in range(n):
        t0, t1 = seq_offsets[i], seq_offsets[i + 1]
        out[i] = block_entropy(log_node[t0:t1], log_edge[t0 - i : t1 - i - 1])
    return out


@njit(cache=True, nogil=True)
def _expected_features(data, log_node, log_edge, dims, out):
    """out += sum_i E_{mu_i}[F(x_i, .)] from log-marginals (layout of crfsdca.features)."""
    seq_offsets, attr_offsets, attr_ids, attr_values = data
    A, K, n_bias = dims
    trans = A * K + n_bias * K
    n = seq_offsets.shape[0] - 1
    for i in range(n):
        t0, t1 = seq_offsets[i], seq_offsets[i + 1]
        for t in range(t0, t1):
            for k in range(K):
                m = np.exp(log_node[t, k])
                for p in range(attr_offsets[t], attr_offsets[t + 1]):
                    out[attr_ids[p] * K + k] += attr_values[p] * m
                if n_bias > 0:
                    out[A * K + k] += m
                    if t == t0:
                        out[A * K + K + k] += m
                    if t == t1 - 1:
                        out[A * K + 2 * K + k] += m
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


# -- thin Python wrappers ------------------------------------------------------------------------
def make_workspace(max_T: int, K: int, max_U: int):
    """Workspace for sequences of up to max_T items and max_U distinct attributes."""
    return _make_ws(max_T, K, max_U)


def run_steps(args: EpochArgs):
    """Run the SDCA steps of ``args`` (see ``_run_steps``); returns (done, status, stats)."""
    done, status, stats = _run_steps(*args)
    return int(done), int(status), stats


def exact_gaps(layout, log_mu, w, dims, max_U):
    """Exact block gaps of the dual state log_mu = (log_node (N, K), log_edge (N - n, K, K))."""
    log_mu = (
        np.ascontiguousarray(log_mu[0]).reshape(-1),
        np.ascontiguousarray(log_mu[1]).reshape(-1),
    )
    max_T = int(np.diff(layout[0]).max())
    n_chunks = max(1, min(layout[0].size - 1, 4 * get_num_threads()))
    return _exact_gaps(layout, log_mu, w, dims, max_T, max_U, n_chunks)


def all_entropies(seq_offsets, log_node, log_edge):
    return _all_entropies(seq_offsets, log_node, log_edge)


def expected_features(data, log_node, log_edge, dims, out):
    _expected_features(data, log_node, log_edge, dims, out)
    return out


def radii(layout, dims, max_U):
    return _radii(layout, dims, max_U)
