"""``crfsdca train``: fit a CRF with one of the registered solvers, checkpoint and resume."""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Any

import click

from crfsdca.cli.common import (
    EXIT_INTERRUPTED,
    check_output_path,
    errors_to_exit,
    json_value,
    plain_warnings,
)
from crfsdca.cli.distributed import train_on_cluster
from crfsdca.cli.graph import train_on_graph
from crfsdca.cli.junction import check_order, train_second_order
from crfsdca.cli.options import (
    config_default,
    config_fields,
    config_options,
    flag_text,
    solver_options,
)
from crfsdca.cli.report import (
    print_summary,
    problem_summary,
    progress,
    run_config,
    warn_stopped_early,
    write_outputs,
)
from crfsdca.cli.resume import load_resume, typed_keys
from crfsdca.cli.train_options import train_options
from crfsdca.errors import ConvergenceWarning
from crfsdca.solvers import SOLVERS

EXAMPLE = "Example: crfsdca train conll2000 --solver sdca --sampling gap --epochs 30"


@click.command(epilog=EXAMPLE)
@train_options
@solver_options
@click.pass_context
def train(
    ctx: click.Context,
    dataset: str | None,
    solver: str,
    test: str | None,
    fmt: str | None,
    label: str | None,
    template: str | None,
    regularization: float | None,
    l1: float,
    loss: str,
    bias: bool | None,
    max_sequences: int | None,
    seed: int,
    threads: int | None,
    data_dir: str | None,
    model_path: str | None,
    trace_path: str | None,
    score_test: str | None,
    plot_path: str | None,
    checkpoint_dir: str | None,
    checkpoint_every: float | None,
    checkpoint_seconds: float,
    resume_dir: str | None,
    workers: int | None,
    worker_threads: bool,
    scheduler: str | None,
    partitions: int | None,
    local_updates: int | None,
    round_timeout: float,
    graph: str | None,
    order: int,
    as_json: bool,
    quiet: bool,
    verbose: int,
    **given: Any,
) -> None:
    """Train a CRF on DATASET (a registered name or a file) and report test scores."""
    run = {
        "dataset": dataset,
        "solver": solver,
        "options": config_options(solver, given),
        "test": test,
        "fmt": fmt,
        "label": label,
        "template": template,
        "regularization": regularization,
        "l1": l1,
        "loss": loss,
        "bias": bias,
        "max_sequences": max_sequences,
        "seed": seed,
        "data_dir": data_dir,
    }
    if resume_dir is None and dataset is None:
        raise click.UsageError("missing argument DATASET (or give --resume DIR)")
    if threads:
        _set_threads(threads)
        if "threads" in config_fields(solver) and not (workers or scheduler):
            run["options"]["threads"] = threads  # SDCA's stepping threads
    from crfsdca.estimators.model import HINGE_SOLVERS, L1_SOLVERS

    if loss == "hinge" and solver not in HINGE_SOLVERS:
        raise click.UsageError(
            f"--loss hinge: --solver {solver} has no hinge loss; the structured SVM is trained"
            f" by --solver {' and --solver '.join(HINGE_SOLVERS)}"
        )
    if l1 > 0 and solver not in L1_SOLVERS:
        raise click.UsageError(
            f"--l1: --solver {solver} has no l1 term; the elastic net is trained by"
            f" --solver {' and --solver '.join(L1_SOLVERS)} (Prox-SDCA, OWL-QN)"
        )
    hinge_only = ("hinge_step", "hinge_atoms", "smooth_temperature", "smooth_decay")
    given = [name for name in hinge_only if name in run["options"]]
    if loss != "hinge" and given:
        flag = "--" + given[0].replace("_", "-")
        raise click.UsageError(
            f"{flag} applies to --loss hinge (the structured SVM); got --loss {loss}"
        )
    step = run["options"].get("hinge_step")
    if loss == "hinge" and step in ("smooth", "active") and (graph == "tree" or order == 2):
        shape = "--graph tree" if graph == "tree" else "--order 2"
        raise click.UsageError(
            f"--hinge-step {step} trains chains; {shape} takes --hinge-step fw or pairwise"
        )
    if loss == "hinge" and step == "smooth" and (l1 > 0 or workers):
        what = "the elastic net (--l1)" if l1 > 0 else "on --workers (its temperature is serial)"
        raise click.UsageError(
            f"--hinge-step smooth does not train {what} yet; use --hinge-step active, fw or"
            " pairwise"
        )
    if loss == "hinge" and scheduler:
        raise click.UsageError(
            "--loss hinge: a --scheduler cluster trains the log-loss only; use --workers"
        )
    if l1 > 0 and (workers or scheduler):
        raise click.UsageError(
            "--l1: the distributed solver (--workers, --scheduler) does not train the elastic"
            " net yet; run --solver sdca in one process"
        )
    if checkpoint_dir and solver != "sdca" and resume_dir is None:
        raise click.UsageError("--checkpoint is supported by --solver sdca")
    _check_paths(model_path, trace_path, checkpoint_dir, resume_dir)
    if plot_path is not None:
        _check_plot(plot_path)
    ctx.meta["crfsdca.plot"] = plot_path
    cluster = {
        "workers": workers,
        "scheduler": scheduler,
        "partitions": partitions,
        "local_updates": local_updates,
        "round_timeout": round_timeout,
        "worker_threads": worker_threads,
    }
    if worker_threads and scheduler is not None:
        raise click.UsageError(
            "--worker-threads runs the partitions in this process; drop it or --scheduler"
        )
    check_order(
        order, run, graph=graph, cluster=workers or scheduler, checkpoint=checkpoint_dir,
        resume=resume_dir,
    )  # fmt: skip
    if graph is not None:
        if checkpoint_dir or resume_dir:
            raise click.UsageError("--graph runs without checkpoints (no --checkpoint or --resume)")
        on_cluster = None
        if workers or scheduler:
            if solver != "sdca":
                raise click.UsageError("--workers and --scheduler run --solver sdca (DisDCA)")
            on_cluster = cluster
        with errors_to_exit(verbose, flag_text):
            _check_config(run)
            with plain_warnings(quiet):
                warnings.simplefilter("ignore", ConvergenceWarning)
                train_on_graph(run, graph, model_path, trace_path, as_json, quiet, on_cluster)
        return
    if scheduler is not None:
        from crfsdca.cli.distributed import scheduler_address

        scheduler_address(scheduler)
    if (workers or scheduler) and order == 2:
        with errors_to_exit(verbose, flag_text):
            _check_config(run)
            with plain_warnings(quiet):
                warnings.simplefilter("ignore", ConvergenceWarning)
                train_second_order(
                    run, model_path=model_path, trace_path=trace_path, as_json=as_json,
                    quiet=quiet, cluster=cluster,
                )  # fmt: skip
        return
    if workers or scheduler:
        if solver != "sdca":
            raise click.UsageError("--workers and --scheduler run --solver sdca (DisDCA)")
        with errors_to_exit(verbose, flag_text):
            _check_config(run)
            with plain_warnings(quiet):
                train_on_cluster(
                    run,
                    {**cluster, "checkpoint_seconds": checkpoint_seconds},
                    checkpoint_dir,
                    resume_dir,
                    model_path,
                    trace_path,
                    as_json,
                    quiet,
                )
        return
    for name in ("partitions", "local_updates", "worker_threads"):
        if cluster[name]:
            flag = "--" + name.replace("_", "-")
            raise click.UsageError(f"{flag} applies to distributed runs (--workers or --scheduler)")
    if order == 2:
        with errors_to_exit(verbose, flag_text):
            _check_config(run)
            with plain_warnings(quiet):
                warnings.simplefilter("ignore", ConvergenceWarning)
                train_second_order(
                    run, model_path=model_path, trace_path=trace_path, as_json=as_json, quiet=quiet
                )
        return
    with errors_to_exit(verbose, flag_text):
        resume = None
        if resume_dir is not None:
            resume = load_resume(resume_dir, run, typed_keys(ctx, run))
            run = resume["run"]
            checkpoint_dir = checkpoint_dir or resume_dir
        _check_config(run)
        with plain_warnings(quiet):
            warnings.simplefilter("ignore", ConvergenceWarning)  # said in plain words below
            _train(
                run,
                resume,
                checkpoint_dir=checkpoint_dir,
                checkpoint_every=checkpoint_every,
                checkpoint_seconds=checkpoint_seconds,
                model_path=model_path,
                trace_path=trace_path,
                score_test=score_test or ("every" if trace_path else "end"),
                as_json=as_json,
                quiet=quiet,
            )


