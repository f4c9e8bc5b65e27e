"""Feature dicts (python-crfsuite's item format) -> attribute lists -> packed sequences.

sklearn-crfsuite and python-crfsuite describe a token by a dict of features. Each entry becomes
one or more CRFsuite attributes ``(name, value)``, exactly as python-crfsuite's ``to_item`` does:

=========================== ========================================= =========================
feature                     attribute(s)                              value
=========================== ========================================= =========================
``{"word": "Paris"}``       ``word:Paris``                            1.0
``{"len": 5}``              ``len``                                   5.0 (a weight)
``{"title": True}``         ``title``                                 1.0 (``False``: 0.0)
``{"w": {"-1": "the"}}``    ``w:-1:the`` (nested dicts are flattened) as for a top-level entry
``{"tags": ["a", "b"]}``    ``tags:a``, ``tags:b``                    1.0 each
=========================== ========================================= =========================

A token may also be a list (or set or tuple) of attribute names: each is an attribute of value
1.0. The separator is ``:`` as in python-crfsuite's code (its docstring says ``=``), so that
attribute names, and the keys of ``state_features_``, match sklearn-crfsuite's.

:class:`FeatureDictEncoder` builds the attribute vocabulary and label set of a training set (in
order of first appearance, as CRFsuite does; the state of an
:class:`~crfsdca.features.encoders.AttributeEncoder`, which model files store) and packs
feature-dict
sequences into :class:`~crfsdca.features.sequences.SequenceData` in one flat pass: the attribute
names
and values of every token go to two flat lists (no per-token list of pairs), then NumPy maps,
sums (a name repeated in a token) and drops zero entries. The entries dropped for summing to 0
are kept aside (:attr:`FeatureDictEncoder.dropped_`): CRFsuite still creates their state
features (frequency 0) in its sparse model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain, repeat
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from crfsdca._dtypes import FLOAT, INDEX
from crfsdca.features.attributes import encoder_from_dict
from crfsdca.features.encoders import AttributeEncoder
from crfsdca.features.sequences import SequenceData
from crfsdca.io.corpora import AttributeCorpus

__all__ = ["FeatureDictEncoder", "item_attributes", "to_attribute_corpus"]

SEPARATOR = ":"
_NUMBERS = (float, bool, int)
# stands for "no label" when sequences are encoded for prediction: never a label name
_NO_LABEL = object()


def _append_nested(key: str, value: Any, names: list[str], values: list[Any]) -> None:
    """Append the attributes of one ``key: value`` feature that is not a str or a number."""
    if isinstance(value, (dict, list, set, tuple, frozenset)):
        inner_names: list[str] = []
        inner_values: list[Any] = []
        _append_item(value, inner_names, inner_values)
        names.extend(key + SEPARATOR + name for name in inner_names)
        values.extend(inner_values)
    elif isinstance(value, str):
        names.append(key + SEPARATOR + value)
        values.append(1.0)
    elif isinstance(value, bytes):
        names.append(key + SEPARATOR + value.decode("utf-8"))
        values.append(1.0)
    else:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise TypeError(
                f"feature {key!r}: expected a str, a number, a bool, a dict or a list;"
                f" got {type(value).__name__}"
            ) from None
        names.append(key)
        values.append(number)


def _name(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bytes):
        return key.decode("utf-8")
    raise TypeError(f"feature names must be str; got {type(key).__name__} {key!r}")


def _append_item(item: Any, names: list[str], values: list[Any]) -> None:
    """Append the attribute names and values (numbers, bools included) of one token."""
    if type(item) is dict or isinstance(item, Mapping):  # the ABC check is slow: dicts first
        add_name, add_value = names.append, values.append
        for key, value in item.items():
            if type(key) is not str:
                key = _name(key)
            kind = type(value)
            # the common cases inline (this runs once per feature of every token)
            if kind is str:
                add_name(key + SEPARATOR + value)
                add_value(1.0)
            elif kind in _NUMBERS:
                add_name(key)
                add_value(value)
            else:
                _append_nested(key, value, names, values)
    elif isinstance(item, (list, set, tuple, frozenset)):
        names.extend(_name(key) for key in item)
        values.extend(repeat(1.0, len(item)))
    else:
        raise TypeError(
            f"expected a feature dict or a list of attribute names; got {type(item).__name__}"
        )


def item_attributes(item: Mapping[str, Any] | Sequence[str]) -> list[tuple[str, float]]:
    """The ``(attribute name, value)`` pairs of one token (see the module docstring).

    Parameters
    ----------
    item : dict or list of str
        A feature dict, or a list / set / tuple of attribute names (each of value 1.0).

    Returns
    -------
    list of (str, float)
        In the dict's order; a name may repeat (values of a repeated name are added up later).
    """
    names: list[str] = []
    values: list[Any] = []
    _append_item(item, names, values)
    return list(zip(names, map(float, values), strict=True))


class _Flat(NamedTuple):
    """Every token's attributes end to end: ``sizes[t]`` entries of ``names``/``values`` for
    token t, ``lengths[i]`` tokens for sequence i."""

    names: list[str]
    values: list[Any]
    sizes: list[int]
    lengths: list[int]


def _check_sequences(X: Any, name: str) -> None:
    if isinstance(X, (str, Mapping)):
        raise TypeError(f"{name}: expected a list of sequences; got {type(X).__name__}")


def _check_sequence(seq: Any, where: str) -> None:
    if isinstance(seq, (str, Mapping)):
        raise TypeError(
            f"{where}: expected a list of tokens (feature dicts); got {type(seq).__name__}"
        )


def _where(seq: Sequence[Any], where: str, err: TypeError) -> TypeError:
    """The error of the first bad token of ``seq``, saying where it is."""
    for t, item in enumerate(seq):
        try:
            _append_item(item, [], [])
        except TypeError as bad:
            return TypeError(f"{where}[{t}]: {bad}")
    return err


def _flatten(X: Sequence[Sequence[Any]], name: str) -> _Flat:
    _check_sequences(X, name)
    flat = _Flat([], [], [], [])
    names, values, add_size = flat.names, flat.values, flat.sizes.append
    for i, seq in enumerate(X):
        _check_sequence(seq, f"{name}[{i}]")
        try:
            for item in seq:
                before = len(names)
                _append_item(item, names, values)
                add_size(len(names) - before)
        except TypeError as err:
            raise _where(seq, f"{name}[{i}]", err) from None
        flat.lengths.append(len(seq))
    return flat


def _finite_values(flat: _Flat, name: str) -> NDArray[np.float64]:
    """The attribute values as floats; ValueError naming the sequence, token and feature of the
    first one that is NaN, infinite or beyond float64."""
    try:
        values = np.array(flat.values, dtype=FLOAT).reshape(-1)
        bad = np.flatnonzero(~np.isfinite(values))
    except OverflowError:  # a Python int beyond float64
        values = None
        bad = [next(k for k, v in enumerate(flat.values) if not _float_ok(v))]
    if values is not None and not len(bad):
        return values
    k = int(bad[0])
    token = int(np.searchsorted(np.cumsum(flat.sizes), k, side="right"))
    i = int(np.searchsorted(np.cumsum(flat.lengths), token, side="right"))
    t = token - (int(np.sum(flat.lengths[:i])) if i else 0)
    value = flat.values[k]
    big = isinstance(value, int) and not isinstance(value, bool)
    shown = f"an integer of {value.bit_length()} bits" if big else repr(value)
    raise ValueError(
        f"{name}[{i}][{t}]: feature {flat.names[k]!r}: expected a finite number; got {shown}"
    )


def _float_ok(value: Any) -> bool:
    try:
        return bool(np.isfinite(float(value)))
    except OverflowError:
        return False


def _check_labels(y: Sequence[Sequence[str]], lengths: list[int], name: str) -> list[list[str]]:
    if len(y) != len(lengths):
        raise ValueError(f"{name} has {len(lengths)} sequences but its labels have {len(y)}")
    labels = []
    for i, seq in enumerate(y):
        if isinstance(seq, str):
            raise TypeError(f"y[{i}]: expected a list of labels; got the string {seq!r}")
        seq = list(seq)
        if not all(type(x) is str or isinstance(x, str) for x in seq):
            t, label = next((t, x) for t, x in enumerate(seq) if not isinstance(x, str))
            raise TypeError(
                f"y[{i}][{t}]: labels must be str (as in CRFsuite); got"
                f" {type(label).__name__} {label!r}"
            )
        if len(seq) != lengths[i]:
            raise ValueError(f"{name}: sequence {i}: {lengths[i]} items but {len(seq)} labels")
        labels.append(seq)
    return labels


def to_attribute_corpus(
    X: Sequence[Sequence[Any]], y: Sequence[Sequence[str]] | None = None, name: str = "X"
) -> AttributeCorpus:
    """Feature-dict sequences (and their labels) as an :class:`AttributeCorpus`.

    Parameters
    ----------
    X : list of list of (dict or list of str)
        One list of tokens per sequence.
    y : list of list of str, optional
        One label per token; ``None`` for prediction (every label is then unknown).
    name : str
        Names the data in error messages (``X``, ``X_dev``).
    """
    flat = _flatten(X, name)
    pairs = iter(zip(flat.names, map(float, flat.values), strict=True))
    sizes = iter(flat.sizes)
    attributes = [[[next(pairs) for _ in range(next(sizes))] for _ in range(n)]
                  for n in flat.lengths]  # fmt: skip
    if y is None:
        labels = [[_NO_LABEL] * n for n in flat.lengths]
    else:
        labels = _check_labels(y, flat.lengths, name)
    return AttributeCorpus(attributes=attributes, labels=labels, path=name)


class FeatureDictEncoder:
    """Attribute vocabulary and label set of feature-dict sequences; packs them.

    Wraps an :class:`AttributeEncoder` (whose ``to_dict`` is what model files store).
    Attributes unseen in training are ignored when encoding; unseen labels become ``-1``.

    Attributes
    ----------
    dropped_ : tuple of two int64 arrays
        ``(token, attribute id)`` of the training entries (``fit_transform``) whose values
        summed to 0 on their token: left out of the data, but CRFsuite's sparse model has their
        features.
    """

    def __init__(self, encoder: AttributeEncoder | None = None) -> None:
        self.encoder = encoder if encoder is not None else AttributeEncoder()
        self.dropped_: tuple[NDArray[np.int64], NDArray[np.int64]] = (
            np.empty(0, INDEX),
            np.empty(0, INDEX),
        )

    @property
    def label_names(self) -> tuple[str, ...]:
        return self.encoder.label_names

    @property
    def attribute_names(self) -> list[str]:
        """Attribute names in id order."""
        return list(self.encoder.vocabulary)

    def fit_transform(self, X: Sequence[Sequence[Any]], y: Sequence[Sequence[str]]) -> SequenceData:
        """Learn attributes and labels from ``(X, y)`` and pack them."""
        flat = _flatten(X, "X")
        labels = _check_labels(y, flat.lengths, "X")
        self.encoder = encoder_from_dict(
            {
                "kind": "attribute",
                "vocabulary": list(dict.fromkeys(flat.names)),
                "label_names": list(dict.fromkeys(chain.from_iterable(labels))),
                "fixed_labels": False,
            }
        )
        data, self.dropped_ = self._pack(flat, labels, "X")
        return data

    def transform(
        self, X: Sequence[Sequence[Any]], y: Sequence[Sequence[str]] | None = None, name: str = "X"
    ) -> SequenceData:
        """Pack ``X`` (with labels ``y``, or every label unknown) with the fitted vocabulary."""
        flat = _flatten(X, name)
        labels = None if y is None else _check_labels(y, flat.lengths, name)
        return self._pack(flat, labels, name)[0]

    def _pack(
        self, flat: _Flat, labels: list[list[str]] | None, name: str
    ) -> tuple[SequenceData, tuple[NDArray[np.int64], NDArray[np.int64]]]:
        """As ``AttributeEncoder.transform``: one entry per (token, attribute) in id order,
        repeated names summed, zero sums dropped (and returned), unseen names ignored."""
        vocabulary = self.encoder.vocabulary
        A = max(len(vocabulary), 1)
        n_items = len(flat.sizes)
        ids = np.fromiter(map(vocabulary.get, flat.names, repeat(-1)), INDEX, len(flat.names))
        values = _finite_values(flat, name)
        rows = np.repeat(np.arange(n_items, dtype=INDEX), np.asarray(flat.sizes, INDEX))
        keep = ids >= 0
        keys = rows[keep] * A + ids[keep]
        order = np.argsort(keys, kind="stable")  # tokens are in order: nearly sorted already
        keys, values = keys[order], values[keep][order]
        if keys.size:
            starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
            keys, sums = keys[starts], np.add.reduceat(values, starts)
        else:
            sums = values
        zero = sums == 0
        dropped = (keys[zero] // A, keys[zero] % A)
        keys, sums = keys[~zero], sums[~zero]
        attr_offsets = np.zeros(n_items + 1, INDEX)
        np.cumsum(np.bincount(keys // A, minlength=n_items), out=attr_offsets[1:])
        data = self._sequence_data(flat, labels, name, attr_offsets, keys % A, sums)
        return data, dropped

    def _sequence_data(
        self,
        flat: _Flat,
        labels: list[list[str]] | None,
        name: str,
        attr_offsets: NDArray[np.int64],
        attr_ids: NDArray[np.int64],
        attr_values: NDArray[np.float64],
    ) -> SequenceData:
        index = {label: k for k, label in enumerate(self.encoder.label_names)}
        flat_labels = [] if labels is None else chain.from_iterable(labels)
        n_items = attr_offsets.size - 1
        label_ids = (
            np.full(n_items, -1, INDEX)
            if labels is None
            else np.fromiter(map(index.get, flat_labels, repeat(-1)), INDEX, n_items)
        )
        unknown = ()
        if labels is not None and np.any(label_ids < 0):
            unknown = tuple(t for t in chain.from_iterable(labels) if t not in index)
        meta = {
            "encoder": "attribute",
            "source": name,
            "template": "crfsuite",
            "default_bias_rows": 0,
            "n_unknown_labels": int(np.count_nonzero(label_ids < 0)),
        }
        return SequenceData(
            seq_offsets=np.concatenate([[0], np.cumsum(flat.lengths, dtype=INDEX)]),
            attr_offsets=attr_offsets,
            attr_ids=attr_ids,
            attr_values=attr_values,
            labels=label_ids,
            n_attributes=len(self.encoder.vocabulary),
            label_names=self.encoder.label_names,
            name=name,
            meta=meta,
            unknown_label_names=unknown,
        )
