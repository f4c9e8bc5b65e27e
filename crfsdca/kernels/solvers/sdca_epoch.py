"""Compiled SDCA epochs, written once for every structure: sampling, oracle, block step and
sparse primal update in one loop.

``run_steps`` draws examples from the sampler tree and takes one step on each (``_step``): the
structure's block oracle (``crfsdca.kernels.primitives``: nu_i as probabilities and logs in
one pass), the block gap, the primal direction, the Newton line search and the update of the
block (``crfsdca.kernels.solvers.sdca``, which reads a block through its runs alone) and of w. numba
compiles one specialisation per structure type (``ChainBlocks``, ``TreeBlocks``,
``JunctionBlocks``). The same step serves serial SDCA (scale = 1) and the local rounds of
DisDCA (scale = number of workers).
"""

from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
from numba import get_num_threads, typeof, types
from numba.extending import overload

from crfsdca.kernels.jit import njit
from crfsdca.kernels.numerics.cycles import cycles
from crfsdca.kernels.primitives import (
    BlockBuffers,
    BlockBuffers32,
    add_block_direction,
    block_direction,
    block_direction_entries,
    block_oracle,
    block_runs,
    direction_capacity,
    step_workspace,
)
from crfsdca.kernels.solvers import trees
from crfsdca.kernels.solvers.hinge import hinge_step
from crfsdca.kernels.solvers.line_search import line_search, model_start, safe_newton
from crfsdca.kernels.solvers.prox import prepare
from crfsdca.kernels.solvers.sdca import _update_range, block_gap_given_nu, update_block
from crfsdca.kernels.solvers.team import move
from crfsdca.kernels.structures import chain_blocks, junction_blocks, tree_blocks  # noqa: F401

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
    gaps_only: bool = False  # no step: each drawn example's exact block gap (``exact_gaps``)


class PaperSearch(NamedTuple):
    """The ``search`` of a run that takes the paper's line search (``line_search.safe_newton``)
    instead of crfsdca's (None: the predictor, then ``rtsafe``). A type, not a run-time code:
    the step loop of a run compiles the one line search it takes."""

    safe_newton: bool = True


class DualArrays(NamedTuple):
    """A dual state as flat arrays: log mu of the clique tables (``log_edge``) and of the nodes
    (``log_node``; empty for junction trees), where the structure's runs point, and per example
    its entropy, gap estimate and last step size."""

    log_edge: np.ndarray
    log_node: np.ndarray
    entropies: np.ndarray
    gaps: np.ndarray
    step_sizes: np.ndarray


class Sampler(NamedTuple):
    """The sampling scheme's code, its sum/max tree and the importance multipliers."""

    code: int
    tree: np.ndarray
    multipliers: np.ndarray


class EpochArgs(NamedTuple):
    """Everything ``run_steps`` reads (``structure``: a structure's kernel type, e.g.
    ``chain_blocks.ChainBlocks``; ``ws`` from ``make_workspace``)."""

    structure: tuple
    dual: DualArrays
    w: np.ndarray
    sampler: Sampler
    params: StepParams
    draws: np.ndarray
    ws: tuple
    prox: object = None  # ``kernels.solvers.prox.ProxArrays`` for the elastic net, else None
    loss: object = None  # ``kernels.solvers.hinge.HingeArrays`` for the hinge loss, else None
    team: object = None  # a ``team.Team`` for one thread of a multi-threaded stretch, else None
    search: object = None  # None: crfsdca's line search; a ``PaperSearch``: the paper's


@njit(cache=True, nogil=True)
def _choose(code, p_nu, tree, u0, u1, n):
    """Index of the next example: the scheme's law with probability p_nu, else uniform."""
    if code != UNIFORM and u0 < p_nu:
        if code == MAX:
            return trees.argmax(tree)
        if tree[1] > 0.0:
            return trees.draw(tree, u1, n)
    return min(int(u1 * n), n - 1)


