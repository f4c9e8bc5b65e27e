"""The template encoder: a token corpus -> indicator attributes of a template set.

Fitting builds one dictionary per template on the training corpus: values in order of first
appearance, kept when seen at least ``min_count`` times. Attribute ids are template blocks laid
end to end (``offset_j + local id``), so each token's ids come out sorted. Values unseen in
training (or pruned) give no attribute, and labels unseen in training get id -1. The templates
themselves are :mod:`crfsdca.features.templates`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import chain, count, repeat
from operator import itemgetter
from typing import Any

import numpy as np
from numpy.typing import NDArray

from crfsdca._dtypes import FLOAT, INDEX
from crfsdca.features.encoders import BaseEncoder, check_corpus_type, offsets_of
from crfsdca.features.sequences import SequenceData
from crfsdca.features.templates import DERIVED_FUNCTIONS, TEMPLATE_SETS, Padding, TemplateSet
from crfsdca.io import TokenCorpus

__all__ = ["TemplateEncoder"]

PAD = "__PAD__"
BOS, EOS = "__BOS__", "__EOS__"


def _map_distinct(function: Callable[[str], str], values: list[str]) -> list[str]:
    """``[function(v) for v in values]``, calling ``function`` once per distinct value."""
    cache = {v: function(v) for v in set(values)}
    return list(map(cache.__getitem__, values))


@dataclass
class _Layout:
    """Where each token of a flattened corpus sits: position in its sequence, its length."""

    position: NDArray[np.int64]
    length: NDArray[np.int64]

    @classmethod
    def of(cls, lengths: list[int]) -> _Layout:
        lengths_ = np.asarray(lengths, INDEX)
        starts = offsets_of(lengths_)[:-1]
        n_items = int(lengths_.sum())
        position = np.arange(n_items, dtype=INDEX) - np.repeat(starts, lengths_)
        return cls(position, np.repeat(lengths_, lengths_))


@dataclass
class _Featurised:
    """Template values of every token: ``values[j][i]`` for template j, token i."""

    values: list[list[str]]
    valid: list[NDArray[np.bool_] | None]  # None: every token has a value
    layout: _Layout = field(repr=False)


class TemplateEncoder(BaseEncoder):
    """Token corpus -> indicator attributes from a :class:`TemplateSet` (one per template).

    Parameters
    ----------
    template_set : TemplateSet or str
        A template set or the name of a built-in one (``TEMPLATE_SETS``).
    label_names : sequence of str, optional
        Fix the label order instead of learning it from the training labels.
    """

    kind = "template"

    def __init__(
        self, template_set: TemplateSet | str, label_names: Sequence[str] | None = None
    ) -> None:
        super().__init__(label_names)
        if isinstance(template_set, str):
            if template_set not in TEMPLATE_SETS:
                choices = sorted(TEMPLATE_SETS)
                raise ValueError(
                    f"unknown template set {template_set!r}; expected one of {choices}"
                )
            template_set = TEMPLATE_SETS[template_set]
        self.template_set = template_set
        self.vocabularies: list[dict[str, int]] = []
        self.counts: list[list[int]] = []

    @property
    def n_attributes(self) -> int:
        self._check_fitted()
        return sum(map(len, self.vocabularies)) + 2 * self.template_set.bos_eos

    @property
    def default_bias_rows(self) -> int:
        return self.template_set.default_bias_rows

    @property
    def template_offsets(self) -> NDArray[np.int64]:
        """Global id of the first attribute of each template (length n_templates + 1)."""
        self._check_fitted()
        return offsets_of(np.array([len(v) for v in self.vocabularies], INDEX))

    def fit(self, corpus: TokenCorpus) -> TemplateEncoder:
        """Build the per-template dictionaries and the label names from a training corpus."""
        self._fit_featurised(corpus, self._featurise(corpus))
        return self

    def transform(self, corpus: TokenCorpus) -> SequenceData:
        """Encode a corpus with the fitted dictionaries (unseen values give no attribute)."""
        self._check_fitted()
        feats = self._featurise(corpus)
        return self._encode(corpus, self._local_ids(feats), feats.layout)

    def fit_transform(self, corpus: TokenCorpus) -> SequenceData:
        """``fit`` then ``transform``, featurising the corpus once."""
        feats = self._featurise(corpus)
        return self._encode(corpus, self._fit_featurised(corpus, feats), feats.layout)

    def template_ids(self, corpus: TokenCorpus) -> NDArray[np.int64]:
        """(n_items, n_templates) 1-based id of each token's value per template, 0 for none.

        This is the column layout of the SAG4CRF ``.mat`` feature files.
        """
        self._check_fitted()
        return self._local_ids(self._featurise(corpus)) + 1

    def attribute_names(self) -> list[str]:
        """Name of every attribute, ``"<template>=<value>"``, in id order."""
        self._check_fitted()
        templates = self.template_set.templates
        pairs = zip(templates, self.vocabularies, strict=True)
        names = [f"{t.name}={v}" for t, vocab in pairs for v in vocab]
        return names + [BOS, EOS] if self.template_set.bos_eos else names

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable state: template set, dictionaries (values in id order), labels."""
        self._check_fitted()
        return {
            "kind": self.kind,
            "template_set": self.template_set.to_dict(),
            "vocabularies": [list(v) for v in self.vocabularies],
            "counts": self.counts,
            **self._labels_dict(),
        }

    def _fit_featurised(self, corpus: TokenCorpus, feats: _Featurised) -> NDArray[np.int64]:
        """Fit the dictionaries; return the training tokens' local ids (see ``_local_ids``)."""
        self.vocabularies, self.counts = [], []
        n_items = feats.layout.position.size
        local = np.empty((len(feats.values), n_items), INDEX)
        for j, (values, valid) in enumerate(zip(feats.values, feats.valid, strict=True)):
            # one dict pass: each token gets the index of the first token with the same value,
            # so sorting those indices gives the values in order of first appearance
            first_token: dict[str, int] = {}
            first = np.fromiter(map(first_token.setdefault, values, count()), INDEX, n_items)
            is_first = first == np.arange(n_items)
            firsts, codes = np.flatnonzero(is_first), (np.cumsum(is_first) - 1)[first]
            counts = np.bincount(codes if valid is None else codes[valid], minlength=firsts.size)
            kept = counts >= self.template_set.min_count
            new_id = np.where(kept, np.cumsum(kept) - 1, -1)
            local[j] = new_id[codes] if valid is None else np.where(valid, new_id[codes], -1)
            kept_values = map(values.__getitem__, firsts[kept].tolist())
            self.vocabularies.append({v: i for i, v in enumerate(kept_values)})
            self.counts.append(counts[kept].tolist())
        self._fit_labels(corpus.labels)
        self._fitted = True
        return local.T

    def _featurise(self, corpus: TokenCorpus) -> _Featurised:
        check_corpus_type(corpus, TokenCorpus, self)
        ts = self.template_set
        layout = _Layout.of([len(s) for s in corpus.tokens])
        columns = self._columns(corpus)
        offsets = [o for t in ts.templates for _, o in t.parts]
        n_left, n_right = max(0, -min(offsets)), max(0, max(offsets))
        if ts.padding == "positional":
            pads = [f"__BOS{k}__" for k in range(1, n_left + 1)]
            pads += [f"__EOS{k}__" for k in range(1, n_right + 1)]
        else:
            pads = [PAD]
        padded = {name: col + pads for name, col in columns.items()}
        shifted: dict[tuple[str, int], list[str]] = {}
        values: list[list[str]] = []
        valid: list[NDArray[np.bool_] | None] = []
        for template in ts.templates:
            for part in template.parts:
                if part not in shifted:
                    shifted[part] = _shift(padded[part[0]], part[1], layout, n_left, ts.padding)
            parts = [shifted[p] for p in template.parts]
            values.append(
                parts[0] if len(parts) == 1 else list(map("|".join, zip(*parts, strict=True)))
            )
            lo = min(o for _, o in template.parts)
            hi = max(o for _, o in template.parts)
            inside = (layout.position + lo >= 0) & (layout.position + hi < layout.length)
            valid.append(None if ts.padding != "none" or inside.all() else inside)
        return _Featurised(values, valid, layout)

    def _columns(self, corpus: TokenCorpus) -> dict[str, list[str]]:
        """Flat list per field over all tokens, with derived and lowercased fields."""
        ts = self.template_set
        flat = list(chain.from_iterable(corpus.tokens))
        n_fields = min(map(len, flat), default=len(ts.field_names))
        if n_fields < len(ts.field_names):
            raise ValueError(
                f"{corpus.path}: template set {ts.name!r} expects token fields "
                f"({' '.join(ts.field_names)}); got {n_fields} ({' '.join(corpus.field_names)})"
            )
        columns = {name: list(map(itemgetter(i), flat)) for i, name in enumerate(ts.field_names)}
        for name, function, source in ts.derived_fields:
            columns[name] = _map_distinct(DERIVED_FUNCTIONS[function], columns[source])
        for name in ts.lowercase_fields:
            columns[name] = _map_distinct(str.lower, columns[name])
        return columns

    def _local_ids(self, feats: _Featurised) -> NDArray[np.int64]:
        """(n_items, n_templates) 0-based id per template, -1 for none."""
        n_items = feats.layout.position.size
        out = np.empty((len(self.vocabularies), n_items), INDEX)
        for j, vocab in enumerate(self.vocabularies):
            out[j] = np.fromiter(map(vocab.get, feats.values[j], repeat(-1)), INDEX, n_items)
            if feats.valid[j] is not None:
                out[j, ~feats.valid[j]] = -1
        return out.T

    def _encode(
        self, corpus: TokenCorpus, local: NDArray[np.int64], layout: _Layout
    ) -> SequenceData:
        ids = np.where(local >= 0, local + self.template_offsets[:-1], -1)
        if self.template_set.bos_eos:
            n = self.n_attributes
            bos = np.where(layout.position == 0, n - 2, -1)
            eos = np.where(layout.position == layout.length - 1, n - 1, -1)
            ids = np.column_stack([ids, bos, eos])
        mask = ids >= 0
        attr_ids = ids[mask]
        meta = {"template": self.template_set.name}
        lengths = [len(s) for s in corpus.tokens]
        values = np.ones(attr_ids.size, FLOAT)
        return self._pack(corpus, lengths, offsets_of(mask.sum(1)), attr_ids, values, meta)


def _shift(
    padded: list[str], offset: int, layout: _Layout, n_left: int, padding: Padding
) -> list[str]:
    """Value of a field at ``t + offset`` for every token ``t``; ``padded`` is the flat field
    followed by its pad symbols (``__BOS1__`` ... ``__EOSk__``, or the single ``__PAD__``)."""
    n_items = layout.position.size
    if offset == 0:
        return padded[:n_items]
    target = layout.position + offset
    inside = (target >= 0) & (target < layout.length)
    if padding == "positional":
        pad = np.where(target < 0, n_items - target - 1, n_items + n_left + target - layout.length)
    else:
        pad = np.full(n_items, n_items, INDEX)
    index = np.where(inside, np.arange(n_items, dtype=INDEX) + offset, pad)
    return list(map(padded.__getitem__, index.tolist()))
