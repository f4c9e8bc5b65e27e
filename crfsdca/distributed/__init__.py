"""Distributed SDCA (practical DisDCA, Yang 2013) on Dask: one actor per partition.

Every partition keeps a replica of the global ``w``. Each round the driver sends every
partition the previous round's summed update (sparse: the rows it moved,
``crfsdca.solvers.sparse_update``); each applies it and runs ``local_updates`` SDCA steps on its
own shard with the scale P (the number of partitions) and the global lambda n, on a local copy
of ``w``, and returns its Delta w on the rows it moved. The driver sums them in partition order
(bitwise reproducible), so ``w = w_hat(mu)`` holds throughout on the driver and every
replica. Every ``eval_every`` rounds it reduces the partitions' scalar sums into the exact
primal, dual and gap (one trace record in the common format) and stops when the gap <= tol.

The dual state never leaves the workers: a partition's marginals, gap estimates and RNG live in
its actor (``crfsdca.distributed.partition.PartitionSolver``). :func:`simulate` runs the same
partition
objects in this process, one after the other; a cluster run equals it bit for bit.

Dask is imported lazily: ``pip install 'crfsdca[distributed]'``.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from crfsdca.distributed.partition import ArrayShard, DatasetShard, PartitionSolver, shard_indices
from crfsdca.errors import WorkerLostError
from crfsdca.io.modelfile import atomic_write_text
from crfsdca.solvers.adaptive import SigmaSchedule, dual_change
from crfsdca.solvers.base import record_summary
from crfsdca.solvers.checkpoint import DEFAULT_SECONDS
from crfsdca.solvers.cocoa import attribute_counts, sequences_of
from crfsdca.solvers.local import VARIANTS
from crfsdca.solvers.sdca import SDCAConfig
from crfsdca.solvers.sparse_update import aggregate, apply
from crfsdca.solvers.trace import Trace, TraceRecord
from crfsdca.structures.objectives import dual_value, primal_value
from crfsdca.structures.problem import Problem

#: how the partitions' updates are combined: the local step variants, and "sparse" (CoCoA+
#: adding with the per-attribute sigma' of ``crfsdca.solvers.cocoa``), and "adaptive" (a trial
#: sigma' checked on the exact dual, ``crfsdca.solvers.adaptive``)
AGGREGATIONS = (*VARIANTS, "sparse", "adaptive")

__all__ = ["DatasetShard", "DistributedResult", "WorkerLostError", "fit", "simulate"]


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


def fit(
    data: Problem | DatasetShard,
    client: Any,
    n_partitions: int | None = None,
    *,
    local_updates: int = 1000,
    max_rounds: int = 100,
    sampling: str = "gap",
    tol: float = 1e-3,
    seed: int = 0,
    round_timeout: float = 600.0,
    eval_every: int = 1,
    checkpoint_dir: str | None = None,
    checkpoint_seconds: float = DEFAULT_SECONDS,
    resume: bool = False,
    variant: str = "practical",
    callback: Callable[[TraceRecord], None] | None = None,
    **sdca_options: Any,
) -> DistributedResult:
    """Train on a Dask cluster: one :class:`PartitionSolver` actor per partition.

    ``data`` is a :class:`~crfsdca.structures.problem.Problem` (each shard's arrays are sent to its
    worker) or a :class:`DatasetShard` template (each worker loads its own shard; ``index`` and
    ``n_partitions`` are filled in). ``n_partitions`` defaults to the number of workers.
    ``sdca_options`` are fields of :class:`SDCAConfig` (``non_uniformity``,
    ``line_search_tol``, ...). With ``checkpoint_dir`` every partition writes its state in the
    background at the first evaluation after each ``checkpoint_seconds`` of wall time (0: at
    every evaluation), and at the end of a run stopped above ``tol``; ``resume=True`` starts
    every partition from the last committed checkpoint (or afresh when there is none) and
    rebuilds w as the sum of the partitions' contributions.
    """
    workers = sorted(client.scheduler_info()["workers"])
    if not workers:
        raise ValueError("the Dask cluster has no workers")
    P = n_partitions or len(workers)
    client.get_versions(check=True)
    _check(P, local_updates, max_rounds, variant, eval_every, round_timeout)
    specs, kwargs = _partition_args(data, P, seed, sampling, tol, variant, sdca_options)
    futures = [
        client.submit(
            PartitionSolver,
            specs[k],
            **kwargs[k],
            checkpoint_dir=checkpoint_dir,
            resume=saved_round(checkpoint_dir) if resume else None,
            actor=True,
            workers=[workers[k % len(workers)]],
            pure=False,
        )
        for k in range(P)
    ]
    try:
        actors = [_result(f, k, round_timeout) for k, f in enumerate(futures)]
        handles = [_Remote(a, k, round_timeout) for k, a in enumerate(actors)]
        return _drive(handles, _driver_options(locals()))
    finally:
        client.cancel(futures)  # frees the actors and their state


def simulate(
    data: Problem | DatasetShard,
    n_partitions: int,
    *,
    local_updates: int = 1000,
    max_rounds: int = 100,
    sampling: str = "gap",
    tol: float = 1e-3,
    seed: int = 0,
    eval_every: int = 1,
    checkpoint_dir: str | None = None,
    checkpoint_seconds: float = DEFAULT_SECONDS,
    resume: bool = False,
    variant: str = "practical",
    callback: Callable[[TraceRecord], None] | None = None,
    keep_partitions: bool = False,
    threads: bool = False,
    **sdca_options: Any,
) -> DistributedResult:
    """:func:`fit` with the partitions in this process, run one after the other, or with
    ``threads`` at the same time, one thread each (the SDCA kernels release the GIL). Either
    way the result is bit for bit a cluster's: partitions share nothing but the driver's
    messages, which are summed in partition order."""
    P = n_partitions
    _check(P, local_updates, max_rounds, variant, eval_every, 1.0)
    specs, kwargs = _partition_args(data, P, seed, sampling, tol, variant, sdca_options)
    start = saved_round(checkpoint_dir) if resume else None

    def build(k: int) -> _Local:
        return _Local(
            PartitionSolver(specs[k], **kwargs[k], checkpoint_dir=checkpoint_dir, resume=start)
        )

    if threads and P > 1:
        with ThreadPoolExecutor(P, thread_name_prefix="crfsdca-partition") as pool:
            handles = list(pool.map(build, range(P)))  # the dual starts, in parallel too
            for h in handles:
                h.pool = pool
            result = _drive(handles, _driver_options(locals()))
    else:
        handles = [build(k) for k in range(P)]
        result = _drive(handles, _driver_options(locals()))
    if keep_partitions:
        result.partitions = [h.solver for h in handles]
    return result


# -- the driver loop ---------------------------------------------------------------------------
def _driver_options(scope: dict[str, Any]) -> dict[str, Any]:
    keys = ("n_partitions", "local_updates", "max_rounds", "tol", "eval_every", "seed")
    out = {k: scope[k] for k in keys if k in scope}
    out.update(
        n_partitions=scope["P"],
        checkpoint_dir=scope["checkpoint_dir"],
        checkpoint_seconds=scope["checkpoint_seconds"],
        resume=scope["resume"],
        callback=scope["callback"],
        variant=scope["variant"],
        sampling=scope["sampling"],
    )
    return out


def _drive(handles: Sequence[Any], opts: dict[str, Any]) -> DistributedResult:
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
            record.extra.update(sigma=schedule.sigma, rejected_rounds=schedule.rejected)
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
            sent = [h.send("local_round", None, m, schedule.safe, True) for h in handles]
            results.append([s.result() for s in sent])
            total = aggregate([r[0] for r in results[1]])
    return total, results


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


# -- partition handles -------------------------------------------------------------------------
class _Done:
    def __init__(self, value: Any) -> None:
        self.value = value

    def result(self) -> Any:
        return self.value


class _Local:
    """A partition in this process: a method runs at once, or on ``pool`` when one is set."""

    def __init__(self, solver: PartitionSolver) -> None:
        self.solver = solver
        self.pool: ThreadPoolExecutor | None = None

    def send(self, method: str, *args: Any) -> Any:
        if self.pool is not None:
            return self.pool.submit(getattr(self.solver, method), *args)
        return _Done(getattr(self.solver, method)(*args))

    def call(self, method: str, *args: Any) -> Any:
        return getattr(self.solver, method)(*args)


class _Remote:
    """A partition's Dask actor; every wait has a timeout and names the partition on failure."""

    def __init__(self, actor: Any, index: int, timeout: float) -> None:
        self.actor, self.index, self.timeout = actor, index, timeout

    def send(self, method: str, *args: Any) -> _Pending:
        try:
            return _Pending(getattr(self.actor, method)(*args), self.index, self.timeout)
        except Exception as err:  # noqa: BLE001 - a dead actor fails here or in result()
            raise _lost(self.index, err) from err

    def call(self, method: str, *args: Any) -> Any:
        return self.send(method, *args).result()


