"""Tree sum-product and max-product against brute-force enumeration; graph validation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from _reference import log_marginals

from crfsdca.errors import GraphError
from crfsdca.kernels.structures import tree as kt
from crfsdca.structures.graphs import Tree, chain_graph

# The tree and junction-tree kernels against brute force and the solvers on them: their kernels
# compile for minutes on an empty cache, so they run in the slow set (`.ci/run` runs it); the
# default set trains, saves and tags trees and second-order chains through the front door.
pytestmark = pytest.mark.slow

TREES = {
    "single node": [-1],
    "edge": [-1, 0],
    "chain of 4": [-1, 0, 1, 2],
    "star of 6": [-1, 0, 0, 0, 0, 0],
    "root in the middle": [2, 2, -1, 2, 3, 3, 5],
    "forest": [-1, 0, -1, 2, 2, -1, 5],
    "deep and wide": [1, -1, 1, 0, 0, 3, 2],
}


def workspace(n, K):
    return tuple(np.empty((n, K)) for _ in range(4)) + (np.empty(K),)


def potentials(rng, n, K, n_types, scale=1.0):
    return scale * rng.normal(size=(n, K)), scale * rng.normal(size=(n_types, K, K))


def score_all(tree, unary, log_pair):
    """Scores of every labelling (K^n rows) and the labellings."""
    n, K = unary.shape
    ys = np.array(list(itertools.product(range(K), repeat=n)))
    score = unary[np.arange(n), ys].sum(1)
    for v in range(n):
        p = tree.parents[v]
        if p >= 0:
            score += log_pair[tree.edge_types[v]][ys[:, p], ys[:, v]]
    return ys, score


def brute(tree, unary, log_pair):
    """(log Z, log node (n, K), log edge (n, K, K) rows of non-roots, MAP labels, its score)."""
    n, K = unary.shape
    ys, score = score_all(tree, unary, log_pair)
    top = score.max()
    log_z = top + np.log(np.exp(score - top).sum())
    p = np.exp(score - log_z)
    node = np.zeros((n, K))
    edge = np.zeros((n, K, K))
    for y, py in zip(ys, p, strict=True):
        node[np.arange(n), y] += py
        for v in range(n):
            if tree.parents[v] >= 0:
                edge[v, y[tree.parents[v]], y[v]] += py
    best = int(np.argmax(score))
    with np.errstate(divide="ignore"):
        return log_z, np.log(node), np.log(edge), ys[best], score[best], p


def run(tree, unary, log_pair):
    n, K = unary.shape
    ws = workspace(n, K)
    args = (unary, log_pair, tree.parents, tree.edge_types, tree.order)
    log_z = kt.upward(*args, ws)
    log_node, log_edge = np.empty((n, K)), np.full((n, K, K), np.nan)
    root_z = np.empty(n)
    children = (tree.children_start, tree.children)
    kt.downward(*args, children, ws, root_z, log_node, log_edge)
    labels = np.empty(n, np.int64)
    best = kt.tree_viterbi(*args, workspace(n, K), np.empty((n, K), np.int64), labels)
    return log_z, log_node, log_edge, labels, best


@pytest.mark.parametrize("name", sorted(TREES))
@pytest.mark.parametrize("scale", [1.0, 30.0])
def test_tree_kernels_equal_brute_force(name, scale):
    parents = np.array(TREES[name])
    n, K = parents.size, 3
    rng = np.random.default_rng(len(name) + int(scale))
    types = rng.integers(0, 2, n)
    tree = Tree(parents, edge_types=types)
    unary, log_pair = potentials(rng, n, K, 2, scale)
    log_z, log_node, log_edge, labels, best = run(tree, unary, log_pair)
    ref_z, ref_node, ref_edge, ref_labels, ref_best, p = brute(tree, unary, log_pair)
    assert log_z == pytest.approx(ref_z, rel=1e-12, abs=1e-10)
    np.testing.assert_allclose(log_node, ref_node, rtol=1e-10, atol=1e-10)
    edges = tree.parents >= 0
    np.testing.assert_allclose(log_edge[edges], ref_edge[edges], rtol=1e-10, atol=1e-10)
    assert best == pytest.approx(ref_best, rel=1e-12, abs=1e-12)
    np.testing.assert_array_equal(labels, ref_labels)
    # entropy and KL: edges minus nodes weighted by (degree - 1), against the joint law
    h = kt.tree_entropy_terms(log_node, log_edge, tree.parents, tree.degrees)
    assert h == pytest.approx(-np.sum(p * np.log(p)), rel=1e-10, abs=1e-10)
    unary2, pair2 = potentials(np.random.default_rng(99), n, K, 2)
    _, q_node, q_edge, _, _ = run(tree, unary2, pair2)
    q = brute(tree, unary2, pair2)[5]
    kl = kt.tree_kl_terms(log_node, log_edge, q_node, q_edge, tree.parents, tree.degrees)
    assert kl == pytest.approx(np.sum(p * np.log(p / q)), rel=1e-9, abs=1e-10)


def test_a_chain_given_as_a_tree_gives_the_chains_results():
    rng = np.random.default_rng(4)
    T, K = 6, 4
    unary, log_pair = potentials(rng, T, K, 1, 2.0)
    log_z, log_node, log_edge, _, _ = run(chain_graph(T), unary, log_pair)
    ref_z, ref_node, ref_edge = log_marginals(unary, log_pair[0])
    assert log_z == pytest.approx(ref_z, rel=1e-12)
    np.testing.assert_allclose(log_node, ref_node, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(log_edge[1:], ref_edge, rtol=1e-12, atol=1e-12)


def test_reversing_an_edge_transposes_its_pairwise_table():
    rng = np.random.default_rng(5)
    K = 3
    unary, log_pair = potentials(rng, 3, K, 1)
    forward = Tree(np.array([-1, 0, 1]))  # 0 -> 1 -> 2
    backward = Tree(np.array([1, -1, 1]))  # 1 is the root: 1 -> 0 reversed, 1 -> 2 kept
    pairs = np.stack([log_pair[0], log_pair[0].T])
    _, node_f, edge_f, _, _ = run(forward, unary, log_pair)
    b = Tree(backward.parents, edge_types=np.array([1, 0, 0]))  # edge 1 -> 0 uses the transpose
    log_z_b, node_b, edge_b, _, _ = run(b, unary, pairs)
    assert log_z_b == pytest.approx(run(forward, unary, log_pair)[0], rel=1e-12)
    np.testing.assert_allclose(node_b, node_f, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(edge_b[0], edge_f[1].T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(edge_b[2], edge_f[2], rtol=1e-12, atol=1e-12)


def test_forbidden_labels_stay_exact():
    """-inf scores (forbidden labels and transitions): marginals are exact zeros, no NaN."""
    tree = Tree(np.array([-1, 0, 0, 1]))
    rng = np.random.default_rng(6)
    unary, log_pair = potentials(rng, 4, 3, 1)
    unary[2, 1] = -np.inf
    log_pair[0, 0, 2] = -np.inf
    log_z, log_node, log_edge, labels, _ = run(tree, unary, log_pair)
    ref_z, ref_node, ref_edge, ref_labels, _, _ = brute(tree, unary, log_pair)
    assert log_z == pytest.approx(ref_z, rel=1e-12)
    assert np.isneginf(log_node[2, 1]) and not np.isnan(log_node).any()
    np.testing.assert_allclose(np.exp(log_node), np.exp(ref_node), atol=1e-12)
    np.testing.assert_allclose(np.exp(log_edge[1:]), np.exp(ref_edge[1:]), atol=1e-12)
    np.testing.assert_array_equal(labels, ref_labels)


@pytest.mark.parametrize(
    ("parents", "match"),
    [
        ([-1, 0, 5], r"node 2: parent 5 is out of range; expected -1 \(a root\) or a node"),
        ([-1, 1], r"node 1: is its own parent \(a self-loop\)"),
        ([-1, 2, 1], r"node 1: lies on a cycle of parents"),
        ([1, 0], r"node 0: lies on a cycle"),
        ([], r"parents must be a non-empty 1-d array"),
        ([-1, -2], r"node 1: parent -2 is out of range"),
    ],
)
def test_bad_parent_arrays(parents, match):
    with pytest.raises(GraphError, match=match):
        Tree(np.array(parents, dtype=np.int64))


def test_errors_name_the_example_and_edge_types_are_checked():
    with pytest.raises(GraphError, match=r"example 7: node 1: is its own parent"):
        Tree(np.array([-1, 1]), example=7)
    with pytest.raises(GraphError, match=r"edge_types must be 3 integers, one per node"):
        Tree(np.array([-1, 0, 0]), edge_types=np.array([0, 1]))
    with pytest.raises(GraphError, match=r"node 2: edge type -1 is negative"):
        Tree(np.array([-1, 0, 0]), edge_types=np.array([0, 0, -1]))
    star = Tree(np.array([-1, 0, 0, 0]), edge_types=np.array([-5, 0, 2, 1]))  # a root's type
    assert star.n_edges == 3 and star.n_edge_types == 3
    assert star.degrees.tolist() == [3, 1, 1, 1] and star.order.tolist() == [0, 1, 2, 3]
