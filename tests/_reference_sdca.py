"""Plain NumPy SDCA step for tiny chains: enumeration oracle, dense vectors, bounded scalar search.

Slow and obviously correct; the compiled step must agree with it to 1e-9 on the same draws.
"""

import itertools

import numpy as np
from scipy.optimize import brentq


def feature_vector(data, fm, i, y):
    """Dense F(x_i, y) in the flat layout of crfsdca.features."""
    F = np.zeros(fm.n_features)
    K, A = fm.n_labels, fm.n_attributes
    t0, t1 = data.seq_offsets[i], data.seq_offsets[i + 1]
    T = t1 - t0
    for t in range(T):
        lo, hi = data.attr_offsets[t0 + t], data.attr_offsets[t0 + t + 1]
        for j, v in zip(data.attr_ids[lo:hi], data.attr_values[lo:hi], strict=True):
            F[j * K + y[t]] += v
        if fm.n_bias_rows:
            F[A * K + y[t]] += 1
            if t == 0:
                F[A * K + K + y[t]] += 1
            if t == T - 1:
                F[A * K + 2 * K + y[t]] += 1
    for t in range(T - 1):
        F[fm.transition_offset + y[t] * K + y[t + 1]] += 1
    return F


def enumerate_sequence(data, fm, i, w):
    """All labelings, their probabilities and feature vectors under weights w."""
    T = int(data.seq_offsets[i + 1] - data.seq_offsets[i])
    ys = list(itertools.product(range(fm.n_labels), repeat=T))
    feats = np.array([feature_vector(data, fm, i, y) for y in ys])
    scores = feats @ w
    p = np.exp(scores - scores.max())
    return ys, p / p.sum(), feats


def marginals_from_joint(ys, p, T, K):
    node = np.zeros((T, K))
    edge = np.zeros((max(T - 1, 0), K, K))
    for y, py in zip(ys, p, strict=True):
        node[np.arange(T), list(y)] += py
        for t in range(T - 1):
            edge[t, y[t], y[t + 1]] += py
    return node, edge


def tree_entropy(node, edge):
    T = node.shape[0]
    coef = np.ones(T) if T == 1 else np.array([0.0] + [-1.0] * (T - 2) + [0.0])
    h = -np.sum(np.where(edge > 0, edge * np.log(np.where(edge > 0, edge, 1)), 0.0))
    h -= np.sum(coef[:, None] * np.where(node > 0, node * np.log(np.where(node > 0, node, 1)), 0))
    return h


def expected_features(data, fm, i, node, edge):
    """E_mu[F(x_i, .)] from node and edge marginals (linear in mu)."""
    K, A = fm.n_labels, fm.n_attributes
    t0 = data.seq_offsets[i]
    T = node.shape[0]
    E = np.zeros(fm.n_features)
    for t in range(T):
        lo, hi = data.attr_offsets[t0 + t], data.attr_offsets[t0 + t + 1]
        for j, v in zip(data.attr_ids[lo:hi], data.attr_values[lo:hi], strict=True):
            E[j * K : (j + 1) * K] += v * node[t]
        if fm.n_bias_rows:
            E[A * K : A * K + K] += node[t]
    if fm.n_bias_rows:
        E[A * K + K : A * K + 2 * K] += node[0]
        E[A * K + 2 * K : A * K + 3 * K] += node[T - 1]
    if T > 1:
        E[fm.transition_offset :] += edge.sum(0).ravel()
    return E


def reference_step(problem, node_mu, edge_mu, w, i):
    """One exact SDCA step on sequence i; returns (new node, new edge, new w, gap, gamma)."""
    data, fm = problem.train, problem.feature_map
    T = node_mu.shape[0]
    K = fm.n_labels
    lam_n = problem.regularization * problem.n_sequences
    ys, p, _ = enumerate_sequence(data, fm, i, w)
    node_nu, edge_nu = marginals_from_joint(ys, p, T, K)
    coef = np.ones(T) if T == 1 else np.array([0.0] + [-1.0] * (T - 2) + [0.0])
    gap = np.sum(edge_mu * np.log(edge_mu / edge_nu)) + np.sum(
        coef[:, None] * node_mu * np.log(node_mu / node_nu)
    )
    v = -(expected_features(data, fm, i, node_nu - node_mu, edge_nu - edge_mu)) / lam_n

    dn, de = node_nu - node_mu, edge_nu - edge_mu

    def fprime(g):
        """Direct form: d/dg [H~(mu + g delta) - (lambda n / 2) ||w + g v||^2]."""
        mix_n, mix_e = node_mu + g * dn, edge_mu + g * de
        with np.errstate(divide="ignore", invalid="ignore"):
            h = -np.sum(np.where(de != 0, de * np.log(mix_e), 0.0))
            h -= np.sum(coef[:, None] * np.where(dn != 0, dn * np.log(mix_n), 0.0))
        return h - lam_n * (w + g * v) @ v

    if fprime(1.0) >= 0:
        gamma = 1.0
    elif fprime(0.0) <= 0:
        gamma = 0.0
    else:
        gamma = brentq(fprime, 0.0, 1.0, xtol=1e-15, rtol=1e-15)
    new_node = node_mu + gamma * (node_nu - node_mu)
    new_edge = edge_mu + gamma * (edge_nu - edge_mu)
    return new_node, new_edge, w + gamma * v, gap, gamma


def assert_same_sdca_steps(a, b, n_sequences):
    """Runs ``a`` and ``b`` (5 epochs with line_search_tol 1e-10, about two Newton iterations
    a step, so that their count is not the step count) took the same SDCA steps: weights,
    counters, each block's last step size and gap estimate, the dual at every evaluation."""
    np.testing.assert_allclose(b.weights, a.weights, rtol=1e-9, atol=1e-12)
    steps = ("newton_iterations", "line_searches", "predictor_evaluations", "exact_passes")
    assert {k: b.counters[k] for k in steps} == {k: a.counters[k] for k in steps}
    assert a.counters["line_searches"] == 5 * n_sequences
    assert a.counters["newton_iterations"] > 1.5 * a.counters["line_searches"]
    for field in ("step_sizes", "gap_estimates"):
        np.testing.assert_allclose(
            getattr(b.state.dual, field), getattr(a.state.dual, field), rtol=1e-8, atol=1e-14
        )
    duals = [[r.dual for r in x.trace.records] for x in (a, b)]
    np.testing.assert_allclose(duals[1], duals[0], rtol=1e-12)