def _start_compile_ahead(run: dict[str, Any]):
    """The process compiling a chain SDCA run's kernels on a cold numba cache
    (``crfsdca.estimators.compile_ahead``), started before the data are read; None when there
    is none to start. A registered data set has a test split, a file has the one ``--test``
    gives."""
    import data_loaders
    from crfsdca.estimators import compile_ahead

    test = run["test"] is not None or run["dataset"] in data_loaders.DATASETS
    dtype = run["options"].get("dual_dtype", "float64")
    return compile_ahead.start(run["solver"], "chain", 1, dtype, test, run.get("loss", "log"))


def _check_paths(model_path, trace_path, checkpoint_dir, resume_dir) -> None:
    """Usage errors for paths that cannot be written or resumed, before any work."""
    check_output_path(model_path, "--model")
    check_output_path(trace_path, "--trace")
    check_output_path(checkpoint_dir, "--checkpoint", folder=True)
    if checkpoint_dir is not None:  # the file it writes there every epoch
        from crfsdca.solvers.checkpoint import checkpoint_path

        check_output_path(str(checkpoint_path(checkpoint_dir)), "--checkpoint")
    if resume_dir is not None and os.path.isfile(resume_dir):
        raise click.BadParameter(
            f"{resume_dir} is a file; expected the folder given to --checkpoint",
            param_hint="--resume",
        )


