"""Compiled SAG-NUS iterations, written once for every structure.

One iteration on example i (``baselines.md`` §1-§5; the helpers are in
``crfsdca.kernels.solvers.sag``): bring the rows of w = c z that the example touches up to date,
call the structure's oracle at w (``crfsdca.kernels.primitives``: ``sag_oracle``), form the compact
gradient g_i, update the gradient memory (d <- d + g_i - y_i), search L_i by doubling (each trial
one oracle call,
``sag_trial``; the §4 skip rule may skip the search), and take the step w <- (1 - alpha lambda)
w - (alpha / m) d as updates of c and the running sum S. numba compiles one specialisation per
structure type (``ChainBlocks``, ``TreeBlocks``, ``JunctionBlocks``).

Arrays: ``memory`` a ``sag.SAGMemory`` (the marginals' shapes are the structure's),
``samplers`` the three sum-trees of ``crfsdca.kernels.solvers.sag.draw``, ``z`` the weights (w on
return), ``params`` a ``sag.SAGParams``, ``ws = (lazy, s_last, sws)`` with the structure's
buffers ``sws``.
"""

import numpy as np

from crfsdca.kernels.jit import njit
from crfsdca.kernels.primitives import (
    sag_add_features,
    sag_oracle,
    sag_prepare_trials,
    sag_rest_rows,
    sag_trial,
)
from crfsdca.kernels.solvers import sag
from crfsdca.kernels.structures import chain_blocks, junction_blocks, tree_blocks  # noqa: F401
from crfsdca.kernels.structures.direction import scatter_rows


@njit(cache=True, nogil=True)
def sag_buffers(structure, i, sws):
    """The visit's marginals (node, summed cliques) and compact rows (g, d change: emit, rest):
    fields every structure's SAG workspace has (``chain_blocks.ChainSagWorkspace``, ...)."""
    a, b = structure.layout.seq_offsets[i], structure.layout.seq_offsets[i + 1]
    v = sws.visit
    return v.node[: b - a], v.sums, v.g_emit, v.g_rest, v.d_emit, v.d_rest


@njit(cache=True, nogil=True)
def _gradient(structure, i, sws, U):
    """Compact g_i = E_nu[F] - F(x_i, y_i) into the visit's g rows; returns ||g_i||^2."""
    node, sums, g_emit, g_rest, _, _ = sag_buffers(structure, i, sws)
    g_emit[:U] = 0.0
    g_rest[:] = 0.0
    sag_add_features(structure, i, node, sums, 1.0, 1.0, g_emit, g_rest)
    return np.sum(g_emit[:U] ** 2) + np.sum(g_rest**2)