@njit(cache=True, nogil=True)
def line_search_start(code, previous, kl, fprime0, cb):
    """First point of the line search: 0.5, the example's previous step size, or the root of
    the quadratic model of f' (``crfsdca.kernels.solvers.line_search.model_start``)."""
    if code == MODEL:
        return model_start(kl, fprime0, cb)
    return previous if code == PREVIOUS else 0.5


def _writable_logs(mu_arrays):
    """The dual state's flat arrays when the line search may write its logs there (float64),
    else None (float32 duals: the logs go through bufs and the update's copy)."""


@overload(_writable_logs)
def _ov_writable_logs(mu_arrays):
    if mu_arrays[0].dtype == types.float64:
        return lambda mu_arrays: mu_arrays
    return lambda mu_arrays: None


@njit(cache=True, nogil=True)
def _search(i, dual, params, block, cb, gap, fp0, n_low, pw, method):
    """The step size of block i (the fixed step, or the line search with cb = c |v_i|^2, or
    q(1) and the elastic net's ``pw``: crfsdca's, or the paper's when ``method`` is a
    :class:`PaperSearch`, decided at compile time); returns (gamma, evaluations, status, evaluated,
    entropy, predictor evaluations, in place, line-search cycles) (``line_search``)."""
    bufs, b32, runs, mu_arrays = block
    if params.fixed_step > 0.0:
        return params.fixed_step, 0, 0, False, 0.0, 0, False, 0
    g0 = line_search_start(params.line_search_start, dual.step_sizes[i], gap, fp0, cb)
    c3 = cycles()
    outs = _writable_logs(mu_arrays)
    # no entry near 0 (``IN_PLACE_LOG_MIN``): the logs go straight to the state (a run-time
    # choice: one compiled line search serves both)
    in_place = outs is not None and n_low == 0.0
    tol, max_newton = params.tol, params.max_newton
    if method is not None:  # noqa: SIM108 (numba prunes the branch on None at compile time)
        gamma, its, status, have_logs, h = safe_newton(
            bufs, runs, cb, fp0, g0, tol, max_newton, outs, pw, in_place
        )
        return gamma, its, status, have_logs, h, 0, in_place, cycles() - c3
    gamma, its, status, have_logs, h, n32 = line_search(
        bufs, b32, runs, cb, fp0, g0, tol, max_newton, outs, pw, in_place
    )
    return gamma, its, status, have_logs, h, n32, in_place, cycles() - c3


@njit(cache=True, nogil=True, inline="always")
def _step(i, structure, dual, w, params, ws, prox, loss, team, s, search):
    """One SDCA step on example i; returns (gap before the step, gamma, evaluations, status,
    cycles = (oracle, block gap, line search) cycles, single-precision predictor evaluations).

    ``dual`` is a :class:`DualArrays`, ``params`` a :class:`StepParams`. ``prox``: None for
    plain SDCA (w = v); for the elastic net the ``ProxArrays`` of v (Prox-SDCA: the line search
    on the exact g* term, then v moves and w = S_tau(v) on the block's support). ``loss``: None
    for the log-loss (the CRF), a ``hinge.HingeArrays`` for the structured hinge loss, whose
    step (``hinge.hinge_step``) replaces this one (decided at compile time). ``team``: None, or
    a ``team.Team`` whose row of ``deltas`` records the step's change of w (of v with the
    elastic net) as well; ``s``: the step's number in the stretch; ``search``: None or a
    :class:`PaperSearch` (``_search``).
    """
    if loss is not None:
        return hinge_step(i, structure, dual, w, params, ws, prox, loss, team, s)
    bufs, b32, sws = ws
    lam_n, scale = params.lam_n, params.scale
    runs = block_runs(structure.runs, i)
    mu_arrays = (dual.log_edge, dual.log_node)
    c0 = cycles()
    log_z = block_oracle(structure, i, w, sws, bufs)
    c1 = cycles()
    if not np.isfinite(log_z):
        return 0.0, 0.0, 0, 1, (c1 - c0, 0, 0), 0
    # the float32 copies serve the line search only, but one compiled variant serves fixed steps
    gap, fp0, n_low = block_gap_given_nu(mu_arrays, runs, bufs, b32)
    c2 = cycles()
    if params.gaps_only:  # an exact gap pass (``exact_gaps``): the block is not moved
        return gap, 0.0, 0, 0, (c1 - c0, c2 - c1, 0), 0
    kappa = -scale / lam_n
    b = block_direction(structure, i, bufs, sws, kappa)
    block = (bufs, b32, runs, mu_arrays)
    if prox is None:  # decided at compile time
        gamma, its, status, have_logs, h, n32, in_place, ls_cycles = _search(
            i, dual, params, block, lam_n / scale * b, gap, fp0, n_low, None, search
        )
        if gamma > 0.0:
            dual.entropies[i] = update_block(gamma, mu_arrays, runs, bufs, have_logs, h, in_place)
            move(structure, i, gamma, kappa, sws, w, None, 0, team, s)
    else:
        m = block_direction_entries(structure, i, sws, prox.idx, prox.a)
        pw, cb = prepare(prox, m, kappa, w, lam_n / scale)
        gamma, its, status, have_logs, h, n32, in_place, ls_cycles = _search(
            i, dual, params, block, cb, gap, fp0, n_low, pw, search
        )
        if gamma > 0.0:
            dual.entropies[i] = update_block(gamma, mu_arrays, runs, bufs, have_logs, h, in_place)
            move(structure, i, gamma, kappa, sws, w, prox, m, team, s)
    dual.step_sizes[i] = gamma
    return gap, gamma, its, 2 * status, (c1 - c0, c2 - c1, ls_cycles), n32