def _set_threads(threads: int) -> None:
    from crfsdca.kernels.numerics.threads import set_threads

    try:
        set_threads(threads)
    except ValueError as err:
        raise click.BadParameter(
            str(err).replace("n_threads ", ""), param_hint="--threads"
        ) from None


def _check_config(run: dict[str, Any]) -> None:
    """Build the solver config now, so that a bad value fails before any data is read."""
    try:
        run_config(run)
    except (TypeError, ValueError) as err:
        raise click.UsageError(flag_text(str(err))) from None


def _train(
    run: dict[str, Any],
    resume: dict[str, Any] | None,
    *,
    checkpoint_dir,
    checkpoint_every,
    checkpoint_seconds,
    model_path,
    trace_path,
    score_test="end",
    as_json,
    quiet,
) -> None:
    from crfsdca.cli.inputs import bias_rows, load_run_inputs, model_meta
    from crfsdca.estimators.model import SequenceCRF
    from crfsdca.features.sources import train_fingerprint
    from crfsdca.solvers.checkpoint import CheckpointWriter

    ahead = _start_compile_ahead(run)  # compiles while the data are read
    try:
        inputs = load_run_inputs(run, quiet)
        fingerprint = train_fingerprint(inputs.train)
        if resume is not None and resume["run"].get("fingerprint") != fingerprint:
            raise ValueError("the training data differs from the checkpointed run's; cannot resume")
        # what a checkpoint records: the resolved format, and files by absolute path so that the
        # run can be resumed from another folder
        files = {k: os.path.abspath(run[k]) for k in ("dataset", "test") if _is_file(run[k])}
        run = {**run, **files, "fmt": inputs.fmt, "fingerprint": fingerprint}
        model = SequenceCRF(
            solver=run["solver"],
            regularization=run["regularization"],
            l1=run.get("l1", 0.0),
            loss=run.get("loss", "log"),
            n_bias_rows=bias_rows(inputs, run),
            seed=run["seed"],
            **run["options"],
        )
        max_epochs = model.solver_options.get("max_epochs") or config_default(
            run["solver"], "max_epochs"
        )
        checkpointer = None
        if checkpoint_dir:
            checkpointer = CheckpointWriter(checkpoint_dir, run)

        bar, callback = progress(max_epochs, quiet)
        try:
            model.fit(
                inputs.train,
                inputs.test,
                encoder=inputs.encoder.to_dict(),
                name=inputs.name,
                callback=callback,
                checkpointer=checkpointer,
                checkpoint_every=checkpoint_every,
                checkpoint_seconds=checkpoint_seconds,
                state=resume["state"] if resume else None,
                records=resume["records"] if resume else None,
                score_test=score_test,
                ahead=ahead,
            )
        finally:
            bar.close()
    finally:
        if ahead is not None:
            ahead.release()
    model.meta = model_meta(inputs, run)
    result = model.result_
    if result.stop_reason == "interrupted" and checkpointer is not None:
        checkpointer.now(result.state, result.trace)
    write_outputs(result.trace, trace_path, model, model_path)
    summary = _summary(model, inputs, model_path)
    if checkpointer is not None:
        checkpointer.wait()  # the last checkpoint was written while the test set was scored
    if as_json:
        click.echo(json.dumps({k: json_value(v) for k, v in summary.items()}))
    else:
        print_summary(summary)
    warn_stopped_early(result, _config(model), quiet)
    if result.stop_reason == "interrupted":
        saved = [f"checkpoint in {checkpoint_dir}"] if checkpointer is not None else []
        saved += [f"model in {model_path}"] if model_path else []
        what = f"; the last complete epoch's {' and '.join(saved)}" if saved else ""
        click.echo(f"crfsdca: interrupted{what}", err=True)
        sys.exit(EXIT_INTERRUPTED)


def _is_file(text: str | None) -> bool:
    return text is not None and text != "-" and os.path.isfile(text)


def _config(model):
    """The solver config ``model`` was trained with."""
    return SOLVERS[model.solver].config_class(**model.solver_options)


def _summary(model, inputs, model_path) -> dict[str, Any]:
    scores = {}
    if inputs.test is not None:  # fit's final record scored these weights on it, unless resumed
        scores = model.test_scores_ if model.test_scores_ is not None else model.score(inputs.test)
    return problem_summary(
        model.problem_,
        model.result_,
        solver=model.solver,
        dataset=inputs.name,
        scores=scores,
        model_path=model_path,
    )


def _check_plot(plot_path: str) -> None:
    """Usage errors for --plot before any work: the extension, matplotlib, the folder."""
    from crfsdca.plotting import output_format

    try:
        output_format(plot_path)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--plot") from None
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise click.BadParameter(
            "plotting needs matplotlib: pip install 'crfsdca[plot]'", param_hint="--plot"
        ) from None
    check_output_path(plot_path, "--plot")
