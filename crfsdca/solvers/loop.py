"""The evaluation loop shared by the stochastic solvers (SDCA, SAG-NUS, SAG-NUS*, OEG).

A runner owns a solver's arrays and counters and provides:

- ``n``, ``state`` (a :class:`~crfsdca.solvers.base.RunState`), ``weights``, ``counters``;
- ``run_until_eval()``: run the steps up to the next evaluation point;
- ``report(monitor)``: the keyword arguments of :meth:`Monitor.end_epoch` for the current state;
- ``certified`` (optional): set by an exact gap pass whose mean gap is <= ``tol``; the loop
  stops when the recorded gap P - D of that state is <= ``tol`` too, else it clears the flag.

Whatever ends the run (tol, a certified exact pass, max_epochs, time_limit, Ctrl-C), the last
trace record is the state the run returns (:meth:`Monitor.finish`), and it is written before
the final checkpoint, so that summaries, checkpoints and traces all agree. A run stopped above
``tol`` ends with a checkpoint of its final state (to be continued with ``--resume``); a run
that reached ``tol`` writes none at its end, as the distributed driver (the dual state of
CoNLL-2000 is 0.8 GB: its write cost a third of the run); its timed checkpoints stay.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from crfsdca.errors import ConvergenceWarning
from crfsdca.solvers.base import (
    ConfiguredSolver,
    SolverConfig,
    SolverResult,
    refuse_hinge,
    refuse_l1,
)
from crfsdca.solvers.interrupts import deferred_interrupt

if TYPE_CHECKING:
    from crfsdca.solvers.monitor import Monitor
    from crfsdca.structures.problem import Problem


class Runner:
    """What every runner starts from: the problem and its structure, the solver's config, the
    state (a :class:`~crfsdca.solvers.base.RunState`), an RNG that continues the state's, ``n``
    and the counters (those of the state, or ``counter_names`` at 0)."""

    counter_names: ClassVar[tuple[str, ...]] = ()

    def __init__(self, problem: Problem, cfg: Any, state: Any) -> None:
        self.problem, self.cfg, self.state = problem, cfg, state
        self.rng = np.random.default_rng()
        self.rng.bit_generator.state = state.rng_state
        self.structure = problem.structure
        self.n = problem.train.n_sequences
        self.counters = dict(state.counters or dict.fromkeys(self.counter_names, 0.0))

    def compile_kernels(self) -> None:
        """Compile (or load from the cache) the kernels of the steps, without taking any."""


class LoopSolver(ConfiguredSolver):
    """A solver that runs :func:`run_loop` over its runner, from a given state or its start;
    one without an l1 term (``trains_l1`` false) refuses an elastic-net problem, one without
    the hinge loss (``trains_hinge`` false) a structured-SVM problem."""

    trains_l1: ClassVar[bool] = False
    trains_hinge: ClassVar[bool] = False

    def initial_state(self, problem: Problem) -> Any:
        raise NotImplementedError

    def runner(self, problem: Problem, state: Any) -> Runner:
        raise NotImplementedError

    def compile_loop(self, problem: Problem) -> None:
        """Compile (or load) the kernel of the steps on ``problem`` before the run's start
        exists, where the argument types allow (else the runner's ``compile_kernels`` does)."""

    def solve(
        self, problem: Problem, monitor: Monitor, state: Any = None, compile_ahead: Any = None
    ) -> SolverResult:
        """Run from ``state`` (or :meth:`initial_state`) until a stopping rule fires.

        ``compile_ahead``: a process compiling the evaluation kernels on a cold cache
        (``crfsdca.estimators.compile_ahead``); the solver compiles its loop meanwhile (before
        the start of a new run: :meth:`compile_loop`), then waits for it before the first
        evaluation."""
        if not self.trains_l1:
            refuse_l1(self.name, problem)
        if not self.trains_hinge:
            refuse_hinge(self.name, problem)
        if compile_ahead is not None and state is None:
            self.compile_loop(problem)
        state = state or self.initial_state(problem)
        runner = self.runner(problem, state)
        if compile_ahead is not None:
            runner.compile_kernels()
            compile_ahead.wait()
        return run_loop(self, runner, monitor)


def run_loop(solver: Any, runner: Any, monitor: Monitor) -> SolverResult:
    """Run a stretch, report, checkpoint, until a stopping rule fires; return the final state."""
    state = runner.state
    monitor.start(elapsed=state.seconds)
    reason = ""
    try:
        if state.oracle_calls > 0:  # resumed: the last evaluation is already in the trace
            monitor.resume_schedule(state.oracle_calls)
            stop = False
        else:
            stop = monitor.end_epoch(runner.weights, **runner.report(monitor), force=True)
            reason = monitor.stop_reason
        while not stop:
            with deferred_interrupt():
                runner.run_until_eval()
                state.seconds = monitor.seconds
                stop = monitor.end_epoch(runner.weights, **runner.report(monitor))
                reason = monitor.stop_reason
                if getattr(runner, "certified", False):  # an exact pass found mean g_i <= tol
                    runner.certified = False
                    record = monitor.finish(runner.weights, **runner.report(monitor))
                    if monitor.gap_reached(record.gap):  # P - D too (float32 duals may differ)
                        stop, reason = True, "tol"
                state.counters = dict(runner.counters)
                if stop:
                    monitor.finish(runner.weights, **runner.report(monitor))
                    state.seconds = monitor.seconds
                if not (stop and reason == "tol"):  # a certified run is done: its model is it
                    monitor.checkpoint(state, final=stop)
    except KeyboardInterrupt:
        reason = "interrupted"
        state.counters = dict(runner.counters)
        monitor.finish(runner.weights, **runner.report(monitor))
    state.seconds = monitor.seconds
    monitor.stop_reason = reason
    warn_above_tol(solver.name, reason, solver.config)
    return SolverResult(
        weights=runner.weights.copy(),
        state=state,
        trace=monitor.trace,
        stop_reason=reason,
        counters=dict(runner.counters),
    )


def warn_above_tol(name: str, reason: str, config: SolverConfig) -> None:
    """ConvergenceWarning for a run that a budget stopped before it reached tol."""
    if reason in ("max_epochs", "time_limit"):
        warnings.warn(
            f"{name} stopped by {reason} above tol={config.tol:g}", ConvergenceWarning, stacklevel=4
        )


def chunk_budget(cfg: SolverConfig, n: int, oracle_calls: int) -> int:
    """Oracle calls until the next evaluation (eval_every epochs), capped by max_epochs."""
    budget = max(1, int(round(cfg.eval_every * n)))
    remaining = int(math.ceil(cfg.max_epochs * n)) - oracle_calls
    return max(1, min(budget, remaining))