@njit(cache=True, nogil=True)
def _update_memory(structure, i, sa, memory, sws):
    """d <- d + g_i - y_i on the support, then store the visit's marginals as y_i (§2). The gold
    parts cancel after the first visit; rows are K entries (flat rests are viewed as rows)."""
    grad_sum, node_mem, sums_mem = memory.grad_sum, memory.node, memory.sums
    covered = memory.covered
    A, K = structure.dims[0], structure.dims[1]
    a, b = structure.layout.seq_offsets[i], structure.layout.seq_offsets[i + 1]
    node, sums, g_emit, g_rest, dd_emit, dd_rest = sag_buffers(structure, i, sws)
    U = sa.shape[0]
    if covered[i]:
        dd_emit[:U] = 0.0
        dd_rest[:] = 0.0
        sag_add_features(structure, i, node, sums, 1.0, 0.0, dd_emit, dd_rest)
        sag_add_features(structure, i, node_mem[a:b], sums_mem[i], -1.0, 0.0, dd_emit, dd_rest)
        rows = dd_rest.reshape((dd_rest.size // K, K))
        scatter_rows(sa, A, dd_emit[:U], rows, grad_sum, K)
    else:
        rows = g_rest.reshape((g_rest.size // K, K))
        scatter_rows(sa, A, g_emit[:U], rows, grad_sum, K)
    node_mem[a:b] = node
    sums_mem[i] = sums


@njit(cache=True, nogil=True)
def _line_search(L, f, gsq, structure, i, sws, max_doublings, growth):
    """Smallest L growth^j, j = 0..max_doublings, with f(w - g/L) <= f(w) - ||g||^2 / (2L)
    (§3.3; growth 2 by default).

    Each trial is one oracle call. Returns (L, trials, doublings), doublings = -1 when the cap
    was reached without success.
    """
    for j in range(max_doublings + 1):
        inv = 1.0 / L
        if sag_trial(structure, i, inv, sws) <= f - 0.5 * gsq * inv:
            return L, j + 1, j
        if j < max_doublings:
            L *= growth
    return L, max_doublings + 1, -1


@njit(cache=True, nogil=True)
def _lipschitz_step(i, was_covered, f, gsq, structure, sws, memory, samplers, params):
    """§3 step 3 (and the §4 skip rule); returns (oracle calls, outcome).

    outcome: SEARCHED, CAPPED (the doubling cap was reached), SKIPPED (§4 skip budget) or
    SMALL_GRADIENT (||g||^2 <= threshold: no test).
    """
    L, skipped = sag.lipschitz_begin(i, was_covered, memory, samplers, params)
    calls, outcome, doublings = 0, sag.SKIPPED, 0
    if not skipped:
        outcome = sag.SMALL_GRADIENT
        if gsq > params.threshold:
            max_d = params.max_doublings
            L, calls, doublings = _line_search(L, f, gsq, structure, i, sws, max_d, params.growth)
            outcome = sag.CAPPED if doublings < 0 else sag.SEARCHED
    sag.lipschitz_end(i, L, outcome, doublings, memory, samplers, params)
    return calls, outcome


@njit(cache=True, nogil=True)
def _step(i, structure, memory, samplers, z, params, ws):
    """One SAG-NUS iteration on example i; returns (oracle calls, status, line-search outcome)."""
    lazy, s_last, sws = ws
    A, K = structure.dims[0], structure.dims[1]
    lay = structure.layout
    sa = lay.slot_attrs[lay.uattr_offsets[i] : lay.uattr_offsets[i + 1]]
    sag.sync_sequence(sa, A, sag_rest_rows(structure), K, z, memory.grad_sum, lazy[1], s_last)
    log_z, f = sag_oracle(structure, i, z, lazy[0], sws)
    if not np.isfinite(log_z):
        return 1, 1, sag.SEARCHED
    gsq = _gradient(structure, i, sws, sa.shape[0])
    was_covered = memory.covered[i]
    _update_memory(structure, i, sa, memory, sws)
    sag_prepare_trials(structure, i, sws)
    calls, outcome = _lipschitz_step(
        i, was_covered, f, gsq, structure, sws, memory, samplers, params
    )
    decay = outcome != sag.SKIPPED or params.skip_decay
    sag.take_step(memory, lazy, params, memory.lipschitz.shape[0], s_last, z, K, decay)
    return 1 + calls, 0, outcome


@njit(cache=True, nogil=True)
def _run_steps(structure, memory, samplers, z, params, draws, ws):
    """Iterations on draws (steps, 3) until they run out or params.budget oracle calls are made.

    Returns (steps done, oracle calls, status, stats, chosen indices); status 0 = ok, i + 1 =
    non-finite log Z on example i (w then holds the iterate before that step).
    """
    lazy, s_last = ws[0], ws[1]
    n, K = memory.lipschitz.shape[0], structure.dims[1]
    stats = np.zeros(sag.N_STATS)
    chosen = np.full(draws.shape[0], -1, np.int64)
    lazy[0], lazy[1] = 1.0, 0.0
    s_last[:] = 0.0
    done, calls, status = 0, 0, 0
    for s in range(draws.shape[0]):
        if calls >= params.budget:
            break
        m = int(memory.scalars[sag.N_COVERED])
        i = sag.draw(samplers, m, n, draws[s], params.non_uniformity)
        chosen[s] = i
        c, st, outcome = _step(i, structure, memory, samplers, z, params, ws)
        calls += c
        if st != 0:
            status = i + 1
            break
        done += 1
        stats[0] += c - 1
        stats[outcome] += 1.0
    sag.normalise(z, memory.grad_sum, lazy, s_last, K)
    return done, calls, status, stats, chosen


# -- thin Python wrappers ------------------------------------------------------------------------
def make_workspace(n_rows: int, sws: tuple) -> tuple:
    """(lazy (c, S), S_r of every one of the n_rows rows of w, the structure's buffers)."""
    return np.ones(2), np.zeros(n_rows), sws


def run_steps(structure, memory, samplers, z, params, draws, ws):
    """Run SAG-NUS iterations (see ``_run_steps``); returns (done, calls, status, stats, chosen)."""
    if not isinstance(params, sag.SAGParams) or draws.ndim != 2 or draws.shape[1] != 3:
        raise ValueError(f"expected SAGParams and draws (steps, 3); got {type(params).__name__}"
                         f" and draws of shape {draws.shape}")  # fmt: skip
    done, calls, status, stats, chosen = _run_steps(
        structure, memory, samplers, z, params, draws, ws
    )
    return int(done), int(calls), int(status), stats, chosen[: done + (status != 0)]
