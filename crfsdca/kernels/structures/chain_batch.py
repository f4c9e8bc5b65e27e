"""Kernels over all sequences, run in contiguous chunks of sequences on Python threads.

The sequences are cut into one chunk per thread with about the same number of tokens
(:func:`chunk_bounds`). Each chunk is one call of a serial ``nogil`` kernel over its sequences,
with its own (max_T, K) workspace and, for the gradient, its own length-d accumulator; the
chunks run on a thread pool and a serial pass sums them in chunk order, so the results do not
depend on the scheduling. (numba's ``parallel=True`` would do the same with prange, but
compiling its parallel loops costs several seconds per kernel on a first run.) Arguments:
``data`` is :meth:`SequenceData.arrays` ``(seq_offsets, attr_offsets, attr_ids, attr_values,
labels)``, ``w`` (d,) float64 the flat weights, ``dims = (A, K, n_bias, max_T)`` the
feature-map sizes and the longest sequence, ``n_chunks`` the number of chunks (the caller's
thread count, capped at the number of sequences).
"""

from __future__ import annotations

import numpy as np

from crfsdca.kernels.jit import njit
from crfsdca.kernels.numerics.threads import chunk_bounds, map_chunks
from crfsdca.kernels.structures.chain import (
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


def _over_chunks(kernel, data, w, dims, n_chunks, *rest) -> list:
    """``kernel(data, lo, hi, w, dims, *rest)`` on every chunk of sequences lo..hi-1 (at most
    ``n_chunks``, :func:`map_chunks`); the results in chunk order."""
    bounds = chunk_bounds(data[0], n_chunks)
    calls = [
        (data, int(bounds[c]), int(bounds[c + 1]), w, dims, *rest)
        for c in range(bounds.shape[0] - 1)
    ]
    return map_chunks(kernel, calls)


def _sum_losses(parts) -> tuple[float, int]:
    """(sum of the chunks' losses, the first bad sequence or -1) of (loss, bad) results."""
    loss, first_bad = 0.0, -1
    for part_loss, bad in parts:
        loss += part_loss
        if bad >= 0 and first_bad < 0:
            first_bad = bad
    return loss, first_bad


@njit(cache=True, nogil=True)
def _workspace(max_T, K):
    """(scaled forward-backward workspace, node scores) for sequences of up to max_T items."""
    T = max(max_T, 1)
    ws = (np.empty((T, K)), np.empty((T, K)), np.empty((T, K)), np.empty(T), np.empty(T))
    return ws, np.empty((max_T, K))


@njit(cache=True, nogil=True)
def _sequence_scores(data, i, w, dims, unary):
    """Node scores of sequence i into unary[:T]; returns its (start, end) items."""
    seq_offsets, attr_offsets, attr_ids, attr_values, _ = data
    start, end = seq_offsets[i], seq_offsets[i + 1]
    attrs = (attr_offsets, attr_ids, attr_values)
    A, K, n_bias, _ = dims
    unary_scores(attrs, start, end, w, A, K, n_bias, unary)
    return start, end


def _transitions(w, dims):
    """(log_trans view, exp_trans, trans_max) of the flat weights (Python around the
    ``transition_exp`` kernel: one entry point less to compile)."""
    A, K, n_bias, _ = dims
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
    summed edge marginals to the transition block of the gradient directly.
    """
    _, attr_offsets, attr_ids, attr_values, labels = data
    attrs = (attr_offsets, attr_ids, attr_values)
    A, K, n_bias, max_T = dims
    log_trans, exp_trans, trans_max = trans
    ws, unary = _workspace(max_T, K)
    node = np.empty((max_T, K))
    log_edge, edge_sum = np.empty((max(max_T - 1, 0), K, K)), np.zeros((K, K))
    loss, bad = 0.0, -1
    for i in range(lo, hi):
        start, end = _sequence_scores(data, i, w, dims, unary)
        T = end - start
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


@njit(cache=True, nogil=True)
def _sum_chunks(grad, extra, exp_trans, edge_acc, off):
    """grad += the other chunks' gradients extra[:n_chunks - 1] (in chunk order), then the
    transition block += exp_trans * each chunk's edge accumulator."""
    n_chunks, K = edge_acc.shape[0], edge_acc.shape[1]
    for j in range(grad.shape[0] if n_chunks > 1 else 0):
        for c in range(n_chunks - 1):
            grad[j] += extra[c, j]
    for c in range(n_chunks):
        for k in range(K):
            for l in range(K):
                grad[off + k * K + l] += exp_trans[k, l] * edge_acc[c, k, l]


def batch_value_and_gradient(data, w, dims, extra):
    """Return (sum_i [log Z_i - score_i(y_i)], gradient (d,), first bad sequence or -1).

    The gradient is sum_i (E_{p_w}[F(x_i, .)] - F(x_i, y_i)), no regularisation. Labels must all
    be >= 0 (the wrapper checks). A non-finite log Z makes the sums meaningless. ``extra``
    (n_chunks - 1, d) float64 is caller-owned scratch (reused across calls, so its pages are not
    faulted in again): chunk 0 accumulates into the returned gradient, chunk c >= 1 into
    ``extra[c - 1]``, zeroed by its own thread.
    """
    A, K, n_bias, _ = dims
    bounds = chunk_bounds(data[0], extra.shape[0] + 1)
    n_chunks = bounds.shape[0] - 1
    trans = _transitions(w, dims)
    grad = np.zeros(w.shape[0])
    edge_acc = np.zeros((n_chunks, K, K))
    calls = []
    for c in range(n_chunks):
        g = grad if c == 0 else extra[c - 1]
        if c > 0:
            g[:] = 0.0  # in the caller's thread: numpy releases the GIL
        calls.append((data, int(bounds[c]), int(bounds[c + 1]), w, dims, trans, g, edge_acc[c]))
    parts = map_chunks(_chunk_value_and_gradient, calls)
    _sum_chunks(grad, extra, trans[1], edge_acc, (A + n_bias) * K)
    loss, first_bad = _sum_losses(parts)
    return loss, grad, first_bad


@njit(cache=True, nogil=True)
def _chunk_loss(data, lo, hi, w, dims, trans):
    """Sum of log Z_i - score_i(y_i) over sequences lo..hi-1 (forward passes only) and the
    first sequence with a non-finite log Z or -1."""
    _, _, _, _, labels = data
    _, K, _, max_T = dims
    log_trans, exp_trans, trans_max = trans
    ws, unary = _workspace(max_T, K)
    loss, bad = 0.0, -1
    for i in range(lo, hi):
        start, end = _sequence_scores(data, i, w, dims, unary)
        u = unary[: end - start]
        log_z = log_partition(u, log_trans, exp_trans, trans_max, ws)
        if not np.isfinite(log_z) and bad < 0:
            bad = i
        loss += log_z - gold_score(u, log_trans, labels[start:end])
    return loss, bad


def batch_loss(data, w, dims, n_chunks):
    """Return (sum_i [log Z_i - score_i(y_i)], first bad sequence or -1): the loss of
    :func:`batch_value_and_gradient` without the gradient (summed in the same chunks and order;
    the same bits unless a scaled backward pass fails where the forward pass did not)."""
    trans = _transitions(w, dims)
    return _sum_losses(_over_chunks(_chunk_loss, data, w, dims, n_chunks, trans))


@njit(cache=True, nogil=True)
def _chunk_predict(data, lo, hi, w, dims, log_trans, out):
    """Viterbi labelling of sequences lo..hi-1 into their items of ``out``."""
    seq_offsets, attr_offsets, attr_ids, attr_values, _ = data
    attrs = (attr_offsets, attr_ids, attr_values)
    A, K, n_bias, max_T = dims
    unary, delta = np.empty((max_T, K)), np.empty((max_T, K))
    backptr = np.empty((max_T, K), np.int64)
    for i in range(lo, hi):
        start, end = seq_offsets[i], seq_offsets[i + 1]
        unary_scores(attrs, start, end, w, A, K, n_bias, unary)
        viterbi(unary[: end - start], log_trans, delta, backptr, out[start:end])


def batch_predict(data, w, dims, n_chunks, out):
    """Viterbi labelling of every sequence into ``out`` (n_items,) int64."""
    log_trans = _transitions(w, dims)[0]
    _over_chunks(_chunk_predict, data, w, dims, n_chunks, log_trans, out)


@njit(cache=True, nogil=True)
def _chunk_log_partition(data, lo, hi, w, dims, trans, out):
    """log Z of sequences lo..hi-1 into out[lo:hi] (forward passes only)."""
    _, K, _, max_T = dims
    log_trans, exp_trans, trans_max = trans
    ws, unary = _workspace(max_T, K)
    for i in range(lo, hi):
        start, end = _sequence_scores(data, i, w, dims, unary)
        out[i] = log_partition(unary[: end - start], log_trans, exp_trans, trans_max, ws)


def batch_log_partition(data, w, dims, n_chunks, out):
    """log Z of every sequence into ``out`` (n_sequences,) float64 (forward passes only)."""
    trans = _transitions(w, dims)
    _over_chunks(_chunk_log_partition, data, w, dims, n_chunks, trans, out)


@njit(cache=True, nogil=True)
def _chunk_node_marginals(data, lo, hi, w, dims, trans, out):
    """Node marginals of the tokens of sequences lo..hi-1 into ``out``; the first sequence with
    a non-finite log Z or -1."""
    _, K, _, max_T = dims
    log_trans, exp_trans, trans_max = trans
    ws, unary = _workspace(max_T, K)
    log_edge = np.empty((max(max_T - 1, 0), K, K))
    bad = -1
    for i in range(lo, hi):
        start, end = _sequence_scores(data, i, w, dims, unary)
        node = out[start:end]
        log_z = forward_backward(
            unary[: end - start], log_trans, exp_trans, trans_max, ws, node, log_edge
        )
        if not np.isfinite(log_z) and bad < 0:
            bad = i
        for t in range(end - start):
            for k in range(K):
                node[t, k] = np.exp(node[t, k])
    return bad


def batch_node_marginals(data, w, dims, n_chunks, out):
    """Node marginals of every token into ``out`` (n_items, K) float64; return first bad or -1."""
    trans = _transitions(w, dims)
    for bad in _over_chunks(_chunk_node_marginals, data, w, dims, n_chunks, trans, out):
        if bad >= 0:
            return bad
    return -1


@njit(cache=True, nogil=True)
def batch_gold_features(data, dims, out):
    """Add sum_i F(x_i, y_i) to ``out`` (d,) float64; tokens with label -1 are skipped."""
    seq_offsets, attr_offsets, attr_ids, attr_values, labels = data
    A, K, n_bias, _ = dims
    attrs = (attr_offsets, attr_ids, attr_values)
    for i in range(seq_offsets.shape[0] - 1):
        start, end = seq_offsets[i], seq_offsets[i + 1]
        scatter_gold(attrs, start, labels[start:end], 1.0, A, K, n_bias, out)
