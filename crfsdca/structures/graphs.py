"""Graph structures of CRF examples: trees and forests given by parent arrays.

A :class:`Tree` is built from ``parents`` (n,) with ``-1`` for a root and, optionally,
``edge_types`` (n,): the type of the edge between each node and its parent (entries of roots are
ignored), each type owning one K x K transition block tied across examples (e.g. one per
dependency relation or per direction). Construction checks the parent array (indices in range,
no self-loop, no cycle) and computes what the kernels need: a node ``order`` with every parent
before its children (roots in index order, then breadth first), the children of each node as a
CSR (``children_start``, ``children``), and the node degrees. A linear chain of length T is
``chain_graph(T)``: node t's parent is t - 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from crfsdca._dtypes import INDEX
from crfsdca.errors import GraphError

__all__ = ["Tree", "chain_graph"]


@dataclass(frozen=True, eq=False)
class Tree:
    """A tree or forest over ``n_nodes`` nodes (see the module docstring)."""

    parents: NDArray[np.int64]
    edge_types: NDArray[np.int64] | None = None
    example: int | None = None  # the example's index, named in errors
    order: NDArray[np.int64] = field(init=False)
    children_start: NDArray[np.int64] = field(init=False)
    children: NDArray[np.int64] = field(init=False)
    degrees: NDArray[np.int64] = field(init=False)

    def __post_init__(self) -> None:
        parents = np.asarray(self.parents)
        where = "" if self.example is None else f"example {self.example}: "
        if parents.ndim != 1 or parents.size == 0:
            raise GraphError(
                f"{where}parents must be a non-empty 1-d array; got shape {parents.shape}"
            )
        if not np.issubdtype(parents.dtype, np.integer):
            raise GraphError(f"{where}parents must be integers; got {parents.dtype}")
        parents = np.ascontiguousarray(parents, INDEX)
        n = parents.size
        bad = np.flatnonzero((parents < -1) | (parents >= n))
        if bad.size:
            v = int(bad[0])
            raise GraphError(
                f"{where}node {v}: parent {int(parents[v])} is out of range; expected -1 (a root)"
                f" or a node index in [0, {n})"
            )
        loops = np.flatnonzero(parents == np.arange(n))
        if loops.size:
            raise GraphError(f"{where}node {int(loops[0])}: is its own parent (a self-loop)")
        types = np.zeros(n, INDEX) if self.edge_types is None else np.asarray(self.edge_types)
        if types.shape != (n,) or not np.issubdtype(types.dtype, np.integer):
            raise GraphError(
                f"{where}edge_types must be {n} integers, one per node; got {types.shape}"
                f" {types.dtype}"
            )
        types = np.ascontiguousarray(types, INDEX)
        if np.any(types[parents >= 0] < 0):
            v = int(np.flatnonzero((types < 0) & (parents >= 0))[0])
            raise GraphError(f"{where}node {v}: edge type {int(types[v])} is negative")
        order, start, kids = _order(parents)
        if order.size < n:  # nodes never reached from a root lie on a cycle
            unreached = np.setdiff1d(np.arange(n), order)
            raise GraphError(
                f"{where}node {int(unreached[0])}: lies on a cycle of parents; expected a tree"
                " or forest (every node reaches a root, -1)"
            )
        degrees = np.diff(start) + (parents >= 0)
        object.__setattr__(self, "parents", parents)
        object.__setattr__(self, "edge_types", types)
        object.__setattr__(self, "order", order)
        object.__setattr__(self, "children_start", start)
        object.__setattr__(self, "children", kids)
        object.__setattr__(self, "degrees", degrees.astype(INDEX))

    @property
    def n_nodes(self) -> int:
        return int(self.parents.size)

    @property
    def n_edges(self) -> int:
        return int(np.count_nonzero(self.parents >= 0))

    @property
    def n_edge_types(self) -> int:
        """1 + the largest edge type used (0 types for a graph without edges)."""
        used = self.edge_types[self.parents >= 0]
        return int(used.max()) + 1 if used.size else 0


def _order(
    parents: NDArray[np.int64],
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """(order, children_start, children): breadth first from the roots, in index order."""
    n = parents.size
    has_parent = parents >= 0
    counts = np.bincount(parents[has_parent], minlength=n)
    start = np.zeros(n + 1, INDEX)
    np.cumsum(counts, out=start[1:])
    kids = np.argsort(np.where(has_parent, parents, n), kind="stable")[: int(has_parent.sum())]
    kids = np.ascontiguousarray(kids, INDEX)
    order = list(np.flatnonzero(~has_parent).tolist())
    head = 0
    while head < len(order):
        v = order[head]
        head += 1
        order.extend(kids[start[v] : start[v + 1]].tolist())
    return np.asarray(order, INDEX), start, kids


def chain_graph(T: int) -> Tree:
    """The linear chain of T nodes as a tree: node t's parent is t - 1."""
    if T < 1:
        raise GraphError(f"a chain needs at least one node; got T = {T}")
    return Tree(np.arange(-1, T - 1, dtype=INDEX))
