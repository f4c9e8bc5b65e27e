"""The ``crfsdca`` command line: train, evaluate, tag, datasets. The only module that prints.

stdout carries results (a short summary, or one JSON object with ``--json``); progress bars and
messages go to stderr. Exit codes: 0 success, 1 data or runtime error (one line, no traceback
unless ``-v``), 2 usage error.
"""

from __future__ import annotations

import json

import click

from crfsdca import __version__
from crfsdca.cli_common import errors_to_exit
from crfsdca.cli_predict import evaluate, tag
from crfsdca.cli_train import train


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="crfsdca")
def main() -> None:
    """Train and use conditional random fields with adaptive SDCA."""


main.add_command(train)
main.add_command(evaluate)
main.add_command(tag)


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

    with errors_to_exit(verbose):
        if name not in data_loaders.DATASETS:
            raise ValueError(f"unknown dataset {name!r}; known: {', '.join(data_loaders.DATASETS)}")
        click.echo(json.dumps(data_loaders.dataset_info(name), indent=2, default=str))


if __name__ == "__main__":
    main()
