"""Attribute templates and encoders: from a corpus to packed :class:`SequenceData`.

The pieces live in one module each: the templates and the built-in template sets in
:mod:`crfsdca.features.templates`, the encoder of token corpora by templates in
:mod:`crfsdca.features.template_encoder`, the encoders of CRFsuite attribute files and dense
rows (and the base they share) in :mod:`crfsdca.features.encoders`. This module picks an
encoder by name (:func:`make_encoder`) or rebuilds a fitted one from its dict
(:func:`encoder_from_dict`), and re-exports the names above.
"""

from __future__ import annotations

from typing import Any

from crfsdca.features.encoders import AttributeEncoder, DenseEncoder
from crfsdca.features.template_encoder import TemplateEncoder
from crfsdca.features.templates import (
    DERIVED_FUNCTIONS,
    TEMPLATE_SETS,
    Template,
    TemplateSet,
    suffix3,
    word_shape,
)

__all__ = [
    "DERIVED_FUNCTIONS",
    "TEMPLATE_SETS",
    "AttributeEncoder",
    "DenseEncoder",
    "Template",
    "TemplateEncoder",
    "TemplateSet",
    "encoder_from_dict",
    "make_encoder",
    "word_shape",
    "suffix3",
]

OCR_LETTERS = tuple("abcdefghijklmnopqrstuvwxyz")
Encoder = TemplateEncoder | AttributeEncoder | DenseEncoder


def make_encoder(name: str) -> Encoder:
    """Unfitted encoder by name: a ``TEMPLATE_SETS`` key, ``"ocr"`` (128 pixels, labels a-z),
    ``"dense"`` or ``"crfsuite"`` (CRFsuite attribute files)."""
    if name in TEMPLATE_SETS:
        return TemplateEncoder(TEMPLATE_SETS[name])
    if name == "ocr":
        return DenseEncoder(128, label_names=OCR_LETTERS)
    if name == "dense":
        return DenseEncoder()
    if name == "crfsuite":
        return AttributeEncoder()
    choices = sorted(TEMPLATE_SETS) + ["crfsuite", "dense", "ocr"]
    raise ValueError(f"unknown encoder {name!r}; expected one of {choices}")


def encoder_from_dict(d: dict[str, Any]) -> Encoder:
    """Rebuild a fitted encoder from its ``to_dict()`` output."""
    kind = d.get("kind")
    encoder: Encoder
    if kind == "template":
        encoder = TemplateEncoder(TemplateSet.from_dict(d["template_set"]))
        encoder.vocabularies = [{v: i for i, v in enumerate(vs)} for vs in d["vocabularies"]]
        encoder.counts = [
            list(c) for c in d.get("counts", [[0] * len(v) for v in d["vocabularies"]])
        ]
    elif kind == "attribute":
        encoder = AttributeEncoder()
        encoder.vocabulary = {name: i for i, name in enumerate(d["vocabulary"])}
    elif kind == "dense":
        encoder = DenseEncoder(int(d["n_dims"]))
    else:
        raise ValueError(f"encoder dict: expected kind template, attribute or dense; got {kind!r}")
    encoder._label_index = {name: i for i, name in enumerate(d["label_names"])}
    encoder._fixed_labels = bool(d.get("fixed_labels", False))
    encoder._fitted = True
    return encoder
