"""Turn the CLI's DATASET | PATH arguments into encoders and SequenceData.

A registered name (``conll2000``, ``conll2002-ned``, ``ocr``, ``ewt-pos``) is resolved by
``data_loaders``; anything else is a file (``-`` is stdin) read in ``--format``, else in the
format its name tells (:data:`EXTENSIONS`). Every format yields one kind of corpus (token
columns, dense vectors, CRFsuite attributes) and every encoder reads one kind: a mismatch between
a model or template and the data is caught here, before any file is read, as one line naming
both. This module never prints.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from crfsdca import io
from crfsdca.errors import DataFormatError, OptionError
from crfsdca.features import encoded_cache
from crfsdca.features.attributes import encoder_from_dict, make_encoder
from crfsdca.features.encoders import AttributeEncoder, DenseEncoder
from crfsdca.features.sequences import SequenceData
from crfsdca.features.templates import TEMPLATE_SETS
from crfsdca.io.corpora import FORMATS
from crfsdca.io.textfile import quote

#: file name endings (after removing ``.gz``) and the format they stand for
EXTENSIONS = {
    ".conll": "conll",
    ".conllu": "conllu",
    ".attr": "crfsuite",
    ".crfsuite": "crfsuite",
    ".data": "ocr",
}
#: every ``--template``: the TEMPLATE_SETS, and the encoders of OCR pixels and CRFsuite attributes
TEMPLATES = (*TEMPLATE_SETS, "ocr", "dense", "crfsuite")
#: largest attribute value (in magnitude) the command line trains or predicts on: the solvers
#: square values and multiply them by weights, which overflows float64 from about 1e154 on
MAX_ATTRIBUTE_VALUE = 1e100
STDIN = "-"
STDIN_NAME = "<stdin>"

# the kind of corpus each format yields and each encoder reads
_FORMAT_KIND = {"conll": "token", "conllu": "token", "ocr": "dense", "crfsuite": "attribute"}
_ENCODER_KIND = {"template": "token", "dense": "dense", "attribute": "attribute"}
_KIND_TEXT = {
    "token": "token columns (CoNLL, CoNLL-U)",
    "dense": "dense vectors (OCR pixels)",
    "attribute": "CRFsuite attributes",
}


@dataclass
class Inputs:
    """Encoded training (and test) data with the encoder that produced them."""

    name: str
    encoder: Any
    train: SequenceData
    test: SequenceData | None
    test_name: str = ""
    fmt: str | None = None


@dataclass(frozen=True)
class Source:
    """A resolved DATASET | PATH argument: a registered dataset, or a file and its format."""

    text: str
    fmt: str
    registered: bool

    @property
    def kind(self) -> str:
        return _FORMAT_KIND[self.fmt]


def registered(name: str) -> bool:
    import data_loaders

    return name in data_loaders.DATASETS


def guess_format(path: str) -> str | None:
    """The format named by the file's ending (``.conllu``, ``.attr``, ``.data.gz``, ...)."""
    name = path[: -len(".gz")] if path.endswith(".gz") else path
    return EXTENSIONS.get(Path(name).suffix.lower())


def template_kind(template: str) -> str:
    """The kind of corpus the template (encoder name) ``template`` reads."""
    if template in TEMPLATE_SETS:
        return "token"
    return {"ocr": "dense", "dense": "dense", "crfsuite": "attribute"}[template]