@njit(cache=True, nogil=True)
def _run_steps(
    structure, dual, w, sampler, params, draws, ws, prox=None, loss=None, team=None, search=None
):
    """Run draws.shape[0] steps (or fewer once the gap estimate <= params.stop_gap).

    Returns (steps done, status, stats) with status 0 = ok, i + 1 = non-finite oracle on
    example i, and stats = [newton iterations, line searches, line-search failures, cycles in
    the line search, cycles in all, cycles in the oracle, cycles in the block gap,
    single-precision predictor evaluations]. The cycle counts let the caller split its wall time.
    On return ``draws[s, 0]`` holds the example of step s (s < steps done): the rows of w that
    the steps moved, for a distributed round's sparse Delta w.

    ``team`` (a ``team.Team``; None: every example, alone): draw from the team member's own
    examples, stop at the member's quota once the team's steps reach its target, and test the
    stop gap on the whole team's gap sums.
    """
    code, tree, mult = sampler.code, sampler.tree, sampler.multipliers
    gaps = dual.gaps
    n = gaps.shape[0]
    p_nu, stop_gap = params.non_uniformity, params.stop_gap
    stats = np.zeros(8)
    start = cycles()
    if team is None:
        m = n
        gap_sum = gaps.sum()
    else:
        m = team.examples.shape[0]
        gap_sum = _gap_sum(gaps, team.examples)
        team.gap_sums[team.rank] = gap_sum
    for s in range(draws.shape[0]):
        if team is not None:  # noqa: SIM102 (numba prunes the branch on None at compile time)
            if s >= team.quota and team.done.sum() >= team.target:
                return s, 0, stats
        j = _choose(code, p_nu, tree, draws[s, 0], draws[s, 1], m)
        i = j if team is None else team.examples[j]
        draws[s, 0] = i  # the draw is used: record the example stepped on
        g, gamma, its, status, phase_cycles, n32 = _step(
            i, structure, dual, w, params, ws, prox, loss, team, s, search
        )
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
        if code in (GAP, MAX, GAP_IMPORTANCE):
            trees.update(tree, j, g * mult[j] if code == GAP_IMPORTANCE else g, code == MAX)
        if team is None:
            if gap_sum <= stop_gap * n:
                return s + 1, 0, stats
        else:
            team.done[team.rank] = s + 1
            team.gap_sums[team.rank] = gap_sum
            if team.gap_sums.sum() <= stop_gap * n:
                return s + 1, 0, stats
    return draws.shape[0], 0, stats


