"""``crfsdca warmup``: compile and cache the numba kernels once, as the last install step."""

from __future__ import annotations

import sys
import traceback

import click

from crfsdca.solvers import SOLVERS

EXAMPLE = "Example: crfsdca warmup            (or: crfsdca warmup --solver sdca)"


@click.command(epilog=EXAMPLE)
@click.option(
    "--solver",
    "solvers",
    multiple=True,
    type=click.Choice(sorted(SOLVERS)),
    help="compile only what this solver needs (repeatable) [all]",
)
@click.option("--verbose", "-v", count=True, help="tracebacks on errors")
def warmup(solvers: tuple[str, ...], verbose: int) -> None:
    """Compile the kernels into numba's cache so that the first train starts at once."""
    from crfsdca.kernels import cache_location
    from crfsdca.warmup import warm_up

    def progress(name: str, seconds: float) -> None:
        click.echo(f"{name}: {seconds:.1f} s", err=True)

    try:
        seconds = warm_up(solvers or None, progress=progress)
    except (ValueError, OSError, FloatingPointError) as err:
        if verbose:
            traceback.print_exc()
        click.echo(f"crfsdca: error: {err}", err=True)
        sys.exit(1)
    click.echo(
        f"compiled kernels for {', '.join(seconds)} in {sum(seconds.values()):.1f} s;"
        f" cache: {cache_location()}"
    )
