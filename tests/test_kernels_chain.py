"""Chain kernels against brute-force enumeration (tests/_reference.py) and exact identities."""

from __future__ import annotations

import numpy as np
import pytest
from _reference import (
    expected_features,
    features,
    log_marginals,
    make_data,
    scores,
    sequence_score,
    unary,
    viterbi,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

from crfsdca import FeatureMap
from crfsdca.kernels.numerics import logspace
from crfsdca.kernels.structures import chain

RTOL = 1e-10


def workspace(T, K, extra=2):
    """Scaled workspace tuple with more rows than needed (kernels must use only T rows)."""
    n = T + extra
    return (np.empty((n, K)), np.empty((n, K)), np.empty((n, K)), np.empty(n), np.empty(n))


def run_forward_backward(u, trans):
    T, K = u.shape
    exp_trans = np.empty((K, K))
    trans_max = chain.transition_exp(trans, exp_trans)
    log_node, log_edge = np.empty((T, K)), np.empty((T - 1, K, K))
    ws = workspace(T, K)
    log_z = chain.forward_backward(u, trans, exp_trans, trans_max, ws, log_node, log_edge)
    return log_z, log_node, log_edge


def run_log_partition(u, trans):
    K = u.shape[1]
    exp_trans = np.empty((K, K))
    trans_max = chain.transition_exp(trans, exp_trans)
    return chain.log_partition(u, trans, exp_trans, trans_max, workspace(*u.shape))


def potentials(rng, T, K, scale):
    return scale * rng.standard_normal((T, K)), scale * rng.standard_normal((K, K))


def assert_log_close(actual, expected, scale=1.0):
    """rtol 1e-10, plus an absolute floor for log values near 0 that follows the potentials."""
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=RTOL * max(1.0, scale))


SHAPES = [(T, K) for T in range(1, 5) for K in range(1, 4)]


@pytest.mark.parametrize("T,K", SHAPES)
@pytest.mark.parametrize("scale", [0.1, 1.0, 10.0, 1e3])
def test_forward_backward_matches_brute_force(T, K, scale):
    rng = np.random.default_rng(1000 * T + 10 * K + int(scale))
    for _ in range(3):
        u, trans = potentials(rng, T, K, scale)
        log_z, log_node, log_edge = run_forward_backward(u, trans)
        ref_z, ref_node, ref_edge = log_marginals(u, trans)
        assert np.isfinite(log_node).all() and np.isfinite(log_edge).all()
        assert (log_node <= 0).all() and (log_edge <= 0).all()
        np.testing.assert_allclose(log_z, ref_z, rtol=RTOL)
        assert_log_close(log_node, ref_node, scale)
        assert_log_close(log_edge, ref_edge, scale)
        np.testing.assert_allclose(run_log_partition(u, trans), ref_z, rtol=RTOL)


@settings(max_examples=60, deadline=None)
@given(
    T=st.integers(1, 4),
    K=st.integers(1, 3),
    log_scale=st.floats(-2.0, 3.2),
    seed=st.integers(0, 2**32 - 1),
)
def test_forward_backward_property(T, K, log_scale, seed):
    scale = 10.0**log_scale
    u, trans = potentials(np.random.default_rng(seed), T, K, scale)
    log_z, log_node, log_edge = run_forward_backward(u, trans)
    ref_z, ref_node, ref_edge = log_marginals(u, trans)
    np.testing.assert_allclose(log_z, ref_z, rtol=RTOL, atol=RTOL * scale)
    assert_log_close(log_node, ref_node, scale)
    assert_log_close(log_edge, ref_edge, scale)


def test_scaled_path_in_normal_range_and_fallback_for_extremes():
    rng = np.random.default_rng(0)
    u, trans = potentials(rng, 4, 3, 1.0)
    exp_trans = np.empty((3, 3))
    trans_max = chain.transition_exp(trans, exp_trans)
    assert chain.scaled_forward(u, exp_trans, trans_max, workspace(4, 3))[1]
    u[2, 1] -= 800.0  # p(y_2 = 1) ~ exp(-800): the scaled message underflows
    assert not chain.scaled_forward(u, exp_trans, trans_max, workspace(4, 3))[1]
    log_z, log_node, log_edge = run_forward_backward(u, trans)
    ref_z, ref_node, ref_edge = log_marginals(u, trans)
    assert -900 < log_node[2, 1] < -700
    assert_log_close(log_node, ref_node, 800.0)
    assert_log_close(log_edge, ref_edge, 800.0)


def test_tiny_marginal_with_normal_messages_is_exact():
    # node marginal ~ exp(-1200) while forward and backward messages stay in range separately
    u = np.zeros((3, 2))
    trans = np.array([[0.0, -600.0], [-600.0, 0.0]])
    log_z, log_node, log_edge = run_forward_backward(u, trans)
    ref_z, ref_node, ref_edge = log_marginals(u, trans)
    assert np.isfinite(log_edge).all()
    assert_log_close(log_node, ref_node, 1200.0)
    assert_log_close(log_edge, ref_edge, 1200.0)


