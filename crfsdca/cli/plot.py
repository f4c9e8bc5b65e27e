"""``crfsdca plot``: draw convergence curves from trace files (see :mod:`crfsdca.plotting`)."""

from __future__ import annotations

import sys
import traceback

import click

from crfsdca.cli.common import check_output_path, describe_error, make_parent
from crfsdca.errors import DataFormatError
from crfsdca.plotting import X_AXES, Y_AXES, output_format

EXAMPLE = "Example: crfsdca plot sdca.jsonl lbfgs.jsonl --x epochs --y suboptimality --out conv.png"


def _check_out(ctx: click.Context, param: click.Parameter, value: str) -> str:
    try:
        output_format(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None
    check_output_path(value, "--out")
    return value


@click.command(epilog=EXAMPLE)
@click.argument("traces", metavar="TRACE.jsonl...", nargs=-1, required=True)
@click.option(
    "--x",
    "x",
    type=click.Choice(list(X_AXES)),
    default="epochs",
    show_default=True,
    help="cost on the x axis",
)
@click.option(
    "--y",
    "y",
    type=click.Choice(Y_AXES),
    default="suboptimality",
    show_default=True,
    help="log P(w) - P*, log certified duality gap, or test error",
)
@click.option("--out", required=True, callback=_check_out, help="figure file: .png, .svg or .pdf")
@click.option(
    "--p-star",
    type=float,
    default=None,
    help="optimal primal value for --y suboptimality [best primal in the traces - 1e-9]",
)
@click.option("--title", default=None, help="figure title [the dataset names]")
@click.option("--verbose", "-v", count=True, help="tracebacks on errors")
def plot(
    traces: tuple[str, ...],
    x: str,
    y: str,
    out: str,
    p_star: float | None,
    title: str | None,
    verbose: int,
) -> None:
    """Plot suboptimality, duality gap or test error of one or more traces against a cost."""
    try:
        from crfsdca.plotting import plot_traces
        from crfsdca.solvers.trace import read_trace

        make_parent(out)
        summary = plot_traces(
            [read_trace(path) for path in traces], out, x=x, y=y, p_star=p_star, title=title
        )
    except (DataFormatError, ValueError, OSError, ImportError) as err:
        if verbose:
            traceback.print_exc()
        click.echo(f"crfsdca: error: {describe_error(err)}", err=True)
        sys.exit(1)
    for note in summary.skipped:
        click.echo(f"crfsdca: note: left out {note}", err=True)
    if summary.p_star is not None:
        click.echo(f"crfsdca: P* = {summary.p_star:.12g} ({summary.p_star_source})", err=True)
    click.echo(f"figure written to {out}")
