"""Monitor: the solver clock, the evaluation schedule, stopping rules and the trace.

Solvers never time or print: they call :meth:`Monitor.end_epoch` with their counters and stop
when it returns True. Evaluation (exact primal, gap, test error) is excluded from solver time
and from the oracle-call counters. Every record holds the exact certificate (primal, dual, gap);
the test set is scored at every evaluation (``score_test="every"``), only in the record of the
returned state (``"end"``: every stop calls :meth:`Monitor.finish`), or never.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from crfsdca.evaluation import evaluate_data
from crfsdca.solvers.base import SolverConfig
from crfsdca.solvers.trace import Trace, TraceRecord
from crfsdca.structures.problem import Problem

NAN = float("nan")
#: when the monitor scores the test set: at every evaluation, in the final record, never
SCORE_TEST = ("every", "end", "never")


class Monitor:
    """Clocks, evaluation schedule, stopping rules and the shared trace of one run."""

    def __init__(
        self,
        problem: Problem,
        solver_name: str,
        config: SolverConfig,
        *,
        callback: Callable[[TraceRecord], None] | None = None,
        evaluate_test: bool = True,
        score_test: str = "every",
        header: dict[str, Any] | None = None,
        checkpointer: Callable[[Any, Trace], None] | None = None,
        checkpoint_every: float | None = 1.0,
        checkpoint_seconds: float | None = None,
        cpu_clock: bool = False,
    ) -> None:
        self.problem = problem
        self.solver_name = solver_name
        self.config = config
        self.callback = callback
        if score_test not in SCORE_TEST:
            raise ValueError(
                f"score_test must be one of {', '.join(SCORE_TEST)}; got {score_test!r}"
            )
        self.evaluate_test = evaluate_test and problem.test is not None and score_test != "never"
        self.score_test = score_test if self.evaluate_test else "never"
        self.trace = Trace(
            header={
                "solver": solver_name,
                "config": config.as_dict(),
                "regularization": problem.regularization,
                **({"l1": problem.l1} if getattr(problem, "l1", 0.0) > 0 else {}),
                "dataset": problem.name,
                "n_sequences": problem.n_sequences,
                "n_features": problem.feature_map.n_features,
                "seed": config.seed,
                **(header or {}),
            }
        )
        self.checkpointer = checkpointer
        self.checkpoint_every = checkpoint_every  # epochs (None: not by epochs)
        self._next_checkpoint = math.inf if checkpoint_every is None else checkpoint_every
        self.checkpoint_seconds = checkpoint_seconds  # wall time (None: not by time)
        self._last_checkpoint = time.perf_counter()
        self._epoch = 0.0
        self.stop_reason = ""
        self._elapsed = 0.0
        self._started: float | None = None
        # the process's CPU time beside the wall clock, paused with it; recorded in every
        # record's extra as ``cpu_seconds`` when ``cpu_clock`` (immune to the process being
        # stopped; equal to the solver time of a single-threaded run that is never preempted)
        self.cpu_clock = cpu_clock
        self._cpu_elapsed = 0.0
        self._cpu_started = 0.0
        self._next_eval = 0.0
        self.last_primal = NAN
        self._last_test: dict[str, Any] = {}
        self._scored: TraceRecord | None = None  # the record _last_test belongs to

    # -- clock -------------------------------------------------------------------------------
    def start(self, elapsed: float = 0.0) -> None:
        """Start (or resume, with ``elapsed`` seconds already spent) the solver clock."""
        self._elapsed = elapsed
        self._started = time.perf_counter()
        self._cpu_started = time.process_time()

    @property
    def seconds(self) -> float:
        running = 0.0 if self._started is None else time.perf_counter() - self._started
        return self._elapsed + running

    @property
    def cpu_seconds(self) -> float:
        """The process's CPU time while the solver clock ran (a resumed run counts from 0)."""
        running = 0.0 if self._started is None else time.process_time() - self._cpu_started
        return self._cpu_elapsed + running

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Exclude the enclosed work from solver time."""
        if self._started is None:
            yield
            return
        self._elapsed += time.perf_counter() - self._started
        self._cpu_elapsed += time.process_time() - self._cpu_started
        self._started = None
        try:
            yield
        finally:
            self._started = time.perf_counter()
            self._cpu_started = time.process_time()

    def resume_schedule(self, oracle_calls: int) -> None:
        """Continue the evaluation and checkpoint schedules of a run resumed at oracle_calls."""
        epoch = self.epoch_of(oracle_calls)
        self._epoch = epoch
        while self._next_eval <= epoch + 1e-12:
            self._next_eval += self.config.eval_every
        while self._next_checkpoint <= epoch + 1e-12:
            self._next_checkpoint += self.checkpoint_every

    def checkpoint(self, state: Any, final: bool = False) -> None:
        """Hand ``state`` and the trace to the checkpointer when one is due: every
        ``checkpoint_every`` epochs, every ``checkpoint_seconds`` of wall time, or at the end."""
        if self.checkpointer is None:
            return
        now = time.perf_counter()
        timed = self.checkpoint_seconds is not None
        if (
            final
            or self._epoch + 1e-12 >= self._next_checkpoint
            or (timed and now - self._last_checkpoint >= self.checkpoint_seconds)
        ):
            with self.paused():
                self.checkpointer(state, self.trace)
            self._last_checkpoint = time.perf_counter()
            while self._next_checkpoint <= self._epoch + 1e-12:
                self._next_checkpoint += self.checkpoint_every

    # -- evaluation --------------------------------------------------------------------------
    def epoch_of(self, oracle_calls: float) -> float:
        return oracle_calls / self.problem.n_sequences

    def evaluate_test_set(self, weights: NDArray[np.float64]) -> dict[str, Any]:
        """Token error and (for chunk labels) F1 of Viterbi predictions on the test set."""
        test = self.problem.test
        pred = self.problem.test_oracle.predict(weights)
        scores = evaluate_data(test, pred)
        return scores

    def end_epoch(
        self,
        weights: NDArray[np.float64],
        *,
        oracle_calls: int,
        updates: int,
        dual: float = NAN,
        gap_estimate: float = NAN,
        primal: float | None = None,
        extra: dict[str, Any] | None = None,
        force: bool = False,
    ) -> bool:
        """Record progress; evaluate when due; return True when the run must stop."""
        epoch = self.epoch_of(oracle_calls)
        self._epoch = epoch
        seconds, cpu = self.seconds, self.cpu_seconds
        due = force or epoch + 1e-12 >= self._next_eval
        gap = primal - dual if primal is not None and math.isfinite(dual) else NAN
        if due:
            with self.paused():
                values = (dual, gap_estimate, primal, self._with_cpu(extra, cpu))
                record = self._record(weights, epoch, oracle_calls, updates, seconds, *values)
            gap = record.gap
            while self._next_eval <= epoch + 1e-12:
                self._next_eval += self.config.eval_every
        stop = self._should_stop(epoch, seconds, gap)
        if stop and due and self.score_test == "end":  # this record is the returned state's
            with self.paused():
                self.trace.records[-1] = self._score(weights, self.trace.records[-1])
        return stop

    def is_recorded(self, oracle_calls: int, updates: int) -> bool:
        """True when the last record is at these counters (the state has not moved since)."""
        records = self.trace.records
        return bool(records) and (records[-1].oracle_calls, records[-1].updates) == (
            oracle_calls,
            updates,
        )

    def finish(
        self, weights: NDArray[np.float64], *, oracle_calls: int, updates: int, **values: Any
    ) -> TraceRecord:
        """Record the state a run returns, unless the last record already is that state.

        Every stop calls this, so the last record (primal, dual, gap, counters) is always the
        returned state, also when the run stopped between two scheduled evaluations.
        ``values``: ``dual``, ``gap_estimate``, ``primal`` and ``extra``, as for
        :meth:`end_epoch`.
        """
        if self.is_recorded(oracle_calls, updates):
            record = self.trace.records[-1]
            if self.score_test == "end" and math.isnan(record.test_error):
                with self.paused():
                    record = self._score(weights, record)
                self.trace.records[-1] = record
            return record
        epoch = self.epoch_of(oracle_calls)
        self._epoch = epoch
        seconds, cpu = self.seconds, self.cpu_seconds
        values["extra"] = self._with_cpu(values.get("extra"), cpu)
        with self.paused():
            counters = (oracle_calls, updates)
            return self._record(weights, epoch, *counters, seconds, final=True, **values)

    def _with_cpu(self, extra: dict[str, Any] | None, cpu: float) -> dict[str, Any] | None:
        """``extra`` with ``cpu_seconds`` when this monitor records the CPU clock."""
        return {**(extra or {}), "cpu_seconds": cpu} if self.cpu_clock else extra

    def _score(self, weights: NDArray[np.float64], record: TraceRecord) -> TraceRecord:
        """``record`` with the test error (and F1) of ``weights``."""
        scores = self.evaluate_test_set(weights)
        self._last_test = scores
        extra = dict(record.extra)
        if scores.get("f1") is not None:
            extra["test_f1"] = scores["f1"]
        self._scored = replace(record, test_error=1.0 - scores["token_accuracy"], extra=extra)
        return self._scored

    def final_test_scores(self) -> dict[str, Any] | None:
        """The test scores of the last record's weights (the returned state's), when this
        run scored them; None otherwise."""
        records = self.trace.records
        if records and self._scored is not None and records[-1] is self._scored:
            return dict(self._last_test)
        return None

    def _record(
        self, weights, epoch, oracle_calls, updates, seconds, dual=NAN, gap_estimate=NAN,
        primal=None, extra=None, final=False,
    ) -> TraceRecord:  # fmt: skip
        if primal is None:
            try:
                primal = self.problem.primal(weights)
            except FloatingPointError as err:
                raise FloatingPointError(f"{err} (at epoch {epoch:.3g})") from err
        if not np.isfinite(primal):
            raise FloatingPointError(f"primal objective is {primal} at epoch {epoch:.3g}")
        gap = primal - dual if np.isfinite(dual) else NAN
        extra = dict(extra or {})
        if getattr(self.problem, "l1", 0.0) > 0:  # the elastic net: how sparse the model is
            extra["nonzero_weights"] = int(np.count_nonzero(weights))
        record = TraceRecord(
            solver=self.solver_name,
            epoch=epoch,
            oracle_calls=int(oracle_calls),
            updates=int(updates),
            seconds=seconds,
            primal=float(primal),
            dual=float(dual),
            gap=float(gap),
            gap_estimate=float(gap_estimate),
            extra=extra,
        )
        if self.score_test == "every" or (self.score_test == "end" and final):
            record = self._score(weights, record)
        self.last_primal = float(primal)
        self.trace.append(record)
        if self.callback is not None:
            self.callback(record)
        return record

    def _should_stop(self, epoch: float, seconds: float, gap: float) -> bool:
        if self.gap_reached(gap):
            self.stop_reason = "tol"
        elif epoch + 1e-12 >= self.config.max_epochs:
            self.stop_reason = "max_epochs"
        elif seconds >= self.config.time_limit:
            self.stop_reason = "time_limit"
        else:
            return False
        return True

    def gap_reached(self, gap: float) -> bool:
        return math.isfinite(gap) and gap <= self.config.tol