@njit(cache=True, nogil=True)
def _gap_sum(gaps, examples):
    """The sum of the gap estimates of ``examples``."""
    total = 0.0
    for j in range(examples.shape[0]):
        total += gaps[examples[j]]
    return total


@njit(cache=True, nogil=True)
def _all_entropies(table, log_edge, log_node):
    """H~(mu_i) of every block from the stored logs (0 log 0 = 0)."""
    n = table.start.shape[0] - 1
    arrays = (log_edge, log_node)
    out = np.empty(n)
    for i in range(n):
        runs = block_runs(table, i)
        h = 0.0
        for r in range(runs.lo.shape[0]):
            c = runs.coef[r]
            if c == 0.0:
                continue
            src = arrays[runs.dst[r]]
            o = runs.off[r]
            for p in range(o, o + runs.hi[r] - runs.lo[r]):
                lm = np.float64(src[p])
                if lm > -np.inf:
                    h -= c * np.exp(lm) * lm
        out[i] = h
    return out


# -- thin Python wrappers ------------------------------------------------------------------------
def make_workspace(structure):
    """Workspace of one step on ``structure`` (a structure's kernel type): block buffers (mu,
    nu, log_nu, log_mix), their float32 copies for the line-search predictor (mu, nu, log_nu)
    and the structure's own buffers (``primitives.step_workspace``). Built in Python: no kernel
    to compile before a first run's loop."""
    return (*_block_buffers(max(int(structure.max_block), 1)), step_workspace(structure))


def _block_buffers(size):
    """A step's float64 and float32 block buffers (``BlockBuffers``, ``BlockBuffers32``) of
    ``size`` entries each."""
    bufs = BlockBuffers(*(np.empty(size) for _ in range(4)))
    return bufs, BlockBuffers32(*(np.empty(size, np.float32) for _ in range(3)))


@njit(cache=True, nogil=True)
def _capacity(structure, ws):
    return direction_capacity(structure, ws[2])


def loop_args(structure, dual_dtype) -> EpochArgs:
    """``_run_steps``'s arguments for ``structure`` (a structure's kernel type) and a dual of
    ``dual_dtype`` without an elastic net, as a run passes them, but of arrays of length 1
    and no draws: no step is taken. A first run compiles its loop on them before its dual start
    exists, while a second process compiles the kernels of the start
    (``crfsdca.estimators.compile_ahead``); a type that differs from the run's only means the
    run compiles its own."""
    logs = np.zeros(1, dual_dtype)
    per_example = np.zeros(1)
    return EpochArgs(
        structure=structure,
        dual=DualArrays(logs, logs, per_example, per_example, per_example),
        w=np.zeros(1),
        sampler=Sampler(UNIFORM, np.zeros(1), np.zeros(1)),
        params=StepParams(1.0, 1.0, 1e-9, 1, -1.0, 0.5, -1.0, HALF),
        draws=np.zeros((0, 2)),
        ws=make_workspace(structure),
    )


def compile_loop(structure, dual_dtype) -> None:
    """Compile (or load) ``_run_steps`` on :func:`loop_args`."""
    run_steps(loop_args(structure, dual_dtype))


