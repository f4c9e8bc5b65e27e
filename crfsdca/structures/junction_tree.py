"""Junction trees of CRF examples: cliques of label variables joined in a clique tree.

An example has ``n_nodes`` label variables (its nodes, K labels each). A :class:`JunctionTree`
gives

- ``cliques``: tuples of node indices (at most :data:`MAX_CLIQUE` nodes each, no repeats); the
  order of a clique's nodes fixes the layout of its table: entry ``sum_p y_{c[p]} K^(m-1-p)``
  (first node most significant);
- ``clique_parents`` (C,): the clique tree, ``-1`` for a root (a forest of clique trees is
  allowed). When omitted it is inferred as a maximum-weight spanning forest over the separator
  sizes |c ∩ c'| (Kruskal, ties in clique-index order), which is a junction tree whenever one
  exists on these cliques (it compares all C^2 / 2 pairs: give the parents for examples with
  thousands of cliques);
- ``factors``: (scope, type) pairs, each scope a tuple of nodes contained in some clique; a type
  owns one weight block of K^arity entries tied across examples, so every scope of one type has
  the same arity. Each factor is assigned to the first clique that contains its scope, each node
  (whose unary scores come from its attributes) to the first clique that contains it.

Validation raises :class:`~crfsdca.errors.GraphError` naming the example, the clique or node and
what was expected: nodes out of range, repeated in a clique or in no clique, a clique larger than
MAX_CLIQUE, a clique-parent array out of range or with a cycle, the running-intersection property
(the cliques containing a node must form a connected subtree), a factor scope in no clique, and
one factor type used with two arities.

The separator of a non-root clique c is c ∩ parent(c), listed in c's node order; the kernels read
it as positions in c (``sep_child``) and in the parent (``sep_parent``), so projections of table
entries onto separators are digit arithmetic. :func:`second_order_chain` builds the junction tree
of a second-order chain (cliques of three consecutive labels, separators of two, bigram factors of
type 0 and trigram factors of type 1); :func:`junction_from_tree` turns a
:class:`~crfsdca.structures.graphs.Tree` into one (edge cliques, node separators, edge type =
factor type).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from crfsdca._dtypes import INDEX
from crfsdca.errors import GraphError
from crfsdca.structures.graphs import Tree, _order

__all__ = ["MAX_CLIQUE", "JunctionTree", "junction_from_tree", "second_order_chain"]

MAX_CLIQUE = 4  # nodes per clique: tables of K^4 entries


@dataclass(frozen=True, eq=False)
class JunctionTree:
    """Cliques, clique tree and factors of one example (see the module docstring)."""

    n_nodes: int
    cliques: tuple[tuple[int, ...], ...]
    clique_parents: NDArray[np.int64] | None = None
    factors: tuple[tuple[tuple[int, ...], int], ...] = ()
    example: int | None = None  # the example's index, named in errors
    arrays: dict[str, NDArray[np.int64]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        where = "" if self.example is None else f"example {self.example}: "
        n = int(self.n_nodes)
        if n < 1:
            raise GraphError(f"{where}a junction tree needs at least one node; got {n}")
        cliques = tuple(_clique(c, j, n, where) for j, c in enumerate(self.cliques))
        if not cliques:
            raise GraphError(f"{where}no cliques; expected at least one")
        home = np.full(n, -1, INDEX)  # first clique of each node
        for j, c in enumerate(cliques):
            for v in c:
                if home[v] < 0:
                    home[v] = j
        if np.any(home < 0):
            v = int(np.flatnonzero(home < 0)[0])
            raise GraphError(f"{where}node {v}: is in no clique; expected every node in one")
        if self.clique_parents is None:
            parents = _spanning_forest(cliques)
        else:
            parents = _check_parents(self.clique_parents, len(cliques), where)
        order, start, kids = _order(parents)
        if order.size < len(cliques):
            c = int(np.setdiff1d(np.arange(len(cliques)), order)[0])
            raise GraphError(
                f"{where}clique {c}: lies on a cycle of clique parents; expected a tree or forest"
            )
        _check_running_intersection(cliques, parents, n, where)
        factors = tuple(_factor(f, k, n, where) for k, f in enumerate(self.factors))
        arities: dict[int, int] = {}
        for k, (scope, t) in enumerate(factors):
            if arities.setdefault(t, len(scope)) != len(scope):
                raise GraphError(
                    f"{where}factor {k}: type {t} has arity {len(scope)} here but"
                    f" {arities[t]} in an earlier factor; expected one arity per type"
                )
        object.__setattr__(self, "n_nodes", n)
        object.__setattr__(self, "cliques", cliques)
        object.__setattr__(self, "clique_parents", parents)
        object.__setattr__(self, "factors", factors)
        arrays = _pack(cliques, parents, factors, home, where)
        arrays.update(order=order, child_start=start, children=kids)
        object.__setattr__(self, "arrays", arrays)

    @property
    def n_cliques(self) -> int:
        return len(self.cliques)

    @property
    def factor_arities(self) -> dict[int, int]:
        """{factor type: arity} of the types used here."""
        return {t: len(scope) for scope, t in self.factors}

    def separator(self, c: int) -> tuple[int, ...]:
        """The nodes c ∩ parent(c) in c's order (empty for a root)."""
        p = int(self.clique_parents[c])
        return () if p < 0 else tuple(v for v in self.cliques[c] if v in self.cliques[p])


