"""``crfsdca train ... --workers K`` / ``--scheduler tcp://HOST:PORT``: DisDCA on Dask.

The driver loads and encodes the data once (the encoder, the model file and the test scores
need it anyway) and sends each partition only its shard's encoded arrays
(:class:`~crfsdca.distributed.partition.ArrayShard`): a worker's memory is its shard, its duals and
w.
``--epochs`` counts passes over the data, as in a serial run.
"""

from __future__ import annotations

import json
import logging
import math
import sys
from contextlib import contextmanager
from typing import Any

import click

from crfsdca.cli.common import json_value

#: serial options that a distributed run sets itself (rounds, not epochs, are its unit)
DRIVER_OPTIONS = ("max_epochs", "tol", "eval_every", "seed", "time_limit")
INSTALL_HINT = "distributed training needs Dask: pip install 'crfsdca[distributed]'"


#: SDCA steps per partition and round unless --local-updates says otherwise
DEFAULT_LOCAL_UPDATES = 100

#: the aggregation (``crfsdca.distributed.AGGREGATIONS``) from this many partitions on: "adaptive"
#: (a trial sigma' below P, checked on the exact dual), below it "practical" (sigma' = P);
#: measured on CoNLL-2000 (BENCHMARKS.md section 9): fewer epochs at P = 2, 4 and 8
ADAPTIVE_FROM = 2


def aggregation(n_partitions: int) -> str:
    """The aggregation the command line uses for ``n_partitions`` partitions."""
    return "adaptive" if n_partitions >= ADAPTIVE_FROM else "practical"


#: seconds to reach the scheduler of --scheduler (apart from --round-timeout, which waits for work)
CONNECT_TIMEOUT = 10.0


def scheduler_address(text: str) -> tuple[str, int]:
    """(host, port) of ``tcp://HOST:PORT`` (or ``tls://``, or no scheme, as Dask takes);
    BadParameter naming --scheduler otherwise."""
    import re

    host = r"\[[0-9A-Fa-f:.]+\]|[^:/\s\[\]]+"
    match = re.fullmatch(rf"(?:(?:tcp|tls)://)?({host}):([0-9]{{1,5}})/?", text)
    if match is None or not 0 < int(match[2]) < 65536:
        raise click.BadParameter(
            f"expected tcp://HOST:PORT (a Dask scheduler), got {text!r}", param_hint="--scheduler"
        )
    return match[1].strip("[]"), int(match[2])