def compile_parts(structure, dual_dtype) -> None:
    """Compile the parts of the SDCA step that follow the block oracle, as the step calls
    them, for ``structure`` (a structure's kernel type) and a dual of ``dual_dtype``, without
    compiling anything else (the argument types are built from arrays of those types): in the
    reverse of the order in which the step loop's typing reaches them, the structure's update
    of w by the primal direction, ``sdca._update_range``, ``_search``, the primal direction and
    the block gap (their callee versions, ``crfsdca.kernels.jit``).

    A second process compiles them into the shared cache while a first run's loop compiles
    its block oracle (``crfsdca.estimators.compile_ahead``); the two meet in the middle, each
    part compiled once when the loop reaches what the second process has not. A type that
    differs from the loop's only means the loop compiles its own. The structure primitives
    (the direction and its update) are compiled here only to reach their callees (a primitive
    is never cached: ``kernels.primitives.implements``)."""
    from numba.core.registry import cpu_target

    ctx = cpu_target.typing_context
    ctx.refresh()

    def typed(stub, *args):
        return ctx.resolve_function_type(ctx.resolve_value_type(stub), args, {})

    kind = typeof(structure)
    runs = block_runs.py_func(structure.runs, 0)
    logs = np.zeros(1, dual_dtype)
    per_example = np.zeros(1)
    dual = DualArrays(logs, logs, per_example, per_example, per_example)
    params = StepParams(1.0, 1.0, 1e-9, 1, -1.0, 0.5, -1.0, HALF)
    bufs, b32 = _block_buffers(1)  # their types only
    sws = typeof(step_workspace(structure))
    x = 0.0
    typed(add_block_direction, kind, types.int64, types.float64, sws, typeof(np.zeros(1)))
    update = (x, logs, 0, bufs, 0, 0, x, True)  # ``update_block``'s loop over the runs
    _update_range.callee.compile(tuple(typeof(a) for a in update))
    search = (0, dual, params, (bufs, b32, runs, (logs, logs)), x, x, x, x, None, None)
    _search.callee.compile(tuple(typeof(a) for a in search))
    bufs_t, b32_t, runs_t, logs_t = (typeof(v) for v in (bufs, b32, runs, logs))
    typed(block_direction, kind, types.int64, bufs_t, sws, types.float64)
    block_gap_given_nu.callee.compile((types.UniTuple(logs_t, 2), runs_t, bufs_t, b32_t))


def direction_size(structure, ws) -> int:
    """The most support entries of one block's primal direction (Prox-SDCA's buffers)."""
    return int(_capacity(structure, ws))


def run_steps(args: EpochArgs):
    """Run the SDCA steps of ``args`` (see ``_run_steps``); returns (done, status, stats)."""
    done, status, stats = _run_steps(*args)
    return int(done), int(status), stats


def exact_gaps(structure, log_edge, log_node, w, prox=None, search=None):
    """Exact block gaps of the dual state (flat views of its clique and node arrays) at w:
    ``_run_steps`` with ``StepParams.gaps_only`` over every example in order (one oracle call
    and the block gap each, no step), so that the SDCA loop's compiled code serves the exact
    passes too (``prox``, ``search``: the run's, for the same specialisation; they are not
    read; the log-loss only: the hinge loss has its own exact pass, ``structures.hinge``). In
    chunks on numba's number of threads (the kernel releases the GIL; each gap is computed
    alone, so the result does not depend on the threads); nan from a non-finite oracle on."""
    n = structure.runs.start.size - 1
    gaps = np.zeros(n)
    unused = np.zeros(0)
    dual = DualArrays(_flat(log_edge), _flat(log_node), unused, gaps, unused)
    sampler = Sampler(UNIFORM, np.zeros(1), np.zeros(1))
    params = StepParams(1.0, 1.0, 1.0, 1, -1.0, 0.0, -1.0, HALF, gaps_only=True)
    threads = max(1, min(n, get_num_threads()))
    bounds = [n * c // threads for c in range(threads + 1)]

    def chunk(lo, hi):
        draws = np.zeros((hi - lo, 2))
        draws[:, 1] = (np.arange(lo, hi) + 0.5) / n  # the uniform law reads example i there
        ws = make_workspace(structure)
        # every argument passed, as a run passes them (an omitted default is another type)
        args = (structure, dual, w, sampler, params, draws, ws, prox, None, None, search)
        done, status, _ = _run_steps(*args)
        if status:
            gaps[status - 1 : hi] = np.nan  # the chunk stopped there
        return done

    if threads == 1:
        chunk(0, n)
        return gaps
    with ThreadPoolExecutor(threads) as pool:
        jobs = [pool.submit(chunk, lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
        for job in jobs:
            job.result()
    return gaps


def all_entropies(table, log_edge, log_node):
    """H~(mu_i) of every block of the run table."""
    return _all_entropies(table, _flat(log_edge), _flat(log_node))


def _flat(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(-1)
