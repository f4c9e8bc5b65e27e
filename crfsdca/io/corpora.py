"""Corpus containers returned by the readers of :mod:`crfsdca.io`.

- :class:`TokenCorpus`: tokens with string fields and one label each (CoNLL, CoNLL-U);
- :class:`AttributeCorpus`: items as lists of ``(attribute name, value)`` pairs (CRFsuite);
- :class:`DenseCorpus`: one dense vector per token (Taskar's OCR pixels).

Every container records the file it came from and the 1-based line of the first token of each
sequence, so that later errors can point back into the file. Encoders in
:mod:`crfsdca.features.attributes` turn a corpus into a packed
:class:`~crfsdca.features.sequences.SequenceData`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from crfsdca._dtypes import INDEX

__all__ = ["AttributeCorpus", "DenseCorpus", "TokenCorpus"]

#: the data formats the readers of crfsdca.io read (``--format`` on the command line)
FORMATS = ("conll", "conllu", "ocr", "crfsuite")


def _take(items: list, indices: Sequence[int] | slice) -> list:
    if not items:
        return []
    if isinstance(indices, slice):
        return items[indices]
    return [items[int(i)] for i in indices]


class _ListCorpus:
    """Shared methods of the corpora stored as one Python list per sequence."""

    _per_sequence: tuple[str, ...] = ()
    labels: list[list[str]]

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def n_tokens(self) -> int:
        return sum(map(len, self.labels))

    def subset(self, indices: Sequence[int] | slice) -> Any:
        """The sequences at ``indices``, in that order."""
        return replace(self, **{k: _take(getattr(self, k), indices) for k in self._per_sequence})

    def head(self, n: int) -> Any:
        """The first ``n`` sequences."""
        return self.subset(slice(0, n))


@dataclass(eq=False)
class TokenCorpus(_ListCorpus):
    """Sequences of tokens with string fields and one label per token.

    ``tokens[i][t]`` is the tuple of fields of token ``t`` of sequence ``i`` (label excluded),
    named by ``field_names``; ``labels[i][t]`` its label; ``lines[i]`` the 1-based line of the
    first token of sequence ``i`` in ``path``; ``heads[i][t]`` (CoNLL-U only, else empty) the
    0-based index of token t's syntactic head, -1 for the root.
    """

    tokens: list[list[tuple[str, ...]]]
    labels: list[list[str]]
    field_names: tuple[str, ...]
    path: str = ""
    lines: list[int] = field(default_factory=list)
    heads: list[list[int]] = field(default_factory=list)
    head_problem: tuple[int, str] | None = None
    _per_sequence = ("tokens", "labels", "lines", "heads")


@dataclass(eq=False)
class AttributeCorpus(_ListCorpus):
    """Sequences of items, each a list of ``(attribute name, value)`` pairs, with labels."""

    attributes: list[list[list[tuple[str, float]]]]
    labels: list[list[str]]
    path: str = ""
    lines: list[int] = field(default_factory=list)
    _per_sequence = ("attributes", "labels", "lines")


@dataclass(eq=False)
class DenseCorpus(_ListCorpus):
    """Sequences of dense attribute vectors (e.g. OCR pixels) with labels.

    ``values`` (n_tokens, n_dims) holds all tokens; sequence ``i`` is rows ``seq_offsets[i]`` to
    ``seq_offsets[i + 1]``; ``labels[i]`` its labels; ``folds[i]`` (int64) its cross-validation
    fold; ``lines[i]`` the 1-based line of its first token.
    """

    values: NDArray[Any]
    seq_offsets: NDArray[np.int64]
    labels: list[list[str]]
    folds: NDArray[np.int64]
    path: str = ""
    lines: list[int] = field(default_factory=list)

    @property
    def n_dims(self) -> int:
        return int(self.values.shape[1])

    def subset(self, indices: Sequence[int] | slice) -> DenseCorpus:
        """The sequences at ``indices``, in that order."""
        idx = np.arange(len(self))[indices]
        starts, lengths = self.seq_offsets[idx], np.diff(self.seq_offsets)[idx]
        offsets = np.zeros(idx.size + 1, INDEX)
        np.cumsum(lengths, out=offsets[1:])
        rows = np.arange(offsets[-1]) - np.repeat(offsets[:-1] - starts, lengths)
        return replace(
            self,
            values=self.values[rows],
            seq_offsets=offsets,
            labels=_take(self.labels, idx),
            folds=self.folds[idx],
            lines=_take(self.lines, idx),
        )
