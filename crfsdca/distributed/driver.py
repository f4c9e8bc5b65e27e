"""The DisDCA driver loop: rounds, the exact evaluations, the stopping rule, checkpoints.

:func:`drive` runs the rounds over partition handles (``crfsdca.distributed.handles``: in this
process or Dask actors): it sends each round the previous round's summed update, sums the
partitions' Delta w in partition order (bitwise reproducible), keeps the driver's own ``w``, and
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
from crfsdca.solvers.adaptive import (
    SigmaSchedule,
    best_damping,
    damped_steps,
    dot_and_square,
    dual_change,
)
from crfsdca.solvers.base import record_summary
from crfsdca.solvers.sparse_update import aggregate, apply
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
    :func:`~crfsdca.distributed.simulate` collect."""
    P, m = opts["n_partitions"], opts["local_updates"]
    info = [h.call("info") for h in handles]
    n = sum(i["n"] for i in info)
    lam_n = info[0]["lambda_n"]
    lam = lam_n / n
    contributions = [h.call("primal_contribution") for h in handles]
    w = np.add.reduce(contributions) if P > 1 else contributions[0].copy()
    for h in handles:  # each partition keeps a replica of w; rounds send sparse updates
        h.call("set_weights", w)
    schedule = SigmaSchedule(P) if opts["variant"] == "adaptive" else None
    A, K = info[0]["n_attributes"], info[0]["n_labels"]
    pending: list[Any] = [None]  # the last round's summed update, not yet sent to the partitions
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
    state_path = None if opts["checkpoint_dir"] is None else Path(opts["checkpoint_dir"])
    rounds, spent, communication = 0, 0.0, 0.0  # spent: round time, evaluations excluded
    if opts["resume"] and state_path is not None and (state_path / "driver.json").exists():
        saved = json.loads((state_path / "driver.json").read_text())
        rounds, spent = saved["round"], saved["seconds"]
        communication = saved["seconds_communication"]
        trace.records[:] = [TraceRecord.from_json(r) for r in saved["records"]]
        if schedule is not None:
            schedule = SigmaSchedule.from_json(P, saved.get("sigma"))
    checkpoints = None
    if state_path is not None:
        checkpoints = _Checkpoints(state_path, handles, opts["checkpoint_seconds"])

    def snapshot() -> dict[str, Any]:
        """What driver.json records of the run so far."""
        return {
            "round": rounds,
            "seconds": spent,
            "seconds_communication": communication,
            "records": [r.to_json() for r in trace.records],
            "sigma": None if schedule is None else schedule.to_json(),
        }

    def evaluate() -> TraceRecord:
        sent = [h.send("objective_terms", pending[0]) for h in handles]  # all at once
        terms = [s.result() for s in sent]
        pending[0] = None
        total = {k: sum(t[k] for t in terms) for k in terms[0]}
        wsq = float(w @ w)
        primal = primal_value(lam, wsq, total["loss"], n)
        dual = dual_value(lam, wsq, total["entropy"], n)
        record = TraceRecord(
            solver="disdca",
            epoch=total["oracle_calls"] / n,
            oracle_calls=int(total["oracle_calls"]),
            updates=int(total["updates"]),
            seconds=spent,
            primal=primal,
            dual=dual,
            gap=primal - dual,
            gap_estimate=total["gap_estimate"] / n,
            extra={"rounds": rounds, "seconds_communication": communication},
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
            checkpoints.due(rounds, snapshot())
        return record

    record = evaluate()  # also after a resume: w was rebuilt from the partitions' duals
    reason = "tol" if record.gap <= opts["tol"] else "max_rounds"
    while reason != "tol" and rounds < opts["max_rounds"]:
        began = time.perf_counter()
        if schedule is None:
            sent = [h.send("local_round", pending[0], m) for h in handles]
            results = [[s.result() for s in sent]]  # partition order: bitwise reproducible
            total = aggregate([r[0] for r in results[0]])
        else:
            total, results = _adaptive_round(handles, pending[0], m, schedule, w, lam, n, A, K)
            rounds += len(results) - 1  # a rejected round counts
        pending[0] = total
        apply(w, total, A, K)  # the driver's own w: no partition holds it
        rounds += 1
        took = time.perf_counter() - began
        spent += took
        computing = sum(max(r[1] for r in rs) for rs in results)
        communication += max(0.0, took - computing)
        if rounds % opts["eval_every"] == 0 or rounds == opts["max_rounds"]:
            record = evaluate()
            if math.isfinite(record.gap) and record.gap <= opts["tol"]:
                reason = "tol"
    if checkpoints is not None:  # a run stopped above tol can be continued from its end
        checkpoints.finish(rounds, None if reason == "tol" else snapshot())
    return DistributedResult(
        weights=w,
        trace=trace,
        stop_reason=reason,
        rounds=rounds,
        n_partitions=P,
        seconds_communication=communication,
        info=info,
    )


def _adaptive_round(handles, update, m, schedule, w, lam, n, A, K):
    """One round of the "adaptive" aggregation (``crfsdca.solvers.adaptive``): the local steps
    with the trial sigma', kept when the exact dual did not decrease, else undone and run again
    with the safe sigma' = P. Returns (the summed update, the results of each try)."""
    sigma = schedule.sigma
    results = [[s.result() for s in [h.send("local_round", update, m, sigma) for h in handles]]]
    total = aggregate([r[0] for r in results[0]])
    if sigma >= schedule.safe:
        schedule.keep()  # safe: the dual rises
    else:
        change = dual_change(w, total, sum(r[2] for r in results[0]), lam, n, A, K)
        if change >= 0.0:
            schedule.keep()
        else:
            schedule.reject()
            damped = _damped(handles, total, sigma, w, lam, n, A, K) if sigma >= 1.0 else None
            if damped is not None:
                schedule.damped += 1
                return damped, results
            sent = [h.send("local_round", None, m, schedule.safe, True) for h in handles]
            results.append([s.result() for s in sent])
            total = aggregate([r[0] for r in results[1]])
    return total, results


def _damped(handles, total, sigma, w, lam, n, A, K):
    """A rejected round tried at sigma' >= 1, kept at the mix t in {1/P, ..., (P-1)/P} that
    raises the exact dual most (at t = 1/P, the average, the dual cannot fall: each
    partition's steps alone raise it when sigma' >= 1, and the dual is concave). Returns the
    summed update times t, or None when no mix raises the dual (then the round is undone)."""
    ts = damped_steps(len(handles))
    changes = np.zeros(ts.size)
    for sent in [h.send("mixed_entropy_changes", ts) for h in handles]:
        changes += sent.result()  # partition order: bitwise reproducible
    t = best_damping(ts, changes, *dot_and_square(w, total, A, K), lam, n)
    if t is None:
        return None
    for sent in [h.send("mix_last_round", t) for h in handles]:
        sent.result()
    rows, values, tail = total
    return rows, values * t, None if tail is None else tail * t


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
