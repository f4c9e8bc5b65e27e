"""Packing the junction trees of a data set into the flat arrays of the kernels.

:func:`pack` concatenates every example's clique tree, separators, node and factor assignments
(``jt``, ``assign``; see :mod:`crfsdca.kernels.structures.junction` and
:mod:`crfsdca.kernels.structures.junction_batch`) and its segment table (``runs``), and builds the
cache of projection arrays: one array of K^m entries per distinct (clique size m, positions) pattern
used by a separator, a node or a factor scope (for second-order chains six patterns of K^3
entries), up to :data:`PATTERN_BUDGET` bytes; patterns beyond it (id -1) are computed per table
by the kernels.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from crfsdca._dtypes import INDEX
from crfsdca.structures.junction_tree import JunctionTree

__all__ = ["PATTERN_BUDGET", "pack", "region"]

PATTERN_BUDGET = 64 * 2**20  # bytes of cached projection arrays


def region(g: JunctionTree, K: int) -> tuple[NDArray[np.int64], NDArray[np.int64], int]:
    """(clique table offsets, separator table offsets, region size), local to the example."""
    a = g.arrays
    tab = K ** np.diff(a["var_start"])
    sep = np.where(g.clique_parents >= 0, K ** np.diff(a["sep_start"]), 0)
    tab_off = np.concatenate([[0], np.cumsum(tab)[:-1]])
    sep_off = tab.sum() + np.concatenate([[0], np.cumsum(sep)[:-1]])
    return tab_off.astype(INDEX), sep_off.astype(INDEX), int(tab.sum() + sep.sum())


def pack(graphs, K: int, region_sizes) -> tuple[tuple, tuple, tuple]:
    def cat(key: str, shift: list[int] | None = None, keep_negative: bool = False):
        parts = []
        for g, d in zip(graphs, shift or [0] * len(graphs), strict=True):
            x = g.arrays[key]
            parts.append(np.where(x >= 0, x + d, x) if keep_negative else x + d)
        return np.ascontiguousarray(np.concatenate(parts), INDEX)

    def csr(key: str) -> NDArray[np.int64]:
        counts = np.concatenate([np.diff(g.arrays[key]) for g in graphs])
        return np.concatenate([[0], np.cumsum(counts)]).astype(INDEX)

    n_cliques = [g.n_cliques for g in graphs]
    c0 = np.concatenate([[0], np.cumsum(n_cliques)]).astype(INDEX)
    shift = c0[:-1].tolist()
    regions = [region(g, K) for g in graphs]
    ex_region = np.concatenate([[0], np.cumsum(region_sizes)]).astype(INDEX)
    jt = (
        c0, ex_region, csr("var_start"), cat("vars"),
        cat("parent", shift, keep_negative=True), cat("order", shift), csr("child_start"),
        cat("children", shift), np.concatenate([r[0] for r in regions]).astype(INDEX),
        np.concatenate([r[1] for r in regions]).astype(INDEX), csr("sep_start"),
        cat("sep_child"), cat("sep_parent"),
    )  # fmt: skip
    patterns = _Patterns(K)
    node_pat, fac_pat, sepc_pat, sepp_pat = (np.concatenate(x).astype(INDEX) for x in zip(
        *(patterns.of(g) for g in graphs), strict=True))  # fmt: skip
    jt += (sepc_pat, sepp_pat) + patterns.arrays()
    assign = (
        csr("node_start"), cat("node_ids"), cat("node_pos"), csr("fac_start"), cat("fac_type"),
        csr("fac_pos_start"), cat("fac_pos"), node_pat, fac_pat,
    )  # fmt: skip
    seg_off, seg_len, seg_coef, seg_count = [], [], [], []
    for _, sep_off, size in regions:
        cliques_end = int(sep_off[0])
        seg_off.append(0), seg_len.append(cliques_end), seg_coef.append(1.0)
        if size > cliques_end:
            seg_off.append(cliques_end), seg_len.append(size - cliques_end), seg_coef.append(-1.0)
        seg_count.append(1 + (size > cliques_end))
    seg_start = np.concatenate([[0], np.cumsum(seg_count)]).astype(INDEX)
    runs = (seg_start, np.array(seg_off, INDEX), np.array(seg_len, INDEX), np.array(seg_coef))
    return jt, assign, runs


class _Patterns:
    """Ids of (clique size, positions) projection patterns and their cached arrays."""

    def __init__(self, K: int) -> None:
        self.K, self.ids, self.chunks, self.used = K, {}, [], 0

    def id(self, m: int, pos: tuple[int, ...]) -> int:
        key = (m, pos)
        if key not in self.ids:
            size = self.K**m
            if (self.used + size) * 8 > PATTERN_BUDGET:
                self.ids[key] = -1
            else:
                self.ids[key] = len(self.chunks)
                self.chunks.append(_projection(m, self.K, pos))
                self.used += size
        return self.ids[key]

    def of(self, g: JunctionTree) -> tuple[list[int], list[int], list[int], list[int]]:
        """Pattern ids of g's nodes, factors, and separators on the child and parent side."""
        a = g.arrays
        m = np.diff(a["var_start"]).tolist()
        node_clique = np.repeat(np.arange(g.n_cliques), np.diff(a["node_start"])).tolist()
        fac_clique = np.repeat(np.arange(g.n_cliques), np.diff(a["fac_start"])).tolist()
        node_pos, fac_pos, fps = a["node_pos"].tolist(), a["fac_pos"].tolist(), a["fac_pos_start"]
        ss, sc, sp = a["sep_start"], a["sep_child"].tolist(), a["sep_parent"].tolist()
        nodes = [self.id(m[c], (node_pos[r],)) for r, c in enumerate(node_clique)]
        factors = [
            self.id(m[c], tuple(fac_pos[fps[f] : fps[f + 1]])) for f, c in enumerate(fac_clique)
        ]
        child, parent = [], []
        for c, p in enumerate(g.clique_parents.tolist()):
            lo, hi = ss[c], ss[c + 1]
            child.append(self.id(m[c], tuple(sc[lo:hi])) if p >= 0 else -1)
            parent.append(self.id(m[p], tuple(sp[lo:hi])) if p >= 0 else -1)
        return nodes, factors, child, parent

    def arrays(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        sizes = [c.size for c in self.chunks]
        offsets = np.concatenate([[0], np.cumsum(sizes, dtype=INDEX)]).astype(INDEX)
        data = np.concatenate(self.chunks) if self.chunks else np.zeros(0, INDEX)
        return offsets, data.astype(INDEX)


def _projection(m: int, K: int, pos: tuple[int, ...]) -> NDArray[np.int64]:
    """Entry of a table of m nodes -> index in the table of the nodes at positions pos."""
    idx = np.arange(K**m, dtype=INDEX)
    out = np.zeros(K**m, INDEX)
    for p in pos:
        out = out * K + (idx // K ** (m - 1 - p)) % K
    return out
