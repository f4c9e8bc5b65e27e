"""Sparse Delta w of a distributed SDCA round: the rows of w that a round moved.

A round of m local steps moves the rows of the attributes of the m examples drawn, and the rows
after the attributes (bias rows, transition and factor blocks: the "tail", small and moved by
every step). Sending only those instead of the whole w makes a round's traffic scale with m,
not with the number of features, so short rounds (few epochs, see BENCHMARKS.md section 9) cost
little. Every partition keeps a replica of the global w and applies the driver's summed update;
the driver sums the partitions' updates in partition order, so the replicas and the driver's w
are equal bit for bit (and a cluster run equals the simulation).

An update is ``(rows, values, tail)``: sorted attribute rows (int64), their (len(rows), K)
increments and the tail's increment; or ``(None, dense, None)`` for a dense increment of the
whole w (the comparison variants that step from a fresh copy of w).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from crfsdca.kernels.solvers import sparse_rows

Update = tuple[Any, NDArray[np.float64], Any]


def touched_rows(
    seqs: Any, examples: NDArray[np.int64], mark: NDArray[np.bool_] | None = None
) -> NDArray[np.int64]:
    """Sorted distinct attribute ids of ``examples`` (indices into ``seqs``, a SequenceData);
    ``mark``: a scratch array of one False per attribute (made here when not given)."""
    if mark is None:
        mark = np.zeros(int(seqs.attr_ids.max(initial=-1)) + 1, np.bool_)
    examples = np.asarray(examples, np.int64)
    return sparse_rows.touched_rows(
        seqs.seq_offsets, seqs.attr_offsets, seqs.attr_ids, examples, mark
    )


def attribute_block(w: NDArray[np.float64], n_attributes: int, n_labels: int) -> np.ndarray:
    """The (A, K) view of the attribute rows of a flat w."""
    return w[: n_attributes * n_labels].reshape(n_attributes, n_labels)


def aggregate(parts: list[Update]) -> Update:
    """The sum of the partitions' updates, added in partition order (from zero)."""
    if any(rows is None for rows, _, _ in parts):
        dense = [v if rows is None else _densify(rows, v, t, parts) for rows, v, t in parts]
        return None, np.add.reduce(dense) if len(dense) > 1 else dense[0].copy(), None
    rows, values = parts[0][0][:0], parts[0][1][:0]
    tail = np.zeros_like(parts[0][2])
    for r, v, t in parts:  # each row's values: ((0 + v_0) + v_1) + ...
        rows, values = sparse_rows.sum_two(rows, values, r, v)
        tail += t
    return rows, values, tail


def apply(w: NDArray[np.float64], update: Update, n_attributes: int, n_labels: int) -> None:
    """w += update, in place."""
    rows, values, tail = update
    if rows is None:
        w += values
        return
    sparse_rows.add_rows(w, rows, values)
    w[n_attributes * n_labels :] += tail


def _densify(rows, values, tail, parts) -> NDArray[np.float64]:
    dense_size = next(v.size for r, v, _ in parts if r is None)
    out = np.zeros(dense_size)
    n_labels = values.shape[1]
    n_attributes = (dense_size - tail.size) // n_labels
    attribute_block(out, n_attributes, n_labels)[rows] = values
    out[n_attributes * n_labels :] = tail
    return out
