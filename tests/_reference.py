"""Slow, obviously correct NumPy twins of the chain kernels, by enumerating all K^T labelings.

Only for tiny chains (T <= 4, K <= 3). Also builds small random :class:`SequenceData` fixtures.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import logsumexp

from crfsdca import FeatureMap, SequenceData


def make_data(
    rng: np.random.Generator,
    n_sequences: int = 6,
    max_length: int = 4,
    n_labels: int = 3,
    n_attributes: int = 5,
    max_active: int = 4,
    binary: bool = False,
    unknown_labels: bool = False,
) -> SequenceData:
    """Random sequences of lengths 1..max_length; tokens may have no attribute or repeated ids."""
    lengths = rng.integers(1, max_length + 1, n_sequences)
    seq_offsets = np.concatenate([[0], np.cumsum(lengths)])
    n_items = int(seq_offsets[-1])
    n_active = rng.integers(0, max_active + 1, n_items)
    attr_offsets = np.concatenate([[0], np.cumsum(n_active)])
    nnz = int(attr_offsets[-1])
    attr_ids = rng.integers(0, n_attributes, nnz)
    attr_values = np.ones(nnz) if binary else rng.normal(size=nnz)
    labels = rng.integers(0, n_labels, n_items)
    if unknown_labels:
        labels[rng.random(n_items) < 0.3] = -1
    return SequenceData(
        seq_offsets=seq_offsets,
        attr_offsets=attr_offsets,
        attr_ids=attr_ids,
        attr_values=attr_values,
        labels=labels,
        n_attributes=n_attributes,
        label_names=tuple(f"L{k}" for k in range(n_labels)),
    )


def dense_attributes(data: SequenceData, i: int) -> np.ndarray:
    """(T, A) attribute matrix phi(x_i, t) of sequence i; repeated ids add up."""
    start, end = data.seq_offsets[i], data.seq_offsets[i + 1]
    phi = np.zeros((end - start, data.n_attributes))
    for t in range(start, end):
        lo, hi = data.attr_offsets[t], data.attr_offsets[t + 1]
        np.add.at(phi[t - start], data.attr_ids[lo:hi], data.attr_values[lo:hi])
    return phi


def bias_indicators(T: int) -> np.ndarray:
    """(T, 3) rows (count, first, last) of the bias features."""
    b = np.zeros((T, 3))
    b[:, 0] = 1.0
    b[0, 1] = 1.0
    b[T - 1, 2] = 1.0
    return b


def unary(data: SequenceData, i: int, w: np.ndarray, fm: FeatureMap) -> np.ndarray:
    """(T, K) node scores of sequence i."""
    phi = dense_attributes(data, i)
    u = phi @ fm.emission(w)
    if fm.n_bias_rows:
        u = u + bias_indicators(phi.shape[0]) @ fm.bias(w)
    return u


def labelings(T: int, K: int) -> np.ndarray:
    """(K^T, T) int64 array of all labelings in lexicographic order."""
    return np.array(list(itertools.product(range(K), repeat=T)), dtype=np.int64).reshape(-1, T)


def scores(u: np.ndarray, trans: np.ndarray) -> np.ndarray:
    """Score of every labeling (rows of :func:`labelings`)."""
    T, K = u.shape
    ys = labelings(T, K)
    s = u[np.arange(T), ys].sum(axis=1)
    if T > 1:
        s = s + trans[ys[:, :-1], ys[:, 1:]].sum(axis=1)
    return s


def log_marginals(u: np.ndarray, trans: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """(log Z, log node (T, K), log edge (T-1, K, K)) by enumeration, in log space."""
    T, K = u.shape
    ys = labelings(T, K)
    s = scores(u, trans)
    log_z = float(logsumexp(s))
    log_node = np.full((T, K), -np.inf)
    log_edge = np.full((max(T - 1, 0), K, K), -np.inf)
    for t in range(T):
        for k in range(K):
            log_node[t, k] = logsumexp(s[ys[:, t] == k]) - log_z
    for t in range(T - 1):
        for k in range(K):
            for l in range(K):
                mask = (ys[:, t] == k) & (ys[:, t + 1] == l)
                log_edge[t, k, l] = logsumexp(s[mask]) - log_z
    return log_z, log_node, log_edge


def viterbi(u: np.ndarray, trans: np.ndarray) -> tuple[np.ndarray, float]:
    """A best labeling (the first in lexicographic order) and its score."""
    s = scores(u, trans)
    best = int(np.argmax(s))
    return labelings(*u.shape)[best], float(s[best])


def sequence_score(u: np.ndarray, trans: np.ndarray, y: np.ndarray) -> float:
    """Score of labeling y; items with label -1 and the edges touching them are skipped."""
    s = sum(u[t, y[t]] for t in range(len(y)) if y[t] >= 0)
    s += sum(trans[y[t], y[t + 1]] for t in range(len(y) - 1) if y[t] >= 0 and y[t + 1] >= 0)
    return float(s)


def features(data: SequenceData, i: int, y: np.ndarray, fm: FeatureMap) -> np.ndarray:
    """Dense F(x_i, y) (n_features,) in the flat layout; label -1 contributes nothing."""
    phi = dense_attributes(data, i)
    T, K = phi.shape[0], fm.n_labels
    f = fm.zeros()
    emission, trans = fm.emission(f), fm.transition(f)
    for t in range(T):
        if y[t] >= 0:
            emission[:, y[t]] += phi[t]
            if fm.n_bias_rows:
                fm.bias(f)[:, y[t]] += bias_indicators(T)[t]
        if t + 1 < T and y[t] >= 0 and y[t + 1] >= 0:
            trans[y[t], y[t + 1]] += 1.0
    assert emission.shape == (fm.n_attributes, K)
    return f


def expected_features(data: SequenceData, i: int, w: np.ndarray, fm: FeatureMap) -> np.ndarray:
    """E_{p(y|x_i;w)}[F(x_i, y)] by enumeration."""
    u = unary(data, i, w, fm)
    s = scores(u, fm.transition(w))
    p = np.exp(s - logsumexp(s))
    ys = labelings(*u.shape)
    return sum(p[m] * features(data, i, ys[m], fm) for m in range(len(ys)))


def loss(data: SequenceData, w: np.ndarray, fm: FeatureMap) -> float:
    """sum_i [log Z_i(w) - w^T F(x_i, y_i)] by enumeration."""
    total = 0.0
    for i in range(data.n_sequences):
        u = unary(data, i, w, fm)
        total += logsumexp(scores(u, fm.transition(w)))
        total -= w @ features(data, i, data.sequence_labels(i), fm)
    return float(total)


def lbfgs_optimum(problem, tol: float = 1e-13) -> float:
    """P* by crfsdca's L-BFGS, which must have stopped on its certificate: the gap
    ||grad P||^2 / (2 lambda) <= ``tol`` (not a budget, not a failed line search), so that P*
    is within ``tol`` of the optimum."""
    from crfsdca.solvers.lbfgs import LBFGS, LBFGSConfig
    from crfsdca.solvers.monitor import Monitor

    config = LBFGSConfig(tol=tol, max_epochs=5000)
    result = LBFGS(config).solve(problem, Monitor(problem, "lbfgs", config))
    last = result.trace.records[-1]
    assert result.stop_reason == "tol" and 0 <= last.gap <= tol, (result.stop_reason, last.gap)
    primal = problem.primal(result.weights)
    # the record's P comes from the forward-backward pass, problem.primal's from forward passes
    # alone: two kernels whose sums may round apart by an ulp (as on AMD EPYC for trees)
    assert primal == pytest.approx(last.primal, rel=1e-14, abs=0)
    return primal
