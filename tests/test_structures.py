"""The segment table of each structure gives the entropy of its own entropy kernel."""

from __future__ import annotations

import numpy as np
from _synthetic import random_sequences
from test_tree_oracle import tree_data

from crfsdca.features import FeatureMap
from crfsdca.junction import JunctionTree
from crfsdca.junction_oracle import JunctionData, JunctionOracle, second_order_data
from crfsdca.kernels import junction_sdca, sdca_epoch, segments, tree_sdca
from crfsdca.oracle import Oracle
from crfsdca.structures import ChainStructure, JunctionStructure, TreeStructure, merge_runs
from crfsdca.tree_oracle import TreeOracle


def stacked(oracle, n, w):
    """Every example's log-marginals at w, packed like the dual state."""
    parts = [[a.copy() for a in oracle.marginals(i, w)[1:]] for i in range(n)]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def segment_entropies(structure, log_node, log_edge):
    return np.array([
        segments.entropy(structure.block(i, log_node, log_edge), structure.segments(i))
        for i in range(structure.n_examples)
    ])  # fmt: skip


def test_merge_runs_joins_equal_neighbours_and_drops_empty_runs():
    off, length, coef = merge_runs([3, 3, 0, 3, 9], [0, -1, 2, -1, 1])
    assert off.tolist() == [0, 3, 9] and length.tolist() == [3, 6, 9]
    assert coef.tolist() == [0.0, -1.0, 1.0]


def test_chain_segment_table_entropy_equals_the_chain_kernel():
    nodes = random_sequences(2, n=12, max_T=6, K=3, A=5)
    fm = FeatureMap(5, 3, 3)
    log_node, log_edge = stacked(Oracle(nodes, fm), 12, np.random.default_rng(0).normal(size=33))
    structure = ChainStructure(nodes)
    assert structure.segments(0)[2].tolist() == [1.0]  # a single node (random_sequences: T=1)
    T = int(nodes.lengths[-1])
    assert structure.segments(11)[1].tolist() == [3, 3 * (T - 2), 3, 9 * (T - 1)]
    want = sdca_epoch.all_entropies(nodes.seq_offsets, log_node, log_edge)
    got = segment_entropies(structure, log_node, log_edge)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    assert want.min() > 0


def test_tree_segment_table_entropy_equals_the_tree_kernel():
    data = tree_data(seed=3, n=10, max_T=6)
    fm = FeatureMap(data.n_attributes, 3, 3, 2)
    w = np.random.default_rng(1).normal(size=fm.n_features)
    log_node, log_edge = stacked(TreeOracle(data, fm), 10, w)
    want = tree_sdca.all_entropies(data.seq_offsets, data.packed, log_node, log_edge)
    got = segment_entropies(TreeStructure(data), log_node, log_edge)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_junction_segment_table_entropy_equals_the_chain_kernel():
    """A first-order chain given as a junction tree (edge cliques, node separators), and a
    second-order chain without trigram weights, have the chain kernel's entropies."""
    nodes = random_sequences(4, n=10, max_T=6, K=3, A=5)
    graphs = tuple(
        JunctionTree(T, tuple((t, t + 1) for t in range(T - 1)) or ((0,),), None,
                     tuple(((t, t + 1), 0) for t in range(T - 1)))
        for T in nodes.lengths.tolist()
    )  # fmt: skip
    w = np.random.default_rng(5).normal(size=33)
    chain = stacked(Oracle(nodes, FeatureMap(5, 3, 3)), 10, w)
    want = sdca_epoch.all_entropies(nodes.seq_offsets, *chain)
    assert want.min() > 0
    second = FeatureMap(5, 3, 3, 0, (2, 3))
    cases = [(JunctionData(nodes, graphs, (2,)), FeatureMap(5, 3, 3, 0, (2,)), w),
             (second_order_data(nodes), second, np.concatenate([w, np.zeros(27)]))]  # fmt: skip
    for data, fm, weights in cases:
        oracle = JunctionOracle(data, fm)
        tables = np.concatenate([oracle.tables(i, weights)[1] for i in range(10)])
        got = segment_entropies(JunctionStructure(data), np.empty((0, 3)), tables)
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-14)
        kernel = junction_sdca.all_entropies(oracle.packed_structure, tables)
        np.testing.assert_allclose(kernel, want, rtol=1e-11, atol=1e-14)
