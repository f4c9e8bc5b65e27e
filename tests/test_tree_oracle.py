"""The tree oracle: a chain as a tree equals the chain oracle; gradients; L-BFGS on trees."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from _synthetic import random_sequences

from crfsdca.errors import GraphError
from crfsdca.features.feature_map import FeatureMap
from crfsdca.solvers.lbfgs import LBFGS, LBFGSConfig
from crfsdca.solvers.monitor import Monitor
from crfsdca.structures.chain import Oracle
from crfsdca.structures.tree import TreeData, TreeOracle, tree_problem, trees_from_parents

# The tree and junction-tree kernels against brute force and the solvers on them: their kernels
# compile for minutes on an empty cache, so they run in the slow set (`.ci/run` runs it); the
# default set trains, saves and tags trees and second-order chains through the front door.
pytestmark = pytest.mark.slow


def random_trees(lengths, rng, n_types=2):
    parents, types = [], []
    for T in lengths:
        perm = rng.permutation(T)  # a random recursive tree on shuffled node names
        p = np.full(T, -1)
        for rank in range(1, T):
            p[perm[rank]] = perm[rng.integers(0, rank)]
        if T > 3 and rng.random() < 0.3:
            p[perm[T - 1]] = -1  # sometimes a forest
        parents.append(p)
        types.append(rng.integers(0, n_types, T))
    return trees_from_parents(parents, types)


def tree_data(seed=0, n=8, max_T=5, K=3, A=6, n_types=2):
    nodes = random_sequences(seed, n=n, max_T=max_T, K=K, A=A)
    rng = np.random.default_rng(seed + 100)
    return TreeData(nodes, random_trees(nodes.lengths.tolist(), rng, n_types))


@pytest.mark.parametrize("n_bias_rows", [0, 3])
def test_a_chain_given_as_trees_equals_the_chain_oracle(n_bias_rows):
    nodes = random_sequences(3, n=10, max_T=6, K=4, A=7)
    chains = trees_from_parents([np.arange(-1, T - 1) for T in nodes.lengths.tolist()])
    fm = FeatureMap(7, 4, n_bias_rows)
    w = np.random.default_rng(1).normal(size=fm.n_features)
    chain, tree = Oracle(nodes, fm), TreeOracle(TreeData(nodes, chains), fm)
    value, grad = chain.value_and_gradient(w)
    t_value, t_grad = tree.value_and_gradient(w)
    assert t_value == pytest.approx(value, rel=1e-12)
    np.testing.assert_allclose(t_grad, grad, rtol=1e-11, atol=1e-12)
    np.testing.assert_array_equal(tree.predict(w), chain.predict(w))
    for i in range(nodes.n_sequences):
        log_z, log_node, log_edge = chain.marginals(i, w)
        t_z, t_node, t_edge = tree.marginals(i, w)
        assert t_z == pytest.approx(log_z, rel=1e-12)
        np.testing.assert_allclose(t_node, log_node, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(t_edge[1:], log_edge, rtol=1e-12, atol=1e-12)


def brute_loss(data, fm, w):
    """sum_i log Z_i - score of the gold labelling, by enumeration."""
    K = fm.n_labels
    emission, bias, pairs = fm.emission(w), fm.bias(w), fm.transitions(w)
    total = 0.0
    for i, tree in enumerate(data.graphs):
        s, e = data.seq_offsets[i], data.seq_offsets[i + 1]
        n = e - s
        unary = np.zeros((n, K))
        for v in range(n):
            for q in range(data.attr_offsets[s + v], data.attr_offsets[s + v + 1]):
                unary[v] += data.attr_values[q] * emission[data.attr_ids[q]]
            if fm.n_bias_rows:
                unary[v] += bias[0]
                unary[v] += bias[1] if tree.parents[v] < 0 else 0
                unary[v] += bias[2] if not np.any(tree.parents == v) else 0

        def score(y, tree=tree, unary=unary, n=n):
            total = unary[np.arange(n), y].sum()
            for v in range(n):
                if tree.parents[v] >= 0:
                    total += pairs[tree.edge_types[v], y[tree.parents[v]], y[v]]
            return total

        scores = np.array([score(np.array(y)) for y in itertools.product(range(K), repeat=n)])
        top = scores.max()
        total += top + np.log(np.exp(scores - top).sum()) - score(data.labels[s:e])
    return total


@pytest.mark.parametrize("n_bias_rows", [0, 3])
def test_value_equals_brute_force_and_gradient_finite_differences(n_bias_rows):
    data = tree_data(seed=4)
    fm = FeatureMap(data.n_attributes, data.n_labels, n_bias_rows, 2)
    rng = np.random.default_rng(2)
    w = rng.normal(size=fm.n_features)
    oracle = TreeOracle(data, fm)
    value, grad = oracle.value_and_gradient(w)
    assert value == pytest.approx(brute_loss(data, fm, w), rel=1e-11)
    direction = rng.normal(size=fm.n_features)
    h = 1e-6
    up = oracle.value_and_gradient(w + h * direction)[0]
    down = oracle.value_and_gradient(w - h * direction)[0]
    assert grad @ direction == pytest.approx((up - down) / (2 * h), rel=1e-6)


def test_lbfgs_trains_a_tree_crf_to_a_certified_optimum():
    train, test = tree_data(seed=6, n=30, max_T=6), tree_data(seed=7, n=10, max_T=6)
    problem = tree_problem(train, test=test)
    assert problem.feature_map.n_edge_types == 2
    config = LBFGSConfig(tol=1e-10, max_epochs=2000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = LBFGS(config).solve(problem, Monitor(problem, "lbfgs", config))
    last = result.trace.records[-1]
    assert result.stop_reason == "tol" and last.gap <= 1e-10
    assert last.primal == pytest.approx(problem.primal(result.weights), rel=1e-12)
    pred = problem.test_oracle.predict(result.weights)
    assert pred.shape == test.labels.shape and pred.min() >= 0
    # the monitor scored the test trees: its error is that of the oracle's own predictions
    error = np.mean(pred != test.labels)
    assert 0.0 < error < 1.0 and last.test_error == pytest.approx(error, rel=1e-12)


def test_bad_tree_data_names_the_example():
    nodes = random_sequences(0, n=3, max_T=4)
    lengths = nodes.lengths.tolist()
    trees = list(trees_from_parents([np.arange(-1, T - 1) for T in lengths]))
    with pytest.raises(GraphError, match=r"2 trees for 3 examples"):
        TreeData(nodes, tuple(trees[:2]))
    wrong = trees_from_parents([np.arange(-1, lengths[1])])[0]  # one node too many
    trees[1] = wrong
    with pytest.raises(GraphError, match=rf"example 1: the tree has {lengths[1] + 1} nodes"):
        TreeData(nodes, tuple(trees))
    with pytest.raises(GraphError, match=r"example 1: node 1: lies on a cycle"):
        trees_from_parents([[-1], [-1, 2, 1]])


def test_an_unknown_training_label_names_the_example_and_node():
    """SequenceData refuses labels >= K itself; -1 (a label unknown to the model) reaches us."""
    from dataclasses import replace

    bad = -1
    data = tree_data(seed=2, n=5, max_T=4, K=3)
    labels = data.nodes.labels.copy()
    labels[int(data.nodes.seq_offsets[3]) + 1] = bad
    nodes = replace(data.nodes, labels=labels)
    with pytest.raises(GraphError, match=rf"example 3: node 1: label {bad} is out of range"):
        tree_problem(TreeData(nodes, data.graphs))


@pytest.mark.parametrize("sampling", ["uniform", "gap"])
def test_sdca_on_trees_reaches_the_lbfgs_optimum(sampling):
    """SDCA on forests with two edge types: the same optimum as L-BFGS (relative 1e-6), a true
    gap <= 1e-6, the dual never above the primal, and P - D = mean block KL (exact gaps)."""
    from crfsdca.kernels.solvers import sdca_epoch
    from crfsdca.solvers.sdca import SDCA, SDCAConfig

    train = tree_data(seed=6, n=30, max_T=6)
    problem = tree_problem(train)
    lb = LBFGSConfig(tol=1e-12, max_epochs=3000)
    p_star = problem.primal(LBFGS(lb).solve(problem, Monitor(problem, "lbfgs", lb)).weights)
    config = SDCAConfig(sampling=sampling, tol=1e-7, max_epochs=500, seed=2, line_search_tol=1e-6)
    result = SDCA(config).solve(problem, Monitor(problem, "sdca", config))
    last = result.trace.records[-1]
    assert result.stop_reason == "tol" and 0 <= last.gap <= 1e-7
    primal = problem.primal(result.weights)
    assert (primal - p_star) / abs(p_star) <= 1e-6 and primal - p_star <= last.gap + 1e-12
    duals = np.array([r.dual for r in result.trace.records])
    assert np.all(duals <= p_star + 1e-12) and np.all(np.diff(duals) >= -1e-12)
    d = result.state.dual
    gaps = sdca_epoch.exact_gaps(problem.structure.blocks, d.log_edge, d.log_node, d.weights)
    assert gaps.mean() == pytest.approx(last.gap, rel=1e-8, abs=1e-14)
    from crfsdca.structures.tree import tree_weights_from_dual

    np.testing.assert_allclose(
        d.weights, tree_weights_from_dual(problem, d.log_node, d.log_edge), rtol=1e-9, atol=1e-12
    )


@pytest.mark.parametrize("scale", [1.0, 300.0])
def test_scaled_batch_equals_the_log_space_batch(scale):
    """The fast scaled-space value and gradient equal the log-space kernels; with potentials of
    hundreds the scaled pass underflows and the example is redone in log space."""
    from crfsdca.kernels.structures import tree as kt

    data = tree_data(seed=9, n=12, max_T=7)
    fm = FeatureMap(data.n_attributes, data.n_labels, 3, 2)
    w = scale * np.random.default_rng(3).normal(size=fm.n_features)
    oracle = TreeOracle(data, fm)
    value, grad = oracle.value_and_gradient(w)
    ref = np.empty(fm.n_features)
    ref_value, bad = kt.tree_value_and_gradient(
        data.nodes.arrays(), data.packed, w, oracle._dims, oracle._ws, oracle._log_node,
        oracle._log_edge, oracle._root_z, ref,
    )  # fmt: skip
    assert bad == -1
    assert value == pytest.approx(ref_value, rel=1e-12)
    np.testing.assert_allclose(grad, ref, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("scale", [1.0, 300.0])
def test_the_loss_alone_equals_brute_force_on_any_number_of_threads(scale):
    """loss_sum (upward passes only, in chunks of examples on threads) is the enumerated loss;
    with potentials of hundreds the scaled pass underflows and the log-space pass takes over."""
    from crfsdca.kernels.numerics.threads import get_threads, max_threads, set_threads

    data = tree_data(seed=11, n=12, max_T=6)
    fm = FeatureMap(data.n_attributes, data.n_labels, 3, 2)
    w = scale * np.random.default_rng(5).normal(size=fm.n_features)
    oracle = TreeOracle(data, fm)
    expected = brute_loss(data, fm, w)
    before = get_threads()
    try:
        for threads in sorted({1, min(2, max_threads()), max_threads()}):
            set_threads(threads)
            assert oracle.loss_sum(w) == pytest.approx(expected, rel=1e-11)
    finally:
        set_threads(before)
    assert oracle.loss_sum(w) == pytest.approx(oracle.value_and_gradient(w)[0], rel=1e-12)
