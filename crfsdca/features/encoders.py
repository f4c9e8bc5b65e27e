"""Encoders: the base that every encoder shares (label names, packing into
:class:`SequenceData`) and the two encoders of attributes given by the corpus itself.

:class:`AttributeEncoder` reads CRFsuite attribute files (names and weights per item) and
:class:`DenseEncoder` dense rows (OCR pixels); the template encoder, which computes attributes
from token fields, is :mod:`crfsdca.features.template_encoder`. Labels unseen in training get
id -1.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain, repeat
from operator import itemgetter
from typing import Any

import numpy as np
from numpy.typing import NDArray

from crfsdca._dtypes import FLOAT, INDEX
from crfsdca.errors import NotFittedError
from crfsdca.features.sequences import SequenceData
from crfsdca.io import AttributeCorpus, DenseCorpus

__all__ = ["AttributeEncoder", "BaseEncoder", "DenseEncoder", "check_corpus_type", "offsets_of"]


class BaseEncoder:
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

    def fit(self, corpus: Any) -> BaseEncoder:
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
            seq_offsets=offsets_of(np.asarray(lengths, INDEX)),
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


def check_corpus_type(corpus: Any, expected: type, encoder: BaseEncoder) -> None:
    if not isinstance(corpus, expected):
        name = type(encoder).__name__
        raise TypeError(f"{name} needs a {expected.__name__}; got {type(corpus).__name__}")


def offsets_of(counts: NDArray[np.int64]) -> NDArray[np.int64]:
    out = np.zeros(counts.size + 1, INDEX)
    np.cumsum(counts, out=out[1:])
    return out


class AttributeEncoder(BaseEncoder):
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
        check_corpus_type(corpus, AttributeCorpus, self)
        pairs = chain.from_iterable(chain.from_iterable(corpus.attributes))
        first_seen = dict.fromkeys(map(itemgetter(0), pairs))
        self.vocabulary = {name: i for i, name in enumerate(first_seen)}
        self._fit_labels(corpus.labels)
        self._fitted = True
        return self

    def transform(self, corpus: AttributeCorpus) -> SequenceData:
        """Encode a corpus; attributes unseen in training are ignored."""
        self._check_fitted()
        check_corpus_type(corpus, AttributeCorpus, self)
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
        return self._pack(corpus, lengths, offsets_of(counts), attr_ids, sums, meta)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable state: attribute names in id order and labels."""
        self._check_fitted()
        return {"kind": self.kind, "vocabulary": list(self.vocabulary), **self._labels_dict()}


class DenseEncoder(BaseEncoder):
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
        return self._pack(corpus, lengths, offsets_of(mask.sum(1)), attr_ids, attr_values, meta)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable state: dimension and labels."""
        self._check_fitted()
        return {"kind": self.kind, "n_dims": self.n_dims, **self._labels_dict()}

    def _check_dims(self, corpus: DenseCorpus) -> None:
        check_corpus_type(corpus, DenseCorpus, self)
        if self.n_dims is not None and corpus.n_dims != self.n_dims:
            raise ValueError(f"{corpus.path}: expected {self.n_dims} columns, got {corpus.n_dims}")
