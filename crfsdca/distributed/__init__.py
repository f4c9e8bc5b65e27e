"""Distributed SDCA (practical DisDCA, Yang 2013) on Dask: one actor per partition.

Every partition keeps a replica of the global ``w``. Each round the driver sends every
partition the previous round's messages; each applies them in partition order (bitwise
reproducible) and runs ``local_updates`` SDCA steps on its own shard with the scale P (the
number of partitions) and the global lambda n, on a local copy of ``w``, and returns its
message: the float32 node-marginal changes of the tokens it stepped on
(``crfsdca.solvers.marginal_update``; chains and trees), or the rows of w it moved
(``crfsdca.solvers.sparse_update``). So ``w = w_hat(mu)`` holds throughout on every replica, up
to a residual of float32 roundings that the certificate accounts for. Every ``eval_every``
rounds the driver reduces the partitions' scalar sums into the exact primal, dual and gap
(one trace record in the common format) and stops when the gap <= tol.

The dual state never leaves the workers: a partition's marginals, gap estimates and RNG live in
its actor (``crfsdca.distributed.partition.PartitionSolver``). :func:`simulate` runs the same
partition objects in this process, one after the other; a cluster run equals it bit for bit.
The driver loop is :mod:`crfsdca.distributed.driver`, the handles it talks to a partition
through :mod:`crfsdca.distributed.handles`.

Dask is imported lazily: ``pip install 'crfsdca[distributed]'``.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from crfsdca.distributed.driver import DistributedResult, drive, saved_round
from crfsdca.distributed.handles import LocalHandle, RemoteHandle, result_of
from crfsdca.distributed.partition import (
    MARGINAL_VARIANTS,
    ArrayShard,
    DatasetShard,
    PartitionSolver,
    attribute_table,
    shard_indices,
)
from crfsdca.errors import WorkerLostError
from crfsdca.solvers.checkpoint import DEFAULT_SECONDS
from crfsdca.solvers.cocoa import attribute_counts, sequences_of
from crfsdca.solvers.local import VARIANTS
from crfsdca.solvers.sdca import SDCAConfig
from crfsdca.solvers.trace import TraceRecord
from crfsdca.structures.problem import Problem

#: how the partitions' updates are combined: the local step variants, and "sparse" (CoCoA+
#: adding with the per-attribute sigma' of ``crfsdca.solvers.cocoa``), and "adaptive" (a trial
#: sigma' checked on the exact dual, ``crfsdca.solvers.adaptive``)
AGGREGATIONS = (*VARIANTS, "sparse", "adaptive")

__all__ = ["DatasetShard", "DistributedResult", "WorkerLostError", "fit", "simulate"]


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
        actors = [result_of(f, k, round_timeout) for k, f in enumerate(futures)]
        handles = [RemoteHandle(a, k, round_timeout) for k, a in enumerate(actors)]
        return drive(handles, _driver_options(locals()))
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

    def build(k: int) -> LocalHandle:
        return LocalHandle(
            PartitionSolver(specs[k], **kwargs[k], checkpoint_dir=checkpoint_dir, resume=start)
        )

    if threads and P > 1:
        with ThreadPoolExecutor(P, thread_name_prefix="crfsdca-partition") as pool:
            handles = list(pool.map(build, range(P)))  # the dual starts, in parallel too
            for h in handles:
                h.pool = pool
            result = drive(handles, _driver_options(locals()))
    else:
        handles = [build(k) for k in range(P)]
        result = drive(handles, _driver_options(locals()))
    if keep_partitions:
        result.partitions = [h.solver for h in handles]
    return result


# -- the driver's options ---------------------------------------------------------------------
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
        table = attribute_table(data) if variant in MARGINAL_VARIANTS else None
        specs = [ArrayShard.of(data, shard_indices(n, P, k), table) for k in range(P)]
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
