"""Turn the CLI's DATASET | PATH arguments into encoders and SequenceData.

A registered name (``conll2000``, ``conll2002-ned``, ``ocr``, ``ewt-pos``) is resolved by
``data_loaders``; anything else is a file read with ``--format``. This module never prints.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crfsdca import io
from crfsdca.attributes import AttributeEncoder, DenseEncoder, encoder_from_dict, make_encoder
from crfsdca.sequences import SequenceData

FORMATS = ("conll", "conllu", "ocr", "crfsuite")


@dataclass
class Inputs:
    """Encoded training (and test) data with the encoder that produced them."""

    name: str
    encoder: Any
    train: SequenceData
    test: SequenceData | None
    test_name: str = ""


def registered(name: str) -> bool:
    import data_loaders

    return name in data_loaders.DATASETS


def read_corpus(path: str, fmt: str | None):
    """A raw corpus from a file in one of FORMATS."""
    if fmt is None:
        raise ValueError(f"{path}: not a registered dataset; give --format ({', '.join(FORMATS)})")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file or registered dataset")
    readers = {
        "conll": io.read_conll,
        "conllu": io.read_conllu,
        "ocr": io.read_ocr,
        "crfsuite": io.read_crfsuite,
    }
    if fmt not in readers:
        raise ValueError(f"--format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    return readers[fmt](path)


def encoder_for(fmt: str, template: str | None):
    if fmt == "crfsuite":
        if template:
            raise ValueError("CRFsuite attribute files carry their attributes; drop --template")
        return AttributeEncoder()
    if fmt == "ocr":
        return DenseEncoder(128)
    if not template:
        raise ValueError(
            f"--format {fmt} needs --template (e.g. conll, ner, pos, crfsuite-chunking)"
        )
    return make_encoder(template)


def load_inputs(
    dataset: str,
    *,
    fmt: str | None,
    template: str | None,
    test: str | None,
    data_dir: str | None,
    max_sequences: int | None,
    with_test: bool = True,
) -> Inputs:
    """Encoded train and test data for ``crfsdca train``."""
    import data_loaders

    if registered(dataset):
        encoder, train, test_data = data_loaders.load_encoded(
            dataset, template=template, data_dir=data_dir, max_sequences=max_sequences
        )
        test_name = f"{dataset}:test"
        if test is not None:
            test_data, test_name = encode_eval(test, encoder, fmt, data_dir), test
        return Inputs(dataset, encoder, train, test_data if with_test else None, test_name)
    corpus = read_corpus(dataset, fmt)
    if max_sequences is not None:
        corpus = corpus.head(max_sequences)
    encoder = encoder_for(fmt, template)
    train = encoder.fit_transform(corpus)
    test_data = encode_eval(test, encoder, fmt, data_dir) if test is not None else None
    return Inputs(Path(dataset).name, encoder, train, test_data, test or "")


def encode_eval(source: str, encoder, fmt: str | None, data_dir: str | None) -> SequenceData:
    """Evaluation data (a registered name's test split, or a file) encoded by ``encoder``."""
    import data_loaders

    if registered(source):
        return encoder.transform(data_loaders.load_dataset(source, "test", data_dir=data_dir))
    fmt = fmt or format_of(encoder)
    return encoder.transform(read_corpus(source, fmt))


def format_of(encoder) -> str:
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
