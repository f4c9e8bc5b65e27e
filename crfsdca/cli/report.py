"""What every ``crfsdca train`` path reports: the progress bar, the summary, the --plot figure.

Serial, ``--workers`` and ``--graph`` runs print the same summary (or ``--json`` object), read
from the last trace record, which is the state the run returned.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import click


def progress(total: float, quiet: bool):
    """A progress bar over epochs on a terminal, and the monitor callback that moves it."""
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


def summary(
    *, solver, dataset, train, test, feature_map, regularization, result, scores, model_path,
    **extra: Any,
) -> dict[str, Any]:  # fmt: skip
    """The summary of a finished run: data, model size, the returned state, test scores."""
    return {
        "solver": solver,
        "dataset": dataset,
        "n": train.n_sequences,
        "n_test": test.n_sequences if test is not None else 0,
        "d": feature_map.n_features,
        "n_attributes": feature_map.n_attributes,
        "n_labels": feature_map.n_labels,
        "lambda": regularization,
        "l1": float(extra.pop("l1", 0.0) or 0.0),
        "loss": extra.pop("loss", "log"),
        **result.summary(),  # the last trace record: the returned state
        **extra,
        "test_token_accuracy": scores.get("token_accuracy"),
        "test_f1": scores.get("f1"),
        "model": model_path,
    }


def problem_summary(
    problem, result, *, solver, dataset, scores, model_path, **extra: Any
) -> dict[str, Any]:
    """:func:`summary` of a run trained on ``problem``: its train and test data, feature map,
    regularization and l1 term."""
    return summary(
        solver=solver,
        dataset=dataset,
        train=problem.train,
        test=problem.test,
        feature_map=problem.feature_map,
        regularization=problem.regularization,
        l1=problem.l1,
        loss=problem.loss,
        result=result,
        scores=scores,
        model_path=model_path,
        **extra,
    )


def print_summary(s: dict[str, Any]) -> None:
    l1 = f", l1={s['l1']:.3g}" if s.get("l1") else ""
    l1 += ", loss=hinge (structured SVM)" if s.get("loss") == "hinge" else ""
    click.echo(
        f"{s['solver']} on {s['dataset']}: n={s['n']}, d={s['d']}, lambda={s['lambda']:.3g}{l1}"
    )
    gap = "" if s["gap"] is None or not math.isfinite(s["gap"]) else f", gap {s['gap']:.3e}"
    click.echo(
        f"  {s['epochs']:.1f} epochs, {s['seconds']:.1f} s, primal {s['primal']:.8f}{gap}"
        f" ({s['stop_reason']})"
    )
    if s.get("nonzero_weights") is not None:
        click.echo(f"  {s['nonzero_weights']} non-zero weights of {s['d']}")
    if s["test_token_accuracy"] is not None:
        click.echo(f"  test token accuracy {100 * s['test_token_accuracy']:.2f}%")
    if s["test_f1"] is not None:
        click.echo(f"  test F1 {s['test_f1']:.2f}")
    if s["model"]:
        click.echo(f"  model written to {s['model']}")


def write_outputs(trace, trace_path, model=None, model_path=None) -> None:
    """A finished run's files: the trace as JSON lines (``--trace``), the ``--plot`` figure and
    the model (``--model``), their folders created."""
    if trace_path:
        Path(trace_path).parent.mkdir(parents=True, exist_ok=True)
        trace.to_jsonl(trace_path)
    draw_plot(trace)
    if model_path:
        Path(model_path).parent.mkdir(parents=True, exist_ok=True)
        model.save(model_path)


def draw_plot(trace) -> None:
    """The --plot figure of a finished run's trace (nothing without --plot)."""
    ctx = click.get_current_context(silent=True)
    path = ctx.meta.get("crfsdca.plot") if ctx is not None else None
    if path:
        from crfsdca.plotting import plot_trace_file

        plot_trace_file(trace, path)


def run_config(run: dict[str, Any]) -> Any:
    """The solver config of a run (``--solver``, its options and ``--seed``)."""
    from crfsdca.solvers import SOLVERS

    return SOLVERS[run["solver"]].config_class(seed=run["seed"], **run["options"])


#: the stop reasons of a budget (``--epochs``, ``--time-limit``; rounds of a distributed run)
BUDGET_STOPS = ("max_epochs", "time_limit", "max_rounds")


def stopped_early(reason: str, config: Any, last: Any, rounds: int | None = None) -> str | None:
    """The line for a run that a budget stopped above ``--tol``, in the user's flags (None for
    any other end): ``reason`` of the result, its solver ``config``, its ``last`` trace record,
    the ``rounds`` of a distributed run."""
    if reason not in BUDGET_STOPS:
        return None
    if reason == "time_limit":
        where = f"--time-limit {config.time_limit:g} s ({last.epoch:.1f} epochs)"
    else:
        where = f"--epochs {config.max_epochs:g}"
        where += f" ({rounds} rounds)" if rounds is not None else ""
    gap = last.gap if math.isfinite(last.gap) else last.gap_estimate
    measure = f" (duality gap {gap:.3g})" if math.isfinite(gap) else ""
    return (
        f"stopped at {where} before reaching --tol {config.tol:g}{measure};"
        " train longer or raise --tol"
    )


def warn_stopped_early(result: Any, config: Any, quiet: bool, rounds: int | None = None) -> None:
    """:func:`stopped_early`'s line on stderr, unless ``quiet``."""
    line = stopped_early(result.stop_reason, config, result.trace.records[-1], rounds)
    if line is not None and not quiet:
        click.echo(f"crfsdca: {line}", err=True)
