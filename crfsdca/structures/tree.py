"""Tree-structured CRFs: examples with their own tree or forest, the oracle, the problem.

A :class:`TreeData` pairs a :class:`~crfsdca.features.sequences.SequenceData` (an example's nodes
are its
items: per-node sparse attributes from the same templates and encoders as chains, one label per
node) with one :class:`~crfsdca.structures.graphs.Tree` per example (parent array, per-edge types).
The
weights follow :class:`~crfsdca.features.FeatureMap` with one K x K transition block per edge
type, tied across examples, and bias rows read as (count, root, leaf).

:class:`TreeOracle` computes log Z, clique marginals (nodes and parent-child edges), the batch
value and gradient and MAP labels with the kernels of :mod:`crfsdca.kernels.structures.tree`;
:class:`TreeProblem` is a :class:`~crfsdca.structures.problem.Problem` whose oracle is a
TreeOracle, so
the primal solvers (L-BFGS) and the monitor run on trees unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from crfsdca._dtypes import FLOAT, INDEX
from crfsdca.errors import GraphError
from crfsdca.features.feature_map import FeatureMap
from crfsdca.features.layout import max_unique, sequence_layout
from crfsdca.features.sequences import SequenceData
from crfsdca.kernels.numerics.threads import get_threads
from crfsdca.kernels.primitives import RunTable
from crfsdca.kernels.solvers import sag_epoch
from crfsdca.kernels.structures import tree as kernels
from crfsdca.kernels.structures import tree_blocks, tree_eg, tree_scaled
from crfsdca.structures import graphs
from crfsdca.structures.chain import ChainStructure
from crfsdca.structures.dual import INITIAL_GAP, DualState, filled, smoothed_entropies
from crfsdca.structures.graphs import Tree
from crfsdca.structures.objectives import lambda_n, weights_from_expectations
from crfsdca.structures.problem import Problem

__all__ = ["TreeData", "TreeOracle", "TreeProblem"]


@dataclass(frozen=True, eq=False)
class TreeData:
    """Nodes (as a SequenceData) and one tree per example, packed for the kernels."""

    nodes: SequenceData
    graphs: tuple[Tree, ...]

    def __post_init__(self) -> None:
        graphs = tuple(self.graphs)
        object.__setattr__(self, "graphs", graphs)
        lengths = self.nodes.lengths.tolist()
        if len(graphs) != len(lengths):
            raise GraphError(f"{len(graphs)} trees for {len(lengths)} examples; expected one each")
        for i, (tree, n) in enumerate(zip(graphs, lengths, strict=True)):
            if tree.n_nodes != n:
                raise GraphError(
                    f"example {i}: the tree has {tree.n_nodes} nodes but the example {n} items"
                )

    @cached_property
    def packed(self) -> tuple[np.ndarray, ...]:
        """(parents, types, order, child_start, children) over all nodes (see
        kernels.structures.tree)."""
        g = self.graphs
        parents = np.concatenate([t.parents for t in g]).astype(INDEX)
        types = np.concatenate([np.where(t.parents >= 0, t.edge_types, 0) for t in g])
        order = np.concatenate([t.order for t in g]).astype(INDEX)
        counts = np.concatenate([np.diff(t.children_start) for t in g])
        child_start = np.zeros(parents.size + 1, INDEX)
        np.cumsum(counts, out=child_start[1:])
        children = np.concatenate([t.children for t in g] or [np.zeros(0, INDEX)]).astype(INDEX)
        return parents, types.astype(INDEX), order, child_start, children

    @property
    def n_edge_types(self) -> int:
        return max((t.n_edge_types for t in self.graphs), default=0) or 1

    # the SequenceData interface the problem and the monitor read
    def __getattr__(self, name: str):
        if name in ("nodes", "graphs", "packed"):
            raise AttributeError(name)
        return getattr(self.nodes, name)


class TreeOracle:
    """log Z, marginals, value and gradient, MAP of tree-structured examples."""

    def __init__(self, data: TreeData, feature_map: FeatureMap) -> None:
        if data.n_labels != feature_map.n_labels:
            raise ValueError(
                f"data has {data.n_labels} labels but the feature map {feature_map.n_labels}"
            )
        if data.n_edge_types > feature_map.n_edge_types:
            raise GraphError(
                f"the trees use {data.n_edge_types} edge types; the feature map has"
                f" {feature_map.n_edge_types} transition blocks"
            )
        self.data, self.feature_map = data, feature_map
        fm, n = feature_map, max(data.max_length, 1)
        K = fm.n_labels
        self._data = data.nodes.arrays()
        self._graph = data.packed
        self._dims = (fm.n_attributes, K, fm.n_bias_rows, fm.n_edge_types)
        self._ws = tuple(np.empty((n, K)) for _ in range(4)) + (np.empty(K), np.empty((n, K)))
        self._log_node, self._log_edge = np.empty((n, K)), np.empty((n, K, K))
        self._root_z = np.empty(n)
        self._sws = tuple(np.empty((n, K)) for _ in range(4)) + (np.empty(n),)

    @property
    def n_sequences(self) -> int:
        return self.data.n_sequences

    def _weights(self, w: NDArray[np.float64]) -> NDArray[np.float64]:
        return self.feature_map.check_weights(w)

    def marginals(
        self, i: int, w: NDArray[np.float64]
    ) -> tuple[float, NDArray[np.float64], NDArray[np.float64]]:
        """(log Z_i, log node marginals (n, K), log edge marginals (n, K, K)) of example i;
        row v of the edges is the edge parent(v)-v, [parent label, v's label] (-inf at roots)."""
        if not 0 <= i < self.n_sequences:
            raise IndexError(f"example index {i} out of range [0, {self.n_sequences})")
        w = self._weights(w)
        log_z, _, _ = kernels._example(
            self._data, self._graph, i, w, self._dims, self._ws, self._log_node,
            self._log_edge, self._root_z,
        )  # fmt: skip
        n = int(self.data.lengths[i])
        edge = self._log_edge[:n].copy()
        edge[self.data.graphs[i].parents < 0] = -np.inf
        return float(log_z), self._log_node[:n].copy(), edge

    def log_partition(self, i: int, w: NDArray[np.float64]) -> float:
        return self.marginals(i, w)[0]

    def loss_sum(self, w: NDArray[np.float64]) -> float:
        """sum_i log Z_i - w^T F_i (upward passes only, on numba's number of threads)."""
        w = self._weights(w)
        loss, bad = tree_scaled.batch_loss(self._data, self._graph, w, self._dims, get_threads())
        if bad >= 0 or not math.isfinite(loss):
            raise FloatingPointError(f"non-finite log partition of example {max(bad, 0)}")
        return float(loss)

    def value_and_gradient(self, w: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        """sum_i log Z_i - w^T F_i and its gradient sum_i E_nu_i F - F_i."""
        w = self._weights(w)
        grad = np.empty(self.feature_map.n_features, FLOAT)
        loss, bad = tree_scaled.batch_value_and_gradient(
            self._data, self._graph, w, self._dims, self._ws, self._sws, self._log_node,
            self._log_edge, self._root_z, grad,
        )  # fmt: skip
        if bad >= 0 or not math.isfinite(loss):
            raise FloatingPointError(f"non-finite log partition of example {max(bad, 0)}")
        return float(loss), grad

    def gold_features(self) -> NDArray[np.float64]:
        """Read-only sum_i F(x_i, y_i): the expected features of the gold labelling."""
        if getattr(self, "_gold", None) is None:
            from crfsdca.kernels.structures.tree_blocks import expected_features

            N, K = self.data.n_items, self.feature_map.n_labels
            log_node = np.full((N, K), -np.inf)
            log_node[np.arange(N), self.data.labels] = 0.0
            gold = self.feature_map.zeros()
            no_edges = np.empty((0, K, K))
            expected_features(self._data, self._graph, log_node, no_edges, self._dims, gold)
            add_edge_sums(gold, self._dims, gold_edge_counts(self.data, self._graph, K))
            gold.setflags(write=False)
            self._gold = gold
        return self._gold

    def predict(self, w: NDArray[np.float64]) -> NDArray[np.int64]:
        """MAP label of every node, packed like the data's labels."""
        w = self._weights(w)
        out = np.empty(self.data.n_items, INDEX)
        n, K = max(self.data.max_length, 1), self.feature_map.n_labels
        backptr = np.empty((n, K), INDEX)
        kernels.tree_predict(self._data, self._graph, w, self._dims, self._ws, backptr, out)
        return out


@dataclass(eq=False)
class TreeProblem(Problem):
    """A :class:`Problem` on tree-structured examples (``train``/``test`` are TreeData)."""

    oracle_class: ClassVar[type] = TreeOracle

    @cached_property
    def structure(self) -> TreeStructure:
        return TreeStructure(self)


def tree_problem(
    train: TreeData,
    *,
    n_bias_rows: int = 3,
    regularization: float | None = None,
    test: TreeData | None = None,
    name: str = "",
) -> TreeProblem:
    """A TreeProblem with one transition block per edge type used in train (or test)."""
    _check_labels(train)
    types = max(train.n_edge_types, test.n_edge_types if test is not None else 1)
    fm = FeatureMap(train.n_attributes, train.n_labels, n_bias_rows, types)
    return TreeProblem(
        train=train, feature_map=fm, regularization=regularization, test=test, name=name
    )


def _check_labels(data: TreeData) -> None:
    """GraphError naming the example and node of the first training label outside [0, K)."""
    labels, K = data.nodes.labels, data.nodes.n_labels
    bad = np.flatnonzero((labels < 0) | (labels >= K))
    if bad.size:
        t = int(bad[0])
        offsets = data.nodes.seq_offsets
        i = int(np.searchsorted(offsets, t, side="right")) - 1
        raise GraphError(
            f"example {i}: node {t - int(offsets[i])}: label {int(labels[t])} is out of range;"
            f" expected a known label in [0, {K})"
        )


def trees_from_parents(parents: Sequence[Sequence[int]], edge_types=None) -> tuple[Tree, ...]:
    """One Tree per example from lists of parent indices (errors name the example)."""
    return graphs.trees(parents, edge_types)


class TreeStructure(ChainStructure):
    """Trees and forests (:class:`~crfsdca.structures.tree.TreeProblem`)."""

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

    def weights_from_dual(self, log_node, log_edge, edge_sums=None) -> NDArray[np.float64]:
        """w_hat(mu); ``edge_sums``: (edge types, K, K), sum_e mu_e over the edges of each type
        when known in closed form (the smoothed start), which spares the pass over
        ``log_edge`` (not read then)."""
        problem = self.problem
        expected = problem.feature_map.zeros()
        data = problem.train
        edges = log_edge if edge_sums is None else log_edge[:0]
        tree_blocks.expected_features(
            data.nodes.arrays(), data.packed, log_node, edges, self.dims, expected
        )
        if edge_sums is not None:
            add_edge_sums(expected, self.dims, edge_sums)
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
        return tree_eg.make_workspace(self.blocks.max_n, self.dims, self.blocks.max_U)

    def dual_size(self, dtype) -> tuple[int, str]:
        data, d, K = self.problem.train, self.problem.feature_map.n_features, self.dims[1]
        item = np.dtype(np.float64).itemsize  # tree duals are kept in float64
        return item * data.n_items * (K + K * K) + 8 * (3 * data.n_sequences + d), ""

    def smoothed_dual(self, epsilon: float, dtype=np.float64) -> DualState:
        _float64_only(dtype)
        return tree_smoothed_empirical(self.problem, epsilon)

    def gibbs_dual(self, score: float, dtype=np.float64) -> DualState:
        _float64_only(dtype)
        return tree_gibbs_start(self.problem, score)


def _float64_only(dtype) -> None:
    if np.dtype(dtype) != np.float64:
        raise ValueError(f"tree duals are kept in float64; got dual_dtype={np.dtype(dtype).name}")


def gold_edge_counts(data, graph, K: int) -> NDArray[np.float64]:
    """(edge types, K, K): how many edges of each type carry each (parent label, child label)
    pair in the gold labelling."""
    parents, types = graph[0], graph[1]
    n_types = int(types.max(initial=0)) + 1
    starts = np.repeat(data.seq_offsets[:-1], data.lengths)
    child = np.flatnonzero(parents >= 0)
    pairs = data.labels[starts[child] + parents[child]] * K + data.labels[child]
    flat = np.bincount(types[child] * K * K + pairs, minlength=n_types * K * K)
    return flat.reshape(n_types, K, K).astype(np.float64)


def add_edge_sums(expected: NDArray[np.float64], dims, edge_sums) -> None:
    """expected += the edge types' rows ``edge_sums`` (edge types, K, K), laid out as
    ``tree_blocks.expected_features`` lays them."""
    A, K, n_bias, _ = dims
    off = (A + n_bias) * K
    expected[off : off + edge_sums.size] += edge_sums.reshape(-1)


# -- dual starts ----------------------------------------------------------------------------------
def tree_smoothed_empirical(problem: TreeProblem, epsilon: float) -> DualState:
    """mu_c = epsilon / K^|c| + (1 - epsilon) 1[y_c = gold] on every node and edge."""
    if not 0.0 < epsilon <= 1.0:
        raise ValueError(f"init_epsilon must be in (0, 1]; got {epsilon}")
    data, K = problem.train, problem.feature_map.n_labels
    N, labels = data.n_items, data.labels
    parents = data.packed[0]
    starts = np.repeat(data.seq_offsets[:-1], data.lengths)  # first node of each node's example
    off, on = np.log(epsilon / K) if epsilon < 1 else -np.log(K), np.log(epsilon / K + 1 - epsilon)
    log_node = np.full((N, K), off)
    log_node[np.arange(N), labels] = on
    off2, on2 = np.log(epsilon / K**2), np.log(epsilon / K**2 + 1.0 - epsilon)
    log_edge = filled((N, K, K), off2)
    child = np.flatnonzero(parents >= 0)
    parent_labels = labels[starts[child] + parents[child]]
    log_edge[child, parent_labels, labels[child]] = on2
    # the entropies and sum_e mu_e in closed form (every edge carries off2, its gold pair on2)
    edges = np.add.reduceat((parents >= 0).astype(np.int64), data.seq_offsets[:-1])
    entropies = smoothed_entropies(data.lengths, K, (off, on), (off2, on2), np.float64, edges)
    gold = gold_edge_counts(data, data.packed, K)
    counts = np.bincount(data.packed[1][child], minlength=gold.shape[0])[:, None, None]
    p_off2, p_on2 = np.exp(off2), np.exp(on2)
    edge_sums = counts * p_off2 + gold * (p_on2 - p_off2)
    weights = problem.structure.weights_from_dual(log_node, log_edge, edge_sums=edge_sums)
    return tree_finish_state(problem, log_node, log_edge, entropies, weights)


def tree_gibbs_start(problem: TreeProblem, score: float) -> DualState:
    """The authors' start on trees: the marginals of exp(score (#gold labels + #gold edges))."""
    if not np.isfinite(score):
        raise ValueError(f"gibbs_score must be finite; got {score}")
    data, K = problem.train, problem.feature_map.n_labels
    log_node, log_edge = np.empty((data.n_items, K)), np.zeros((data.n_items, K, K))
    layout = sequence_layout(data.nodes)
    tree_eg.gibbs_marginals(layout, data.packed, K, score, log_node, log_edge,
                             data.max_length)  # fmt: skip
    return tree_finish_state(problem, log_node, log_edge)


def tree_finish_state(
    problem: TreeProblem, log_node, log_edge, entropies=None, weights=None
) -> DualState:
    """The dual state of these marginals (``entropies`` and ``weights``: when known)."""
    data, structure = problem.train, problem.structure
    if entropies is None:
        entropies = structure.entropies(log_node, log_edge)
    return DualState(
        log_node=log_node,
        log_edge=log_edge,
        entropies=entropies,
        gap_estimates=np.full(data.n_sequences, INITIAL_GAP),
        weights=structure.weights_from_dual(log_node, log_edge) if weights is None else weights,
        step_sizes=np.full(data.n_sequences, 0.5),
    )


def tree_weights_from_dual(problem, log_node, log_edge) -> NDArray[np.float64]:
    """w_hat(mu) of tree marginals stored like the dual state."""
    return problem.structure.weights_from_dual(log_node, log_edge)
