"""The ``crfsdca`` command line: train, evaluate, tag, datasets. The only module that prints.

stdout carries results (a short summary, or one JSON object with ``--json``); progress bars and
messages go to stderr. Exit codes: 0 success, 1 data or runtime error (one line, no traceback
unless ``-v``), 2 usage error, 130 after Ctrl-C, 141 when stdout was closed early (``| head``).

``train`` builds its options from the solver configs, whose modules load the numba kernels: it
is imported only when it runs, so ``crfsdca --help`` and the other commands start quickly.
"""

from __future__ import annotations

import json
from importlib import import_module

import click

from crfsdca import __version__
from crfsdca.cli.common import (
    check_input_file,
    check_output_path,
    errors_to_exit,
    interrupted,
    make_parent,
    quiet_broken_pipe,
)
from crfsdca.cli.predict import evaluate, tag

#: subcommands imported on first use: name -> (module, attribute, short help)
LAZY_COMMANDS = {
    "train": (
        "crfsdca.cli.train",
        "train",
        "Train a CRF on DATASET (a registered name or a file) and report test scores.",
    ),
    "warmup": (
        "crfsdca.cli.warmup",
        "warmup",
        "Compile the kernels into numba's cache so that the first train starts at once.",
    ),
}


class _Group(click.Group):
    """The top-level group: lazy subcommands; a closed stdout or Ctrl-C ends quietly."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *LAZY_COMMANDS])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS:
            module, attribute, _ = LAZY_COMMANDS[cmd_name]
            return getattr(import_module(module), attribute)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names))
        rows = []
        for name in names:
            if name in LAZY_COMMANDS:
                short = click.Command(name, help=LAZY_COMMANDS[name][2]).get_short_help_str(limit)
                rows.append((name, short))
            elif not self.commands[name].hidden:
                rows.append((name, self.commands[name].get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            quiet_broken_pipe()
        except KeyboardInterrupt:
            interrupted()


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="crfsdca")
def main() -> None:
    """Train and use conditional random fields with adaptive SDCA."""


main.add_command(evaluate)
main.add_command(tag)


@main.command(epilog="Example: crfsdca export model.npz model.crfsuite")
@click.argument("model_path", metavar="MODEL")
@click.argument("out", metavar="OUT.crfsuite")
@click.option("--verbose", "-v", count=True, help="tracebacks on errors")
def export(model_path: str, out: str, verbose: int) -> None:
    """Write MODEL as a CRFsuite binary model file.

    pycrfsuite.Tagger and crfsuite tag load it; a model with bias rows needs the reserved
    attributes __crfsdca_bias__, __crfsdca_first__, __crfsdca_last__ on the items (README).
    """
    check_output_path(out, "OUT.crfsuite")
    with errors_to_exit(verbose):
        from crfsdca.cli.predict import load_model, model_encoder
        from crfsdca.estimators.crfsuite_format import BIAS_ATTRIBUTES, export_crfsuite

        model = load_model(model_path)
        model_encoder(model_path, model)  # a damaged encoder would name the attributes wrongly
        make_parent(out)
        try:
            export_crfsuite(model, out)
        except ValueError as err:  # what CRFsuite's format cannot hold: said of the model file
            raise ValueError(f"{model_path}: {err}") from err
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
    check_output_path(out, "OUT.npz")
    with errors_to_exit(verbose):
        from crfsdca.estimators.crfsuite_format import import_crfsuite as read_model

        check_input_file(crfsuite_path, "a CRFsuite model file")
        model = read_model(crfsuite_path)
        make_parent(out)
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
@click.option("--data-dir", default=None, type=click.Path(exists=True, file_okay=False))
@click.option("--verbose", "-v", count=True)
def datasets_info(name: str, data_dir: str | None, verbose: int) -> None:
    """Describe dataset NAME: files, splits, template, where it was found."""
    import data_loaders

    with errors_to_exit(verbose):
        if name not in data_loaders.DATASETS:
            from crfsdca.features.sources import unknown_source_message

            raise ValueError(unknown_source_message(name, file_too=False))
        click.echo(json.dumps(data_loaders.dataset_info(name, data_dir), indent=2, default=str))


def _register_commands() -> None:
    from crfsdca.cli.plot import plot
    from crfsdca.cli.reproduce import reproduce

    main.add_command(plot)
    main.add_command(reproduce)


_register_commands()

if __name__ == "__main__":
    main()
