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
    """The :class:`SequenceLayout` of a :class:`~crfsdca.features.sequences.SequenceData`."""
    so, ao, ids, vals, labels = data.arrays()
    n = so.size - 1
    per_seq = ao[so[1:]] - ao[so[:-1]]
    seq_of_entry = np.repeat(np.arange(n, dtype=np.int64), per_seq)
    # one stable sort of the key (sequence, attribute): the permutation of
    # np.lexsort((ids, seq_of_entry)) in a third of its time
    key = seq_of_entry * (int(ids.max(initial=0)) + 1) + ids
    order = np.argsort(key, kind="stable")
    s_seq, s_ids = seq_of_entry[order], ids[order]
    new = np.ones(ids.size, dtype=bool)
    new[1:] = (s_seq[1:] != s_seq[:-1]) | (s_ids[1:] != s_ids[:-1])
    unique_rank = np.cumsum(new) - 1
    uattr_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(s_seq[new], minlength=n), out=uattr_offsets[1:])
    entry_slot = np.empty(ids.size, np.int64)
    entry_slot[order] = unique_rank
    entry_slot -= uattr_offsets[seq_of_entry]
    slot_attrs = np.ascontiguousarray(s_ids[new])
    return SequenceLayout(so, ao, ids, vals, labels, entry_slot, uattr_offsets, slot_attrs)


def max_unique(layout: SequenceLayout) -> int:
    """The largest number of distinct attributes in one sequence."""
    offsets = layout.uattr_offsets
    return int(np.diff(offsets).max()) if offsets.size > 1 else 0
