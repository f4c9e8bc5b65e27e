"""Junction-tree CRFs: examples with their own junction tree, the oracle, the problem.

A :class:`JunctionData` pairs a :class:`~crfsdca.features.sequences.SequenceData` (an example's
nodes are
its items: per-node sparse attributes, one label per node) with one
:class:`~crfsdca.structures.junction_tree.JunctionTree` per example. The weights follow
:class:`~crfsdca.features.FeatureMap` with ``n_edge_types = 0`` and one block of K^a entries per
factor type (``factor_arities``), bias rows read as (count, first node, last node).

:class:`JunctionOracle` computes log Z, clique and separator marginals, the batch value and
gradient and MAP labels with :mod:`crfsdca.kernels.structures.junction_batch`;
:class:`JunctionProblem` is a :class:`~crfsdca.structures.problem.Problem` whose oracle is a
JunctionOracle, so L-BFGS and the monitor
run unchanged (SDCA, SAG-NUS, SAG-NUS* and OEG run their junction kernels on its packed
structure). :func:`second_order_data` and :func:`junction_problem` build the usual cases.

The packed tables of every example (``JunctionData.packed``) are laid out region by region:
clique tables first, then the separator tables of the non-root cliques; the segment table of an
example is the two runs (cliques, +1) and (separators, -1).

Usage (``nodes`` a SequenceData, e.g. from an encoder's ``fit_transform``)::

    data = second_order_data(nodes)                      # every example a second-order chain
    data = junctions_from_cliques(                       # or one junction tree per example
        nodes,
        cliques=[[(0, 1, 2), (2, 3)], ...],              # node tuples, per example
        factors=[[((0, 1), 0), ((0, 1, 2), 1), ((2, 3), 0)], ...],  # (scope, type)
        factor_arities=(2, 3),                           # optional: read from the factors
    )                                                    # clique_parents=... optional
    problem = junction_problem(data, test=test_data)
    config = SDCAConfig(tol=1e-6)
    result = SDCA(config).solve(problem, Monitor(problem, "sdca", config))  # or any solver
    labels = problem.oracle.predict(result.weights)
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
from crfsdca.features.layout import max_unique
from crfsdca.features.sequences import SequenceData
from crfsdca.kernels.primitives import RunTable
from crfsdca.kernels.solvers import sag_epoch
from crfsdca.kernels.structures import junction_batch as kernels
from crfsdca.kernels.structures import junction_blocks, junction_eg, junction_scaled
from crfsdca.structures.chain import ChainStructure
from crfsdca.structures.dual import INITIAL_GAP, DualState
from crfsdca.structures.junction_pack import pack, region
from crfsdca.structures.junction_tree import (
    JunctionTree,
    is_second_order_chain,
    second_order_chain,
)
from crfsdca.structures.objectives import dot, lambda_n, weights_from_expectations
from crfsdca.structures.problem import Problem

__all__ = [
    "MAX_TABLE",
    "JunctionData",
    "JunctionOracle",
    "JunctionProblem",
    "junction_problem",
    "second_order_data",
]

MAX_TABLE = 2**24  # entries of one clique table (K^|c|)


@dataclass(frozen=True, eq=False)
class JunctionData:
    """Nodes (as a SequenceData) and one junction tree per example, packed for the kernels.

    ``factor_arities`` gives the arity of every factor type 0..T-1; when None it is read from the
    trees (every type from 0 to the largest must then be used by some example).
    """

    nodes: SequenceData
    graphs: tuple[JunctionTree, ...]
    factor_arities: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        graphs = tuple(self.graphs)
        object.__setattr__(self, "graphs", graphs)
        lengths = self.nodes.lengths.tolist()
        if len(graphs) != len(lengths):
            raise GraphError(
                f"{len(graphs)} junction trees for {len(lengths)} examples; expected one each"
            )
        arities = dict(enumerate(self.factor_arities or ()))
        for i, (g, n) in enumerate(zip(graphs, lengths, strict=True)):
            if g.n_nodes != n:
                raise GraphError(
                    f"example {i}: the junction tree has {g.n_nodes} nodes but the example {n}"
                    " items"
                )
            for t, a in g.factor_arities.items():
                if self.factor_arities is not None and t >= len(self.factor_arities):
                    raise GraphError(
                        f"example {i}: factor type {t} is not declared; expected a type in"
                        f" [0, {len(self.factor_arities)})"
                    )
                if arities.setdefault(t, a) != a:
                    raise GraphError(
                        f"example {i}: factor type {t} has arity {a}; expected {arities[t]}"
                    )
        missing = [t for t in range(len(arities)) if t not in arities]
        if missing:
            raise GraphError(f"factor type {missing[0]} is used by no example; give factor_arities")
        object.__setattr__(self, "factor_arities", tuple(arities[t] for t in range(len(arities))))
        K = self.nodes.n_labels
        for i, g in enumerate(graphs):
            big = max(len(c) for c in g.cliques)
            if K**big > MAX_TABLE:
                c = next(j for j, c in enumerate(g.cliques) if len(c) == big)
                raise GraphError(
                    f"example {i}: clique {c} has {K}^{big} = {K**big} table entries; expected at"
                    f" most {MAX_TABLE}"
                )

    @cached_property
    def region_sizes(self) -> NDArray[np.int64]:
        """Table entries (cliques and separators) of every example."""
        K = self.nodes.n_labels
        return np.array([region(g, K)[2] for g in self.graphs], INDEX)

    @property
    def n_table_entries(self) -> int:
        return int(self.region_sizes.sum())

    @cached_property
    def packed(self) -> tuple[tuple, tuple, tuple]:
        """(jt, assign, runs): see kernels.structures.junction, kernels.structures.junction_batch
        and kernels.numerics.segments; ``runs = (seg_start, seg_off, seg_len, seg_coef)``."""
        return pack(self.graphs, self.nodes.n_labels, self.region_sizes)

    @cached_property
    def max_table(self) -> int:
        K = self.nodes.n_labels
        return max(K ** max(len(c) for c in g.cliques) for g in self.graphs)

    # the SequenceData interface the problem and the monitor read
    def __getattr__(self, name: str):
        if name in ("nodes", "graphs", "factor_arities", "packed"):
            raise AttributeError(name)
        return getattr(self.nodes, name)


class JunctionOracle:
    """log Z, marginals, value and gradient, MAP of junction-tree examples."""

    def __init__(self, data: JunctionData, feature_map: FeatureMap) -> None:
        if data.n_labels != feature_map.n_labels:
            raise ValueError(
                f"data has {data.n_labels} labels but the feature map {feature_map.n_labels}"
            )
        fa, da = feature_map.factor_arities, data.factor_arities
        if fa[: len(da)] != da:
            raise GraphError(
                f"the junction trees use factor arities {da}; the feature map has {fa}"
            )
        self.data, self.feature_map = data, feature_map
        self._data = data.nodes.arrays()
        self._jt, self._assign, self._runs = data.packed
        fm = feature_map
        woff = np.array([fm.factor_offset(t) for t in range(len(fa))] or [0], INDEX)
        self._feat = (woff, np.array(fa or (1,), INDEX))
        self._dims = (fm.n_attributes, fm.n_labels, fm.n_bias_rows)
        self._ws = make_workspace(data, fm.n_labels)
        self._ews = exp_workspace(fm)

    @property
    def n_sequences(self) -> int:
        return self.data.n_sequences

    @property
    def packed_structure(self) -> tuple:
        """(jt, assign, feat, runs): the structure as kernels.junction_sdca takes it."""
        return self._jt, self._assign, self._feat, self._runs

    def marginals(self, i: int, w: NDArray[np.float64]) -> tuple[float, list, list]:
        """(log Z_i, clique log-marginals, separator log-marginals (None at roots)) of example
        i; the table of a clique of m nodes has shape (K,) * m, in the clique's node order."""
        if not 0 <= i < self.n_sequences:
            raise IndexError(f"example index {i} out of range [0, {self.n_sequences})")
        log_z, marg = self.tables(i, w)
        g, K = self.data.graphs[i], self.feature_map.n_labels
        c0 = int(self._jt[0][i])
        tab_off, sep_off = self._jt[8], self._jt[9]
        cliques, seps = [], []
        for c, nodes in enumerate(g.cliques):
            t0, m = int(tab_off[c0 + c]), len(nodes)
            cliques.append(marg[t0 : t0 + K**m].reshape((K,) * m).copy())
            if g.clique_parents[c] < 0:
                seps.append(None)
            else:
                s0, ms = int(sep_off[c0 + c]), len(g.separator(c))
                seps.append(marg[s0 : s0 + K**ms].reshape((K,) * ms).copy())
        return float(log_z), cliques, seps

    def tables(self, i: int, w: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        """(log Z_i, example i's clique and separator log-marginals as its flat region)."""
        if not 0 <= i < self.n_sequences:
            raise IndexError(f"example index {i} out of range [0, {self.n_sequences})")
        w = self.feature_map.check_weights(w)
        log_z = kernels.marginals(self._data, self._jt, self._assign, self._feat, i, w,
                                  self._dims, self._ws)  # fmt: skip
        return float(log_z), self._ws[1][2][: int(self.data.region_sizes[i])].copy()

    def log_partition(self, i: int, w: NDArray[np.float64]) -> float:
        return self.marginals(i, w)[0]

    def loss_sum(self, w: NDArray[np.float64]) -> float:
        """sum_i log Z_i - w^T F_i."""
        return self.value_and_gradient(w)[0]

    def value_and_gradient(self, w: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        """sum_i log Z_i - w^T F_i and its gradient sum_i E_nu_i F - F_i."""
        w = self.feature_map.check_weights(w)
        grad = np.empty(self.feature_map.n_features, FLOAT)
        total, bad = junction_scaled.batch_value_and_expected(
            self._data,
            self._jt,
            self._assign,
            self._feat,
            w,
            self._dims,
            self._ws,
            self._ews,
            grad,
        )
        if bad >= 0 or not math.isfinite(total):
            raise FloatingPointError(f"non-finite log partition of example {max(bad, 0)}")
        gold = self.gold_features()
        grad -= gold
        return float(total - dot(w, gold)), grad

    def expected_features(self, log_tables: NDArray[np.floating]) -> NDArray[np.float64]:
        """sum_i E_mu_i F for tables packed like the dual state."""
        out = self.feature_map.zeros()
        scratch = (self._ws[1][3], self._ws[1][4], self._ws[0][5])
        kernels.expected_features(self._data, self._jt, self._assign, self._feat, log_tables,
                                  self._dims, out, scratch)  # fmt: skip
        return out

    def gold_features(self) -> NDArray[np.float64]:
        """Read-only sum_i F(x_i, y_i) (every label must be known)."""
        if getattr(self, "_gold", None) is None:
            check_labels(self.data)
            gold = self.feature_map.zeros()
            kernels.gold_features(self._data, self._jt, self._assign, self._feat, self._dims, gold)
            gold.setflags(write=False)
            self._gold = gold
        return self._gold

    def predict(self, w: NDArray[np.float64]) -> NDArray[np.int64]:
        """MAP label of every node, packed like the data's labels."""
        w = self.feature_map.check_weights(w)
        out = np.empty(self.data.n_items, INDEX)
        backptr = np.empty(int(self.data.region_sizes.max()), INDEX)
        chosen = np.empty(max(g.n_cliques for g in self.data.graphs), INDEX)
        kernels.predict(self._data, self._jt, self._assign, self._feat, w, self._dims, self._ws,
                        backptr, chosen, out)  # fmt: skip
        return out


def check_labels(data: JunctionData) -> None:
    """GraphError naming the first example and node whose label is not in [0, K)."""
    labels, K = data.labels, data.n_labels
    bad = np.flatnonzero((labels < 0) | (labels >= K))
    if bad.size:
        g = int(bad[0])
        i = int(np.searchsorted(data.seq_offsets, g, side="right")) - 1
        raise GraphError(
            f"example {i}: node {g - int(data.seq_offsets[i])}: label {int(labels[g])} is out of"
            f" range; expected a known label in [0, {K})"
        )


def exp_workspace(fm: FeatureMap) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(exponentiated factor blocks, their log scales) for kernels.structures.junction_scaled."""
    n = fm.n_features - fm.factor_offset(0) if fm.factor_arities else 0
    return np.empty(n), np.empty(len(fm.factor_arities))


def make_workspace(data: JunctionData, K: int) -> tuple[tuple, tuple]:
    """(message workspace, batch workspace) sized for the largest example."""
    R = int(data.region_sizes.max())
    table = data.max_table
    cliques = max(g.n_cliques for g in data.graphs)
    mws = (np.empty(R), np.empty(R), np.empty(table), np.empty(table), np.empty(cliques),
           np.empty(table, INDEX))  # fmt: skip
    bws = (np.empty((max(data.max_length, 1), K)), np.empty(R), np.empty(R), np.empty(table),
           np.empty(K))  # fmt: skip
    return mws, bws


@dataclass(eq=False)
class JunctionProblem(Problem):
    """A :class:`Problem` on junction-tree examples (``train``/``test`` are JunctionData)."""

    def __post_init__(self) -> None:
        check_labels(self.train)
        super().__post_init__()

    oracle_class: ClassVar[type] = JunctionOracle

    @cached_property
    def structure(self) -> JunctionStructure:
        return JunctionStructure(self)


def junction_problem(
    train: JunctionData,
    *,
    n_bias_rows: int = 3,
    regularization: float | None = None,
    test: JunctionData | None = None,
    name: str = "",
) -> JunctionProblem:
    """A JunctionProblem with one weight block per factor type of train (or test)."""
    arities = train.factor_arities
    if test is not None and len(test.factor_arities) > len(arities):
        arities = test.factor_arities
    if not arities:
        raise GraphError(
            "the junction trees have no factors; expected at least one factor type (e.g. pairs"
            " of labels) tying the nodes of a clique"
        )
    fm = FeatureMap(train.n_attributes, train.n_labels, n_bias_rows, 0, arities)
    return JunctionProblem(
        train=train, feature_map=fm, regularization=regularization, test=test, name=name
    )


def second_order_data(nodes: SequenceData) -> JunctionData:
    """Every example as a second-order chain (bigram type 0: K^2, trigram type 1: K^3)."""
    lengths = nodes.lengths.tolist()
    graphs = tuple(second_order_chain(T, example=i) for i, T in enumerate(lengths))
    return JunctionData(nodes, graphs, factor_arities=(2, 3))


def junctions_from_cliques(
    nodes: SequenceData,
    cliques: Sequence[Sequence[Sequence[int]]],
    factors: Sequence[Sequence[tuple[Sequence[int], int]]],
    clique_parents: Sequence[Sequence[int] | None] | None = None,
    factor_arities: tuple[int, ...] | None = None,
) -> JunctionData:
    """JunctionData from per-example cliques, factors and (optionally) clique parents; errors
    name the example."""
    lengths = nodes.lengths.tolist()
    parents = clique_parents if clique_parents is not None else [None] * len(lengths)
    if not len(cliques) == len(factors) == len(parents) == len(lengths):
        raise GraphError(
            f"{len(cliques)} clique lists, {len(factors)} factor lists and {len(parents)} parent"
            f" arrays for {len(lengths)} examples; expected one each"
        )
    graphs = tuple(
        JunctionTree(
            T,
            tuple(tuple(c) for c in cs),
            None if p is None else np.asarray(p, INDEX),
            tuple((tuple(s), t) for s, t in fs),
            example=i,
        )  # fmt: skip
        for i, (T, cs, fs, p) in enumerate(zip(lengths, cliques, factors, parents, strict=True))
    )
    return JunctionData(nodes, graphs, factor_arities)


class JunctionStructure(ChainStructure):
    """Junction trees (:class:`~crfsdca.structures.junction.JunctionProblem`): every clique and
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
            order2=tuple(fm.factor_arities) == (2, 3)
            and all(g.n_nodes <= 2 or is_second_order_chain(g) for g in data.graphs),
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
        blocks, K = self.blocks, self.problem.feature_map.n_labels
        mws = make_workspace(self.problem.train, K)[0]
        sws = junction_blocks.sag_workspace(blocks, max_unique(self.layout), mws)
        return sag_epoch.make_workspace(blocks.dims[0] + blocks.dims[2] + blocks.n_factor_rows, sws)

    def oeg_workspace(self) -> tuple:
        b, data = self.blocks, self.problem.train
        mws = make_workspace(data, b.dims[1])[0]
        dims = (*b.dims, b.n_factor_rows)
        sizes = (b.max_block, b.sizes[0])
        return junction_eg.make_workspace(b.sizes[2], dims, max_unique(self.layout), mws, sizes)

    def dual_size(self, dtype) -> tuple[int, str]:
        data, d = self.problem.train, self.problem.feature_map.n_features
        entries = f"{data.n_table_entries:.3g} clique and separator table entries"
        detail = f"({entries} x {np.dtype(dtype).itemsize} bytes)"
        return junction_dual_bytes(data, d, dtype), detail

    def smoothed_dual(self, epsilon: float, dtype=np.float64) -> DualState:
        return junction_smoothed_empirical(self.problem, epsilon, dtype)

    def gibbs_dual(self, score: float, dtype=np.float64) -> DualState:
        raise ValueError(
            "junction trees start from init='smoothed' (or OEG's 'uniform'); got 'gibbs'"
        )


# -- dual starts ----------------------------------------------------------------------------------
def junction_dual_bytes(data: JunctionData, n_features: int, dtype=np.float64) -> int:
    """Bytes of the junction dual state: the tables, three per-example arrays and w."""
    return np.dtype(dtype).itemsize * data.n_table_entries + 8 * (3 * data.n_sequences + n_features)


def junction_smoothed_empirical(problem: JunctionProblem, epsilon: float, dtype) -> DualState:
    """mu_t = epsilon / K^|t| + (1 - epsilon) 1[y_t = gold] on every clique and separator
    table t (consistent: a clique's projection is its separator's table)."""
    if not 0.0 < epsilon <= 1.0:
        raise ValueError(f"init_epsilon must be in (0, 1]; got {epsilon}")
    data, oracle = problem.train, problem.oracle
    check_labels(data)
    tables = np.empty(data.n_table_entries, dtype)
    kernels.empirical_tables(
        oracle._data, oracle._jt, problem.feature_map.n_labels, epsilon, tables
    )
    return junction_finish_state(problem, tables)


def junction_finish_state(problem: JunctionProblem, tables) -> DualState:
    n, structure = problem.n_sequences, problem.structure
    empty = np.empty(0, tables.dtype)
    return DualState(
        log_node=np.empty((0, problem.feature_map.n_labels), tables.dtype),
        log_edge=tables,
        entropies=structure.entropies(empty, tables),
        gap_estimates=np.full(n, INITIAL_GAP),
        weights=structure.weights_from_dual(empty, tables),
        step_sizes=np.full(n, 0.5),
    )


def junction_weights_from_dual(problem, tables) -> NDArray[np.float64]:
    """w_hat(mu) of clique and separator tables packed like the dual state."""
    return problem.structure.weights_from_dual(np.empty(0), tables)
