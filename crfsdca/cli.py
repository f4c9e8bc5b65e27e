"""The ``crfsdca`` command line: train, evaluate, tag, datasets. The only module that prints.

stdout carries results (a short summary, or one JSON object with ``--json``); progress bars and
messages go to stderr. Exit codes: 0 success, 1 data or runtime error (one line, no traceback
unless ``-v``), 2 usage error.
"""

from __future__ import annotations

import json
import math
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from crfsdca import __version__
from crfsdca.cli_options import config_options, solver_options
from crfsdca.errors import DataFormatError, ModelFormatError
from crfsdca.solvers import SOLVERS

EXAMPLE = "Example: crfsdca train conll2000 --solver sdca --sampling gap --epochs 30"
EXPECTED_ERRORS = (
    DataFormatError,
    ModelFormatError,
    ValueError,
    OSError,
    MemoryError,
    FloatingPointError,
    KeyError,
)


@contextmanager
def _errors(verbose: int) -> Iterator[None]:
    """Turn expected failures into one line on stderr and exit status 1."""
    try:
        yield
    except click.ClickException:
        raise
    except EXPECTED_ERRORS as err:
        if verbose:
            traceback.print_exc()
        message = str(err) or type(err).__name__
        if isinstance(err, KeyError):
            message = f"missing key {message}"
        click.echo(f"crfsdca: error: {message}", err=True)
        sys.exit(1)


def _json_value(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _progress(total: float, quiet: bool):
    from tqdm import tqdm

    disable = quiet or not sys.stderr.isatty()
    bar = tqdm(
        total=total,
        unit="epoch",
        file=sys.stderr,
        disable=disable,
        leave=False,
        bar_format="{l_bar}{bar}| {n:.1f}/{total:.0f} epochs [{elapsed}<{remaining}]{postfix}",
    )

    def callback(record) -> None:
        bar.n = min(record.epoch, total)
        post = {"primal": f"{record.primal:.6g}"}
        if math.isfinite(record.gap):
            post["gap"] = f"{record.gap:.2e}"
        if "test_f1" in record.extra:
            post["F1"] = f"{record.extra['test_f1']:.2f}"
        elif math.isfinite(record.test_error):
            post["err"] = f"{record.test_error:.4f}"
        bar.set_postfix(post, refresh=False)
        bar.refresh()

    return bar, callback


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="crfsdca")
def main() -> None:
    """Train and use conditional random fields with adaptive SDCA."""


