"""Click options several commands share, in a module light enough for every command to import
(no solver, no numba: ``crfsdca --help``, ``evaluate`` and ``tag`` start without them)."""

from __future__ import annotations

from collections.abc import Callable

import click

#: ``--data-dir``: where registered corpora are read (``train``, ``evaluate``)
DATA_DIR_OPTION = click.option(
    "--data-dir",
    default=None,
    type=click.Path(exists=True, file_okay=False),
    help="folder with the corpora [$CRFSDCA_DATA_DIR]",
)


def label_option(help: str) -> Callable:
    """``--label``: the CoNLL-U column of the gold labels."""
    return click.option("--label", default=None, type=click.Choice(["xpos", "upos"]), help=help)


def count_option(*decls: str, help: str) -> Callable:
    """An optional whole number >= 1 (None when not given)."""
    return click.option(*decls, type=click.IntRange(min=1), default=None, help=help)
