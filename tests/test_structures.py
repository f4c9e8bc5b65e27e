"""Each structure's run table gives the junction-tree entropy of its blocks."""

from __future__ import annotations

import numpy as np
from _synthetic import random_sequences
from test_tree_oracle import tree_data

from crfsdca.features import FeatureMap
from crfsdca.junction import JunctionTree
from crfsdca.junction_oracle import JunctionData, JunctionOracle, JunctionProblem, second_order_data
from crfsdca.kernels import sdca as K_sdca
from crfsdca.oracle import Oracle
from crfsdca.problem import Problem
from crfsdca.structures import ChainStructure, JunctionStructure, TreeStructure, merge_runs
from crfsdca.tree_oracle import TreeOracle, TreeProblem


def stacked(oracle, n, w):
    """Every example's log-marginals at w, packed like the dual state."""
    parts = [[a.copy() for a in oracle.marginals(i, w)[1:]] for i in range(n)]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def test_merge_runs_joins_equal_neighbours_and_drops_empty_runs():
    off, length, coef = merge_runs([3, 3, 0, 3, 9], [0, -1, 2, -1, 1])
    assert off.tolist() == [0, 3, 9] and length.tolist() == [3, 6, 9]
    assert coef.tolist() == [0.0, -1.0, 1.0]


def chain_entropies(nodes, log_node, log_edge):
    """The chain kernel's block entropies (``kernels.sdca.block_entropy``)."""
    so = nodes.seq_offsets
    return np.array([
        K_sdca.block_entropy(log_node[so[i] : so[i + 1]], log_edge[so[i] - i : so[i + 1] - i - 1])
        for i in range(nodes.n_sequences)
    ])  # fmt: skip


def test_chain_run_table_entropy_equals_the_chain_kernel():
    nodes = random_sequences(2, n=12, max_T=6, K=3, A=5)
    fm = FeatureMap(5, 3, 3)
    log_node, log_edge = stacked(Oracle(nodes, fm), 12, np.random.default_rng(0).normal(size=33))
    structure = ChainStructure(Problem(train=nodes, feature_map=fm))
    runs = structure.runs
    assert runs.coef[runs.start[0] : runs.start[1]].tolist() == [1.0]  # a single node (T = 1)
    T = int(nodes.lengths[-1])
    a, b = runs.start[11], runs.start[12]
    assert (runs.hi - runs.lo)[a:b].tolist() == [9 * (T - 1), 3, 3 * (T - 2), 3]
    assert runs.coef[a:b].tolist() == [1.0, 0.0, -1.0, 0.0]
    want = chain_entropies(nodes, log_node, log_edge)
    np.testing.assert_allclose(structure.entropies(log_node, log_edge), want, rtol=1e-12)
    assert want.min() > 0


def test_tree_run_table_entropy_equals_the_junction_tree_formula():
    """sum_edges H(mu_e) + sum_v (1 - deg v) H(mu_v), written out in NumPy."""
    data = tree_data(seed=3, n=10, max_T=6)
    fm = FeatureMap(data.n_attributes, 3, 3, 2)
    w = np.random.default_rng(1).normal(size=fm.n_features)
    log_node, log_edge = stacked(TreeOracle(data, fm), 10, w)
    parents, _, _, child_start, _ = data.packed
    degree = np.diff(child_start) + (parents >= 0)
    h_node = -(np.exp(log_node) * log_node).sum(axis=1)
    h_edge = -(np.exp(log_edge) * np.where(np.isfinite(log_edge), log_edge, 0)).sum(axis=(1, 2))
    terms = (1 - degree) * h_node + np.where(parents >= 0, h_edge, 0.0)
    want = np.add.reduceat(terms, data.seq_offsets[:-1])
    structure = TreeStructure(TreeProblem(train=data, feature_map=fm))
    np.testing.assert_allclose(structure.entropies(log_node, log_edge), want, rtol=1e-12)


def test_junction_run_table_entropy_equals_the_chain_kernel():
    """A first-order chain given as a junction tree (edge cliques, node separators), and a
    second-order chain without trigram weights, have the chain kernel's entropies."""
    nodes = random_sequences(4, n=10, max_T=6, K=3, A=5)
    graphs = tuple(
        JunctionTree(T, tuple((t, t + 1) for t in range(T - 1)) or ((0,),), None,
                     tuple(((t, t + 1), 0) for t in range(T - 1)))
        for T in nodes.lengths.tolist()
    )  # fmt: skip
    w = np.random.default_rng(5).normal(size=33)
    want = chain_entropies(nodes, *stacked(Oracle(nodes, FeatureMap(5, 3, 3)), 10, w))
    assert want.min() > 0
    second = FeatureMap(5, 3, 3, 0, (2, 3))
    cases = [(JunctionData(nodes, graphs, (2,)), FeatureMap(5, 3, 3, 0, (2,)), w),
             (second_order_data(nodes), second, np.concatenate([w, np.zeros(27)]))]  # fmt: skip
    for data, fm, weights in cases:
        oracle = JunctionOracle(data, fm)
        tables = np.concatenate([oracle.tables(i, weights)[1] for i in range(10)])
        structure = JunctionStructure(JunctionProblem(train=data, feature_map=fm))
        got = structure.entropies(np.empty((0, 3)), tables)
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-14)