@pytest.mark.parametrize("T,K", SHAPES)
def test_zero_potentials_count_labelings(T, K):
    log_z, log_node, log_edge = run_forward_backward(np.zeros((T, K)), np.zeros((K, K)))
    np.testing.assert_allclose(log_z, T * np.log(K), rtol=RTOL, atol=1e-14)
    np.testing.assert_allclose(log_node, -np.log(K), rtol=RTOL, atol=1e-14)
    np.testing.assert_allclose(log_edge, -2 * np.log(K), rtol=RTOL, atol=1e-14)


@pytest.mark.parametrize("scale", [1.0, 1e3])
def test_edge_marginals_marginalise_to_node_marginals(scale):
    rng = np.random.default_rng(3)
    u, trans = potentials(rng, 7, 4, scale)
    _, log_node, log_edge = run_forward_backward(u, trans)
    assert_log_close(logsumexp(log_edge, axis=2), log_node[:-1], scale)
    assert_log_close(logsumexp(log_edge, axis=1), log_node[1:], scale)
    assert_log_close(logsumexp(log_node, axis=1), np.zeros(7), scale)


def test_marginals_are_gradient_of_log_z():
    rng = np.random.default_rng(4)
    u, trans = potentials(rng, 5, 3, 1.0)
    _, log_node, log_edge = run_forward_backward(u, trans)
    h = 1e-5
    grad_u = np.zeros_like(u)
    for idx in np.ndindex(u.shape):
        e = np.zeros_like(u)
        e[idx] = h
        grad_u[idx] = (run_log_partition(u + e, trans) - run_log_partition(u - e, trans)) / (2 * h)
    grad_w = np.zeros_like(trans)
    for idx in np.ndindex(trans.shape):
        e = np.zeros_like(trans)
        e[idx] = h
        grad_w[idx] = (run_log_partition(u, trans + e) - run_log_partition(u, trans - e)) / (2 * h)
    np.testing.assert_allclose(grad_u, np.exp(log_node), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(grad_w, np.exp(log_edge).sum(axis=0), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("T,K", SHAPES)
def test_viterbi_matches_brute_force(T, K):
    rng = np.random.default_rng(T * 7 + K)
    for scale in (1.0, 1e3):
        u, trans = potentials(rng, T, K, scale)
        out = np.full(T, -5, np.int64)
        best = chain.viterbi(u, trans, np.empty((T, K)), np.empty((T, K), np.int64), out)
        ref_y, ref_best = viterbi(u, trans)
        np.testing.assert_array_equal(out, ref_y)
        np.testing.assert_allclose(best, ref_best, rtol=RTOL)


def test_viterbi_ties_reach_the_maximum():
    rng = np.random.default_rng(5)
    for T, K in SHAPES:
        u = rng.integers(0, 2, (T, K)).astype(float)
        trans = rng.integers(0, 2, (K, K)).astype(float)
        out = np.empty(T, np.int64)
        best = chain.viterbi(u, trans, np.empty((T, K)), np.empty((T, K), np.int64), out)
        assert best == scores(u, trans).max()
        assert sequence_score(u, trans, out) == best
        assert ((out >= 0) & (out < K)).all()


@pytest.mark.parametrize("n_bias", [0, 3])
@pytest.mark.parametrize("binary", [False, True])
def test_unary_scores_match_reference(n_bias, binary):
    rng = np.random.default_rng(6)
    data = make_data(rng, n_sequences=10, n_attributes=3, max_active=6, binary=binary)
    fm = FeatureMap(data.n_attributes, data.n_labels, n_bias)
    w = rng.standard_normal(fm.n_features)
    buf = np.full((data.max_length + 1, fm.n_labels), np.nan)
    attrs = data.arrays()[1:4]
    for i in range(data.n_sequences):
        start, end = data.seq_offsets[i], data.seq_offsets[i + 1]
        chain.unary_scores(attrs, start, end, w, fm.n_attributes, fm.n_labels, n_bias, buf)
        np.testing.assert_allclose(buf[: end - start], unary(data, i, w, fm), rtol=RTOL)


def test_unary_scores_add_duplicate_attribute_ids():
    data = make_data(np.random.default_rng(7), n_sequences=1, max_length=1, max_active=0)
    attrs = (np.array([0, 3]), np.array([1, 1, 0]), np.array([0.5, 2.0, -1.0]))
    fm = FeatureMap(2, 3, 0)
    w = np.arange(fm.n_features, dtype=float)
    buf = np.empty((1, 3))
    chain.unary_scores(attrs, 0, 1, w, 2, 3, 0, buf)
    np.testing.assert_allclose(buf[0], 2.5 * w[3:6] - w[0:3])
    assert data.n_sequences == 1


@pytest.mark.parametrize("n_bias", [0, 3])
def test_gold_score_and_scatter_gold_match_features(n_bias):
    rng = np.random.default_rng(8)
    data = make_data(rng, n_sequences=12, unknown_labels=True)
    fm = FeatureMap(data.n_attributes, data.n_labels, n_bias)
    w = rng.standard_normal(fm.n_features)
    attrs = data.arrays()[1:4]
    for i in range(data.n_sequences):
        start = data.seq_offsets[i]
        y = data.sequence_labels(i)
        ref = features(data, i, y, fm)
        grad = np.ones(fm.n_features)
        chain.scatter_gold(attrs, start, y, -2.0, fm.n_attributes, fm.n_labels, n_bias, grad)
        np.testing.assert_allclose(grad, 1.0 - 2.0 * ref, rtol=RTOL)
        u = unary(data, i, w, fm)
        score = chain.gold_score(u, fm.transition(w), y)
        np.testing.assert_allclose(score, w @ ref, rtol=RTOL, atol=1e-12)


@pytest.mark.parametrize("n_bias", [0, 3])
def test_scatter_expected_matches_enumeration(n_bias):
    rng = np.random.default_rng(9)
    data = make_data(rng, n_sequences=8)
    fm = FeatureMap(data.n_attributes, data.n_labels, n_bias)
    w = rng.standard_normal(fm.n_features)
    attrs = data.arrays()[1:4]
    K = fm.n_labels
    for i in range(data.n_sequences):
        u = unary(data, i, w, fm)
        T = u.shape[0]
        _, log_node, log_edge = run_forward_backward(u, fm.transition(w).copy())
        node, edge_sum = np.empty((T, K)), np.empty((K, K))
        chain.exp_marginals(log_node, log_edge, node, edge_sum)
        grad = np.zeros(fm.n_features)
        start = data.seq_offsets[i]
        chain.scatter_expected(attrs, start, node, edge_sum, 0.5, fm.n_attributes, n_bias, grad)
        ref = expected_features(data, i, w, fm)
        np.testing.assert_allclose(grad, 0.5 * ref, rtol=RTOL, atol=1e-14)


def test_scaled_expectations_match_log_marginals():
    rng = np.random.default_rng(10)
    u, trans = potentials(rng, 6, 4, 2.0)
    ref_z, ref_node, ref_edge = log_marginals(u, trans)
    exp_trans = np.empty((4, 4))
    trans_max = chain.transition_exp(trans, exp_trans)
    ws = workspace(6, 4)
    log_z, ok = chain.scaled_forward(u, exp_trans, trans_max, ws)
    assert ok and chain.scaled_backward(exp_trans, ws, 6)
    node, edge_acc = np.empty((6, 4)), np.zeros((4, 4))
    chain.scaled_expectations(ws, 6, node, edge_acc)
    np.testing.assert_allclose(log_z, ref_z, rtol=RTOL)
    np.testing.assert_allclose(node, np.exp(ref_node), rtol=RTOL)
    np.testing.assert_allclose(exp_trans * edge_acc, np.exp(ref_edge).sum(0), rtol=RTOL)


def test_non_finite_potentials_give_non_finite_log_z():
    u, trans = np.zeros((3, 2)), np.zeros((2, 2))
    u[1, 0] = np.nan
    assert not np.isfinite(run_forward_backward(u, trans)[0])
    assert not np.isfinite(run_log_partition(u, trans))
    u[1, 0] = np.inf
    assert not np.isfinite(run_log_partition(u, trans))
    exp_trans, ws = np.ones((2, 2)), workspace(3, 2)
    log_z, ok = chain.scaled_forward(np.zeros((3, 2)), exp_trans, 0.0, ws)
    assert ok and log_z == pytest.approx(3 * np.log(2.0), rel=1e-15)  # 2^3 paths of score 0
    exp_trans[1, 1] = np.nan
    assert not chain.scaled_backward(exp_trans, ws, 3)


def test_logspace_helpers():
    x = np.array([-np.inf, 0.0, np.log(3.0)])
    np.testing.assert_allclose(logspace.logsumexp(x), np.log(4.0), rtol=1e-15)
    assert logspace.logsumexp(np.full(3, -np.inf)) == -np.inf
    assert logspace.logsumexp(np.empty(0)) == -np.inf
    assert np.isnan(logspace.logsumexp(np.array([0.0, np.nan])))
    np.testing.assert_allclose(logspace.logaddexp(-1e3, -1e3 + 1), np.logaddexp(-1e3, -1e3 + 1))
    assert logspace.logaddexp(-np.inf, -np.inf) == -np.inf
    for v in (-1e-20, -1e-5, -0.5, -1.0, -50.0, -800.0):
        expected = np.log(-np.expm1(v))
        np.testing.assert_allclose(logspace.log1mexp(v), expected, rtol=1e-14, atol=1e-15)
    assert logspace.log1mexp(0.0) == -np.inf and logspace.log1mexp(-np.inf) == 0.0
    p = np.array([np.log(0.5), np.log(0.5), -np.inf])
    q = np.log([0.25, 0.25, 0.5])
    np.testing.assert_allclose(logspace.kl_terms(p, q), np.log(2.0), rtol=1e-15)
    np.testing.assert_allclose(logspace.entropy_terms(q), 1.5 * np.log(2.0), rtol=1e-15)
