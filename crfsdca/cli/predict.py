"""``crfsdca evaluate`` and ``crfsdca tag``: apply a trained model to data.

The data's format is ``--format``, else the one its file name tells, else the one the model was
trained on; data of another kind than the model reads (OCR pixels for a CoNLL model, ...) is
refused before it is read. ``evaluate`` refuses gold labels none of which the model knows, and
warns with their count when only some are unknown (they count as errors).

A tree model (``crfsdca train ... --graph tree``) reads CoNLL-U data: the HEAD column gives each
sentence's tree and edge types go by direction, as in training (:mod:`crfsdca.cli.graph`). A
second-order model (``crfsdca train ... --order 2``) reads what a chain model reads, each
sequence a second-order chain; a custom junction-tree model (Python API) is refused, as the
command line has no way to give its cliques.
"""

from __future__ import annotations

import json
import os
import sys

import click

from crfsdca.cli.common import (
    check_input_file,
    check_output_path,
    errors_to_exit,
    is_special,
    plain_warnings,
)
from crfsdca.cli.inputs import check_labels
from crfsdca.cli.shared_options import DATA_DIR_OPTION, label_option
from crfsdca.errors import DataFormatError, GraphError, ModelFormatError, OptionError
from crfsdca.io.corpora import FORMATS

MODEL_FILE = "a crfsdca model (.npz, from crfsdca train --model)"


def load_model(model_path: str):
    """The model in a model file; one clear line if it is missing or not a model."""
    from crfsdca.estimators.model import SequenceCRF

    check_input_file(model_path, MODEL_FILE)
    try:
        return SequenceCRF.load(model_path)
    except ModelFormatError:
        _refuse_checkpoint(model_path)
        raise


def _load_model(model_path: str):
    """(model, encoder) of a model file; one clear line if it is missing or not a model."""
    model = load_model(model_path)
    if model.graph_ == "junction" and model.order_ != 2:
        raise ValueError(
            f"{model_path}: a custom junction-tree model; the command line cannot give its"
            " cliques: predict with SequenceCRF.load(...).predict(JunctionData) in Python"
        )
    if model.encoder is None:
        raise ValueError(
            f"{model_path}: the model has no attribute encoder (it was trained from the Python"
            " API on encoded data); the command line cannot turn files into its attributes"
        )
    encoder = model_encoder(model_path, model)
    return model, encoder


def model_encoder(model_path: str, model):
    """The model's attribute encoder, rebuilt and checked against the model (None if none)."""
    from crfsdca.estimators.model_header import check_encoder
    from crfsdca.features.sources import encoder_from_model

    if model.encoder is None:
        return None
    try:
        encoder = encoder_from_model(model.encoder)
    except Exception as err:  # any failure to rebuild it is the file's
        raise ModelFormatError(
            f"{model_path}: corrupt model header: the attribute encoder (encoder) is damaged or"
            " was not written by crfsdca"
        ) from err
    check_encoder(model_path, encoder, model)
    return encoder


def _refuse_checkpoint(path: str) -> None:
    """A clearer error than a model's missing fields for a checkpoint given as a model."""
    from crfsdca.io.modelfile import load_model

    try:
        header = load_model(path)[1]
    except (ModelFormatError, OSError, ValueError):
        return
    if header.get("kind") == "crfsdca-checkpoint":
        folder = os.path.dirname(path) or "."
        raise ModelFormatError(
            f"{path}: a training checkpoint, not a model; continue it with crfsdca train"
            f" --resume {folder} --model FILE"
        )


def _source(model_path, model, encoder, text, fmt, label=None, *, datasets=True):
    """The resolved data argument, checked to be of the kind the model reads."""
    from crfsdca.features.sources import check_kind, encoder_kind, format_of, resolve

    trained_on = model.meta.get("format") or format_of(encoder)
    source = resolve(text, fmt, trained_on, datasets=datasets)
    check_kind(source, encoder_kind(encoder), f"the model {model_path}")
    if label is not None and source.fmt != "conllu":
        raise OptionError(f"--label applies to CoNLL-U files; {text} is not one")
    check_columns(source, model, model_path, label)
    return source


