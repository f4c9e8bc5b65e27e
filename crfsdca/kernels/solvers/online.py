"""Epoch kernels of CRFsuite's online algorithms: averaged perceptron, passive-aggressive, AROW.

Each visits the sequences in ``order``; for sequence i it tags x_i with the current weights
(Viterbi, :func:`crfsdca.kernels.structures.chain.viterbi`) and, when the tags differ from the gold
labels y_i on d > 0 items, updates the weights along the difference vector
delta = F(x_i, y_i) - F(x_i, y_hat) restricted to the model's features (``free``, 1 where a
weight exists: CRFsuite's sparse model), as CRFsuite's ``train_averaged_perceptron.c``,
``train_passive_aggressive.c`` and ``train_arow.c`` do:

- AP: w += delta; ws += c delta, with c the 1-based count of sequences visited so far; the
  averaged weights are w - ws / c (computed by the caller);
- PA: tau = cost / ||delta||^2 (type 0), min(C, cost / ||delta||^2) (type I),
  cost / (||delta||^2 + 1 / (2 C)) (type II), with cost = s(y_hat) - s(y) + 1 (or + sqrt(d) when
  error-sensitive); w += tau delta; ws += tau u delta (u as c above);
- AROW: alpha = (s(y_hat) - s(y) + d) / (gamma + sum_k Sigma_k delta_k^2); mean += alpha Sigma
  delta; 1 / Sigma_k += delta_k^2 / gamma.

``bufs`` = (potentials workspace of :func:`crfsdca.kernels.structures.chain.sequence_potentials`,
delta (>=T, K) float64, backptr (>=T, K) int64, path (>=T,) int64, diff (d,) float64 zeros,
used (d,) uint8 zeros, actives (m,) int64 with m >= twice the features on one path).
``data`` is :meth:`SequenceData.arrays`; ``dims`` = (A, K, n_bias).
"""

from __future__ import annotations

import math

from crfsdca.kernels.jit import njit
from crfsdca.kernels.structures.chain import gold_score, sequence_potentials, viterbi


@njit(cache=True, nogil=True)
def _add(k, value, free, diff, used, actives, n):
    """diff[k] += value on a free coordinate k, listing k once in actives; return the count."""
    if free[k]:
        if not used[k]:
            used[k] = 1
            actives[n] = k
            n += 1
        diff[k] += value
    return n


@njit(cache=True, nogil=True)
def path_difference(data, i, gold, pred, coef, dims, free, bufs):
    """diff = coef (F(x_i, gold) - F(x_i, pred)) on the free coordinates; return the number of
    listed coordinates (``bufs[6][:n]``; ``diff`` is zero elsewhere)."""
    seq_offsets, attr_offsets, attr_ids, attr_values, _ = data
    A, K, n_bias = dims
    diff, used, actives = bufs[4], bufs[5], bufs[6]
    start, T = seq_offsets[i], seq_offsets[i + 1] - seq_offsets[i]
    off, n = (A + n_bias) * K, 0
    for path, sign in ((gold, coef), (pred, -coef)):
        for t in range(T):
            y = path[t]
            for p in range(attr_offsets[start + t], attr_offsets[start + t + 1]):
                n = _add(attr_ids[p] * K + y, sign * attr_values[p], free, diff, used, actives, n)
            if n_bias:
                n = _add(A * K + y, sign, free, diff, used, actives, n)
                if t == 0:
                    n = _add(A * K + K + y, sign, free, diff, used, actives, n)
                if t == T - 1:
                    n = _add(A * K + 2 * K + y, sign, free, diff, used, actives, n)
            if t + 1 < T:
                n = _add(off + y * K + path[t + 1], sign, free, diff, used, actives, n)
    return n


@njit(cache=True, nogil=True)
def clear_difference(n, bufs):
    """Zero ``diff`` and ``used`` on the n listed coordinates."""
    diff, used, actives = bufs[4], bufs[5], bufs[6]
    for j in range(n):
        diff[actives[j]] = 0.0
        used[actives[j]] = 0


