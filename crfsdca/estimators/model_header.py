"""Checks of a model file's header and encoder, in words, before anything is built from them.

A model file is read by :func:`crfsdca.io.modelfile.load_model`; this module checks that what the
header holds makes one consistent model: sizes that are integers in range, a label list of
``n_labels`` distinct names, weights of the size the sizes give, solver options the solver has,
an encoder that rebuilds and agrees with the model. Every failure is a
:class:`~crfsdca.errors.ModelFormatError` ``<file>: corrupt model header: <what, in words>``,
so that a damaged file is blamed on the file, never on the data it is applied to, and no
Python or numpy message reaches the user.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from crfsdca.errors import ModelFormatError

__all__ = ["check_encoder", "check_header", "header_words", "size_mismatch"]

#: header key -> what it holds, in words
FIELDS = {
    "solver": "the solver name",
    "regularization": "the regularization",
    "l1": "the l1 weight",
    "loss": "the loss",
    "n_bias_rows": "the number of bias rows",
    "n_attributes": "the number of attributes",
    "n_labels": "the number of labels",
    "labels": "the label list",
    "solver_options": "the solver options",
    "encoder": "the attribute encoder",
    "meta": "the training data's description",
    "n_edge_types": "the number of edge types",
    "graph": "the graph kind",
    "order": "the chain order",
    "factor_arities": "the factor sizes",
}


def _bad(path: str | os.PathLike, what: str, part: str = "model header") -> ModelFormatError:
    return ModelFormatError(f"{os.fspath(path)}: corrupt {part}: {what}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _integer(path, header: dict[str, Any], key: str, low: int, allowed=None) -> int:
    value = header.get(key)
    if key not in header:
        raise _bad(path, f"{FIELDS[key]} ({key}) is missing")
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= low
    if allowed is not None:
        ok = ok and value in allowed
    if not ok:
        expected = " or ".join(map(str, allowed)) if allowed else f"an integer >= {low}"
        raise _bad(path, f"{FIELDS[key]} ({key}) must be {expected}; got {_shown(value)}")
    return value


def check_header(path: str | os.PathLike, header: dict[str, Any], arrays: dict[str, Any]) -> None:
    """ModelFormatError unless ``header`` and ``arrays`` describe one consistent model.

    Checks the fields every model has; the graph fields (graph kind, edge types, order) are
    checked where they are read, and their errors reworded by the caller.
    """
    from crfsdca.solvers import SOLVERS

    solver = header.get("solver")
    if not isinstance(solver, str) or solver not in SOLVERS:
        raise _bad(path, f"the solver name (solver) is {_shown(solver)}, not one of crfsdca's")
    lam = header.get("regularization")  # None: not known (an imported CRFsuite model)
    number = isinstance(lam, int | float) and not isinstance(lam, bool)
    if lam is not None and (not number or not math.isfinite(lam) or lam <= 0):
        raise _bad(path, f"the regularization must be a number > 0; got {_shown(lam)}")
    l1 = header.get("l1", 0.0)
    number = isinstance(l1, int | float) and not isinstance(l1, bool)
    if not number or not math.isfinite(l1) or l1 < 0:
        raise _bad(path, f"the l1 weight (l1) must be a number >= 0; got {_shown(l1)}")
    loss = header.get("loss", "log")
    if loss not in ("log", "hinge"):
        raise _bad(path, f"the loss (loss) must be log or hinge; got {_shown(loss)}")
    _integer(path, header, "n_bias_rows", 0, allowed=(0, 3))
    _integer(path, header, "n_attributes", 0)
    n_labels = _integer(path, header, "n_labels", 1)
    if "labels" not in header:
        raise _bad(path, "the label list (labels) is missing")
    labels = header.get("labels")
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        raise _bad(path, f"the label list (labels) must be a list of names; got {_shown(labels)}")
    if len(labels) != n_labels:
        raise _bad(path, f"the label list has {len(labels)} names for {n_labels} labels (n_labels)")
    seen: set[str] = set()
    for name in labels:
        if name in seen:
            raise _bad(path, f"the label {name!r} appears more than once in the label list")
        seen.add(name)
    encoder = header.get("encoder")
    kinds = ("template", "attribute", "dense")
    if encoder is not None and (not isinstance(encoder, dict) or encoder.get("kind") not in kinds):
        raise _bad(path, "the attribute encoder (encoder) is damaged or was not written by crfsdca")
    for key in ("all_possible_states", "all_possible_transitions"):
        if not isinstance(header.get(key, True), bool):
            raise _bad(path, f"{key} must be true or false; got {_shown(header[key])}")
    for key in ("solver_options", "meta"):
        if not isinstance(header.get(key, {}), dict):
            raise _bad(path, f"{FIELDS[key]} ({key}) must be a JSON object")
    options = header.get("solver_options", {})
    import dataclasses

    known = {f.name for f in dataclasses.fields(SOLVERS[solver].config_class)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise _bad(path, f"the solver options name {unknown[0]!r}, which {solver} does not have")
    weights = arrays.get("weights")
    if weights is None:
        raise _bad(path, "the file holds no weights array", "model")
    if not isinstance(weights, np.ndarray) or weights.dtype.kind not in "fiu" or weights.ndim != 1:
        raise _bad(path, "the weights are not a flat array of numbers", "model")


def size_mismatch(path: str | os.PathLike, n_weights: int, n_features: int) -> ModelFormatError:
    """The weights array does not have the size the header's sizes give."""
    return _bad(
        path,
        f"the weights hold {n_weights} numbers, but the header's sizes (attributes, labels,"
        f" bias rows, edge types) need {n_features}",
        "model",
    )


def check_encoder(path: str | os.PathLike, encoder: Any, model: Any) -> None:
    """ModelFormatError unless the rebuilt ``encoder`` agrees with ``model``'s labels and sizes."""
    if list(encoder.label_names) != list(model.label_names_):
        raise _bad(
            path,
            "the attribute encoder's label list (encoder) differs from the model's (labels)",
        )
    if encoder.n_attributes != model.feature_map_.n_attributes:
        raise _bad(
            path,
            f"the encoder knows {encoder.n_attributes} attributes, the model has weights for"
            f" {model.feature_map_.n_attributes} (n_attributes)",
        )


def header_words(err: Exception) -> str:
    """The message of a header check elsewhere, with the field named in words first."""
    if isinstance(err, KeyError):
        key = err.args[0] if err.args else "?"
        return f"{FIELDS.get(key, 'a field')} ({key}) is missing"
    text = str(err)
    for key, words in FIELDS.items():
        if text.startswith(f"{key} "):
            return f"{words} ({key}) {text[len(key) + 1 :]}"
    return text
