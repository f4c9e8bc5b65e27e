"""Attribute templates and encoders: from a corpus to packed :class:`SequenceData`.

A *template* is a tuple of ``(field, offset)`` parts; at position ``t`` its value is the fields
at ``t + offset`` joined with ``|`` and its attribute is the pair (template, value), named
``"w[-1]|w[0]=the|cat"`` as in CRFsuite's ``crfutils.apply_templates``. Out-of-range offsets
are handled by the template set's ``padding``:

- ``"none"``: the attribute is dropped (CRFsuite);
- ``"per-template"``: one pad symbol, the same at every distance (SAG4CRF CONLL);
- ``"positional"``: ``__BOS1__``, ``__BOS2__``, ... before and ``__EOS1__``, ... after the
  sequence, so ``w[-2]`` differs at t = 0 and t = 1 (SAG4CRF NER and POS).

Fitting builds one dictionary per template on the training corpus: values in order of first
appearance, kept when seen at least ``min_count`` times. Attribute ids are template blocks laid
end to end (``offset_j + local id``), so each token's ids come out sorted. Values unseen in
training (or pruned) give no attribute, and labels unseen in training get id -1.

A user-defined template set is a :class:`TemplateSet`, or the dict of
:meth:`TemplateSet.to_dict` (e.g. loaded from JSON)::

    TemplateSet.from_dict({"name": "mine", "field_names": ["w", "pos"],
                           "templates": [[["w", 0]], [["w", -1], ["w", 0]], [["pos", 0]]],
                           "derived_fields": [["shape", "shape", "w"]],
                           "padding": "positional", "min_count": 2})
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import chain, count, repeat
from operator import itemgetter
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from crfsdca._dtypes import FLOAT, INDEX
from crfsdca.errors import NotFittedError
from crfsdca.features.sequences import SequenceData
from crfsdca.io import AttributeCorpus, DenseCorpus, TokenCorpus

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

Padding = Literal["none", "per-template", "positional"]
PAD = "__PAD__"
BOS, EOS = "__BOS__", "__EOS__"
SHORT = "__SHORT__"


def word_shape(word: str) -> str:
    """``X`` for each ASCII capital A-Z, ``x`` for any other character ("CV70" -> "XXxx")."""
    return "".join("X" if "A" <= c <= "Z" else "x" for c in word)


def suffix3(word: str) -> str:
    """The last 3 characters of a word longer than 3, else one shared value ``__SHORT__``."""
    return word[-3:] if len(word) > 3 else SHORT


DERIVED_FUNCTIONS: dict[str, Callable[[str], str]] = {
    "shape": word_shape,
    "suf3": suffix3,
    "lower": str.lower,
}


# ----------------------------------------------------------------------------- templates


@dataclass(frozen=True)
class Template:
    """A named tuple of ``(field, offset)`` parts."""

    name: str
    parts: tuple[tuple[str, int], ...]

    def __post_init__(self) -> None:
        parts = tuple((str(f), int(o)) for f, o in self.parts)
        if not parts:
            raise ValueError(f"template {self.name!r} needs at least one (field, offset) part")
        object.__setattr__(self, "parts", parts)

    @classmethod
    def of(cls, *parts: tuple[str, int]) -> Template:
        """Template named CRFsuite-style from its parts: ``of(("w", -1), ("w", 0))`` is
        ``w[-1]|w[0]``."""
        return cls("|".join(f"{f}[{o}]" for f, o in parts), tuple(parts))


@dataclass(frozen=True)
class TemplateSet:
    """Everything that defines the attributes of a token corpus.

    Parameters
    ----------
    name : str
        Registry key and the ``template`` entry of ``SequenceData.meta``.
    field_names : tuple of str
        Names of the corpus's token fields, by position (labels excluded).
    templates : tuple of Template
    lowercase_fields : tuple of str
        Fields lowercased before use (after the derived fields are computed).
    derived_fields : tuple of (name, function, source)
        Extra fields ``DERIVED_FUNCTIONS[function](source field)``, e.g. ``("shape", "shape",
        "w")``, computed from the raw source field.
    min_count : int
        Keep a template value when it occurs at least this often in the training corpus.
    padding : {"none", "per-template", "positional"}
        Out-of-range offsets (see the module docstring).
    bos_eos : bool
        Add attributes ``__BOS__`` to the first and ``__EOS__`` to the last token (CRFsuite).
    default_bias_rows : int
        Number of bias rows (0 or 3) a model trained on these attributes uses by default.
    """

    name: str
    field_names: tuple[str, ...]
    templates: tuple[Template, ...]
    lowercase_fields: tuple[str, ...] = ()
    derived_fields: tuple[tuple[str, str, str], ...] = ()
    min_count: int = 1
    padding: Padding = "none"
    bos_eos: bool = False
    default_bias_rows: int = 3

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "field_names", tuple(self.field_names))
        set_(self, "templates", tuple(self.templates))
        set_(self, "lowercase_fields", tuple(self.lowercase_fields))
        set_(self, "derived_fields", tuple(tuple(d) for d in self.derived_fields))
        known = set(self.field_names)
        for d in self.derived_fields:
            if len(d) != 3 or d[1] not in DERIVED_FUNCTIONS or d[2] not in known:
                raise ValueError(
                    f"template set {self.name!r}: derived field {d!r} must be (name, function,"
                    f" source) with function in {sorted(DERIVED_FUNCTIONS)} and a known source"
                )
            known.add(d[0])
        used = {f for t in self.templates for f, _ in t.parts} | set(self.lowercase_fields)
        if used - known:
            raise ValueError(
                f"template set {self.name!r}: unknown fields {sorted(used - known)}; "
                f"expected fields among {sorted(known)}"
            )
        if not self.templates or len({t.name for t in self.templates}) != len(self.templates):
            raise ValueError(f"template set {self.name!r}: expected non-empty unique templates")
        if self.padding not in ("none", "per-template", "positional"):
            raise ValueError(
                f"padding must be none, per-template or positional; got {self.padding}"
            )
        if self.min_count < 1:
            raise ValueError(f"min_count must be >= 1; got {self.min_count}")
        if self.default_bias_rows not in (0, 3):
            raise ValueError(f"default_bias_rows must be 0 or 3; got {self.default_bias_rows}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable definition; :meth:`from_dict` inverts it."""
        return {
            "name": self.name,
            "field_names": list(self.field_names),
            "templates": [[t.name, [list(p) for p in t.parts]] for t in self.templates],
            "lowercase_fields": list(self.lowercase_fields),
            "derived_fields": [list(d) for d in self.derived_fields],
            "min_count": self.min_count,
            "padding": self.padding,
            "bos_eos": self.bos_eos,
            "default_bias_rows": self.default_bias_rows,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TemplateSet:
        """Build from :meth:`to_dict` output; a template may also be a bare list of parts."""
        d = dict(d)
        d["templates"] = tuple(_template_from_json(t) for t in d["templates"])
        return cls(**d)


def _template_from_json(t: Any) -> Template:
    if isinstance(t, Template):
        return t
    if len(t) == 2 and isinstance(t[0], str):
        return Template(t[0], tuple(tuple(p) for p in t[1]))
    return Template.of(*(tuple(p) for p in t))


def _ngrams(field: str, offsets: Sequence[Sequence[int]]) -> list[Template]:
    return [Template.of(*((field, o) for o in group)) for group in offsets]


_CHUNKING = (
    _ngrams("w", [[-2], [-1], [0], [1], [2], [-1, 0], [0, 1]])
    + _ngrams("pos", [[-2], [-1], [0], [1], [2], [-2, -1], [-1, 0], [0, 1], [1, 2]])
    + _ngrams("pos", [[-2, -1, 0], [-1, 0, 1], [0, 1, 2]])
)
_NER = (
    _ngrams("w", [[0], [-1], [1], [-1, 0], [0, 1]])
    + _ngrams("pos", [[-2], [-1], [0], [1], [2], [-2, -1], [-1, 0], [0, 1], [1, 2]])
    + _ngrams("pos", [[-2, -1, 0], [-1, 0, 1], [0, 1, 2]])
    + _ngrams("shape", [[-1], [0], [1]])
)
_POS = (
    _ngrams("w", [[0], [-1], [-2], [1], [2], [-1, 0], [0, 1]])
    + _ngrams("suf3", [[-1], [0], [1]])
    + _ngrams("shape", [[-1], [0], [1]])
)

#: Built-in template sets: CRFsuite's chunking.py (conll, crfsuite-chunking) and SAG4CRF's
#: encodings (ner, pos);
#: tests/test_attributes.py checks their sizes against Le Priol et al. (2018, Table 1).
TEMPLATE_SETS: dict[str, TemplateSet] = {
    ts.name: ts
    for ts in (
        TemplateSet(
            "conll", ("w", "pos"), tuple(_CHUNKING), lowercase_fields=("w",), min_count=3,
            padding="per-template",
        ),
        TemplateSet(
            "ner", ("w", "pos"), tuple(_NER), derived_fields=(("shape", "shape", "w"),),
            padding="positional",
        ),
        TemplateSet(
            "pos", ("w",), tuple(_POS), min_count=3, padding="positional",
            derived_fields=(("shape", "shape", "w"), ("suf3", "suf3", "w")),
        ),
        TemplateSet(
            "crfsuite-chunking", ("w", "pos"), tuple(_CHUNKING), padding="none", bos_eos=True,
            default_bias_rows=0,
        ),
    )
}  # fmt: skip


# ----------------------------------------------------------------------------- encoders


class _Encoder:
    """Shared label handling: names in order of first appearance, unseen labels -> -1."""

    kind = ""

    def __init__(self, label_names: Sequence[str] | None = None) -> None:
        self._fixed_labels = label_names is not None
        self._label_index: dict[str, int] | None = None
        if label_names is not None:
            self._label_index = {name: i for i, name in enumerate(label_names)}
        self._fitted = False

    @property
    def label_names(self) -> tuple[str, ...]:
        """Label names; label id ``k`` is ``label_names[k]``."""
        self._check_fitted()
        assert self._label_index is not None
        return tuple(self._label_index)

    @property
    def n_attributes(self) -> int:
        raise NotImplementedError

    @property
    def default_bias_rows(self) -> int:
        return 3

    def fit(self, corpus: Any) -> _Encoder:
        raise NotImplementedError

    def transform(self, corpus: Any) -> SequenceData:
        raise NotImplementedError

    def fit_transform(self, corpus: Any) -> SequenceData:
        """``fit(corpus)`` then ``transform(corpus)``."""
        return self.fit(corpus).transform(corpus)

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def _check_fitted(self) -> None:
        if not self._fitted:
            raise NotFittedError(f"this {type(self).__name__} is not fitted; call fit() first")

    def _fit_labels(self, labels: list[list[str]]) -> None:
        if not self._fixed_labels:
            first_seen = dict.fromkeys(chain.from_iterable(labels))
            self._label_index = {name: i for i, name in enumerate(first_seen)}

    def _labels_dict(self) -> dict[str, Any]:
        return {"label_names": list(self.label_names), "fixed_labels": self._fixed_labels}

    def _pack(
        self,
        corpus: Any,
        lengths: list[int],
        attr_offsets: NDArray[np.int64],
        attr_ids: NDArray[np.int64],
        attr_values: NDArray[np.float64],
        meta: dict[str, Any],
    ) -> SequenceData:
        """Assemble the SequenceData; ``lengths`` = items per sequence (checked vs labels)."""
        assert self._label_index is not None
        label_lengths = [len(s) for s in corpus.labels]
        if label_lengths != list(lengths):
            pairs = enumerate(zip(lengths, label_lengths, strict=False))
            i = next((i for i, (a, b) in pairs if a != b), None)
            if i is None:
                msg = f"{len(lengths)} sequences but {len(label_lengths)} label sequences"
            else:
                msg = f"sequence {i}: {lengths[i]} items but {label_lengths[i]} labels"
            raise ValueError(f"{corpus.path}: {msg}")
        flat = chain.from_iterable(corpus.labels)
        n_items = attr_offsets.size - 1
        labels = np.fromiter(map(self._label_index.get, flat, repeat(-1)), INDEX, count=n_items)
        meta = {"encoder": self.kind, "source": corpus.path, **meta}
        meta["default_bias_rows"] = self.default_bias_rows
        meta["n_unknown_labels"] = int(np.count_nonzero(labels < 0))
        unknown = ()
        if meta["n_unknown_labels"]:
            flat = chain.from_iterable(corpus.labels)
            unknown = tuple(y for y in flat if y not in self._label_index)
        return SequenceData(
            seq_offsets=_offsets(np.asarray(lengths, INDEX)),
            attr_offsets=attr_offsets,
            attr_ids=attr_ids,
            attr_values=attr_values,
            labels=labels,
            n_attributes=self.n_attributes,
            label_names=self.label_names,
            name=str(corpus.path).rsplit("/", 1)[-1],
            meta=meta,
            unknown_label_names=unknown,
        )


def _check_type(corpus: Any, expected: type, encoder: _Encoder) -> None:
    if not isinstance(corpus, expected):
        name = type(encoder).__name__
        raise TypeError(f"{name} needs a {expected.__name__}; got {type(corpus).__name__}")


def _offsets(counts: NDArray[np.int64]) -> NDArray[np.int64]:
    out = np.zeros(counts.size + 1, INDEX)
    np.cumsum(counts, out=out[1:])
    return out


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
        starts = _offsets(lengths_)[:-1]
        n_items = int(lengths_.sum())
        position = np.arange(n_items, dtype=INDEX) - np.repeat(starts, lengths_)
        return cls(position, np.repeat(lengths_, lengths_))


@dataclass
class _Featurised:
    """Template values of every token: ``values[j][i]`` for template j, token i."""

    values: list[list[str]]
    valid: list[NDArray[np.bool_] | None]  # None: every token has a value
    layout: _Layout = field(repr=False)


class TemplateEncoder(_Encoder):
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
        return _offsets(np.array([len(v) for v in self.vocabularies], INDEX))

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
        _check_type(corpus, TokenCorpus, self)
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
        return self._pack(corpus, lengths, _offsets(mask.sum(1)), attr_ids, values, meta)


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


class AttributeEncoder(_Encoder):
    """CRFsuite attribute files -> attributes named in the file, values = weights.

    The vocabulary holds every attribute name of the training corpus in order of first
    appearance. A name repeated within one item is summed into one entry; zero values are
    dropped. No bias rows by default (CRFsuite's model).
    """

    kind = "attribute"

    def __init__(self, label_names: Sequence[str] | None = None) -> None:
        super().__init__(label_names)
        self.vocabulary: dict[str, int] = {}

    @property
    def n_attributes(self) -> int:
        self._check_fitted()
        return len(self.vocabulary)

    @property
    def default_bias_rows(self) -> int:
        return 0

    def fit(self, corpus: AttributeCorpus) -> AttributeEncoder:
        """Collect attribute and label names from a training corpus."""
        _check_type(corpus, AttributeCorpus, self)
        pairs = chain.from_iterable(chain.from_iterable(corpus.attributes))
        first_seen = dict.fromkeys(map(itemgetter(0), pairs))
        self.vocabulary = {name: i for i, name in enumerate(first_seen)}
        self._fit_labels(corpus.labels)
        self._fitted = True
        return self

    def transform(self, corpus: AttributeCorpus) -> SequenceData:
        """Encode a corpus; attributes unseen in training are ignored."""
        self._check_fitted()
        _check_type(corpus, AttributeCorpus, self)
        items = list(chain.from_iterable(corpus.attributes))
        sizes = np.fromiter(map(len, items), INDEX, len(items))
        pairs = list(chain.from_iterable(items))
        names = map(itemgetter(0), pairs)
        ids = np.fromiter(map(self.vocabulary.get, names, repeat(-1)), INDEX, len(pairs))
        values = np.fromiter(map(itemgetter(1), pairs), FLOAT, len(pairs))
        rows = np.repeat(np.arange(len(items), dtype=INDEX), sizes)
        keep = ids >= 0
        # one entry per (item, attribute): sort by key, sum duplicates
        keys, inverse = np.unique(rows[keep] * self.n_attributes + ids[keep], return_inverse=True)
        sums = np.bincount(inverse, weights=values[keep], minlength=keys.size)
        nonzero = sums != 0
        keys, sums = keys[nonzero], sums[nonzero]
        counts = np.bincount(keys // max(self.n_attributes, 1), minlength=len(items))
        attr_ids = keys % max(self.n_attributes, 1)
        lengths = [len(s) for s in corpus.attributes]
        meta = {"template": "crfsuite"}
        return self._pack(corpus, lengths, _offsets(counts), attr_ids, sums, meta)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable state: attribute names in id order and labels."""
        self._check_fitted()
        return {"kind": self.kind, "vocabulary": list(self.vocabulary), **self._labels_dict()}


class DenseEncoder(_Encoder):
    """Dense corpus (OCR pixels) -> attribute ``j`` = column ``j``; only non-zeros are stored.

    Parameters
    ----------
    n_dims : int, optional
        Expected number of columns; taken from the training corpus when None.
    label_names : sequence of str, optional
        Fix the label order (``make_encoder("ocr")`` uses a-z, as the SAG4CRF files do).
    """

    kind = "dense"

    def __init__(self, n_dims: int | None = None, label_names: Sequence[str] | None = None) -> None:
        super().__init__(label_names)
        self.n_dims = n_dims

    @property
    def n_attributes(self) -> int:
        self._check_fitted()
        assert self.n_dims is not None
        return self.n_dims

    def fit(self, corpus: DenseCorpus) -> DenseEncoder:
        """Check the dimension and collect the label names."""
        self._check_dims(corpus)
        self.n_dims = corpus.n_dims
        self._fit_labels(corpus.labels)
        self._fitted = True
        return self

    def transform(self, corpus: DenseCorpus) -> SequenceData:
        """Encode a corpus; its number of columns must equal ``n_dims``."""
        self._check_fitted()
        self._check_dims(corpus)
        values = np.asarray(corpus.values)
        mask = values != 0
        attr_ids = np.nonzero(mask)[1].astype(INDEX)
        attr_values = values[mask].astype(FLOAT)
        meta = {"template": "dense"}
        lengths = np.diff(corpus.seq_offsets).tolist()
        return self._pack(corpus, lengths, _offsets(mask.sum(1)), attr_ids, attr_values, meta)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable state: dimension and labels."""
        self._check_fitted()
        return {"kind": self.kind, "n_dims": self.n_dims, **self._labels_dict()}

    def _check_dims(self, corpus: DenseCorpus) -> None:
        _check_type(corpus, DenseCorpus, self)
        if self.n_dims is not None and corpus.n_dims != self.n_dims:
            raise ValueError(f"{corpus.path}: expected {self.n_dims} columns, got {corpus.n_dims}")


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
