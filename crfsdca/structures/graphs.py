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

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from crfsdca._dtypes import INDEX
from crfsdca.errors import GraphError

__all__ = ["Tree", "chain_graph", "trees"]


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

    @classmethod
    def _checked(cls, parents, edge_types, example, order, children_start, children, degrees):
        """A Tree from arrays already checked and derived (:func:`trees`)."""
        tree = object.__new__(cls)
        for name, value in (
            ("parents", parents), ("edge_types", edge_types), ("example", example),
            ("order", order), ("children_start", children_start), ("children", children),
            ("degrees", degrees),
        ):  # fmt: skip
            object.__setattr__(tree, name, value)
        return tree

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


#: the deepest forests :func:`trees` builds at once (one pass of numpy calls per level)
MAX_LEVELS = 256


def trees(parents: Sequence, edge_types: Sequence | None = None) -> tuple[Tree, ...]:
    """One :class:`Tree` per example of the parent sequences (and edge types) as int64 arrays,
    as ``Tree(parents[i], edge_types[i], example=i)`` builds it (the same arrays), computed for
    all examples at once (a corpus of dependency trees is thousands of small arrays). Any input
    the vectorised checks do not pass (a bad parent, a cycle, a wrong shape) is built one by
    one, so the error is :class:`Tree`'s own; so are forests of :data:`MAX_LEVELS` levels or
    more (one pass of numpy calls per level)."""
    arrays = [np.asarray(p, INDEX) for p in parents]
    types = None if edge_types is None else [np.asarray(t, INDEX) for t in edge_types]
    built = None if types is not None and len(types) != len(arrays) else _forest(arrays, types)
    if built is None:
        given = [None] * len(arrays) if types is None else types
        return tuple(
            Tree(p, t, example=i) for i, (p, t) in enumerate(zip(arrays, given, strict=True))
        )
    return built


def _well_formed(arrays: list[np.ndarray], sizes: list[int] | None) -> bool:
    """Whether every array is 1-d integer, non-empty (or of the given sizes)."""
    for i, a in enumerate(arrays):
        if a.ndim != 1 or not np.issubdtype(a.dtype, np.integer):
            return False
        if (a.size == 0) if sizes is None else (a.size != sizes[i]):
            return False
    return True


def _forest(arrays: list[np.ndarray], types: list[np.ndarray] | None) -> tuple[Tree, ...] | None:
    """The trees of :func:`trees` from the concatenated parent arrays; None where they are to
    be built one by one (:class:`Tree`'s checks raise the error)."""
    if not arrays or not _well_formed(arrays, None):
        return None
    sizes = np.array([a.size for a in arrays], INDEX)
    if types is not None and not _well_formed(types, sizes.tolist()):
        return None
    m, N = sizes.size, int(sizes.sum())
    offsets = np.zeros(m + 1, INDEX)
    np.cumsum(sizes, out=offsets[1:])
    example = np.repeat(np.arange(m, dtype=INDEX), sizes)
    local = np.arange(N, dtype=INDEX) - offsets[example]
    parents = np.concatenate(arrays).astype(INDEX)
    if np.any((parents < -1) | (parents >= sizes[example]) | (parents == local)):
        return None  # out of range or a self-loop
    has_parent = parents >= 0
    kinds = np.zeros(N, INDEX) if types is None else np.concatenate(types).astype(INDEX)
    if np.any(kinds[has_parent] < 0):
        return None
    up = np.where(has_parent, parents + offsets[example], -1)  # global parent index
    depth = _depths(up)
    if depth is None or depth.max() >= MAX_LEVELS:
        return None  # a cycle; or deep trees, cheaper one by one than level by level
    counts = np.bincount(up[has_parent], minlength=N)
    start = np.zeros(N + 1, INDEX)
    np.cumsum(counts, out=start[1:])
    kids = np.argsort(np.where(has_parent, up, N), kind="stable")[: int(has_parent.sum())]
    kids = kids.astype(INDEX, copy=False)
    rank = _breadth_first_ranks(up, depth, example, m)
    order = np.lexsort((rank, example)).astype(INDEX)
    degrees = (counts + has_parent).astype(INDEX)
    out = []
    for i in range(m):
        lo, hi = int(offsets[i]), int(offsets[i + 1])
        c0, c1 = int(start[lo]), int(start[hi])
        out.append(
            Tree._checked(
                parents[lo:hi], kinds[lo:hi], i, order[lo:hi] - lo, start[lo : hi + 1] - c0,
                kids[c0:c1] - lo, degrees[lo:hi],
            )
        )  # fmt: skip
    return tuple(out)


def _depths(up: NDArray[np.int64]) -> NDArray[np.int64] | None:
    """Each node's number of ancestors (``up``: global parent indices, -1 for roots), by pointer
    doubling; None if some node never reaches a root (it lies on a cycle or below one)."""
    jump = up.copy()  # an ancestor of each node, or -1 once the root is passed
    dist = (up >= 0).astype(INDEX)  # the steps from the node to jump (to its root at -1)
    for _ in range(int(up.size).bit_length() + 1):
        active = np.flatnonzero(jump >= 0)
        if active.size == 0:
            return dist
        via = jump[active]
        dist[active] += dist[via]  # numpy reads every right-hand side before it writes
        jump[active] = jump[via]
    return None


def _breadth_first_ranks(up, depth, example, m: int) -> NDArray[np.int64]:
    """Each node's place in its tree's breadth-first order (roots in index order, then level by
    level, a level's nodes by their parent's place, then by index: ``_order``'s queue)."""
    rank = np.empty(up.size, INDEX)
    placed = np.zeros(m, INDEX)  # nodes of each example on the levels above
    by_level = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[by_level], np.arange(int(depth.max()) + 2))
    for d in range(bounds.size - 1):
        nodes = by_level[bounds[d] : bounds[d + 1]]  # in index order
        key = (example[nodes],) if d == 0 else (rank[up[nodes]], example[nodes])
        nodes = nodes[np.lexsort(key)]  # stable: index order within equal keys
        ex = example[nodes]
        first = np.searchsorted(ex, ex, side="left")
        rank[nodes] = placed[ex] + np.arange(nodes.size) - first
        placed += np.bincount(ex, minlength=m)
    return rank
