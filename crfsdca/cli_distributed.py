"""``crfsdca train ... --workers K`` / ``--scheduler tcp://HOST:PORT``: DisDCA on Dask.

The driver loads the data once (for the encoder, the model file and the test scores); every
partition's worker loads its own shard from a :class:`~crfsdca.distributed.DatasetShard`, so
only a few strings cross the wire. ``--epochs`` counts passes over the data, as in a serial run.
"""

from __future__ import annotations

import logging
import math
import sys
from contextlib import contextmanager
from typing import Any

#: serial options that a distributed run sets itself (rounds, not epochs, are its unit)
DRIVER_OPTIONS = ("max_epochs", "tol", "eval_every", "seed", "time_limit")
INSTALL_HINT = "distributed training needs Dask: pip install 'crfsdca[distributed]'"


def require_dask() -> None:
    """Raise ImportError with the install hint when dask.distributed is missing."""
    try:
        import distributed  # noqa: F401
    except ImportError as err:
        raise ImportError(INSTALL_HINT) from err


@contextmanager
def cluster_client(workers: int | None, scheduler: str | None, timeout: float):
    """A client of a LocalCluster on 127.0.0.1 (``workers`` processes x 1 thread, no
    dashboard), or of the cluster at ``scheduler`` (waiting for ``workers`` workers)."""
    import distributed

    if scheduler is None:
        with (
            distributed.LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
                silence_logs=logging.CRITICAL,  # a worker racing the shutdown logs a traceback
            ) as cluster,
            distributed.Client(cluster, direct_to_workers=True) as client,
        ):
            yield client
        return
    with distributed.Client(scheduler, direct_to_workers=True, timeout=timeout) as client:
        if workers:
            client.wait_for_workers(workers, timeout=timeout)
        yield client


def train_distributed(
    run: dict[str, Any],
    inputs: Any,
    *,
    workers: int | None,
    scheduler: str | None,
    partitions: int | None,
    local_updates: int | None,
    round_timeout: float,
    checkpoint_dir: str | None,
    resume: bool,
    callback_factory: Any,
) -> tuple[Any, dict[str, Any]]:
    """Run DisDCA for a ``crfsdca train`` run; returns (result, the summary's extra fields)."""
    from crfsdca.distributed import DatasetShard, fit
    from crfsdca.solvers.sdca import SDCAConfig

    options = dict(run["options"])
    config = SDCAConfig(seed=run["seed"], **options)
    n = inputs.train.n_sequences
    with cluster_client(workers, scheduler, round_timeout) as client:
        n_workers = len(client.scheduler_info()["workers"])
        P = partitions or n_workers
        if n < P:
            raise ValueError(f"--partitions {P} exceeds the {n} training sequences")
        # default: 1,000 steps (or a pass over the shard, if shorter); longer local passes need
        # more epochs (BENCHMARKS.md, distributed SDCA)
        m = local_updates or min(1000, math.ceil(n / P))
        per_round = P * m / n  # epochs per round
        max_rounds = max(1, math.ceil(config.max_epochs / per_round - 1e-9))
        eval_every = max(1, round(config.eval_every / per_round))
        spec = DatasetShard(
            run["dataset"],
            0,
            P,
            fmt=run["fmt"],
            template=run["template"],
            data_dir=run["data_dir"],
            max_sequences=run["max_sequences"],
            n_bias_rows=run["n_bias_rows"],
            regularization=run["regularization"],
            label=run.get("label"),
        )
        sdca_options = {k: v for k, v in options.items() if k not in (*DRIVER_OPTIONS, "sampling")}
        bar, callback = callback_factory(max_rounds)
        try:
            result = fit(
                spec,
                client,
                P,
                local_updates=m,
                max_rounds=max_rounds,
                sampling=config.sampling,
                tol=config.tol,
                seed=run["seed"],
                round_timeout=round_timeout,
                eval_every=eval_every,
                checkpoint_dir=checkpoint_dir,
                resume=resume,
                callback=callback,
                **sdca_options,
            )
        finally:
            bar.close()
    extra = {
        "workers": n_workers,
        "partitions": P,
        "local_updates": m,
        "rounds": result.rounds,
        "seconds_communication": result.seconds_communication,
    }
    return result, extra


def progress(total_rounds: int, quiet: bool):
    """A progress bar per round: rounds done, epochs and the exact gap at evaluations."""
    from tqdm import tqdm

    bar = tqdm(
        total=total_rounds,
        unit="round",
        file=sys.stderr,
        disable=quiet or not sys.stderr.isatty(),
        leave=False,
    )

    def callback(record) -> None:
        bar.n = min(int(record.extra.get("rounds", 0)), total_rounds)
        bar.set_postfix({"epoch": f"{record.epoch:.1f}", "gap": f"{record.gap:.2e}"}, refresh=False)
        bar.refresh()

    return bar, callback
