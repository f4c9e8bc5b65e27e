"""``crfsdca reproduce``: re-run the paper's figures and write a claim-by-claim report."""

from __future__ import annotations

import sys
import time
import traceback

import click

from crfsdca.cli.common import check_output_path, describe_error

EPILOG = (
    "Example: crfsdca reproduce --quick --out repro   (figures: 2 3 4 6 7 8 9 time start oeg"
    " linesearch fn4 refresh seeds sag)"
)


def _split(values: tuple[str, ...]) -> list[str]:
    return [v for value in values for v in value.replace(",", " ").split()]


@click.command(epilog=EPILOG)
@click.option(
    "--figure",
    "figures",
    multiple=True,
    metavar="N",
    help="figure to reproduce (repeatable; default all)",
)
@click.option(
    "--datasets",
    "datasets",
    multiple=True,
    metavar="NAME",
    help="datasets to run (repeatable or comma-separated; default all four)",
)
@click.option(
    "--quick",
    is_flag=True,
    help="small subsets, 3 epochs: every figure in minutes; a smoke test, its verdicts are marked",
)
@click.option(
    "--jobs",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="experiments run in this many processes",
)
@click.option(
    "--out",
    default="reproduction",
    show_default=True,
    type=click.Path(file_okay=False),
    help="output folder: traces/, figures, CSVs, REPORT.md",
)
@click.option("--data-dir", default=None, help="folder with the corpora")
@click.option(
    "--cached-only",
    is_flag=True,
    help="run nothing: figures and report from the cached traces (missing runs are marked)",
)
@click.option(
    "--from-archive",
    "from_archive",
    default=None,
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="run nothing and read no corpus: figures and report from the traces packed in FILE"
    " (the traces.tar.xz a run writes into its --out), whatever code made them",
)
@click.option(
    "--subsets",
    default=1.0,
    show_default=True,
    metavar="FRACTION",
    type=click.FloatRange(0.0, 1.0, min_open=True),
    help="training subsets at this fraction of the full run's (at least 100 sequences; same"
    " epoch budgets): a shorter run, which the report states",
)
@click.option("--verbose", "-v", count=True)
def reproduce(
    figures, datasets, quick, jobs, out, data_dir, cached_only, from_archive, subsets, verbose
) -> None:
    """Re-run the paper's experiments (cached by digest) and write OUT/REPORT.md."""
    from crfsdca.reproduce import UsageError, check_names
    from crfsdca.reproduce.pipeline import reproduce as run

    try:
        names = check_names(_split(figures), _split(datasets))
    except UsageError as err:
        click.echo(f"crfsdca reproduce: error: {err}", err=True)
        sys.exit(2)

    check_output_path(out, "--out", folder=True)
    if from_archive is not None and (quick or cached_only or subsets != 1.0):
        click.echo(
            "crfsdca reproduce: error: --from-archive takes the budgets of its traces; drop"
            " --quick, --cached-only and --subsets",
            err=True,
        )
        sys.exit(2)
    if quick and subsets != 1.0:
        click.echo("crfsdca reproduce: error: --subsets scales a full run; drop --quick", err=True)
        sys.exit(2)

    def progress(line: str) -> None:
        click.echo(f"[{time.strftime('%H:%M:%S')}] {line}", err=True)

    try:
        outcome = run(
            *names,
            quick=quick,
            jobs=jobs,
            out=out,
            data_dir=data_dir,
            progress=progress,
            cached_only=cached_only,
            from_archive=from_archive,
            subsets=subsets,
        )
    except (OSError, ValueError, MemoryError) as err:
        if verbose:
            traceback.print_exc()
        click.echo(f"crfsdca reproduce: error: {describe_error(err)}", err=True)
        sys.exit(1)
    for claim in outcome.claims:
        click.echo(f"  {claim.line()}")
    click.echo(f"{outcome.report} ({outcome.computed} traces computed, {outcome.seconds:.0f} s)")
    if not outcome.ok:
        if outcome.failures:
            click.echo(
                f"crfsdca reproduce: {len(outcome.failures)} experiment(s) failed; the report"
                " marks what is missing",
                err=True,
            )
        else:
            n = sum(len(m) for m in outcome.missing.values())
            click.echo(
                f"crfsdca reproduce: {n} curve(s) missing (not run); the report marks them",
                err=True,
            )
        sys.exit(1)
