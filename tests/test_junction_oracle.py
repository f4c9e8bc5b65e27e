"""The junction-tree oracle and problem: gradients against finite differences, L-BFGS on
second-order chains and on custom junction trees."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _synthetic import random_sequences

from crfsdca.features.feature_map import FeatureMap
from crfsdca.solvers.lbfgs import LBFGS, LBFGSConfig
from crfsdca.solvers.monitor import Monitor
from crfsdca.structures.chain import Oracle
from crfsdca.structures.junction import (
    JunctionOracle,
    junction_problem,
    junctions_from_cliques,
    second_order_data,
)

# The tree and junction-tree kernels against brute force and the solvers on them: their kernels
# compile for minutes on an empty cache, so they run in the slow set (`.ci/run` runs it); the
# default set trains, saves and tags trees and second-order chains through the front door.
pytestmark = pytest.mark.slow


def custom_data(seed=0, n=8, max_T=5, K=3, A=6):
    """Per example: cliques (t, t+1, t+2) on even t and (t, t+1) elsewhere, a unary factor
    type on every node and pair factors on the edges (t, t+1); clique trees inferred."""
    nodes = random_sequences(seed, n=n, max_T=max_T, K=K, A=A)
    cliques, factors = [], []
    for T in nodes.lengths.tolist():
        cs = [tuple(range(t, min(t + 3, T))) for t in range(0, max(T - 2, 1), 2)]
        if cs[-1][-1] < T - 1:
            cs.append((cs[-1][-1], T - 1))
        cliques.append(cs)
        factors.append([((t, t + 1), 0) for t in range(T - 1)] + [((v,), 1) for v in range(T)])
    return junctions_from_cliques(nodes, cliques, factors, factor_arities=(2, 1))


@pytest.mark.parametrize("kind", ["second-order", "custom"])
@pytest.mark.parametrize("n_bias_rows", [0, 3])
def test_gradient_equals_finite_differences(kind, n_bias_rows):
    nodes = random_sequences(4, n=8, max_T=6, K=3, A=6)
    data = second_order_data(nodes) if kind == "second-order" else custom_data(4)
    fm = FeatureMap(data.n_attributes, data.n_labels, n_bias_rows, 0, data.factor_arities)
    rng = np.random.default_rng(2)
    w = rng.normal(size=fm.n_features)
    oracle = JunctionOracle(data, fm)
    value, grad = oracle.value_and_gradient(w)
    assert value == pytest.approx(
        sum(oracle.log_partition(i, w) for i in range(data.n_sequences))
        - w @ oracle.gold_features(),
        rel=1e-12,
    )
    for direction in (rng.normal(size=fm.n_features), np.eye(fm.n_features)[-1]):
        h = 1e-6
        up = oracle.value_and_gradient(w + h * direction)[0]
        down = oracle.value_and_gradient(w - h * direction)[0]
        assert grad @ direction == pytest.approx((up - down) / (2 * h), rel=1e-6, abs=1e-8)


def test_a_second_order_chain_without_trigram_weights_is_the_first_order_chain():
    nodes = random_sequences(5, n=10, max_T=6, K=3, A=5)
    data = second_order_data(nodes)
    fm, fm_chain = FeatureMap(5, 3, 3, 0, (2, 3)), FeatureMap(5, 3, 3)
    w = np.random.default_rng(0).normal(size=fm.n_features)
    w[fm.factor_offset(1) :] = 0.0
    value, grad = JunctionOracle(data, fm).value_and_gradient(w)
    c_value, c_grad = Oracle(nodes, fm_chain).value_and_gradient(w[: fm_chain.n_features])
    assert value == pytest.approx(c_value, rel=1e-12)
    np.testing.assert_allclose(grad[: fm_chain.n_features], c_grad, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("kind", ["second-order", "custom"])
def test_lbfgs_trains_a_junction_crf_to_a_certified_optimum(kind):
    if kind == "second-order":
        train = second_order_data(random_sequences(6, n=30, max_T=6, K=3, A=6))
        test = second_order_data(random_sequences(7, n=10, max_T=6, K=3, A=6))
    else:
        train, test = custom_data(6, n=30, max_T=6), custom_data(7, n=10, max_T=6)
    problem = junction_problem(train, test=test)
    assert problem.feature_map.factor_arities == train.factor_arities
    config = LBFGSConfig(tol=1e-10, max_epochs=2000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = LBFGS(config).solve(problem, Monitor(problem, "lbfgs", config))
    last = result.trace.records[-1]
    assert result.stop_reason == "tol" and last.gap <= 1e-10
    assert last.primal == pytest.approx(problem.primal(result.weights), rel=1e-12)
    pred = problem.test_oracle.predict(result.weights)
    assert pred.shape == test.labels.shape and pred.min() >= 0
    # the monitor scored the test examples: its error is that of the oracle's own predictions
    error = np.mean(pred != test.labels)
    assert 0.0 < error < 1.0 and last.test_error == pytest.approx(error, rel=1e-12)


@pytest.mark.parametrize("kind", ["second-order", "custom"])
@pytest.mark.parametrize("scale", [1.0, 300.0])
def test_scaled_kernels_equal_the_log_space_kernels(kind, scale):
    """The scaled batch value and gradient and per-example marginals equal the log-space
    kernels; with potentials of hundreds the scaled pass fails and the example is redone in
    log space."""
    from crfsdca.kernels.structures import junction_batch, junction_scaled

    nodes = random_sequences(9, n=12, max_T=7, K=3, A=6)
    data = second_order_data(nodes) if kind == "second-order" else custom_data(9, n=12, max_T=7)
    problem = junction_problem(data)
    oracle, fm = problem.oracle, problem.feature_map
    w = scale * np.random.default_rng(3).normal(size=fm.n_features)
    value, grad = oracle.value_and_gradient(w)
    ref = np.empty(fm.n_features)
    args = (oracle._data, oracle._jt, oracle._assign, oracle._feat)
    ref_value, bad = junction_batch.value_and_expected(*args, w, oracle._dims, oracle._ws, ref)
    gold = oracle.gold_features()
    assert bad == -1
    assert value == pytest.approx(ref_value - w @ gold, rel=1e-12)
    np.testing.assert_allclose(grad, ref - gold, rtol=1e-9, atol=1e-9)
    junction_scaled.exp_blocks(w, oracle._feat, 3, oracle._ews)
    oks = []
    for i in range(data.n_sequences):
        log_z, tables = oracle.tables(i, w)
        z, ok = junction_scaled.scaled_marginals(*args, i, w, oracle._dims, oracle._ws, oracle._ews)
        oks.append(ok)
        if ok:
            assert z == pytest.approx(log_z, rel=1e-12)
            probs = oracle._ws[1][2][: tables.size]
            np.testing.assert_allclose(probs, np.exp(tables), rtol=1e-11, atol=1e-15)
    assert all(oks) if scale == 1.0 else not all(oks)  # both paths ran


def test_uncached_projection_patterns_give_the_same_results(monkeypatch):
    """With no budget for cached projection arrays every projection is computed per table."""
    from crfsdca.structures import junction_pack

    nodes = random_sequences(11, n=10, max_T=7, K=3, A=6)
    cached = junction_problem(custom_data(11, n=10, max_T=7))
    assert cached.oracle.data.packed  # packed (lazily) with the default budget
    monkeypatch.setattr(junction_pack, "PATTERN_BUDGET", 0)
    uncached = junction_problem(custom_data(11, n=10, max_T=7))
    assert cached.train.packed[0][16].size > 0 and uncached.train.packed[0][16].size == 0
    assert np.all(uncached.train.packed[1][7] == -1)
    second = second_order_data(nodes)
    assert np.all(second.packed[0][13] == -1)
    for problem, other in ((cached, uncached), (junction_problem(second), None)):
        w = np.random.default_rng(4).normal(size=problem.feature_map.n_features)
        value, grad = problem.oracle.value_and_gradient(w)
        if other is None:  # second-order, uncached: against the log-space kernels
            from crfsdca.kernels.structures import junction_batch

            o = problem.oracle
            ref = np.empty_like(grad)
            ref_value, _ = junction_batch.value_and_expected(
                o._data, o._jt, o._assign, o._feat, w, o._dims, o._ws, ref
            )
            assert value == pytest.approx(ref_value - w @ o.gold_features(), rel=1e-12)
            continue
        o_value, o_grad = other.oracle.value_and_gradient(w)
        assert o_value == pytest.approx(value, rel=1e-13)
        np.testing.assert_allclose(o_grad, grad, rtol=1e-12, atol=1e-13)
        np.testing.assert_array_equal(other.oracle.predict(w), problem.oracle.predict(w))
        for i in range(problem.n_sequences):
            np.testing.assert_allclose(
                other.oracle.tables(i, w)[1], problem.oracle.tables(i, w)[1], rtol=1e-13, atol=1e-13
            )
