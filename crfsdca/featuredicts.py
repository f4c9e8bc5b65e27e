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
order of first appearance, as CRFsuite does) and packs feature-dict sequences into
:class:`~crfsdca.sequences.SequenceData` through :class:`~crfsdca.attributes.AttributeEncoder`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from crfsdca.attributes import AttributeEncoder
from crfsdca.corpora import AttributeCorpus
from crfsdca.sequences import SequenceData

__all__ = ["FeatureDictEncoder", "item_attributes", "to_attribute_corpus"]

SEPARATOR = ":"
# stands for "no label" when sequences are encoded for prediction: never a label name
_NO_LABEL = object()


def _entry(key: str, value: Any, out: list[tuple[str, float]]) -> None:
    """Append the attributes of one ``key: value`` feature to ``out``."""
    if isinstance(value, (dict, list, set, tuple)):
        for name, v in item_attributes(value):
            out.append((key + SEPARATOR + name, v))
    elif isinstance(value, str):
        out.append((key + SEPARATOR + value, 1.0))
    elif isinstance(value, bytes):
        out.append((key + SEPARATOR + value.decode("utf-8"), 1.0))
    else:
        try:
            out.append((key, float(value)))
        except (TypeError, ValueError):
            raise TypeError(
                f"feature {key!r}: expected a str, a number, a bool, a dict or a list;"
                f" got {type(value).__name__}"
            ) from None


def _name(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bytes):
        return key.decode("utf-8")
    raise TypeError(f"feature names must be str; got {type(key).__name__} {key!r}")


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
    out: list[tuple[str, float]] = []
    append = out.append
    if isinstance(item, Mapping):
        for key, value in item.items():
            if type(key) is not str:
                key = _name(key)
            kind = type(value)
            # the common cases inline (this runs once per feature of every token)
            if kind is str:
                append((key + SEPARATOR + value, 1.0))
            elif kind is float or kind is bool or kind is int:
                append((key, float(value)))
            else:
                _entry(key, value, out)
    elif isinstance(item, (list, set, tuple, frozenset)):
        out.extend((_name(key), 1.0) for key in item)
    else:
        raise TypeError(
            f"expected a feature dict or a list of attribute names; got {type(item).__name__}"
        )
    return out


def _sequence_attributes(seq: Sequence[Any], where: str) -> list[list[tuple[str, float]]]:
    try:
        return [item_attributes(item) for item in seq]
    except TypeError:
        for t, item in enumerate(seq):  # find the token again, to say where
            try:
                item_attributes(item)
            except TypeError as err:
                raise TypeError(f"{where}[{t}]: {err}") from None
        raise


def _check_labels(y: Sequence[Sequence[str]]) -> list[list[str]]:
    labels = []
    for i, seq in enumerate(y):
        if isinstance(seq, str):
            raise TypeError(f"y[{i}]: expected a list of labels; got the string {seq!r}")
        seq = list(seq)
        for t, label in enumerate(seq):
            if not isinstance(label, str):
                raise TypeError(
                    f"y[{i}][{t}]: labels must be str (as in CRFsuite); got"
                    f" {type(label).__name__} {label!r}"
                )
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
    if isinstance(X, (str, Mapping)):
        raise TypeError(f"{name}: expected a list of sequences; got {type(X).__name__}")
    attributes = []
    for i, seq in enumerate(X):
        if isinstance(seq, (str, Mapping)):
            raise TypeError(
                f"{name}[{i}]: expected a list of tokens (feature dicts); got {type(seq).__name__}"
            )
        attributes.append(_sequence_attributes(seq, f"{name}[{i}]"))
    if y is None:
        labels = [[_NO_LABEL] * len(s) for s in attributes]
    else:
        if len(y) != len(attributes):
            raise ValueError(f"{name} has {len(attributes)} sequences but its labels have {len(y)}")
        labels = _check_labels(y)
    return AttributeCorpus(attributes=attributes, labels=labels, path=name)


class FeatureDictEncoder:
    """Attribute vocabulary and label set of feature-dict sequences; packs them.

    Wraps an :class:`AttributeEncoder` (whose ``to_dict`` is what model files store).
    Attributes unseen in training are ignored when encoding; unseen labels become ``-1``.
    """

    def __init__(self, encoder: AttributeEncoder | None = None) -> None:
        self.encoder = encoder if encoder is not None else AttributeEncoder()

    @property
    def label_names(self) -> tuple[str, ...]:
        return self.encoder.label_names

    @property
    def attribute_names(self) -> list[str]:
        """Attribute names in id order."""
        return list(self.encoder.vocabulary)

    def fit_transform(self, X: Sequence[Sequence[Any]], y: Sequence[Sequence[str]]) -> SequenceData:
        """Learn attributes and labels from ``(X, y)`` and pack them."""
        corpus = to_attribute_corpus(X, y)
        return self.encoder.fit(corpus).transform(corpus)

    def transform(
        self, X: Sequence[Sequence[Any]], y: Sequence[Sequence[str]] | None = None, name: str = "X"
    ) -> SequenceData:
        """Pack ``X`` (with labels ``y``, or every label unknown) with the fitted vocabulary."""
        return self.encoder.transform(to_attribute_corpus(X, y, name))