class _Pending:
    def __init__(self, future: Any, index: int, timeout: float) -> None:
        self.future, self.index, self.timeout = future, index, timeout

    def result(self) -> Any:
        return _result(self.future, self.index, self.timeout)


def _result(future: Any, index: int, timeout: float) -> Any:
    try:
        return future.result(timeout=timeout)
    except (OSError, TimeoutError) as err:  # dask: a dead actor's worker is an OSError
        raise _lost(index, err) from err
    except Exception as err:
        if type(err).__name__ in ("CancelledError", "KilledWorker", "FutureCancelledError"):
            raise _lost(index, err) from err
        raise


def _lost(index: int, err: BaseException) -> WorkerLostError:
    detail = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
    return WorkerLostError(index, detail)


# -- arguments ---------------------------------------------------------------------------------
def _check(P, local_updates, max_rounds, variant, eval_every, round_timeout) -> None:
    if P < 1:
        raise ValueError(f"n_partitions must be >= 1; got {P}")
    if local_updates < 1:
        raise ValueError(f"local_updates must be >= 1; got {local_updates}")
    if max_rounds < 0:
        raise ValueError(f"max_rounds must be >= 0; got {max_rounds}")
    if eval_every < 1:
        raise ValueError(f"eval_every must be >= 1; got {eval_every}")
    if not round_timeout > 0:
        raise ValueError(f"round_timeout must be > 0; got {round_timeout}")
    if variant not in AGGREGATIONS:
        raise ValueError(f"variant must be one of {', '.join(AGGREGATIONS)}; got {variant!r}")