#: what the second token field holds: CoNLL columns, CoNLL-U labelled by XPOS or by UPOS
_SECOND_FIELD = {
    ("conll", None): "the file's second column",
    ("conllu", "xpos"): "UPOS (column 4)",
    ("conllu", "upos"): "XPOS (column 5)",
}
_FORMAT_TEXT = {"conll": "CoNLL columns (word POS ...)", "conllu": "CoNLL-U"}


def _second_field(fmt: str, label: str | None) -> str | None:
    return _SECOND_FIELD.get((fmt, (label or "xpos") if fmt == "conllu" else None))


def check_columns(source, model, model_path: str, label: str | None = None) -> None:
    """Refuse token data whose fields mean something else than the model's training data did.

    A template such as ``conll`` reads two token fields (word, POS): from CoNLL columns the
    second is the file's second column (PTB POS in CoNLL-2000), from CoNLL-U the tag column
    that is not the label (UPOS when learning XPOS). A model trained on one and applied to
    another would tag from the wrong tag set without a word; it is refused. A template reading
    the word alone (``pos``) takes any token format.
    """
    trained_on = model.meta.get("format")
    fields = (model.encoder or {}).get("template_set", {}).get("field_names", [])
    if source.kind != "token" or len(fields) < 2:
        return
    trained = _second_field(trained_on, model.meta.get("label")) if trained_on else None
    given = _second_field(source.fmt, label or model.meta.get("label"))
    if trained is None or given is None or trained == given:
        return
    what = "a dataset" if source.registered else f"a --format {source.fmt} file"
    name = model.encoder["template_set"].get("name", "?")
    raise ValueError(
        f"{source.text}: {what}, but the model {model_path} was trained on"
        f" {_FORMAT_TEXT[trained_on]} and its template {name} reads ({' '.join(fields)}), the"
        f" second from {trained}, where this data holds {given}; give the model data as it was"
        " trained on"
    )


def tree_data(model_path: str, encoder, source, data_dir: str | None, label: str):
    """TreeData (gold labels, unknown ones counted) of a CoNLL-U file or of a registered
    CoNLL-U dataset's test split, for a tree model: heads as parents, edge types by direction."""
    from crfsdca.cli.graph import conllu_paths, flat_heads, require_heads
    from crfsdca.cli.graph import tree_data as trees_of
    from crfsdca.features.sources import STDIN, STDIN_NAME, encode_labelled, local_path
    from crfsdca.io.readers import read_conllu

    if source.fmt != "conllu":
        what = "a dataset" if source.registered else f"a --format {source.fmt} file"
        raise ValueError(
            f"{source.text}: {what}, but the model {model_path} is a tree model (--graph tree):"
            " it reads CoNLL-U, whose HEAD column gives the trees"
        )
    path = conllu_paths(source.text, None, data_dir)[1] if source.registered else source.text
    with local_path(path) as local:
        corpus = read_conllu(local, label)
    name = STDIN_NAME if path == STDIN else str(path)
    corpus.path = name
    require_heads(corpus, f"the tree model {model_path}")
    nodes = encode_labelled(corpus, encoder)
    try:
        return trees_of(flat_heads(corpus), nodes)
    except GraphError as err:
        raise _tree_error(name, corpus, err) from None


def _tree_error(name: str, corpus, err: GraphError) -> DataFormatError:
    """The GraphError of a sentence's heads, pointing at the sentence's first line."""
    import numpy as np

    from crfsdca.structures.graphs import Tree

    for i, heads in enumerate(corpus.heads):
        try:
            Tree(np.asarray(heads, np.int64), example=i)
        except GraphError as first:
            line = corpus.lines[i] if corpus.lines else None
            return DataFormatError(name, line, f"HEAD column: {first}")
    return DataFormatError(name, None, str(err))


