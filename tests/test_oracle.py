"""Oracle (per-sequence and parallel batch kernels) against enumeration and identities."""

from __future__ import annotations

import numpy as np
import pytest
from _reference import (
    expected_features,
    features,
    log_marginals,
    loss,
    make_data,
    unary,
    viterbi,
)

from crfsdca import FeatureMap
from crfsdca.kernels.numerics.threads import max_threads
from crfsdca.kernels.structures import chain
from crfsdca.structures.chain import Oracle

RTOL = 1e-10


def problem(seed, n_bias=3, scale=1.0, binary=False, **kwargs):
    rng = np.random.default_rng(seed)
    data = make_data(rng, binary=binary, **kwargs)
    fm = FeatureMap(data.n_attributes, data.n_labels, n_bias)
    w = scale * rng.standard_normal(fm.n_features)
    return data, fm, w


def assert_grad_close(actual, expected, rtol=RTOL):
    atol = rtol * max(1.0, np.abs(expected).max())
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


@pytest.mark.parametrize("n_bias", [0, 3])
@pytest.mark.parametrize("scale", [1.0, 300.0])
def test_marginals_match_brute_force(n_bias, scale):
    data, fm, w = problem(11, n_bias, scale, n_sequences=15)
    oracle = Oracle(data, fm)
    for i in range(data.n_sequences):
        u = unary(data, i, w, fm)
        ref_z, ref_node, ref_edge = log_marginals(u, fm.transition(w))
        log_z, log_node, log_edge = oracle.marginals(i, w)
        T = u.shape[0]
        assert log_node.shape == (T, fm.n_labels)
        assert log_edge.shape == (T - 1, fm.n_labels, fm.n_labels)
        np.testing.assert_allclose(log_z, ref_z, rtol=RTOL)
        atol = RTOL * max(1.0, np.abs(u).max())
        np.testing.assert_allclose(log_node, ref_node, rtol=RTOL, atol=atol)
        np.testing.assert_allclose(log_edge, ref_edge, rtol=RTOL, atol=atol)
        np.testing.assert_allclose(oracle.log_partition(i, w), ref_z, rtol=RTOL)


@pytest.mark.parametrize("n_bias", [0, 3])
@pytest.mark.parametrize("scale", [1.0, 300.0])
def test_value_and_gradient_match_enumeration(n_bias, scale):
    data, fm, w = problem(12, n_bias, scale, n_sequences=10, binary=True)
    oracle = Oracle(data, fm)
    value, grad = oracle.value_and_gradient(w)
    ref_grad = sum(
        expected_features(data, i, w, fm) - features(data, i, data.sequence_labels(i), fm)
        for i in range(data.n_sequences)
    )
    np.testing.assert_allclose(value, loss(data, w, fm), rtol=RTOL)
    assert_grad_close(grad, ref_grad)
    if scale == 1.0:  # the scaled path throughout: the loss alone is the same sum, bit for bit
        assert oracle.loss_sum(w) == value
    np.testing.assert_allclose(oracle.loss_sum(w), loss(data, w, fm), rtol=RTOL)


def test_log_partitions_and_gold_features():
    data, fm, w = problem(13, n_sequences=9, unknown_labels=True)
    oracle = Oracle(data, fm)
    ref_z = [log_marginals(unary(data, i, w, fm), fm.transition(w))[0] for i in range(9)]
    np.testing.assert_allclose(oracle.log_partitions(w), ref_z, rtol=RTOL)
    gold = oracle.gold_features()
    ref = sum(features(data, i, data.sequence_labels(i), fm) for i in range(9))
    np.testing.assert_allclose(gold, ref, rtol=RTOL)
    assert oracle.gold_features() is gold and not gold.flags.writeable


@pytest.mark.parametrize("n_bias", [0, 3])
def test_gradient_passes_finite_difference_check(n_bias):
    data, fm, w = problem(14, n_bias, n_sequences=20, max_length=8, n_labels=4)
    oracle = Oracle(data, fm)
    value, grad = oracle.value_and_gradient(w)
    rng = np.random.default_rng(0)
    for _ in range(3):
        d = rng.standard_normal(w.size)
        h = 1e-5
        plus = oracle.value_and_gradient(w + h * d)[0]
        minus = oracle.value_and_gradient(w - h * d)[0]
        np.testing.assert_allclose((plus - minus) / (2 * h), grad @ d, rtol=1e-7)


def per_sequence_sums(oracle, data, fm, w):
    """Loss and gradient sums from the per-sequence kernels, one Python call per sequence."""
    K = fm.n_labels
    attrs = data.arrays()[1:4]
    grad = -oracle.gold_features()
    total = -float(w @ oracle.gold_features())
    for i in range(data.n_sequences):
        log_z, log_node, log_edge = oracle.marginals(i, w)
        node, edge_sum = np.empty(log_node.shape), np.empty((K, K))
        chain.exp_marginals(log_node, log_edge, node, edge_sum)
        start = data.seq_offsets[i]
        chain.scatter_expected(
            attrs, start, node, edge_sum, 1.0, fm.n_attributes, fm.n_bias_rows, grad
        )
        total += log_z
    return total, grad


