"""The structure interface of SDCA's dual blocks: the segment table.

A :class:`Structure` describes, per example, the clique and separator marginals of its dual
block as one flat array of log-probabilities (:meth:`Structure.block`) and a segment table
(:meth:`Structure.segments`): runs ``(offset, length, coefficient)`` of that array. For the
marginals mu of a law that factorises over a junction tree,

    H(mu) = sum_r coef_r H(run r),   KL(mu || nu) = sum_r coef_r KL(run r of mu || run r of nu),

so SDCA's gap, entropy, KL, line search and log-space update read the segment table alone
(:mod:`crfsdca.kernels.segments`). The three structures:

=================  ===========================================================================
structure          segment table of one example
=================  ===========================================================================
linear chain       node tables (K entries) with coefficient 1 - degree (0 at the ends, -1
                   inside; 1 for a single node), edge tables (K^2) with +1
tree / forest      node tables with 1 - degree(v), edge tables parent(v)-v with +1
junction tree      clique tables (K^|c|) with +1, separator tables (K^|s|) with -1
=================  ===========================================================================

Adjacent runs with one coefficient are merged. The chain and the tree keep their specialised
kernels (their dual is stored as node and edge arrays, and :meth:`block` concatenates an
example's rows); the junction tree stores its dual as the flat blocks themselves, and its SDCA
kernels (:mod:`crfsdca.kernels.junction_sdca`) run on the segment table. One oracle per
structure kind computes log Z, clique marginals and MAP for every solver:
:class:`~crfsdca.oracle.Oracle`, :class:`~crfsdca.tree_oracle.TreeOracle`,
:class:`~crfsdca.junction_oracle.JunctionOracle`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from crfsdca._dtypes import INDEX
from crfsdca.junction_oracle import JunctionData
from crfsdca.sequences import SequenceData
from crfsdca.tree_oracle import TreeData

__all__ = ["ChainStructure", "JunctionStructure", "Structure", "TreeStructure", "merge_runs"]

Runs = tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]


class Structure(Protocol):
    """Per example: the flat log-marginal block and its segment table (module docstring)."""

    @property
    def n_examples(self) -> int: ...

    def segments(self, i: int) -> Runs:
        """(offsets, lengths, coefficients) of example i's block, offsets local to it."""
        ...

    def block(self, i: int, log_node: NDArray, log_edge: NDArray) -> NDArray:
        """Example i's log-marginals as one flat array, from the dual state's arrays."""
        ...


def merge_runs(lengths, coefs) -> Runs:
    """Runs laid end to end from 0, adjacent runs of one coefficient merged."""
    off, length, coef = [], [], []
    at = 0
    for n, c in zip(lengths, coefs, strict=True):
        if coef and coef[-1] == c and off[-1] + length[-1] == at:
            length[-1] += n
        elif n:
            off.append(at), length.append(n), coef.append(float(c))
        at += n
    return np.array(off, INDEX), np.array(length, INDEX), np.array(coef)


@dataclass(frozen=True, eq=False)
class ChainStructure:
    """Linear chains: node rows of log_node, edges i's rows of log_edge (N - n, K, K)."""

    data: SequenceData

    @property
    def n_examples(self) -> int:
        return self.data.n_sequences

    def segments(self, i: int) -> Runs:
        T, K = int(self.data.lengths[i]), self.data.n_labels
        degree = np.full(T, 2)
        degree[[0, -1]] = 1 if T > 1 else 0
        return merge_runs([K] * T + [(T - 1) * K * K], [*(1 - degree), 1.0])

    def block(self, i: int, log_node: NDArray, log_edge: NDArray) -> NDArray:
        s, e = int(self.data.seq_offsets[i]), int(self.data.seq_offsets[i + 1])
        return np.concatenate([log_node[s:e].ravel(), log_edge[s - i : e - i - 1].ravel()])


@dataclass(frozen=True, eq=False)
class TreeStructure:
    """Trees and forests: node rows of log_node, rows of non-root nodes of log_edge (N, K, K)."""

    data: TreeData

    @property
    def n_examples(self) -> int:
        return self.data.n_sequences

    def segments(self, i: int) -> Runs:
        tree, K = self.data.graphs[i], self.data.n_labels
        return merge_runs([K] * tree.n_nodes + [tree.n_edges * K * K], [*(1 - tree.degrees), 1.0])

    def block(self, i: int, log_node: NDArray, log_edge: NDArray) -> NDArray:
        s, e = int(self.data.seq_offsets[i]), int(self.data.seq_offsets[i + 1])
        edges = log_edge[s:e][self.data.graphs[i].parents >= 0]
        return np.concatenate([log_node[s:e].ravel(), edges.ravel()])


@dataclass(frozen=True, eq=False)
class JunctionStructure:
    """Junction trees: example i's region of the flat tables (held in ``log_edge``)."""

    data: JunctionData

    @property
    def n_examples(self) -> int:
        return self.data.n_sequences

    def segments(self, i: int) -> Runs:
        seg_start, off, length, coef = self.data.packed[2]
        a, b = int(seg_start[i]), int(seg_start[i + 1])
        return off[a:b], length[a:b], coef[a:b]

    def block(self, i: int, log_node: NDArray, log_edge: NDArray) -> NDArray:
        region = self.data.packed[0][1]
        return log_edge[int(region[i]) : int(region[i + 1])]
