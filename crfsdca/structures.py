"""The structures SDCA trains: one object per structure kind, chosen in one place.

A structure owns what depends on the graph of its examples, so that every solver is written
once (``crfsdca.solvers``, ``crfsdca.kernels.sdca_epoch``):

- its packed arrays as one compiled type (:attr:`blocks`) whose primitives the kernels call
  (``crfsdca.kernels.primitives``: the block oracle, the primal direction and its scatter);
- its dual blocks as runs (``crfsdca.kernels.primitives.RunTable``): where each block's
  entries live in the dual state and with which coefficient of the junction-tree entropy

    H~(mu) = sum_r coef_r H(run r),   KL~(mu || nu) = sum_r coef_r KL(run r);

- w(mu) = (sum_i F(x_i, y_i) - E_mu_i F) / (lambda n), the summed loss at w, and the
  importance weights of a sampling scheme that needs them.

=================  ===========================================================================
structure          runs of one example
=================  ===========================================================================
linear chain       edge tables (K^2 each) with +1, then node tables: the two ends 0, the
                   interior -1 (a single node: +1)
tree / forest      the non-root nodes' edge tables parent(v)-v with +1, then node tables with
                   1 - degree(v)
junction tree      clique tables (K^|c|) with +1, separator tables (K^|s|) with -1
=================  ===========================================================================

The dual state keeps clique tables in ``log_edge`` and node tables in ``log_node`` (empty for
junction trees, whose node marginals are projections of their cliques). :func:`structure_of`
is the one place that looks at a problem's kind.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from crfsdca.kernels import (
    chain_blocks,
    junction_blocks,
    junction_oeg,
    oeg,
    sag_epoch,
    sdca_epoch,
    tree_blocks,
    tree_oeg,
)
from crfsdca.kernels.primitives import RunTable
from crfsdca.layout import max_unique, sequence_layout
from crfsdca.objectives import lambda_n, weights_from_expectations

__all__ = ["ChainStructure", "JunctionStructure", "TreeStructure", "structure_of"]


class ChainStructure:
    """Linear chains (:class:`~crfsdca.problem.Problem` over a ``SequenceData``)."""

    kind = "chain"

    def __init__(self, problem) -> None:
        self.problem = problem

    @cached_property
    def layout(self):
        return sequence_layout(self.problem.train)

    @cached_property
    def dims(self) -> tuple[int, int, int]:
        fm = self.problem.feature_map
        return (fm.n_attributes, fm.n_labels, fm.n_bias_rows)

    @cached_property
    def runs(self) -> RunTable:
        return chain_blocks.chain_run_table(self.problem.train.seq_offsets, self.dims[1])

    @cached_property
    def blocks(self) -> chain_blocks.ChainBlocks:
        data = self.problem.train
        return chain_blocks.ChainBlocks(
            layout=self.layout,
            dims=self.dims,
            runs=self.runs,
            max_T=max(int(data.max_length), 1),
            max_U=max_unique(self.layout),
            max_block=int(self.runs.hi.max(initial=1)),
        )

    def entropies(self, log_node, log_edge) -> NDArray[np.float64]:
        return sdca_epoch.all_entropies(self.runs, log_edge, log_node)

    def weights_from_dual(self, log_node, log_edge) -> NDArray[np.float64]:
        problem = self.problem
        expected = problem.feature_map.zeros()
        chain_blocks.expected_features(
            problem.train.arrays()[:4], log_node, log_edge, self.dims, expected
        )
        gold = problem.oracle.gold_features()
        return weights_from_expectations(gold, expected, lambda_n(problem))

    def loss(self, w: NDArray[np.float64]) -> float:
        """sum_i -log p(y_i | x_i; w)."""
        oracle = self.problem.oracle
        return float(oracle.log_partitions(w).sum() - w @ oracle.gold_features())

    def importance_weights(self) -> NDArray[np.float64]:
        from crfsdca.radii import importance_weights

        return importance_weights(self.problem)

    def sag_sums_shape(self) -> tuple[int, ...]:
        """The shape of one example's summed clique marginals in SAG's gradient memory."""
        K = self.dims[1]
        return (K, K)

    def sag_workspace(self) -> tuple:
        """The workspace of ``sag_epoch.run_steps`` on this structure."""
        A, K, nb = self.dims
        sws = chain_blocks.sag_workspace(self.blocks.max_T, self.dims, self.blocks.max_U)
        return sag_epoch.make_workspace(A + nb + K, sws)

    def oeg_workspace(self) -> tuple:
        """The workspace of ``oeg_epoch.run_steps`` on this structure."""
        return oeg.make_workspace(self.blocks.max_T, self.dims, self.blocks.max_U)


class TreeStructure(ChainStructure):
    """Trees and forests (:class:`~crfsdca.tree_oracle.TreeProblem`)."""

    kind = "tree"

    @cached_property
    def dims(self) -> tuple[int, int, int, int]:
        fm = self.problem.feature_map
        return (fm.n_attributes, fm.n_labels, fm.n_bias_rows, fm.n_edge_types)

    @cached_property
    def runs(self) -> RunTable:
        data = self.problem.train
        parents, _, _, child_start, _ = data.packed
        degrees = np.diff(child_start) + (parents >= 0)
        return tree_blocks.tree_run_table(data.seq_offsets, parents, degrees, self.dims[1])

    @cached_property
    def blocks(self) -> tree_blocks.TreeBlocks:
        data = self.problem.train
        return tree_blocks.TreeBlocks(
            layout=self.layout,
            graph=data.packed,
            dims=self.dims,
            runs=self.runs,
            max_n=max(int(data.max_length), 1),
            max_U=max_unique(self.layout),
            max_block=int(self.runs.hi.max(initial=1)),
        )

    def weights_from_dual(self, log_node, log_edge) -> NDArray[np.float64]:
        problem = self.problem
        expected = problem.feature_map.zeros()
        data = problem.train
        tree_blocks.expected_features(
            data.nodes.arrays(), data.packed, log_node, log_edge, self.dims, expected
        )
        gold = problem.oracle.gold_features()
        return weights_from_expectations(gold, expected, lambda_n(problem))

    def loss(self, w: NDArray[np.float64]) -> float:
        return float(self.problem.oracle.value_and_gradient(w)[0])

    def importance_weights(self) -> NDArray[np.float64]:
        raise ValueError("importance sampling needs the radii of chains; not available for trees")

    def sag_sums_shape(self) -> tuple[int, ...]:
        K, n_types = self.dims[1], self.dims[3]
        return (n_types, K, K)

    def sag_workspace(self) -> tuple:
        A, K, nb, n_types = self.dims
        sws = tree_blocks.sag_workspace(self.blocks.max_n, self.dims, self.blocks.max_U)
        return sag_epoch.make_workspace(A + nb + n_types * K, sws)

    def oeg_workspace(self) -> tuple:
        return tree_oeg.make_workspace(self.blocks.max_n, self.dims, self.blocks.max_U)


class JunctionStructure(ChainStructure):
    """Junction trees (:class:`~crfsdca.junction_oracle.JunctionProblem`): every clique and
    separator table in ``log_edge``, ``log_node`` empty."""

    kind = "junction"

    @cached_property
    def runs(self) -> RunTable:
        data = self.problem.train
        seg_start, seg_off, seg_len, seg_coef = data.packed[2]
        region = data.packed[0][1]
        return junction_blocks.junction_run_table(region, seg_start, seg_off, seg_len, seg_coef)

    @cached_property
    def blocks(self) -> junction_blocks.JunctionBlocks:
        problem = self.problem
        data, oracle, fm = problem.train, problem.oracle, problem.feature_map
        n_factor = fm.n_features - fm.factor_offset(0) if fm.factor_arities else 0
        max_attrs = int(np.diff(data.attr_offsets[data.seq_offsets]).max(initial=1))
        sizes = (
            int(data.max_table), max(g.n_cliques for g in data.graphs), int(data.max_length),
            max(max_attrs, 1), int(n_factor), len(fm.factor_arities),
        )  # fmt: skip
        return junction_blocks.JunctionBlocks(
            data=oracle._data, layout=self.layout, jt=oracle._jt, assign=oracle._assign,
            feat=oracle._feat, dims=oracle._dims, runs=self.runs,
            max_block=int(data.region_sizes.max()), sizes=sizes,
            n_factor_rows=int(n_factor) // fm.n_labels,
        )  # fmt: skip

    def weights_from_dual(self, log_node, log_edge) -> NDArray[np.float64]:
        oracle = self.problem.oracle
        expected = oracle.expected_features(log_edge)
        return weights_from_expectations(oracle.gold_features(), expected, lambda_n(self.problem))

    def loss(self, w: NDArray[np.float64]) -> float:
        return float(self.problem.oracle.value_and_gradient(w)[0])

    def importance_weights(self) -> NDArray[np.float64]:
        raise ValueError(
            "importance sampling needs the radii of chains; not available for junction trees"
        )

    def sag_sums_shape(self) -> tuple[int, ...]:
        fm = self.problem.feature_map
        return (fm.n_features - fm.factor_offset(0),)  # factor sums, laid out like w's blocks

    def sag_workspace(self) -> tuple:
        from crfsdca.junction_oracle import make_workspace

        blocks, K = self.blocks, self.problem.feature_map.n_labels
        mws = make_workspace(self.problem.train, K)[0]
        sws = junction_blocks.sag_workspace(blocks, max_unique(self.layout), mws)
        return sag_epoch.make_workspace(blocks.dims[0] + blocks.dims[2] + blocks.n_factor_rows, sws)

    def oeg_workspace(self) -> tuple:
        from crfsdca.junction_oracle import make_workspace

        b, data = self.blocks, self.problem.train
        mws = make_workspace(data, b.dims[1])[0]
        dims = (*b.dims, b.n_factor_rows)
        sizes = (b.max_block, b.sizes[0])
        return junction_oeg.make_workspace(b.sizes[2], dims, max_unique(self.layout), mws, sizes)


def structure_of(problem) -> ChainStructure | TreeStructure | JunctionStructure:
    """The structure object of ``problem`` (the one place that asks which kind it is)."""
    from crfsdca.junction_oracle import JunctionProblem
    from crfsdca.tree_oracle import TreeProblem

    if isinstance(problem, JunctionProblem):
        return JunctionStructure(problem)
    if isinstance(problem, TreeProblem):
        return TreeStructure(problem)
    return ChainStructure(problem)


def merge_runs(lengths, coefs):
    """Runs laid end to end from 0, adjacent runs of one coefficient merged: (off, len, coef)."""
    off, length, coef = [], [], []
    at = 0
    for n, c in zip(lengths, coefs, strict=True):
        if coef and coef[-1] == c and off[-1] + length[-1] == at:
            length[-1] += n
        elif n:
            off.append(at), length.append(n), coef.append(float(c))
        at += n
    return np.array(off, np.int64), np.array(length, np.int64), np.array(coef)
