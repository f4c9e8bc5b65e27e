"""Kernels over all sequences, parallel over contiguous chunks of sequences (``prange``).

The sequences are cut into one chunk per thread with about the same number of tokens. Each chunk
allocates its own (max_T, K) workspace and, for the gradient, its own length-d accumulator; a
serial pass sums the chunks. Arguments: ``data`` is :meth:`SequenceData.arrays`
``(seq_offsets, attr_offsets, attr_ids, attr_values, labels)``, ``w`` (d,) float64 the flat
weights, ``dims = (A, K, n_bias, max_T)`` the feature-map sizes and the longest sequence,
``n_chunks`` the number of chunks (the thread count: the wrapper passes it because calling
``numba.get_num_threads`` inside a kernel makes it uncacheable; capped at the number of
sequences).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from crfsdca.kernels.chain import (
    exp_marginals,
    forward_backward,
    gold_score,
    log_partition,
    scaled_backward,
    scaled_expectations,
    scaled_forward,
    scatter_expected,
    scatter_gold,
    transition_exp,
    unary_scores,
    viterbi,
)


def set_threads(n_threads: int) -> None:
    """Set the number of threads of the parallel kernels (for the calling thread)."""
    if not 1 <= n_threads <= numba.config.NUMBA_NUM_THREADS:
        raise ValueError(
            f"n_threads must lie in [1, {numba.config.NUMBA_NUM_THREADS}]; got {n_threads}"
        )
    numba.set_num_threads(n_threads)


def get_threads() -> int:
    """Number of threads the parallel kernels use from the calling thread."""
    return numba.get_num_threads()


def max_threads() -> int:
    """Largest value accepted by :func:`set_threads`."""
    return numba.config.NUMBA_NUM_THREADS


@njit(cache=True, nogil=True)
def chunk_bounds(seq_offsets, n_chunks):
    """(c + 1,) int64 sequence boundaries with about equal token counts per chunk, for
    c = n_chunks clamped to [1, n_sequences]."""
    n = seq_offsets.shape[0] - 1
    n_chunks = max(min(n_chunks, n), 1)
    n_items = seq_offsets[n]
    bounds = np.empty(n_chunks + 1, np.int64)
    bounds[0] = 0
    for c in range(1, n_chunks):
        bounds[c] = max(np.searchsorted(seq_offsets, c * n_items // n_chunks), bounds[c - 1])
    bounds[n_chunks] = n
    return bounds


@njit(cache=True, nogil=True)
def _workspace(max_T, K):
    """Scaled forward-backward workspace tuple for sequences of up to max_T items."""
    T = max(max_T, 1)
    return (np.empty((T, K)), np.empty((T, K)), np.empty((T, K)), np.empty(T), np.empty(T))


@njit(cache=True, nogil=True)
def _transitions(w, A, K, n_bias):
    """(log_trans view, exp_trans, trans_max) of the flat weights."""
    off = (A + n_bias) * K
    log_trans = w[off : off + K * K].reshape((K, K))
    exp_trans = np.empty((K, K))
    trans_max = transition_exp(log_trans, exp_trans)
    return log_trans, exp_trans, trans_max


@njit(cache=True, nogil=True)
def _chunk_value_and_gradient(data, lo, hi, w, dims, trans, grad, edge_acc):
    """Sum of losses of sequences lo..hi-1; add their gradients to grad and edge_acc.

    Returns (loss_sum, first sequence with a non-finite log Z or -1). Sequences on the scaled
    path add alpha v products to edge_acc; those that need the log-space path add exact
    summed edge marginals to the transition block of grad directly.
    """
    seq_offsets, attr_offsets, attr_ids, attr_values, labels = data
    attrs = (attr_offsets, attr_ids, attr_values)
    A, K, n_bias, max_T = dims
    log_trans, exp_trans, trans_max = trans
    ws = _workspace(max_T, K)
    unary, node = np.empty((max_T, K)), np.empty((max_T, K))
    log_edge, edge_sum = np.empty((max(max_T - 1, 0), K, K)), np.zeros((K, K))
    loss, bad = 0.0, -1
    for i in range(lo, hi):
        start, end = seq_offsets[i], seq_offsets[i + 1]
        T = end - start
        unary_scores(attrs, start, end, w, A, K, n_bias, unary)
        u, y = unary[:T], labels[start:end]
        log_z, ok = scaled_forward(u, exp_trans, trans_max, ws)
        if ok and scaled_backward(exp_trans, ws, T):
            scaled_expectations(ws, T, node, edge_acc)
            edge_sum[:, :] = 0.0
        else:
            log_z = forward_backward(u, log_trans, exp_trans, trans_max, ws, node, log_edge)
            exp_marginals(node[:T], log_edge[: T - 1], node, edge_sum)
        if not np.isfinite(log_z) and bad < 0:
            bad = i
        loss += log_z - gold_score(u, log_trans, y)
        scatter_expected(attrs, start, node[:T], edge_sum, 1.0, A, n_bias, grad)
        scatter_gold(attrs, start, y, -1.0, A, K, n_bias, grad)
    return loss, bad


@njit(cache=True, nogil=True, parallel=True)
def batch_value_and_gradient(data, w, dims, extra):
    """Return (sum_i [log Z_i - score_i(y_i)], gradient (d,), first bad sequence or -1).

    The gradient is sum_i (E_{p_w}[F(x_i, .)] - F(x_i, y_i)), no regularisation. Labels must all
    be >= 0 (the wrapper checks). A non-finite log Z makes the sums meaningless. ``extra``
    (n_chunks - 1, d) float64 is caller-owned scratch (reused across calls, so its pages are not
    faulted in again): chunk 0 accumulates into the returned gradient, chunk c >= 1 into
    ``extra[c - 1]``, zeroed here by its own thread.
    """
    A, K, n_bias, _ = dims
    bounds = chunk_bounds(data[0], extra.shape[0] + 1)
    n_chunks = bounds.shape[0] - 1
    trans = _transitions(w, A, K, n_bias)
    grad = np.zeros(w.shape[0])
    edge_acc = np.zeros((n_chunks, K, K))
    losses, bad = np.zeros(n_chunks), np.full(n_chunks, -1)
    for c in prange(n_chunks):
        if c > 0:
            extra[c - 1, :] = 0.0
        g = grad if c == 0 else extra[c - 1]
        losses[c], bad[c] = _chunk_value_and_gradient(
            data, bounds[c], bounds[c + 1], w, dims, trans, g, edge_acc[c]
        )
    for j in prange(w.shape[0] if n_chunks > 1 else 0):
        for c in range(n_chunks - 1):
            grad[j] += extra[c, j]
    off = (A + n_bias) * K
    exp_trans = trans[1]
    for c in range(n_chunks):
        for k in range(K):
            for l in range(K):
                grad[off + k * K + l] += exp_trans[k, l] * edge_acc[c, k, l]
    first_bad = -1
    for c in range(n_chunks):
        if bad[c] >= 0 and first_bad < 0:
            first_bad = bad[c]
    return losses.sum(), grad, first_bad


@njit(cache=True, nogil=True, parallel=True)
def batch_predict(data, w, dims, n_chunks, out):
    """Viterbi labelling of every sequence into ``out`` (n_items,) int64."""
    seq_offsets, attrs = data[0], data[1:4]
    A, K, n_bias, max_T = dims
    bounds = chunk_bounds(seq_offsets, n_chunks)
    n_chunks = bounds.shape[0] - 1
    log_trans = _transitions(w, A, K, n_bias)[0]
    for c in prange(n_chunks):
        unary, delta = np.empty((max_T, K)), np.empty((max_T, K))
        backptr = np.empty((max_T, K), np.int64)
        for i in range(bounds[c], bounds[c + 1]):
            start, end = seq_offsets[i], seq_offsets[i + 1]
            unary_scores(attrs, start, end, w, A, K, n_bias, unary)
            viterbi(unary[: end - start], log_trans, delta, backptr, out[start:end])


@njit(cache=True, nogil=True, parallel=True)
def batch_log_partition(data, w, dims, n_chunks, out):
    """log Z of every sequence into ``out`` (n_sequences,) float64 (forward passes only)."""
    seq_offsets, attrs = data[0], data[1:4]
    A, K, n_bias, max_T = dims
    bounds = chunk_bounds(seq_offsets, n_chunks)
    n_chunks = bounds.shape[0] - 1
    log_trans, exp_trans, trans_max = _transitions(w, A, K, n_bias)
    for c in prange(n_chunks):
        ws = _workspace(max_T, K)
        unary = np.empty((max_T, K))
        for i in range(bounds[c], bounds[c + 1]):
            start, end = seq_offsets[i], seq_offsets[i + 1]
            unary_scores(attrs, start, end, w, A, K, n_bias, unary)
            u = unary[: end - start]
            out[i] = log_partition(u, log_trans, exp_trans, trans_max, ws)


@njit(cache=True, nogil=True, parallel=True)
def batch_node_marginals(data, w, dims, n_chunks, out):
    """Node marginals of every token into ``out`` (n_items, K) float64; return first bad or -1."""
    seq_offsets, attrs = data[0], data[1:4]
    A, K, n_bias, max_T = dims
    bounds = chunk_bounds(seq_offsets, n_chunks)
    n_chunks = bounds.shape[0] - 1
    log_trans, exp_trans, trans_max = _transitions(w, A, K, n_bias)
    bad = np.full(n_chunks, -1)
    for c in prange(n_chunks):
        ws = _workspace(max_T, K)
        unary = np.empty((max_T, K))
        log_edge = np.empty((max(max_T - 1, 0), K, K))
        for i in range(bounds[c], bounds[c + 1]):
            start, end = seq_offsets[i], seq_offsets[i + 1]
            unary_scores(attrs, start, end, w, A, K, n_bias, unary)
            node = out[start:end]
            log_z = forward_backward(
                unary[: end - start], log_trans, exp_trans, trans_max, ws, node, log_edge
            )
            if not np.isfinite(log_z) and bad[c] < 0:
                bad[c] = i
            for t in range(end - start):
                for k in range(K):
                    node[t, k] = np.exp(node[t, k])
    first_bad = -1
    for c in range(n_chunks):
        if bad[c] >= 0 and first_bad < 0:
            first_bad = bad[c]
    return first_bad


@njit(cache=True, nogil=True)
def batch_gold_features(data, dims, out):
    """Add sum_i F(x_i, y_i) to ``out`` (d,) float64; tokens with label -1 are skipped."""
    seq_offsets, attr_offsets, attr_ids, attr_values, labels = data
    A, K, n_bias, _ = dims
    attrs = (attr_offsets, attr_ids, attr_values)
    for i in range(seq_offsets.shape[0] - 1):
        start, end = seq_offsets[i], seq_offsets[i + 1]
        scatter_gold(attrs, start, labels[start:end], 1.0, A, K, n_bias, out)