#: the input format of ``evaluate`` and ``tag``
FORMAT_OPTION = click.option(
    "--format",
    "fmt",
    default=None,
    type=click.Choice(FORMATS),
    help="format of PATH [from its name, else the model's]",
)


@click.command()
@click.argument("model_path", metavar="MODEL")
@click.argument("source", metavar="DATASET|PATH")
@FORMAT_OPTION
@label_option("CoNLL-U column holding the gold labels [the model's]")
@DATA_DIR_OPTION
@click.option("--json", "as_json", is_flag=True, help="print one JSON object on stdout")
@click.option("--quiet", "-q", is_flag=True, help="no warnings")
@click.option("--verbose", "-v", count=True, help="tracebacks on errors")
def evaluate(
    model_path: str,
    source: str,
    fmt: str | None,
    label: str | None,
    data_dir: str | None,
    as_json: bool,
    quiet: bool,
    verbose: int,
) -> None:
    """Score MODEL on a registered dataset's test split or on a labelled file (- for stdin)."""
    with errors_to_exit(verbose), plain_warnings(quiet):
        from crfsdca.evaluation import format_report
        from crfsdca.features.sources import encode_eval

        model, encoder = _load_model(model_path)
        resolved = _source(model_path, model, encoder, source, fmt, label)
        gold = label or model.meta.get("label")
        if model.graph_ == "tree":
            data = tree_data(model_path, encoder, resolved, data_dir, gold or "xpos")
        else:
            data = encode_eval(resolved, encoder, data_dir, gold)
        check_labels(data, source, model.label_names_, quiet)
        scores = model.score(data)
        if as_json:
            click.echo(json.dumps({"model": model_path, "data": source, **scores}, default=float))
            return
        click.echo(f"token accuracy {100 * scores['token_accuracy']:.2f}%")
        if scores.get("f1") is not None:
            click.echo(format_report(scores))


@click.command()
@click.argument("model_path", metavar="MODEL")
@click.argument("path", metavar="PATH")
@FORMAT_OPTION
@click.option(
    "--output",
    "-o",
    default=None,
    help="write the tagged data here (atomically) [-: stdout]",
)
@click.option("--verbose", "-v", count=True, help="tracebacks on errors")
def tag(model_path: str, path: str, fmt: str | None, output: str | None, verbose: int) -> None:
    """Tag PATH (- for stdin) with MODEL.

    CoNLL files (word POS ... per line): each line with the predicted label appended. CRFsuite
    attribute files, OCR letters and CoNLL-U: one predicted label per line, a blank line after
    each sequence. A tree model (--graph tree) reads CoNLL-U, its trees from the HEAD column.
    """
    if output == "-":
        output = None
    check_output_path(output, "--output", special_ok=True)
    with errors_to_exit(verbose):
        from crfsdca.estimators.tagging import tag_conll, tag_corpus, tag_data
        from crfsdca.features.sources import local_path, read_corpus

        model, encoder = _load_model(model_path)
        source = _source(model_path, model, encoder, path, fmt, datasets=False)
        if model.graph_ == "tree":
            label = model.meta.get("label") or "xpos"
            lines = list(tag_data(model, tree_data(model_path, encoder, source, None, label)))
        elif source.fmt == "conll":
            with local_path(path) as local:
                lines = list(tag_conll(model, encoder, local))
        else:
            corpus = read_corpus(path, source.fmt, model.meta.get("label") or "xpos")
            lines = list(tag_corpus(model, encoder, corpus))
        _write_lines(lines, output)


def _write_lines(lines: list[str], output: str | None) -> None:
    from pathlib import Path

    from crfsdca.io import atomic_open

    if output is None:
        for start in range(0, len(lines), 4096):
            sys.stdout.write("".join(f"{line}\n" for line in lines[start : start + 4096]))
        sys.stdout.flush()
        return
    if is_special(output):  # /dev/stdout, a named pipe: written in place, never replaced
        with open(output, "w", encoding="utf-8") as handle:
            handle.writelines(f"{line}\n" for line in lines)
        return
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(output, "w") as handle:
        handle.writelines(f"{line}\n" for line in lines)
