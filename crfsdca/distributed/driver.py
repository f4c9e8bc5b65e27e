"""The DisDCA driver loop: rounds, the exact evaluations, the stopping rule, checkpoints.

:func:`drive` runs the rounds over partition handles (``crfsdca.distributed.handles``: in this
process or Dask actors): it sends each round every partition's message of the previous round,
in partition order (each partition applies them to its replica of w alike, so the run is
bitwise reproducible and the driver holds no w), keeps the adaptive rule's trial sigma', and
every ``eval_every`` rounds reduces the partitions' scalar sums into the exact primal, dual and
gap (one trace record). ``driver.json`` in the checkpoint folder commits a round once every
partition has written its state.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from crfsdca.distributed.partition import PartitionSolver
from crfsdca.io.modelfile import atomic_write_text
from crfsdca.solvers.adaptive import SigmaSchedule, best_damping, damped_steps
from crfsdca.solvers.base import record_summary
from crfsdca.solvers.trace import Trace, TraceRecord
from crfsdca.structures.objectives import dual_value, primal_value

__all__ = ["DistributedResult", "drive", "saved_round"]


@dataclass
class DistributedResult:
    """Final weights, the trace (one record per evaluation), and how the run ended."""

    weights: NDArray[np.float64]
    trace: Trace
    stop_reason: str
    rounds: int
    n_partitions: int
    seconds_communication: float = 0.0
    info: list[dict[str, Any]] = field(default_factory=list)
    partitions: list[PartitionSolver] | None = None  # simulate(..., keep_partitions=True)

    def summary(self) -> dict[str, Any]:
        return {
            **record_summary(self.trace.records[-1], self.stop_reason),
            "rounds": self.rounds,
            "partitions": self.n_partitions,
            "seconds_communication": self.seconds_communication,
        }


def drive(handles: Sequence[Any], opts: dict[str, Any]) -> DistributedResult:
    """Run the rounds over the partitions' ``handles`` until the gap <= ``opts["tol"]`` or
    ``opts["max_rounds"]``; ``opts`` are the options :func:`crfsdca.distributed.fit` and
    :func:`~crfsdca.distributed.simulate` collect.

    The driver forwards each round's messages to every partition with the next call (the
    partitions settle the round themselves, ``PartitionSolver.local_round``), so a round is
    one call per partition; it keeps the trial sigma' and runs a rejected round's damping or
    redo."""
    P, m = opts["n_partitions"], opts["local_updates"]
    info = [h.call("info") for h in handles]
    n = sum(i["n"] for i in info)
    lam_n = info[0]["lambda_n"]
    lam = lam_n / n
    contributions = [h.call("primal_contribution") for h in handles]
    w = np.add.reduce(contributions) if P > 1 else contributions[0].copy()
    del contributions
    for h in handles:  # each partition keeps a replica of w; rounds send their changes
        h.call("set_weights", w)
    schedule = SigmaSchedule(P) if opts["variant"] == "adaptive" else None
    trace = Trace(
        header={
            "solver": "disdca",
            "config": {k: v for k, v in opts.items() if k != "callback"},
            "regularization": lam,
            "dataset": "",
            "n_sequences": n,
            "n_features": int(w.size),
            "seed": opts["seed"],
            "partitions": P,
        }
    )
    del w  # the partitions hold it
    state_path = None if opts["checkpoint_dir"] is None else Path(opts["checkpoint_dir"])
    run = _Run(handles, schedule, m, lam, n)
    if opts["resume"] and state_path is not None and (state_path / "driver.json").exists():
        saved = json.loads((state_path / "driver.json").read_text())
        run.rounds, run.spent = saved["round"], saved["seconds"]
        run.communication = saved["seconds_communication"]
        trace.records[:] = [TraceRecord.from_json(r) for r in saved["records"]]
        if schedule is not None:
            run.schedule = schedule = SigmaSchedule.from_json(P, saved.get("sigma"))
    checkpoints = None
    if state_path is not None:
        checkpoints = _Checkpoints(state_path, handles, opts["checkpoint_seconds"])

    def snapshot() -> dict[str, Any]:
        """What driver.json records of the run so far."""
        return {
            "round": run.rounds,
            "seconds": run.spent,
            "seconds_communication": run.communication,
            "records": [r.to_json() for r in trace.records],
            "sigma": None if schedule is None else schedule.to_json(),
        }

    def evaluate() -> TraceRecord:
        terms = run.settled("objective_terms")  # all at once, after the last round's messages
        total = {k: sum(t[k] for t in terms) for k in terms[0]}
        wsq = terms[0]["wsq"]  # every replica is the same w
        # the certificate's |w_hat(mu)|^2 bound (crfsdca.solvers.marginal_update)
        wsq_dual = wsq + 2.0 * total["residual_dot"] + total["residual_bound"] ** 2
        primal = primal_value(lam, wsq, total["loss"], n)
        dual = dual_value(lam, wsq_dual, total["entropy"], n)
        record = TraceRecord(
            solver="disdca",
            epoch=total["oracle_calls"] / n,
            oracle_calls=int(total["oracle_calls"]),
            updates=int(total["updates"]),
            seconds=run.spent,
            primal=primal,
            dual=dual,
            gap=primal - dual,
            gap_estimate=total["gap_estimate"] / n,
            extra={"rounds": run.rounds, "seconds_communication": run.communication},
        )
        if schedule is not None:
            record.extra.update(
                sigma=schedule.sigma,
                rejected_rounds=schedule.rejected,
                damped_rounds=schedule.damped,
            )
        last = trace.records[-1] if trace.records else None
        if last is not None and (last.oracle_calls, last.updates) == (
            record.oracle_calls,
            record.updates,
        ):
            return last  # resumed exactly where the saved trace ends
        trace.append(record)
        if opts["callback"] is not None:
            opts["callback"](record)
        if checkpoints is not None:
            checkpoints.due(run.rounds, snapshot())
        return record

    record = evaluate()  # also after a resume: w was rebuilt from the partitions' duals
    reason = "tol" if record.gap <= opts["tol"] else "max_rounds"
    while reason != "tol" and run.rounds < opts["max_rounds"]:
        run.round()
        if run.rounds % opts["eval_every"] == 0 or run.rounds >= opts["max_rounds"]:
            record = evaluate()
            if math.isfinite(record.gap) and record.gap <= opts["tol"]:
                reason = "tol"
    if checkpoints is not None:  # a run stopped above tol can be continued from its end
        checkpoints.finish(run.rounds, None if reason == "tol" else snapshot())
    return DistributedResult(
        weights=handles[0].call("weights"),
        trace=trace,
        stop_reason=reason,
        rounds=run.rounds,
        n_partitions=P,
        seconds_communication=run.communication,
        info=info,
    )


class _Run:
    """The rounds' state on the driver: the last round's messages not yet settled by the
    partitions, the trial sigma', the round count and the clocks."""

    def __init__(self, handles, schedule: SigmaSchedule | None, m: int, lam: float, n: int):
        self.handles, self.schedule, self.m, self.lam, self.n = handles, schedule, m, lam, n
        self.pending: dict[str, Any] | None = None
        self.rounds, self.spent, self.communication = 0, 0.0, 0.0

    def round(self) -> None:
        """One round: every partition settles the last one and steps (one call each)."""
        began = time.perf_counter()
        computing = 0.0
        while True:  # a rejected last round is damped or run again first
            sigma = self._next_sigma()
            results = self._all("local_round", self.pending, self.m, sigma)
            if results[0][0] != "rejected":
                break
            computing += self._reject(results[0])
        self._kept()
        computing += max(r[1] for r in results)
        self._pend(results, sigma, trial=True)
        self.rounds += 1
        took = time.perf_counter() - began
        self.spent += took
        self.communication += max(0.0, took - computing)

    def settled(self, method: str) -> list[Any]:
        """``method(pending)`` on every partition once the last round is settled."""
        while True:
            results = self._all(method, self.pending)
            if not (isinstance(results[0], dict) and "rejected" in results[0]):
                self._kept()
                return results
            began = time.perf_counter()
            self._reject(results[0]["rejected"])
            self.spent += time.perf_counter() - began

    def _all(self, method: str, *args: Any) -> list[Any]:
        """``method`` on every partition; a ``pending`` first argument is sent to each
        without its own message, which it kept (None in its place)."""
        if args and isinstance(args[0], dict):
            messages = args[0]["messages"]
            sent = [
                h.send(method, {**args[0], "messages": _others(messages, k)}, *args[1:])
                for k, h in enumerate(self.handles)
            ]
        else:
            sent = [h.send(method, *args) for h in self.handles]  # all at once
        return [s.result() for s in sent]  # partition order: bitwise reproducible

    def _next_sigma(self) -> float | None:
        """The trial sigma' of the next round, as it will be once the last is kept (when the
        last is rejected, the partitions step no further and it is asked again)."""
        s = self.schedule
        if s is None:
            return None
        if self.pending is None or not self.pending["trial"]:
            return s.sigma
        after = SigmaSchedule.from_json(s.n_partitions, s.to_json())
        after.keep()
        return after.sigma

    def _pend(self, results: list[Any], sigma: float | None, trial: bool) -> None:
        s = self.schedule
        self.pending = {
            "messages": [r[0] for r in results],
            "check": s is not None and trial and sigma is not None and sigma < s.safe,
            "trial": s is not None and trial,
            "entropy": sum(r[2] for r in results) if s is not None else 0.0,
            "sigma": sigma,
            "lam": self.lam,
            "n": self.n,
        }

    def _kept(self) -> None:
        if self.pending is not None and self.pending["trial"]:
            self.schedule.keep()
        self.pending = None

    def _reject(self, rejected: tuple[str, float, float]) -> float:
        """A rejected round (``crfsdca.solvers.adaptive``): tried at sigma' >= 1, kept at the
        mix t in {1/P, ..., (P-1)/P} that raises the exact dual most (at t = 1/P, the
        average, the dual cannot fall: each partition's steps alone raise it when sigma' >= 1,
        and the dual is concave); else (or for trials below 1) undone and run again with the
        safe sigma' = P. Returns the seconds of computation of a run-again round."""
        _, dot, sq = rejected
        schedule, sigma = self.schedule, self.pending["sigma"]
        schedule.reject()
        if sigma >= 1.0:
            ts = damped_steps(len(self.handles))
            changes = np.zeros(ts.size)
            for sent in [h.send("mixed_entropy_changes", ts) for h in self.handles]:
                changes += sent.result()  # partition order: bitwise reproducible
            t = best_damping(ts, changes, dot, sq, self.lam, self.n)
            if t is not None:
                self._all("mix_last_round", t)
                schedule.damped += 1
                self.pending = None
                return 0.0
        results = self._all("redo", self.m, schedule.safe)
        self._pend(results, schedule.safe, trial=False)
        self.rounds += 1  # a rejected round counts
        return max(r[1] for r in results)


