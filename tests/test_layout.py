"""The per-sequence attribute layout (``crfsdca.features.layout``) against its definition."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from crfsdca.features.layout import max_unique, sequence_layout
from crfsdca.features.sequences import SequenceData


@st.composite
def sequences(draw):
    """Packed sequences whose tokens have 0 to 4 attributes (repeats included), so some
    sequences have no attribute entry at all, the first and the last ones too."""
    A = draw(st.integers(1, 6))
    lengths = draw(st.lists(st.integers(1, 4), min_size=1, max_size=6))
    n_items = sum(lengths)
    per_token = draw(st.lists(st.integers(0, 4), min_size=n_items, max_size=n_items))
    ids = draw(st.lists(st.integers(0, A - 1), min_size=sum(per_token), max_size=sum(per_token)))
    return SequenceData(
        seq_offsets=np.concatenate([[0], np.cumsum(lengths)]),
        attr_offsets=np.concatenate([[0], np.cumsum(per_token)]),
        attr_ids=np.array(ids, np.int64),
        attr_values=np.ones(len(ids)),
        labels=np.zeros(n_items, np.int64),
        n_attributes=A,
        label_names=("x",),
    )


@settings(max_examples=200, deadline=None)
@given(sequences())
def test_each_entry_points_at_its_attribute_among_its_sequence_s_distinct_ones(data):
    layout = sequence_layout(data)
    so, ao, ids = data.seq_offsets, data.attr_offsets, data.attr_ids
    uo = layout.uattr_offsets
    assert uo[0] == 0 and uo.dtype == layout.entry_slot.dtype == np.int64
    for i in range(data.n_sequences):
        lo, hi = ao[so[i]], ao[so[i + 1]]
        distinct = layout.slot_attrs[uo[i] : uo[i + 1]]
        np.testing.assert_array_equal(distinct, np.unique(ids[lo:hi]))
        slots = layout.entry_slot[lo:hi]
        np.testing.assert_array_equal(distinct[slots], ids[lo:hi])
    assert max_unique(layout) == max(np.diff(uo), default=0)
