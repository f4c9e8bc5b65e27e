"""``crfsdca evaluate`` and ``crfsdca tag``: apply a trained model to data."""

from __future__ import annotations

import json

import click

from crfsdca.cli_common import errors_to_exit


@click.command()
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
    with errors_to_exit(verbose):
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


@click.command()
@click.argument("model_path", metavar="MODEL")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--verbose", "-v", count=True)
def tag(model_path: str, path: str, verbose: int) -> None:
    """Tag a CoNLL file (word POS per line): print each line with the predicted label appended."""
    with errors_to_exit(verbose):
        from crfsdca.cli_data import encoder_from_model
        from crfsdca.model import CRF
        from crfsdca.tagging import tag_conll

        model = CRF.load(model_path)
        for line in tag_conll(model, encoder_from_model(model.encoder), path):
            click.echo(line)
