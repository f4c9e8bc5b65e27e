"""Export crfsdca models to CRFsuite's binary model format; import CRFsuite models.

A CRFsuite model (``crf1d_model.c`` in chokkan/crfsuite; written by ``crfsuite learn`` and
``pycrfsuite.Trainer``; the bytes are :mod:`crfsdca.io.crfsuite_file`) holds state features
(attribute, label) and transition features (label, label), each with a float64 weight.
CRFsuite's tagger scores label ``k`` at item ``t`` as ``sum_a value_a * w(a, k)`` over the
item's (attribute, value) pairs whose names are in the attribute dictionary (others are
ignored) and a transition ``i -> j`` as ``w(i, j)``; a feature that is not stored weighs 0.

**Mapping.** The emission block ``E`` (attributes x labels) becomes the state features and
``W`` (labels x labels) the transitions, attribute and label ids unchanged. Features of weight
exactly 0 are not stored (as CRFsuite does), but every attribute name is, so ids survive a
round trip. With ``n_bias_rows == 0`` this is exactly the crfsdca model. A model with bias rows
(count, first, last) has no CRFsuite counterpart, so its rows are exported as the state
features of three reserved attributes, :data:`BIAS_ATTRIBUTES`; **a CRFsuite deployment must
add** ``__crfsdca_bias__`` (value 1) to every item, ``__crfsdca_first__`` to the first and
``__crfsdca_last__`` to the last item of each sequence (:func:`crfsuite_items` does), and then
tags exactly as crfsdca. Import maps these attributes back to bias rows.

**Attribute names** are the strings a CRFsuite user passes: the names of a CRFsuite attribute
file; ``"<template>=<value>"`` for template models (e.g. ``w[-1]|w[0]=the|cat``, padding values
such as ``__PAD__`` included, as :meth:`TemplateEncoder.attribute_names` lists them); the column
index (``"0"``, ``"1"``, ...) for dense models and for models trained without an encoder.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

from crfsdca._dtypes import FLOAT
from crfsdca.features.feature_map import FeatureMap
from crfsdca.io.crfsuite_file import CRFsuiteModel, read_crfsuite_model, write_crfsuite_model

if TYPE_CHECKING:
    from crfsdca.estimators.model import SequenceCRF
    from crfsdca.features.sequences import SequenceData

__all__ = [
    "BIAS_ATTRIBUTES",
    "attribute_names",
    "crfsuite_items",
    "export_crfsuite",
    "import_crfsuite",
    "to_crfsuite_model",
]

#: Reserved attributes carrying the count, first and last bias rows of a crfsdca model.
BIAS_ATTRIBUTES = ("__crfsdca_bias__", "__crfsdca_first__", "__crfsdca_last__")


def attribute_names(model: SequenceCRF) -> list[str]:
    """The CRFsuite attribute name of each crfsdca attribute id of ``model`` (no bias names)."""
    from crfsdca.features.attributes import encoder_from_dict

    model._check_fitted()
    n = model.feature_map_.n_attributes
    spec = model.encoder
    kind = spec.get("kind") if isinstance(spec, dict) else None
    if kind == "template":
        names = encoder_from_dict(spec).attribute_names()
    elif kind == "attribute":
        names = list(spec["vocabulary"])
    else:
        names = [str(j) for j in range(n)]
    if len(names) != n:
        raise ValueError(f"the model's encoder names {len(names)} attributes; the model has {n}")
    return names


def to_crfsuite_model(model: SequenceCRF, names: list[str] | None = None) -> CRFsuiteModel:
    """The CRFsuite features of a trained crfsdca model (bias rows -> :data:`BIAS_ATTRIBUTES`).

    ``names`` overrides :func:`attribute_names` (one name per attribute id).
    """
    model._check_fitted()
    if model.graph_ != "chain":
        has = "trees" if model.graph_ == "tree" else "junction trees (e.g. --order 2)"
        raise ValueError(f"CRFsuite's format holds linear-chain models; this one has {has}")
    fm, w = model.feature_map_, model.weights_
    names = attribute_names(model) if names is None else [str(n) for n in names]
    if len(names) != fm.n_attributes:
        raise ValueError(f"expected {fm.n_attributes} attribute names, got {len(names)}")
    state = fm.emission(w)
    if fm.n_bias_rows:
        clash = sorted(set(BIAS_ATTRIBUTES) & set(names))
        if clash:
            raise ValueError(
                f"attribute {clash[0]!r} is reserved for the bias rows; rename it or train"
                " without bias rows (--no-bias)"
            )
        names = names + list(BIAS_ATTRIBUTES)
        state = np.vstack([state, fm.bias(w)])
    return CRFsuiteModel(
        labels=tuple(model.label_names_),
        attributes=tuple(names),
        state=np.array(state, FLOAT),
        transition=np.array(fm.transition(w), FLOAT),
    )


def export_crfsuite(
    model: SequenceCRF, path: str | os.PathLike, names: list[str] | None = None
) -> None:
    """Write ``model`` as a CRFsuite model file that ``pycrfsuite.Tagger().open(path)`` loads.

    The tagger gives crfsdca's Viterbi labels when fed the attribute names of
    :func:`attribute_names` and, for a model with bias rows, the reserved attributes
    :data:`BIAS_ATTRIBUTES` (see the module docstring; :func:`crfsuite_items` builds the items).
    The file is written atomically.
    """
    write_crfsuite_model(to_crfsuite_model(model, names), path)


def import_crfsuite(path: str | os.PathLike) -> SequenceCRF:
    """A crfsdca :class:`CRF` holding the weights of a CRFsuite model file.

    The model gets an attribute encoder with the file's attribute names (so it reads CRFsuite
    attribute files), the file's labels, and bias rows if the file has any of
    :data:`BIAS_ATTRIBUTES` (whose features become the bias rows; 0 where absent).
    """
    from crfsdca.estimators.model import SequenceCRF

    cm = read_crfsuite_model(path)
    reserved = [cm.attributes.index(b) if b in cm.attributes else -1 for b in BIAS_ATTRIBUTES]
    n_bias = 3 if max(reserved) >= 0 else 0
    keep = np.ones(len(cm.attributes), bool)
    keep[[r for r in reserved if r >= 0]] = False
    names = [a for a, k in zip(cm.attributes, keep, strict=True) if k]
    fm = FeatureMap(len(names), len(cm.labels), n_bias)
    w = fm.zeros()
    fm.emission(w)[:] = cm.state[keep]
    for row, r in enumerate(reserved if n_bias else ()):
        if r >= 0:
            fm.bias(w)[row] = cm.state[r]
    fm.transition(w)[:] = cm.transition
    model = SequenceCRF(solver="sdca", n_bias_rows=n_bias)
    model.weights_, model.feature_map_, model.label_names_ = w, fm, cm.labels
    model.regularization_ = None
    model.encoder = {
        "kind": "attribute",
        "vocabulary": names,
        "label_names": list(cm.labels),
        "fixed_labels": False,
    }
    model.meta = {"imported_from": "crfsuite", "source": os.fspath(path)}
    return model


def crfsuite_items(model: SequenceCRF, data: SequenceData) -> list[list[dict[str, float]]]:
    """``data`` (encoded by the model's encoder) as item sequences for ``pycrfsuite.Tagger``.

    Each item is ``{attribute name: value}`` in attribute-id order, followed by the reserved
    bias attributes when the model has bias rows.
    """
    names = np.array(attribute_names(model), dtype=object)
    bias = model.feature_map_.n_bias_rows > 0
    ids, values, offsets = data.attr_ids, data.attr_values, data.attr_offsets
    sequences = []
    for i in range(data.n_sequences):
        start, stop = int(data.seq_offsets[i]), int(data.seq_offsets[i + 1])
        items = []
        for t in range(start, stop):
            span = slice(offsets[t], offsets[t + 1])
            item = dict(zip(names[ids[span]].tolist(), values[span].tolist(), strict=True))
            if bias:
                item[BIAS_ATTRIBUTES[0]] = 1.0
                if t == start:
                    item[BIAS_ATTRIBUTES[1]] = 1.0
                if t == stop - 1:
                    item[BIAS_ATTRIBUTES[2]] = 1.0
            items.append(item)
        sequences.append(items)
    return sequences