@njit(cache=True, nogil=True)
def tag_sequence(data, i, w, dims, bufs):
    """Viterbi path of sequence i into ``bufs[3][:T]``; return (T, errors d, s(y_hat) - s(y))."""
    seq_offsets, labels = data[0], data[4]
    T, log_trans, _ = sequence_potentials(data, i, w, dims, bufs[0])
    if T == 0:
        return 0, 0, 0.0
    unary, path = bufs[0][0][:T], bufs[3][:T]
    best = viterbi(unary, log_trans, bufs[1], bufs[2], path)
    gold = labels[seq_offsets[i] : seq_offsets[i + 1]]
    d = 0
    for t in range(T):
        if path[t] != gold[t]:
            d += 1
    margin = best - gold_score(unary, log_trans, gold) if d > 0 else 0.0
    return T, d, margin


@njit(cache=True, nogil=True)
def ap_epoch(data, order, w, ws, c, free, dims, bufs):
    """One averaged-perceptron pass; c counts visited sequences (1-based). Return (loss, c),
    loss = sum of the error rates d / T."""
    seq_offsets, labels = data[0], data[4]
    loss = 0.0
    for i in order:
        T, d, _ = tag_sequence(data, i, w, dims, bufs)
        if d > 0:
            gold = labels[seq_offsets[i] : seq_offsets[i + 1]]
            n = path_difference(data, i, gold, bufs[3][:T], 1.0, dims, free, bufs)
            diff, actives = bufs[4], bufs[6]
            for j in range(n):
                k = actives[j]
                w[k] += diff[k]
                ws[k] += c * diff[k]
            clear_difference(n, bufs)
            loss += d / T
        c += 1
    return loss, c


@njit(cache=True, nogil=True)
def pa_epoch(data, order, w, ws, u, free, dims, params, bufs):
    """One passive-aggressive pass; params = (type 0/1/2, C, error_sensitive 0/1). Return
    (summed cost, u). A difference of norm 0 (the tags differ but not their features) is
    skipped: its step would be infinite."""
    pa_type, aggressiveness, sensitive = params
    seq_offsets, labels = data[0], data[4]
    loss = 0.0
    for i in order:
        T, d, margin = tag_sequence(data, i, w, dims, bufs)
        if d > 0:
            cost = margin + (math.sqrt(d) if sensitive else 1.0)
            gold = labels[seq_offsets[i] : seq_offsets[i + 1]]
            n = path_difference(data, i, gold, bufs[3][:T], 1.0, dims, free, bufs)
            diff, actives = bufs[4], bufs[6]
            norm2 = 0.0
            for j in range(n):
                norm2 += diff[actives[j]] ** 2
            if norm2 > 0.0:
                tau = cost / norm2
                if pa_type == 1:
                    tau = min(aggressiveness, tau)
                elif pa_type == 2:
                    tau = cost / (norm2 + 0.5 / aggressiveness)
                for j in range(n):
                    k = actives[j]
                    w[k] += tau * diff[k]
                    ws[k] += tau * u * diff[k]
            clear_difference(n, bufs)
            loss += cost
        u += 1
    return loss, u


@njit(cache=True, nogil=True)
def arow_epoch(data, order, mean, cov, free, dims, gamma, bufs):
    """One AROW pass (``cov``: the diagonal covariance). Return the summed cost."""
    seq_offsets, labels = data[0], data[4]
    loss = 0.0
    for i in order:
        T, d, margin = tag_sequence(data, i, mean, dims, bufs)
        if d > 0:
            cost = margin + d
            gold = labels[seq_offsets[i] : seq_offsets[i + 1]]
            n = path_difference(data, i, gold, bufs[3][:T], 1.0, dims, free, bufs)
            diff, actives = bufs[4], bufs[6]
            frac = gamma
            for j in range(n):
                frac += diff[actives[j]] ** 2 * cov[actives[j]]
            alpha = cost / frac
            for j in range(n):
                k = actives[j]
                mean[k] += alpha * cov[k] * diff[k]
                cov[k] = 1.0 / (1.0 / cov[k] + diff[k] ** 2 / gamma)
            clear_difference(n, bufs)
            loss += cost
    return loss