@main.command(epilog=EXAMPLE)
@click.argument("dataset", required=False)
@click.option(
    "--solver",
    default="sdca",
    show_default=True,
    type=click.Choice(sorted(SOLVERS)),
    help="training algorithm",
)
@click.option("--test", "test", default=None, help="test set: registered name or file path")
@click.option(
    "--format",
    "fmt",
    default=None,
    type=click.Choice(["conll", "conllu", "ocr", "crfsuite"]),
    help="format of DATASET when it is a file path",
)
@click.option(
    "--template", default=None, help="attribute template (conll, ner, pos, crfsuite-chunking)"
)
@click.option("--lambda", "regularization", type=float, default=None, help="regularization [1/n]")
@click.option(
    "--bias/--no-bias", default=None, help="count/first/last bias rows [on for templates]"
)
@click.option(
    "--max-sequences",
    type=click.IntRange(min=1),
    default=None,
    help="train on the first N sequences only",
)
@click.option("--seed", type=int, default=0, show_default=True, help="random seed")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="numba threads [all]")
@click.option("--data-dir", default=None, help="folder with the corpora [$CRFSDCA_DATA_DIR]")
@click.option("--model", "model_path", default=None, help="write the trained model here (.npz)")
@click.option("--trace", "trace_path", default=None, help="write the trace here (.jsonl)")
@click.option(
    "--checkpoint",
    "checkpoint_dir",
    default=None,
    help="save the run's state here every --checkpoint-every epochs and on Ctrl-C",
)
@click.option(
    "--checkpoint-every",
    type=click.FloatRange(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="epochs between checkpoints",
)
@click.option(
    "--resume",
    "resume_dir",
    default=None,
    help="continue the run saved in this checkpoint folder (DATASET is not needed)",
)
@click.option("--json", "as_json", is_flag=True, help="print one JSON object on stdout")
@click.option("--quiet", "-q", is_flag=True, help="no progress bar")
@click.option("--verbose", "-v", count=True, help="tracebacks on errors")
@solver_options
def train(
    dataset: str | None,
    solver: str,
    test: str | None,
    fmt: str | None,
    template: str | None,
    regularization: float | None,
    bias: bool | None,
    max_sequences: int | None,
    seed: int,
    threads: int | None,
    data_dir: str | None,
    model_path: str | None,
    trace_path: str | None,
    checkpoint_dir: str | None,
    checkpoint_every: float,
    resume_dir: str | None,
    as_json: bool,
    quiet: bool,
    verbose: int,
    **given: Any,
) -> None:
    """Train a CRF on DATASET (a registered name or a file) and report test scores."""
    options = config_options(solver, given)
    run = {
        "dataset": dataset,
        "solver": solver,
        "options": options,
        "test": test,
        "fmt": fmt,
        "template": template,
        "regularization": regularization,
        "bias": bias,
        "max_sequences": max_sequences,
        "seed": seed,
        "data_dir": data_dir,
    }
    if resume_dir is None and dataset is None:
        raise click.UsageError("missing argument DATASET (or give --resume DIR)")
    if (checkpoint_dir or resume_dir) and solver != "sdca" and resume_dir is None:
        raise click.UsageError("--checkpoint is supported by --solver sdca")
    with _errors(verbose):
        if threads:
            from crfsdca.kernels.batch import set_threads

            set_threads(threads)
        resume = _load_resume(resume_dir, options) if resume_dir else None
        if resume is not None:
            run = resume["run"]
            checkpoint_dir = checkpoint_dir or resume_dir
        _train(
            run,
            resume,
            checkpoint_dir=checkpoint_dir,
            checkpoint_every=checkpoint_every,
            model_path=model_path,
            trace_path=trace_path,
            as_json=as_json,
            quiet=quiet,
        )


RESUME_OVERRIDES = ("max_epochs", "time_limit", "tol", "eval_every")


def _load_resume(resume_dir: str, options: dict[str, Any]) -> dict[str, Any]:
    """The saved run arguments (with allowed overrides), solver state and trace records."""
    from crfsdca.checkpoint import load_checkpoint
    from crfsdca.solvers.sdca import SDCAState

    other = sorted(set(options) - set(RESUME_OVERRIDES))
    if other:
        raise click.UsageError(
            f"--resume continues the saved run; only --epochs, --time-limit,"
            f" --tol and --eval-every may change (got {', '.join(other)})"
        )
    arrays, header = load_checkpoint(resume_dir)
    run = dict(header["run"])
    run["options"] = {**run["options"], **options}
    state = SDCAState.from_checkpoint(arrays, header["state"])
    return {"run": run, "state": state, "records": header["records"]}


def _train(
    run: dict[str, Any],
    resume: dict[str, Any] | None,
    *,
    checkpoint_dir,
    checkpoint_every,
    model_path,
    trace_path,
    as_json,
    quiet,
) -> None:
    from crfsdca.checkpoint import save_checkpoint
    from crfsdca.cli_data import load_inputs, train_fingerprint
    from crfsdca.model import CRF

    inputs = load_inputs(
        run["dataset"],
        fmt=run["fmt"],
        template=run["template"],
        test=run["test"],
        data_dir=run["data_dir"],
        max_sequences=run["max_sequences"],
    )
    fingerprint = train_fingerprint(inputs.train)
    if resume is not None and resume["run"].get("fingerprint") != fingerprint:
        raise ValueError("the training data differs from the checkpointed run's; cannot resume")
    run = {**run, "fingerprint": fingerprint}
    bias = run["bias"]
    n_bias = inputs.encoder.default_bias_rows if bias is None else (3 if bias else 0)
    model = CRF(
        solver=run["solver"],
        regularization=run["regularization"],
        n_bias_rows=n_bias,
        seed=run["seed"],
        **run["options"],
    )
    max_epochs = model.solver_options.get("max_epochs") or _default(run["solver"], "max_epochs")
    checkpointer = None
    if checkpoint_dir:

        def checkpointer(state, trace):
            save_checkpoint(checkpoint_dir, state, trace, run)

    bar, callback = _progress(max_epochs, quiet)
    try:
        model.fit(
            inputs.train,
            inputs.test,
            encoder=inputs.encoder.to_dict(),
            name=inputs.name,
            callback=callback,
            checkpointer=checkpointer,
            checkpoint_every=checkpoint_every,
            state=resume["state"] if resume else None,
            records=resume["records"] if resume else None,
        )
    finally:
        bar.close()
    model.meta = {"dataset": inputs.name, "template": run["template"], "format": run["fmt"]}
    result = model.result_
    if result.stop_reason == "interrupted" and checkpointer is not None:
        checkpointer(result.state, result.trace)
    if trace_path:
        Path(trace_path).parent.mkdir(parents=True, exist_ok=True)
        result.trace.to_jsonl(trace_path)
    if model_path:
        Path(model_path).parent.mkdir(parents=True, exist_ok=True)
        model.save(model_path)
    summary = _summary(model, inputs, model_path)
    if as_json:
        click.echo(json.dumps({k: _json_value(v) for k, v in summary.items()}))
    else:
        _print_summary(summary)
    if result.stop_reason == "interrupted":
        click.echo("crfsdca: interrupted; the last complete state was saved", err=True)
        sys.exit(130)


def _default(solver: str, field_name: str) -> Any:
    import dataclasses

    from crfsdca.solvers import SOLVERS

    return next(
        f.default for f in dataclasses.fields(SOLVERS[solver].config_class) if f.name == field_name
    )


def _summary(model, inputs, model_path) -> dict[str, Any]:
    result = model.result_
    scores = model.score(inputs.test) if inputs.test is not None else {}
    return {
        "solver": model.solver,
        "dataset": inputs.name,
        "n": inputs.train.n_sequences,
        "n_test": inputs.test.n_sequences if inputs.test is not None else 0,
        "d": model.feature_map_.n_features,
        "n_attributes": model.feature_map_.n_attributes,
        "n_labels": model.feature_map_.n_labels,
        "lambda": model.regularization_,
        **result.summary(),
        "test_token_accuracy": scores.get("token_accuracy"),
        "test_f1": scores.get("f1"),
        "model": model_path,
    }


def _print_summary(s: dict[str, Any]) -> None:
    click.echo(f"{s['solver']} on {s['dataset']}: n={s['n']}, d={s['d']}, lambda={s['lambda']:.3g}")
    gap = "" if s["gap"] is None or not math.isfinite(s["gap"]) else f", gap {s['gap']:.3e}"
    click.echo(
        f"  {s['epochs']:.1f} epochs, {s['seconds']:.1f} s, primal {s['primal']:.8f}{gap}"
        f" ({s['stop_reason']})"
    )
    if s["test_token_accuracy"] is not None:
        click.echo(f"  test token accuracy {100 * s['test_token_accuracy']:.2f}%")
    if s["test_f1"] is not None:
        click.echo(f"  test F1 {s['test_f1']:.2f}")
    if s["model"]:
        click.echo(f"  model written to {s['model']}")


@main.command()
@click.argument("model_path", metavar="MODEL")
@click.argument("source", metavar="DATASET|PATH")
@click.option(
    "--format", "fmt", default=None, type=click.Choice(["conll", "conllu", "ocr", "crfsuite"])
)
@click.option("--data-dir", default=None, help="folder with the corpora [$CRFSDCA_DATA_DIR]")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object on stdout")
@click.option("--verbose", "-v", count=True)
def evaluate(
    model_path: str, source: str, fmt: str | None, data_dir: str | None, as_json: bool, verbose: int
) -> None:
    """Score MODEL on a registered dataset's test split or on a labelled file."""
    with _errors(verbose):
        from crfsdca.cli_data import encode_eval, encoder_from_model
        from crfsdca.evaluation import format_report
        from crfsdca.model import CRF

        model = CRF.load(model_path)
        encoder = encoder_from_model(model.encoder)
        data = encode_eval(source, encoder, fmt, data_dir)
        scores = model.score(data)
        if as_json:
            click.echo(json.dumps({"model": model_path, "data": source, **scores}, default=float))
            return
        click.echo(f"token accuracy {100 * scores['token_accuracy']:.2f}%")
        if scores.get("f1") is not None:
            click.echo(format_report(scores))


@main.command()
@click.argument("model_path", metavar="MODEL")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--verbose", "-v", count=True)
def tag(model_path: str, path: str, verbose: int) -> None:
    """Tag a CoNLL file (word POS per line): print each line with the predicted label appended."""
    with _errors(verbose):
        from crfsdca.cli_data import encoder_from_model
        from crfsdca.model import CRF
        from crfsdca.tagging import tag_conll

        model = CRF.load(model_path)
        for line in tag_conll(model, encoder_from_model(model.encoder), path):
            click.echo(line)


@main.command(epilog="Example: crfsdca export model.npz model.crfsuite")
@click.argument("model_path", metavar="MODEL")
@click.argument("out", metavar="OUT.crfsuite")
@click.option("--verbose", "-v", count=True, help="tracebacks on errors")
def export(model_path: str, out: str, verbose: int) -> None:
    """Write MODEL as a CRFsuite binary model file.

    pycrfsuite.Tagger and crfsuite tag load it; a model with bias rows needs the reserved
    attributes __crfsdca_bias__, __crfsdca_first__, __crfsdca_last__ on the items (README).
    """
    with _errors(verbose):
        from crfsdca.crfsuite_format import BIAS_ATTRIBUTES, export_crfsuite
        from crfsdca.model import CRF

        model = CRF.load(model_path)
        export_crfsuite(model, out)
        click.echo(f"CRFsuite model written to {out}")
        if model.feature_map_.n_bias_rows:
            click.echo(
                "crfsdca: note: the bias rows are the attributes " + ", ".join(BIAS_ATTRIBUTES)
                + "; add them (value 1) to every / the first / the last item when tagging",
                err=True,
            )  # fmt: skip


@main.command("import-crfsuite", epilog="Example: crfsdca import-crfsuite m.crfsuite m.npz")
@click.argument("crfsuite_path", metavar="MODEL.crfsuite")
@click.argument("out", metavar="OUT.npz")
@click.option("--verbose", "-v", count=True, help="tracebacks on errors")
def import_crfsuite(crfsuite_path: str, out: str, verbose: int) -> None:
    """Convert a CRFsuite model file to a crfsdca model (.npz)."""
    with _errors(verbose):
        from crfsdca.crfsuite_format import import_crfsuite as read_model

        model = read_model(crfsuite_path)
        model.save(out)
        fm = model.feature_map_
        click.echo(
            f"{out}: {fm.n_labels} labels, {fm.n_attributes} attributes, {fm.n_bias_rows} bias rows"
        )


@main.group()
def datasets() -> None:
    """List the registered datasets or describe one."""


@datasets.command("list")
def datasets_list() -> None:
    """One line per registered dataset."""
    import data_loaders

    for name in data_loaders.DATASETS:
        info = data_loaders.dataset_info(name)
        click.echo(f"{name:15s} {info.get('description', '')}")


@datasets.command("info")
@click.argument("name")
@click.option("--data-dir", default=None)
@click.option("--verbose", "-v", count=True)
def datasets_info(name: str, data_dir: str | None, verbose: int) -> None:
    """Describe dataset NAME: files, splits, template, where it was found."""
    import data_loaders

    with _errors(verbose):
        if name not in data_loaders.DATASETS:
            raise ValueError(f"unknown dataset {name!r}; known: {', '.join(data_loaders.DATASETS)}")
        click.echo(json.dumps(data_loaders.dataset_info(name), indent=2, default=str))


from crfsdca.cli_reproduce import reproduce  # noqa: E402

main.add_command(reproduce)
if __name__ == "__main__":
    main()