def _clique(c: Sequence[int], j: int, n: int, where: str) -> tuple[int, ...]:
    nodes = tuple(int(v) for v in c)
    if not nodes:
        raise GraphError(f"{where}clique {j}: is empty; expected 1 to {MAX_CLIQUE} nodes")
    if len(nodes) > MAX_CLIQUE:
        raise GraphError(
            f"{where}clique {j}: has {len(nodes)} nodes; at most {MAX_CLIQUE} are supported"
            " (tables of K^|c| entries)"
        )
    for v in nodes:
        if not 0 <= v < n:
            raise GraphError(
                f"{where}clique {j}: node {v} is out of range; expected a node index in [0, {n})"
            )
    if len(set(nodes)) < len(nodes):
        v = next(v for v in nodes if nodes.count(v) > 1)
        raise GraphError(f"{where}clique {j}: node {v} appears twice; expected distinct nodes")
    return nodes


def _factor(f, k: int, n: int, where: str) -> tuple[tuple[int, ...], int]:
    try:
        scope, t = f
        scope, t = tuple(int(v) for v in scope), int(t)
    except (TypeError, ValueError):
        raise GraphError(f"{where}factor {k}: expected (scope tuple, type); got {f!r}") from None
    if not scope or len(set(scope)) < len(scope):
        raise GraphError(f"{where}factor {k}: scope {scope} must be non-empty and distinct")
    bad = [v for v in scope if not 0 <= v < n]
    if bad:
        raise GraphError(
            f"{where}factor {k}: node {bad[0]} is out of range; expected a node index in [0, {n})"
        )
    if t < 0:
        raise GraphError(f"{where}factor {k}: type {t} is negative; expected a type >= 0")
    return scope, t


def _check_parents(parents, C: int, where: str) -> NDArray[np.int64]:
    p = np.asarray(parents)
    if p.shape != (C,) or not np.issubdtype(p.dtype, np.integer):
        raise GraphError(
            f"{where}clique_parents must be {C} integers, one per clique; got {p.shape} {p.dtype}"
        )
    p = np.ascontiguousarray(p, INDEX)
    bad = np.flatnonzero((p < -1) | (p >= C) | (p == np.arange(C)))
    if bad.size:
        c = int(bad[0])
        raise GraphError(
            f"{where}clique {c}: parent {int(p[c])} is invalid; expected -1 (a root) or another"
            f" clique index in [0, {C})"
        )
    return p


def _spanning_forest(cliques: tuple[tuple[int, ...], ...]) -> NDArray[np.int64]:
    """Maximum-weight spanning forest over separator sizes, rooted at the lowest clique."""
    C = len(cliques)
    sets = [set(c) for c in cliques]
    pairs = [(-len(sets[a] & sets[b]), a, b) for a in range(C) for b in range(a + 1, C)]
    pairs = sorted(p for p in pairs if p[0] < 0)
    root = list(range(C))

    def find(a: int) -> int:
        while root[a] != a:
            root[a] = root[root[a]]
            a = root[a]
        return a

    adjacent: list[list[int]] = [[] for _ in range(C)]
    for _, a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            root[max(ra, rb)] = min(ra, rb)
            adjacent[a].append(b)
            adjacent[b].append(a)
    parents = np.full(C, -2, INDEX)
    for r in range(C):
        if parents[r] != -2:
            continue
        parents[r] = -1
        stack = [r]
        while stack:
            a = stack.pop()
            for b in sorted(adjacent[a]):
                if parents[b] == -2:
                    parents[b] = a
                    stack.append(b)
    return parents


def _check_running_intersection(cliques, parents: NDArray[np.int64], n: int, where: str) -> None:
    """The cliques holding a node form a subtree: in a forest, #edges = #cliques - 1."""
    count = np.zeros(n, INDEX)
    joined = np.zeros(n, INDEX)
    for c, nodes in enumerate(cliques):
        count[list(nodes)] += 1
        p = int(parents[c])
        if p >= 0:
            shared = [v for v in nodes if v in cliques[p]]
            joined[shared] += 1
    bad = np.flatnonzero(joined != count - 1)
    if bad.size:
        v = int(bad[0])
        holding = [c for c, nodes in enumerate(cliques) if v in nodes]
        raise GraphError(
            f"{where}node {v}: the cliques holding it {tuple(holding)} are not connected in the"
            " clique tree; expected a junction tree (running intersection property)"
        )


