"""The per-sequence attribute layout the SDCA, SAG-NUS and OEG kernels read.

A chain step touches each distinct attribute of its sequence once: :func:`sequence_layout` maps
every attribute entry to its row among the distinct attributes of its sequence, so the primal
direction is accumulated in a small (U, K) block and scattered once. Plain numpy, computed once
per problem.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["SequenceLayout", "max_unique", "sequence_layout"]


class SequenceLayout(NamedTuple):
    """Packed sequences plus the map of attribute entries to per-sequence distinct attributes.

    ``entry_slot[p]`` is the row of entry p's attribute among the distinct attributes of its
    sequence i, listed in ``slot_attrs[uattr_offsets[i]:uattr_offsets[i + 1]]``.
    """

    seq_offsets: np.ndarray
    attr_offsets: np.ndarray
    attr_ids: np.ndarray
    attr_values: np.ndarray
    labels: np.ndarray
    entry_slot: np.ndarray
    uattr_offsets: np.ndarray
    slot_attrs: np.ndarray


def sequence_layout(data) -> SequenceLayout:
    """The :class:`SequenceLayout` of a :class:`~crfsdca.features.sequences.SequenceData`.

    One stable sort of the key (sequence, attribute) groups each sequence's entries by
    attribute; the sort keeps every sequence in its own range of entries, so the sequence of
    a sorted entry is that of the unsorted one. The keys and ranks are int32 when they fit (half
    the memory to sort and to touch for the first time)."""
    so, ao, ids, vals, labels = data.arrays()
    n, nnz = so.size - 1, ids.size
    bounds = ao[so]  # each sequence's first entry, then nnz
    width = int(ids.max(initial=0)) + 1
    itype = np.int32 if max(n * width, nnz + 1) < 2**31 else np.int64
    seq_of_entry = np.repeat(np.arange(n, dtype=itype), np.diff(bounds))
    order = np.argsort(seq_of_entry * itype(width) + ids.astype(itype), kind="stable")
    s_ids = ids[order]
    new = np.empty(nnz, dtype=bool)  # the first entry of each (sequence, attribute)
    new[:1] = True
    np.not_equal(s_ids[1:], s_ids[:-1], out=new[1:])
    new[bounds[(bounds > 0) & (bounds < nnz)]] = True
    seen = np.zeros(nnz + 1, itype)  # distinct attributes before each entry, all sequences
    np.cumsum(new, out=seen[1:])
    uattr_offsets = seen[bounds].astype(np.int64)
    entry_slot = np.empty(nnz, np.int64)
    entry_slot[order] = seen[1:]
    entry_slot -= 1 + uattr_offsets[seq_of_entry]
    slot_attrs = s_ids[new]
    return SequenceLayout(so, ao, ids, vals, labels, entry_slot, uattr_offsets, slot_attrs)


def max_unique(layout: SequenceLayout) -> int:
    """The largest number of distinct attributes in one sequence."""
    offsets = layout.uattr_offsets
    return int(np.diff(offsets).max()) if offsets.size > 1 else 0
