"""Packed storage of a set of labelled sequences.

A :class:`SequenceData` holds ``n_sequences`` sequences with ``n_items`` tokens in total as flat
arrays (no per-sequence Python objects):

- ``seq_offsets`` (n_sequences + 1,) int64: tokens of sequence ``i`` are ``seq_offsets[i]`` to
  ``seq_offsets[i + 1]``;
- ``attr_offsets`` (n_items + 1,) int64: the active attributes of token ``t`` (global token index)
  are entries ``attr_offsets[t]`` to ``attr_offsets[t + 1]`` of
- ``attr_ids`` (nnz,) int64 in ``[0, n_attributes)`` and ``attr_values`` (nnz,) float64;
- ``labels`` (n_items,) int64 in ``[0, n_labels)``, or ``-1`` for a label the model does not know
  (e.g. ``I-LST`` in the CoNLL-2000 test set): such a token always counts as an error;
- ``unknown_label_names``: the original gold tag of every ``-1`` token, in token order (empty
  when not known), so that chunk scores read the gold tags as ``conlleval`` does.

Dense attributes (OCR pixels) use the same layout with their non-zero entries.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from crfsdca._dtypes import FLOAT, INDEX, LABEL


@dataclass(frozen=True, eq=False)
class SequenceData:
    """Labelled sequences packed in CSR form (see the module docstring)."""

    seq_offsets: NDArray[np.int64]
    attr_offsets: NDArray[np.int64]
    attr_ids: NDArray[np.int64]
    attr_values: NDArray[np.float64]
    labels: NDArray[np.int64]
    n_attributes: int
    label_names: tuple[str, ...]
    name: str = ""
    meta: dict = field(default_factory=dict)
    unknown_label_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "seq_offsets", np.ascontiguousarray(self.seq_offsets, INDEX))
        object.__setattr__(self, "attr_offsets", np.ascontiguousarray(self.attr_offsets, INDEX))
        object.__setattr__(self, "attr_ids", np.ascontiguousarray(self.attr_ids, INDEX))
        object.__setattr__(self, "attr_values", np.ascontiguousarray(self.attr_values, FLOAT))
        object.__setattr__(self, "labels", np.ascontiguousarray(self.labels, LABEL))
        object.__setattr__(self, "label_names", tuple(self.label_names))
        object.__setattr__(self, "unknown_label_names", tuple(self.unknown_label_names))
        self.validate()

    def validate(self) -> None:
        """Check the packed arrays for consistency; raise ValueError naming the problem."""
        so, ao = self.seq_offsets, self.attr_offsets
        if so.ndim != 1 or so.size < 1 or so[0] != 0:
            raise ValueError("seq_offsets must be a 1-d array starting at 0")
        if np.any(np.diff(so) < 1):
            bad = int(np.flatnonzero(np.diff(so) < 1)[0])
            raise ValueError(f"sequence {bad}: empty sequences are not allowed")
        n_items = int(so[-1])
        if ao.shape != (n_items + 1,) or ao[0] != 0 or np.any(np.diff(ao) < 0):
            raise ValueError(f"attr_offsets must be non-decreasing of length {n_items + 1}")
        nnz = int(ao[-1])
        if self.attr_ids.shape != (nnz,) or self.attr_values.shape != (nnz,):
            raise ValueError(f"attr_ids and attr_values must have length {nnz}")
        if nnz and (self.attr_ids.min() < 0 or self.attr_ids.max() >= self.n_attributes):
            raise ValueError(f"attribute ids must lie in [0, {self.n_attributes})")
        if not np.all(np.isfinite(self.attr_values)):
            raise ValueError("attribute values must be finite")
        if self.labels.shape != (n_items,):
            raise ValueError(f"labels must have length {n_items}; got {self.labels.shape}")
        if n_items and (self.labels.min() < -1 or self.labels.max() >= len(self.label_names)):
            raise ValueError(f"labels must lie in [-1, {len(self.label_names)})")
        n_unknown = int(np.count_nonzero(self.labels < 0))
        if self.unknown_label_names and len(self.unknown_label_names) != n_unknown:
            raise ValueError(
                f"unknown_label_names must name the {n_unknown} tokens labelled -1;"
                f" got {len(self.unknown_label_names)} names"
            )
        if set(self.unknown_label_names) & set(self.label_names):
            raise ValueError("unknown_label_names must not contain the model's labels")

    def gold_names_of_unknown(self) -> list[str | None] | None:
        """Per token: the original gold tag of a ``-1`` token, None elsewhere (None if unknown)."""
        if not self.unknown_label_names:
            return None
        out: list[str | None] = [None] * self.n_items
        unknown = np.flatnonzero(self.labels < 0).tolist()
        for t, name in zip(unknown, self.unknown_label_names, strict=True):
            out[t] = name
        return out

    @property
    def n_sequences(self) -> int:
        return int(self.seq_offsets.size - 1)

    @property
    def n_items(self) -> int:
        return int(self.seq_offsets[-1])

    @property
    def n_labels(self) -> int:
        return len(self.label_names)

    @property
    def lengths(self) -> NDArray[np.int64]:
        return np.diff(self.seq_offsets)

    @property
    def max_length(self) -> int:
        return int(self.lengths.max()) if self.n_sequences else 0

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The five kernel arrays: (seq_offsets, attr_offsets, attr_ids, attr_values, labels)."""
        return (self.seq_offsets, self.attr_offsets, self.attr_ids, self.attr_values, self.labels)

    def subset(self, indices: NDArray[np.integer] | slice) -> SequenceData:
        """The sequences at ``indices`` (in that order), repacked."""
        idx = np.arange(self.n_sequences)[indices]
        lengths = self.lengths[idx]
        seq_offsets = np.zeros(idx.size + 1, INDEX)
        np.cumsum(lengths, out=seq_offsets[1:])
        tokens = _ranges(self.seq_offsets[idx], lengths)
        n_attr = np.diff(self.attr_offsets)[tokens]
        attr_offsets = np.zeros(tokens.size + 1, INDEX)
        np.cumsum(n_attr, out=attr_offsets[1:])
        entries = _ranges(self.attr_offsets[tokens], n_attr)
        return SequenceData(
            seq_offsets=seq_offsets,
            attr_offsets=attr_offsets,
            attr_ids=self.attr_ids[entries],
            attr_values=self.attr_values[entries],
            labels=self.labels[tokens],
            n_attributes=self.n_attributes,
            label_names=self.label_names,
            name=self.name,
            meta=dict(self.meta),
            unknown_label_names=self._unknown_names_at(tokens),
        )

    def _unknown_names_at(self, tokens: NDArray[np.int64]) -> tuple[str, ...]:
        if not self.unknown_label_names:
            return ()
        rank = np.cumsum(self.labels < 0) - 1  # index into unknown_label_names of a -1 token
        chosen = tokens[self.labels[tokens] < 0]
        return tuple(self.unknown_label_names[r] for r in rank[chosen].tolist())

    def head(self, n: int) -> SequenceData:
        """The first ``n`` sequences (all of them when ``n`` is larger)."""
        return self.subset(slice(0, min(n, self.n_sequences)))

    def sequence_labels(self, i: int) -> NDArray[np.int64]:
        """Gold labels of sequence ``i``."""
        return self.labels[self.seq_offsets[i] : self.seq_offsets[i + 1]]


def _ranges(starts: NDArray[np.int64], counts: NDArray[np.int64]) -> NDArray[np.int64]:
    """Concatenate ``arange(s, s + c)`` for every (s, c) without a Python loop."""
    counts = np.asarray(counts, INDEX)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, INDEX)
    ends = np.cumsum(counts)
    out = np.ones(total, INDEX)
    out[0] = starts[0]
    nz = counts > 0
    s, e = np.asarray(starts, INDEX)[nz], ends[nz]
    # at the first element of each range jump from the previous range's last value
    out[e[:-1]] = s[1:] - (s[:-1] + counts[nz][:-1] - 1)
    out[0] = s[0]
    return np.cumsum(out)