def _others(messages: list[Any], k: int) -> list[Any]:
    return [None if j == k else m for j, m in enumerate(messages)]


class _Checkpoints:
    """The driver's side of checkpoints: every ``seconds`` of wall time (at an evaluation)
    each partition starts writing its state in the background; once all have written that
    round, ``driver.json`` (round, clock, trace) commits it and older files are deleted. A
    lost worker or a killed driver loses at most one interval and a write."""

    def __init__(self, path: Path, handles: Sequence[Any], seconds: float) -> None:
        self.path, self.handles, self.seconds = path, handles, seconds
        self.last = time.perf_counter()
        self.flight: tuple[int, dict[str, Any]] | None = None  # started, not yet committed

    def due(self, round_: int, saved: dict[str, Any], force: bool = False) -> None:
        self.commit(wait=False)
        if self.flight is None and (force or time.perf_counter() - self.last >= self.seconds):
            for h in self.handles:
                h.call("checkpoint", round_)
            self.flight, self.last = (round_, saved), time.perf_counter()

    def commit(self, wait: bool) -> None:
        if self.flight is None:
            return
        round_, saved = self.flight
        done = [h.call("checkpoint_done", wait) for h in self.handles]
        if all(d == round_ for d in done):
            atomic_write_text(self.path / "driver.json", json.dumps(saved))
            for h in self.handles:
                h.call("prune", round_)
            self.flight = None

    def finish(self, round_: int, saved: dict[str, Any] | None) -> None:
        """Commit the write under way; with ``saved``, then write and commit the end state."""
        self.commit(wait=True)
        if saved is not None and saved["round"] != self._committed():
            self.due(round_, saved, force=True)
            self.commit(wait=True)

    def _committed(self) -> int | None:
        return saved_round(str(self.path))


def saved_round(checkpoint_dir: str | None) -> int | None:
    """The round of the last committed checkpoint in ``checkpoint_dir`` (None: none)."""
    if checkpoint_dir is None:
        return None
    path = Path(checkpoint_dir, "driver.json")
    return json.loads(path.read_text())["round"] if path.exists() else None