@pytest.mark.parametrize("n_bias", [0, 3])
@pytest.mark.parametrize("scale", [0.3, 200.0])
def test_batch_equals_per_sequence_sums(n_bias, scale):
    data, fm, w = problem(
        15, n_bias, scale, n_sequences=300, max_length=30, n_labels=5, n_attributes=40
    )
    oracle = Oracle(data, fm)
    ref_value, ref_grad = per_sequence_sums(oracle, data, fm, w)
    for n_threads in range(1, max_threads() + 1):
        oracle.n_threads = n_threads
        value, grad = oracle.value_and_gradient(w)
        np.testing.assert_allclose(value, ref_value, rtol=1e-12)
        assert_grad_close(grad, ref_grad, rtol=1e-12)
        np.testing.assert_allclose(oracle.loss_sum(w), ref_value, rtol=1e-12)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_more_threads_than_sequences(n_threads):
    if n_threads > max_threads():
        pytest.skip("needs more threads")
    data, fm, w = problem(16, n_sequences=1)
    oracle = Oracle(data, fm, n_threads=n_threads)
    value, grad = oracle.value_and_gradient(w)
    np.testing.assert_allclose(value, loss(data, w, fm), rtol=RTOL)
    assert oracle.predict(w).shape == (data.n_items,)


@pytest.mark.parametrize("scale", [1.0, 1e3])
def test_predict_matches_brute_force(scale):
    data, fm, w = problem(17, 3, scale, n_sequences=20, unknown_labels=True)
    oracle = Oracle(data, fm, n_threads=max_threads())
    pred = oracle.predict(w)
    for i in range(data.n_sequences):
        ref_y, _ = viterbi(unary(data, i, w, fm), fm.transition(w))
        np.testing.assert_array_equal(pred[data.seq_offsets[i] : data.seq_offsets[i + 1]], ref_y)


def test_predict_marginals_match_log_marginals():
    data, fm, w = problem(18, n_sequences=12)
    oracle = Oracle(data, fm)
    probs = oracle.predict_marginals(w)
    for i in range(data.n_sequences):
        ref_node = log_marginals(unary(data, i, w, fm), fm.transition(w))[1]
        lo, hi = data.seq_offsets[i], data.seq_offsets[i + 1]
        np.testing.assert_allclose(probs[lo:hi], np.exp(ref_node), rtol=RTOL, atol=1e-15)


def test_zero_weights_give_t_log_k():
    data, fm, _ = problem(19, n_sequences=7)
    oracle = Oracle(data, fm)
    w = fm.zeros()
    np.testing.assert_allclose(oracle.log_partitions(w), data.lengths * np.log(fm.n_labels))
    value, _ = oracle.value_and_gradient(w)
    np.testing.assert_allclose(value, data.n_items * np.log(fm.n_labels), rtol=1e-13)


def test_marginals_of_length_one_sequence():
    data, fm, w = problem(20, n_sequences=30, max_length=2)
    oracle = Oracle(data, fm)
    i = int(np.flatnonzero(data.lengths == 1)[0])
    log_z, log_node, log_edge = oracle.marginals(i, w)
    assert log_node.shape == (1, fm.n_labels) and log_edge.shape == (0, fm.n_labels, fm.n_labels)
    np.testing.assert_allclose(np.exp(log_node).sum(), 1.0, rtol=1e-14)


def test_unknown_labels_rejected_for_training():
    data, fm, w = problem(21, n_sequences=5, unknown_labels=True)
    with pytest.raises(ValueError, match=r"sequence \d+: token \d+ has an unknown label"):
        Oracle(data, fm).value_and_gradient(w)
    with pytest.raises(ValueError, match=r"sequence \d+: token \d+ has an unknown label"):
        Oracle(data, fm).loss_sum(w)


def test_non_finite_weights_raise_floating_point_error():
    data, fm, w = problem(22, n_sequences=5)
    oracle = Oracle(data, fm)
    w[fm.transition_offset :] = np.nan
    i = int(np.flatnonzero(data.lengths > 1)[0])
    with pytest.raises(FloatingPointError, match=f"sequence {i}: log partition"):
        oracle.marginals(i, w)
    with pytest.raises(FloatingPointError, match=f"sequence {i}: log partition"):
        oracle.log_partition(i, w)
    with pytest.raises(FloatingPointError, match=f"sequence {i}:"):
        oracle.value_and_gradient(w)
    with pytest.raises(FloatingPointError, match=f"sequence {i}:"):
        oracle.loss_sum(w)
    with pytest.raises(FloatingPointError, match=f"sequence {i}:"):
        oracle.log_partitions(w)
    with pytest.raises(FloatingPointError, match=f"sequence {i}:"):
        oracle.predict_marginals(w)


def test_input_checks():
    data, fm, w = problem(23, n_sequences=4, n_attributes=5, n_labels=3)
    with pytest.raises(ValueError, match="labels"):
        Oracle(data, FeatureMap(5, 4))
    with pytest.raises(ValueError, match="attribute id"):
        Oracle(data, FeatureMap(int(data.attr_ids.max()), 3))
    with pytest.raises(ValueError, match="n_threads"):
        Oracle(data, fm, n_threads=0)
    oracle = Oracle(data, fm)
    with pytest.raises(ValueError, match="weights must have shape"):
        oracle.marginals(0, w[:-1])
    with pytest.raises(IndexError, match="out of range"):
        oracle.marginals(4, w)
    log_z = oracle.marginals(np.int64(1), list(w))[0]
    np.testing.assert_allclose(log_z, oracle.log_partition(1, w), rtol=1e-14)