def unknown_source_message(text: str, *, file_too: bool = True) -> str:
    """Neither a file nor a registered dataset: list the datasets and the closest name."""
    import data_loaders

    names = list(data_loaders.DATASETS)
    close = difflib.get_close_matches(text, names, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else ""
    what = "no such file, and not a registered dataset" if file_too else "not a registered dataset"
    return f"{text}: {what} ({', '.join(names)}){hint}"


def resolve(
    text: str, fmt: str | None, default_fmt: str | None = None, *, datasets: bool = True
) -> Source:
    """Resolve a DATASET | PATH argument (only a PATH unless ``datasets``) without reading it.

    A registered name wins over ``fmt``; a file's format is ``fmt``, else its name's
    (:func:`guess_format`), else ``default_fmt``.
    """
    import data_loaders

    if datasets and registered(text):
        return Source(text, data_loaders.DATASETS[text].format, True)
    if text != STDIN:
        if not os.path.exists(text):
            message = unknown_source_message(text) if datasets else f"{text}: no such file"
            raise FileNotFoundError(message)
        if os.path.isdir(text):
            raise IsADirectoryError(f"{text}: is a directory; expected a data file")
    fmt = fmt or (guess_format(text) if text != STDIN else None) or default_fmt
    if fmt is None:
        endings = ", ".join(f"{e} ({f})" for e, f in EXTENSIONS.items())
        raise ValueError(
            f"{text}: cannot tell the format from the name; give --format"
            f" ({', '.join(FORMATS)}) or name the file by its format: {endings}"
        )
    return Source(text, fmt, False)


def check_kind(source: Source, kind: str, reader: str) -> None:
    """ValueError unless ``source`` yields the corpus kind ``kind`` that ``reader`` reads."""
    if source.kind != kind:
        what = "a dataset" if source.registered else f"a --format {source.fmt} file"
        raise ValueError(
            f"{source.text}: {what} of {_KIND_TEXT[source.kind]}, but {reader} reads"
            f" {_KIND_TEXT[kind]}"
        )


def encoder_kind(encoder: Any) -> str:
    return _ENCODER_KIND[encoder.kind]


@contextlib.contextmanager
def local_path(path: str) -> Iterator[str]:
    """``path`` itself, or for ``-`` a temporary copy of stdin (the readers take paths).

    Errors about the copy name ``<stdin>``; the copy is removed afterwards.
    """
    if path != STDIN:
        yield path
        return
    fd, name = tempfile.mkstemp(prefix="crfsdca-stdin-")
    try:
        with os.fdopen(fd, "wb") as tmp:
            shutil.copyfileobj(sys.stdin.buffer, tmp)
        yield name
    except DataFormatError as err:
        if err.path != name:
            raise
        raise DataFormatError(STDIN_NAME, err.line, err.reason) from None
    finally:
        os.unlink(name)


def read_corpus(path: str, fmt: str, label: str = "xpos"):
    """A raw corpus from a file (``-``: stdin) in one of FORMATS; ``label`` for CoNLL-U."""
    with local_path(path) as local:
        corpus = _read(local, fmt, label)
    if path == STDIN:
        corpus.path = STDIN_NAME
    return corpus


def _read(path: str, fmt: str, label: str):
    if fmt == "conllu":
        return io.read_conllu(path, tag=label)
    if fmt == "crfsuite":
        return _check_attribute_lines(io.read_crfsuite(path))
    readers = {"conll": io.read_conll, "ocr": io.read_ocr}
    if fmt not in readers:
        raise ValueError(f"--format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    return readers[fmt](path)


def _check_attribute_lines(corpus: io.AttributeCorpus) -> io.AttributeCorpus:
    """Refuse an item without attributes whose label holds blanks: a line without tabs, and
    attribute values beyond :data:`MAX_ATTRIBUTE_VALUE` (whose squares would overflow).

    CRFsuite files are ``label TAB attribute TAB ...``; read as one, a space-separated CoNLL
    file would become labels like ``'The DT B-NP'`` without attributes, and train on nothing.
    """
    for first, items, labels in zip(corpus.lines, corpus.attributes, corpus.labels, strict=True):
        for t, (item, label) in enumerate(zip(items, labels, strict=True)):
            for name, value in item:
                if abs(value) > MAX_ATTRIBUTE_VALUE:
                    raise DataFormatError(
                        corpus.path,
                        first + t,
                        f"attribute {quote(name)}: expected a value of magnitude at most"
                        f" {MAX_ATTRIBUTE_VALUE:g}, got {value:g}; scale the values (training"
                        " squares them and multiplies them by weights)",
                    )
            if not item and len(label.split()) > 1:
                raise DataFormatError(
                    corpus.path,
                    first + t,
                    "expected tab-separated fields (label TAB attribute TAB ...), got"
                    f" {quote(label)} without a tab; a CoNLL file? (--format conll)",
                )
    return corpus


def encoder_for(fmt: str, template: str | None):
    """An unfitted encoder for a training file in ``fmt``: ``template``, else the format's."""
    if template is not None:
        if template_kind(template) != _FORMAT_KIND[fmt]:
            raise OptionError(
                f"--template {template} reads {_KIND_TEXT[template_kind(template)]}; a --format"
                f" {fmt} file holds {_KIND_TEXT[_FORMAT_KIND[fmt]]}"
            )
        return make_encoder(template)
    if fmt == "crfsuite":
        return AttributeEncoder()
    if fmt == "ocr":
        return DenseEncoder(io.OCR_PIXELS)
    raise OptionError(f"--format {fmt} needs --template (e.g. conll, ner, pos, crfsuite-chunking)")


def check_train_sources(
    dataset: Source, template: str | None, test: Source | None, label: str | None
) -> None:
    """Refuse a template, a test set or ``--label`` that cannot go with the training data."""
    if template is not None and template_kind(template) != dataset.kind:
        raise OptionError(
            f"--template {template} reads {_KIND_TEXT[template_kind(template)]}; {dataset.text}"
            f" holds {_KIND_TEXT[dataset.kind]}"
        )
    if label is not None and dataset.fmt != "conllu":
        raise OptionError(f"--label applies to CoNLL-U files; {dataset.text} is not one")
    if test is not None and test.kind != dataset.kind:
        raise ValueError(
            f"--test {test.text} holds {_KIND_TEXT[test.kind]}, but the training data"
            f" {dataset.text} holds {_KIND_TEXT[dataset.kind]}"
        )


def load_inputs(
    dataset: str,
    *,
    fmt: str | None,
    template: str | None,
    test: str | None,
    data_dir: str | None,
    max_sequences: int | None,
    label: str | None = None,
    with_test: bool = True,
    cache: bool = True,
) -> Inputs:
    """Encoded train and test data for ``crfsdca train``; ``cache``: files given by path go
    through the encoded-corpus cache (:mod:`crfsdca.features.encoded_cache`)."""
    import data_loaders

    # a name that tells nothing (train.txt) with --template conll is a CoNLL file
    by_template = {"token": "conll", "dense": "ocr", "attribute": "crfsuite"}
    source = resolve(dataset, fmt, by_template[template_kind(template)] if template else None)
    test_source = resolve(test, fmt, source.fmt) if test is not None else None
    check_train_sources(source, template, test_source, label)
    if source.registered and label is not None:  # a CoNLL-U dataset, another label column
        corpus = registered_conllu(dataset, "train", data_dir, label)
        if max_sequences is not None:
            corpus = corpus.head(max_sequences)
        encoder = make_encoder(template or data_loaders.DATASETS[dataset].default_template)
        train = replace(encoder.fit_transform(corpus), name=f"{dataset}:train")
        test_name = test or f"{dataset}:test"
        test_data = encode_eval(test_source or source, encoder, data_dir, label)
        return Inputs(
            dataset, encoder, train, test_data if with_test else None, test_name, "conllu"
        )
    if source.registered:
        encoder, train, test_data = data_loaders.load_encoded(
            dataset, template=template, data_dir=data_dir, max_sequences=max_sequences
        )
        test_name = f"{dataset}:test"
        if test_source is not None:
            test_data, test_name = encode_eval(test_source, encoder, data_dir, label), test
        return Inputs(
            dataset, encoder, train, test_data if with_test else None, test_name, source.fmt
        )

    def encode():
        corpus = read_corpus(dataset, source.fmt, label or "xpos")
        if max_sequences is not None:
            corpus = corpus.head(max_sequences)
        encoder = encoder_for(source.fmt, template)
        train = encoder.fit_transform(corpus)
        test_data = (
            encode_eval(test_source, encoder, data_dir, label) if test_source is not None else None
        )
        return encoder, train, test_data

    entry = _file_key(source, test_source, template, max_sequences, label) if cache else None
    encoder, train, test_data = encoded_cache.cached(
        data_loaders.default_cache_dir(), entry, encode
    )
    name = STDIN_NAME if dataset == STDIN else Path(dataset).name
    return Inputs(name, encoder, train, test_data, test or "", source.fmt)


def _file_key(
    source: Source, test: Source | None, template: str | None, max_sequences, label
) -> str | None:
    """The encoded-corpus cache's key of training (and test) files given by path; None (not
    cached) for standard input, a registered test set, or with the cache off."""
    sources = [source] if test is None else [source, test]
    if any(s.text == STDIN or s.registered for s in sources):
        return None
    inputs = {
        "files": [(s.text, s.fmt) for s in sources],
        "template": template,
        "label": label,
        "max_sequences": max_sequences,
    }
    return encoded_cache.key(inputs, [Path(s.text) for s in sources])


def encode_eval(
    source: Source, encoder, data_dir: str | None, label: str | None = None
) -> SequenceData:
    """Evaluation data (a registered dataset's test split, or a file) encoded by ``encoder``.

    ``meta["unknown_labels"]`` lists the gold labels the encoder does not know, by count.
    """
    import data_loaders

    if source.registered and source.fmt == "conllu":  # the label column the model learnt
        corpus = registered_conllu(source.text, "test", data_dir, label or "xpos")
    elif source.registered:
        corpus = data_loaders.load_dataset(source.text, "test", data_dir=data_dir)
    else:
        corpus = read_corpus(source.text, source.fmt, label or "xpos")
    return encode_labelled(corpus, encoder)


def registered_conllu(name: str, split: str, data_dir: str | None, label: str):
    """One split of a registered CoNLL-U dataset, labelled by the column ``label``."""
    import data_loaders

    spec = data_loaders.DATASETS[name]
    path = data_loaders.find_data_file(name, spec.split(split)[1].relpath, data_dir)
    return io.read_conllu(path, tag=label)


def encode_labelled(corpus, encoder) -> SequenceData:
    """``corpus`` encoded by ``encoder``, with ``meta["unknown_labels"]`` (see encode_eval)."""
    data = encoder.transform(corpus)
    known = set(encoder.label_names)
    unknown: dict[str, int] = {}
    for labels in corpus.labels:
        for name in labels:
            if name not in known:
                unknown[name] = unknown.get(name, 0) + 1
    return replace(data, meta={**data.meta, "unknown_labels": unknown})


def format_of(encoder) -> str:
    """The format a model's data came in, when the model does not say: by its encoder."""
    if isinstance(encoder, AttributeEncoder):
        return "crfsuite"
    if isinstance(encoder, DenseEncoder):
        return "ocr"
    return "conll"


def train_fingerprint(data: SequenceData) -> str:
    """A digest of the encoded training arrays (a resumed run must see the same data)."""
    import hashlib

    h = hashlib.sha256()
    for array in data.arrays():
        h.update(array.tobytes())
    h.update(repr((data.n_attributes, data.label_names)).encode())
    return h.hexdigest()[:24]


def encoder_from_model(header_encoder: dict[str, Any] | None):
    if header_encoder is None:
        raise ValueError(
            "the model has no encoder; it was trained from the Python API on pre-encoded data"
        )
    return encoder_from_dict(header_encoder)