def _pack(cliques, parents, factors, home, where: str) -> dict[str, NDArray[np.int64]]:
    """CSR arrays of one example, indices local to it (see kernels.structures.junction)."""
    sizes = [len(c) for c in cliques]
    var_start = np.concatenate([[0], np.cumsum(sizes)]).astype(INDEX)
    sep_child, sep_parent, sep_sizes = [], [], []
    for c, nodes in enumerate(cliques):
        p = int(parents[c])
        shared = [] if p < 0 else [v for v in nodes if v in cliques[p]]
        sep_child += [nodes.index(v) for v in shared]
        sep_parent += [cliques[p].index(v) for v in shared]
        sep_sizes.append(len(shared))
    node_home = [[] for _ in cliques]
    for v, c in enumerate(home.tolist()):
        node_home[c].append(v)
    fac_home: list[list[int]] = [[] for _ in cliques]
    for k, (scope, _) in enumerate(factors):
        c = next((j for j, nodes in enumerate(cliques) if set(scope) <= set(nodes)), -1)
        if c < 0:
            raise GraphError(
                f"{where}factor {k}: scope {scope} lies in no clique; expected its nodes to be"
                " in one clique"
            )
        fac_home[c].append(k)
    fac_order = [k for ks in fac_home for k in ks]
    fac_pos = [
        cliques[c].index(v) for c, ks in enumerate(fac_home) for k in ks for v in factors[k][0]
    ]
    arity = [len(factors[k][0]) for k in fac_order]

    def csr(counts) -> NDArray[np.int64]:
        return np.concatenate([[0], np.cumsum(counts, dtype=INDEX)]).astype(INDEX)

    def arr(values) -> NDArray[np.int64]:
        return np.asarray(values, INDEX).reshape(-1)

    return {
        "var_start": var_start,
        "vars": arr([v for c in cliques for v in c]),
        "parent": parents,
        "sep_start": csr(sep_sizes),
        "sep_child": arr(sep_child),
        "sep_parent": arr(sep_parent),
        "node_start": csr([len(h) for h in node_home]),
        "node_ids": arr([v for h in node_home for v in h]),
        "node_pos": arr([cliques[c].index(v) for c, h in enumerate(node_home) for v in h]),
        "fac_start": csr([len(ks) for ks in fac_home]),
        "fac_type": arr([factors[k][1] for k in fac_order]),
        "fac_pos_start": csr(arity),
        "fac_pos": arr(fac_pos),
    }


def second_order_chain(T: int, example: int | None = None) -> JunctionTree:
    """Second-order chain of T nodes: cliques (t, t+1, t+2), separators (t+1, t+2), bigram
    factors (type 0) on every (t, t+1) and trigram factors (type 1) on every clique. T = 1 and
    T = 2 are one clique, (0,) and (0, 1)."""
    if T < 1:
        raise GraphError(f"a chain needs at least one node; got T = {T}")
    cliques = [tuple(range(T))] if T <= 2 else [(t, t + 1, t + 2) for t in range(T - 2)]
    factors = [((t, t + 1), 0) for t in range(T - 1)]
    factors += [((t, t + 1, t + 2), 1) for t in range(T - 2)]
    parents = np.arange(-1, len(cliques) - 1, dtype=INDEX)
    return JunctionTree(T, tuple(cliques), parents, tuple(factors), example=example)


def is_second_order_chain(g: JunctionTree) -> bool:
    """Whether g is ``second_order_chain(g.n_nodes)``: the same cliques, clique tree and
    factors (in any order)."""
    T = g.n_nodes
    if T <= 2 or g.n_cliques != T - 2:
        return False
    if g.cliques != tuple((t, t + 1, t + 2) for t in range(T - 2)):
        return False
    if not np.array_equal(g.clique_parents, np.arange(-1, T - 3)):
        return False
    expected = [((t, t + 1), 0) for t in range(T - 1)]
    expected += [((t, t + 1, t + 2), 1) for t in range(T - 2)]
    return sorted(g.factors) == sorted(expected)


def junction_from_tree(tree: Tree, example: int | None = None) -> JunctionTree:
    """The junction tree of a tree or forest: one clique (parent(v), v) per edge, carrying a
    factor of the edge's type; an isolated node is a clique of its own."""
    parents = tree.parents.tolist()
    cliques, factors = [], []
    for v, p in enumerate(parents):
        if p >= 0:
            cliques.append((p, v))
            factors.append(((p, v), int(tree.edge_types[v])))
        elif tree.degrees[v] == 0:
            cliques.append((v,))
    return JunctionTree(tree.n_nodes, tuple(cliques), None, tuple(factors), example=example)