def check_scheduler(text: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """OSError in one line unless something accepts a TCP connection at ``text`` within
    ``timeout`` seconds: a refused or unreachable scheduler fails at once, not after
    --round-timeout."""
    import socket

    host, port = scheduler_address(text)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except TimeoutError:
        raise OSError(
            f"--scheduler {text}: no answer within {timeout:g} s; is a Dask scheduler running"
            " there (dask scheduler --port PORT) and reachable?"
        ) from None
    except OSError as err:
        reason = (err.strerror or str(err)).lower()
        raise OSError(
            f"--scheduler {text}: cannot connect ({reason}); start a Dask scheduler there"
            " (dask scheduler --port PORT) or correct the address"
        ) from None


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
    check_scheduler(scheduler)
    with distributed.Client(
        scheduler, direct_to_workers=True, timeout=min(timeout, CONNECT_TIMEOUT)
    ) as client:
        if workers:
            client.wait_for_workers(workers, timeout=timeout)
        yield client


def train_distributed(
    run: dict[str, Any], inputs: Any, **cluster: Any
) -> tuple[Any, dict[str, Any]]:
    """Run DisDCA on the chains of a ``crfsdca train`` run; (result, the summary's extra
    fields). The driver encoded the data once: each partition gets only its shard's arrays and
    the feature map (crfsdca.distributed.partition.ArrayShard); no worker reads the corpus."""
    from crfsdca.features.feature_map import FeatureMap
    from crfsdca.structures.problem import Problem

    train = inputs.train
    fm = FeatureMap(train.n_attributes, train.n_labels, run["n_bias_rows"])
    problem = Problem(
        train=train, feature_map=fm, regularization=run["regularization"], name=inputs.name,
        loss=run.get("loss", "log"),
    )  # fmt: skip
    return fit_on_cluster(problem, run, **cluster)


def fit_on_cluster(
    problem: Any,
    run: dict[str, Any],
    *,
    workers: int | None,
    scheduler: str | None,
    partitions: int | None,
    local_updates: int | None,
    round_timeout: float,
    callback_factory: Any,
    checkpoint_dir: str | None = None,
    resume: bool = False,
    checkpoint_seconds: float = 300.0,
    worker_threads: bool = False,
) -> tuple[Any, dict[str, Any]]:
    """DisDCA on ``problem`` (chains, trees or junction trees) with the run's options: on a
    Dask cluster, or with ``worker_threads`` (and no scheduler) on threads of this process."""
    from crfsdca.solvers.sdca import SDCAConfig

    options = dict(run["options"])
    config = SDCAConfig(seed=run["seed"], **options)
    n = problem.n_sequences
    sdca_options = {k: v for k, v in options.items() if k not in (*DRIVER_OPTIONS, "sampling")}
    common = {
        "sampling": config.sampling,
        "tol": config.tol,
        "seed": run["seed"],
        "checkpoint_dir": checkpoint_dir,
        "checkpoint_seconds": checkpoint_seconds,
        "resume": resume,
        **sdca_options,
    }
    if worker_threads and scheduler is None:
        from crfsdca.distributed import simulate

        P = partitions or workers or 1
        m, max_rounds, eval_every = _rounds(config, n, P, local_updates)
        bar, callback = callback_factory(max_rounds)
        try:
            result = simulate(problem, P, local_updates=m, max_rounds=max_rounds,
                              eval_every=eval_every, callback=callback, threads=True,
                              variant=aggregation(P), **common)  # fmt: skip
        finally:
            bar.close()
        peaks = {"this process": peak_rss_mib()}  # one process holds every partition
        n_workers = P
    else:
        require_dask()
        from crfsdca.distributed import fit

        with cluster_client(workers, scheduler, round_timeout) as client:
            n_workers = len(client.scheduler_info()["workers"])
            P = partitions or n_workers
            m, max_rounds, eval_every = _rounds(config, n, P, local_updates)
            bar, callback = callback_factory(max_rounds)
            try:
                result = fit(problem, client, P, local_updates=m, max_rounds=max_rounds,
                             eval_every=eval_every, callback=callback, variant=aggregation(P),
                             round_timeout=round_timeout, **common)  # fmt: skip
            finally:
                bar.close()
            peaks = client.run(peak_rss_mib)  # each worker process's peak resident memory
    extra = {
        "workers": n_workers,
        "partitions": P,
        "local_updates": m,
        "rounds": result.rounds,
        "seconds_communication": result.seconds_communication,
        "worker_peak_rss_mib": max(peaks.values()),
        "worker_threads": bool(worker_threads and scheduler is None),
        "aggregation": aggregation(P),
    }
    return result, extra


def _rounds(config: Any, n: int, P: int, local_updates: int | None) -> tuple[int, int, int]:
    """(steps per partition and round, the most rounds, rounds between evaluations) of P
    partitions, from --local-updates and the run's --epochs and --eval-every."""
    if n < P:
        raise ValueError(f"--partitions {P} exceeds the {n} training sequences")
    # default: 100 steps (or a pass over the shard, if shorter): longer local rounds need
    # more epochs (BENCHMARKS.md section 9)
    m = local_updates or min(DEFAULT_LOCAL_UPDATES, math.ceil(n / P))
    per_round = P * m / n  # epochs per round
    max_rounds = max(1, math.ceil(config.max_epochs / per_round - 1e-9))
    eval_every = max(1, round(config.eval_every / per_round))
    return m, max_rounds, eval_every


def peak_rss_mib() -> float:
    """This process's peak resident memory in MiB (Linux reports KiB, macOS bytes)."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024


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


def train_on_cluster(
    run, cluster, checkpoint_dir, resume_dir, model_path, trace_path, as_json, quiet
) -> None:
    """``train --workers K`` / ``--scheduler ADDR``: DisDCA on Dask (crfsdca.distributed)."""
    from crfsdca.cli.inputs import bias_rows, load_run_inputs
    from crfsdca.cli.report import (
        print_summary,
        run_config,
        summary,
        warn_stopped_early,
        write_outputs,
    )
    from crfsdca.estimators.model import SequenceCRF
    from crfsdca.features.feature_map import FeatureMap

    if not cluster.get("worker_threads") or cluster["scheduler"] is not None:
        require_dask()
    if cluster["scheduler"] is not None:
        check_scheduler(cluster["scheduler"])  # before the data is read
    inputs = load_run_inputs(run, quiet)
    n_bias = bias_rows(inputs, run)
    run = {**run, "fmt": inputs.fmt, "n_bias_rows": n_bias}
    if resume_dir is not None:
        checkpoint_dir = resume_dir
    result, extra = train_distributed(
        run,
        inputs,
        **cluster,
        checkpoint_dir=checkpoint_dir,
        resume=resume_dir is not None,
        callback_factory=lambda total: progress(total, quiet),
    )
    train = inputs.train
    fm = FeatureMap(train.n_attributes, train.n_labels, n_bias)
    model = SequenceCRF(solver="sdca", regularization=run["regularization"], n_bias_rows=n_bias)
    model.weights_, model.feature_map_, model.label_names_ = result.weights, fm, train.label_names
    model.regularization_ = result.trace.header["regularization"]
    model.encoder = inputs.encoder.to_dict()
    model.meta = {"dataset": inputs.name, "template": run["template"], "format": inputs.fmt,
                  "label": run.get("label"), "distributed": extra}  # fmt: skip
    write_outputs(result.trace, trace_path, model, model_path)
    scores = model.score(inputs.test) if inputs.test is not None else {}
    report = summary(
        solver="sdca",
        dataset=inputs.name,
        train=train,
        test=inputs.test,
        feature_map=fm,
        regularization=model.regularization_,
        result=result,
        scores=scores,
        model_path=model_path,
        **extra,
    )
    if as_json:
        click.echo(json.dumps({k: json_value(v) for k, v in report.items()}))
        return
    print_summary(report)
    click.echo(
        f"  {extra['partitions']} partitions on {extra['workers']} workers, {extra['rounds']}"
        f" rounds of {extra['local_updates']} steps, {extra['seconds_communication']:.1f} s"
        f" communicating, worker peak memory {extra['worker_peak_rss_mib']:.0f} MiB"
    )
    warn_stopped_early(result, run_config(run), quiet, result.rounds)
