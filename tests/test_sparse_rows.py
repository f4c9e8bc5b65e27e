"""The row bookkeeping of a distributed round (``crfsdca.kernels.solvers.sparse_rows``) against the
numpy expressions it replaces, bit for bit, and the adaptive rule's block snapshot."""

from __future__ import annotations

import numpy as np
import pytest
from _synthetic import random_problem

from crfsdca.features.sequences import _ranges
from crfsdca.kernels.solvers import sparse_rows
from crfsdca.solvers.adaptive import Snapshot
from crfsdca.solvers.sdca import SDCA, SDCAConfig
from crfsdca.solvers.sparse_update import aggregate, apply, touched_rows


def _bits(a):
    return np.ascontiguousarray(a, np.float64).view(np.int64)


@pytest.mark.parametrize("n_attributes", [20, 5000])  # marks scanned / rows sorted
def test_touched_rows_are_numpys_unique_attribute_ids(n_attributes):
    problem = random_problem(seed=3, n=40, max_T=7, K=3, A=n_attributes)
    seqs = problem.train
    rng = np.random.default_rng(0)
    mark = np.zeros(n_attributes, np.bool_)
    for size in (0, 1, 5, 60):
        examples = rng.integers(0, seqs.n_sequences, size)  # repeats included
        so, ao = seqs.seq_offsets, seqs.attr_offsets
        idx = np.unique(examples)
        starts, ends = ao[so[idx]], ao[so[idx + 1]]
        expected = np.unique(seqs.attr_ids[_ranges(starts, ends - starts)])
        rows = touched_rows(seqs, examples, mark)
        assert rows.dtype == np.int64
        np.testing.assert_array_equal(rows, expected)
        assert not mark.any()  # left clean for the next round


def _update(rng, n_attributes, K, size):
    rows = np.sort(rng.choice(n_attributes, size, replace=False)).astype(np.int64)
    values = rng.standard_normal((size, K))
    values[rng.random((size, K)) < 0.2] = -0.0  # the sign of zero survives as numpy's
    return rows, values, rng.standard_normal(4)


def test_aggregate_and_apply_equal_numpys_sums_in_partition_order():
    rng = np.random.default_rng(1)
    A, K = 300, 5
    for P in (1, 2, 3, 5):
        parts = [_update(rng, A, K, int(rng.integers(0, 120))) for _ in range(P)]
        rows, values, tail = aggregate(parts)
        ref_rows = np.unique(np.concatenate([r for r, _, _ in parts]))
        ref = np.zeros((ref_rows.size, K))
        for r, v, _ in parts:
            ref[np.searchsorted(ref_rows, r)] += v
        np.testing.assert_array_equal(rows, ref_rows)
        np.testing.assert_array_equal(_bits(values), _bits(ref))
        w = rng.standard_normal(A * K + 4)
        expected = w.copy()
        expected[: A * K].reshape(A, K)[rows] += values
        expected[A * K :] += tail
        apply(w, (rows, values, tail), A, K)
        np.testing.assert_array_equal(_bits(w), _bits(expected))


def test_row_increments_and_copies_equal_numpys():
    rng = np.random.default_rng(2)
    A, K = 50, 4
    u, w = rng.standard_normal(A * K + 3), rng.standard_normal(A * K + 3)
    rows = np.array([0, 7, 8, 49], np.int64)
    expected = (u[: A * K].reshape(A, K)[rows] - w[: A * K].reshape(A, K)[rows]) / 1.5
    got = sparse_rows.row_increments(u, w, rows, K, 1.5)
    np.testing.assert_array_equal(_bits(got), _bits(expected))
    sparse_rows.copy_rows(u, w, rows, K)
    np.testing.assert_array_equal(u[: A * K].reshape(A, K)[rows], w[: A * K].reshape(A, K)[rows])
    others = np.setdiff1d(np.arange(A), rows)
    assert not np.any(u[: A * K].reshape(A, K)[others] == w[: A * K].reshape(A, K)[others])


def test_a_snapshot_restores_the_blocks_and_lists_their_runs():
    problem = random_problem(seed=4, n=12, max_T=6, K=3, A=30)
    state = SDCA(SDCAConfig()).initial_state(problem)
    dual, runs = state.dual, problem.structure.blocks.runs
    before = [a.copy() for a in (dual.log_edge, dual.log_node, dual.entropies)]
    blocks = np.array([5, 2, 5, 9], np.int64)
    snap = Snapshot(dual, runs, blocks)
    arrays = (dual.log_edge.reshape(-1), dual.log_node.reshape(-1))
    listed = list(snap.segments)
    expected = [  # (position of the block, array, start, stop, coef) of every run, in order
        (j, int(runs.dst[r]), int(runs.off[r]), int(runs.off[r] + runs.hi[r] - runs.lo[r]))
        for j, i in enumerate([2, 5, 9])
        for r in range(runs.start[i], runs.start[i + 1])
    ]
    assert [s[:4] for s in listed] == expected
    for _, src, start, stop, _, saved in listed:
        np.testing.assert_array_equal(saved, arrays[src][start:stop])
    for _, src, start, stop, _, _ in listed:  # a round moves these blocks
        arrays[src][start:stop] -= 1.0
    dual.entropies[[2, 5, 9]] = 0.0
    snap.restore(dual)
    for a, b in zip((dual.log_edge, dual.log_node, dual.entropies), before, strict=True):
        np.testing.assert_array_equal(a, b)