def _partition_args(data, P, seed, sampling, tol, variant, sdca_options):
    """(shard specs, per-partition keyword arguments) of P partitions."""
    if getattr(data, "l1", 0.0) > 0:
        raise ValueError(
            "the distributed solver does not train the elastic net (l1 > 0) yet; use the"
            " serial sdca solver (or lbfgs, OWL-QN)"
        )
    config = SDCAConfig(sampling=sampling, tol=tol, seed=seed, **sdca_options).as_dict()
    seeds = np.random.SeedSequence(seed).spawn(P)  # by partition index, never by worker
    if isinstance(data, Problem):
        n = data.n_sequences
        if n < P:
            raise ValueError(f"n_partitions ({P}) exceeds the number of sequences ({n})")
        specs = [ArrayShard.of(data, shard_indices(n, P, k)) for k in range(P)]
        if variant == "sparse":
            ids = [sequences_of(spec.train).attr_ids for spec in specs]
            counts = attribute_counts(ids, sequences_of(data.train).n_attributes)
    elif isinstance(data, DatasetShard):
        from dataclasses import replace

        if variant == "sparse":
            raise ValueError("the sparse aggregation needs the data in memory (a Problem)")
        specs = [replace(data, index=k, n_partitions=P) for k in range(P)]
    else:
        raise TypeError(f"data must be a Problem or a DatasetShard; got {type(data).__name__}")
    kwargs = [
        {"index": k, "n_partitions": P, "config": config, "seed": seeds[k], "variant": variant}
        for k in range(P)
    ]
    if variant == "sparse":
        for k in range(P):
            kwargs[k]["attribute_counts"] = counts
    return specs, kwargs
