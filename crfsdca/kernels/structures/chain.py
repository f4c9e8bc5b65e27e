"""Per-sequence kernels on a linear chain: scores, forward-backward, Viterbi, feature scatters.

Notation: a sequence has ``T`` items and ``K`` labels; ``unary`` (T, K) holds the node scores
u[t, k] and ``log_trans`` (K, K) the edge scores W[k, l] (label k at t, l at t+1), so that
p(y | x) = exp(sum_t u[t, y_t] + sum_{t<T-1} W[y_t, y_{t+1}]) / Z.

Forward-backward runs in scaled probability space (CRFsuite ``crf1d_context.c``): with
m_t = max_k u[t, k], e[t, k] = exp(u[t, k] - m_t), E = exp(W - max W) and c_t the normaliser,

    alpha[0] = e[0] / c_0,   alpha[t, l] = e[t, l] sum_k alpha[t-1, k] E[k, l] / c_t,
    log Z = sum_t (m_t + log c_t) + (T - 1) max W,
    v[t, l] = e[t, l] beta[t, l] / c_t,   beta[T-1] = 1,   beta[t, k] = sum_l E[k, l] v[t+1, l],

and p(y_t = k) = alpha[t, k] beta[t, k], p(y_t = k, y_{t+1} = l) = alpha[t, k] E[k, l] v[t+1, l].
The log marginals need K logs per position and additions per K^2 entry:
log p(k, l) = log alpha[t, k] + W[k, l] + (u[t+1, l] - m_{t+1} - log c_{t+1} + log beta[t+1, l]
- max W). A message entry below ``TINY`` (or non-finite) would lose its relative precision in
subnormals, so the kernels then redo the sequence exactly in log space (potentials of ~+-1e3).

The workspace tuple ``ws = (exp_unary, alpha, beta, inv_scale, log_scale)`` holds caller-owned
buffers of at least T rows: three (>=T, K) float64 and two (>=T,) float64. The attribute tuple
``attrs = (attr_offsets, attr_ids, attr_values)`` is the CSR of :class:`SequenceData`.
"""

from __future__ import annotations

import numpy as np

from crfsdca.kernels.jit import njit
from crfsdca.kernels.numerics.fastmath import add_reassoc, exp_into, log_inplace, max_num
from crfsdca.kernels.numerics.logspace import logsumexp
from crfsdca.kernels.numerics.rowops import rows_sum, rows_sum_into

TINY = 1e-290
HUGE = 1e290


@njit(cache=True, nogil=True)
def unary_scores(attrs, start, end, w, A, K, n_bias, unary):
    """Fill ``unary[:end-start]`` with the node scores of the tokens ``start..end-1``.

    attrs: CSR tuple (int64, int64, float64); w (d,) float64 flat weights; A, K, n_bias ints;
    unary (>=T, K) float64. u[t, k] = sum_j value_j w[j K + k] + bias rows (count, first, last).
    """
    attr_offsets, attr_ids, attr_values = attrs
    T = end - start
    b = A * K
    # rows of w as views indexed from 0 (no wraparound select on a computed offset, which
    # would turn the vector loads into gathers)
    count, first, last = w[b : b + K], w[b + K : b + 2 * K], w[b + 2 * K : b + 3 * K]
    for t in range(T):
        u = unary[t]
        for k in range(K):
            u[k] = count[k] if n_bias else 0.0
        if n_bias and t == 0:
            for k in range(K):
                u[k] += first[k]
        if n_bias and t == T - 1:
            for k in range(K):
                u[k] += last[k]
        p0, p1 = attr_offsets[start + t], attr_offsets[start + t + 1]
        rows_sum_into(u, w, attr_ids, attr_values, p0, p1, K)  # ``crfsdca.kernels.numerics.rowops``


@njit(cache=True, nogil=True)
def transition_exp(log_trans, exp_trans):
    """Fill ``exp_trans = exp(log_trans - max)`` (both (K, K) C-contiguous float64); return the max.

    One vectorized ``exp`` over the K^2 flat entries after a vectorized ``max_num`` reduction
    (a nan entry, which ``max_num`` skips, still makes its exp nan for the range checks).
    """
    K = log_trans.shape[0]
    n = K * K
    src = log_trans.reshape((n,))
    m = src[0]
    for p in range(n):
        m = max_num(m, src[p])
    exp_into(src, m, exp_trans.reshape((n,)), 0, n)
    return m


@njit(cache=True, nogil=True)
def scaled_forward(unary, exp_trans, trans_max, ws):
    """Scaled forward pass; return ``(log_z, ok)``, ``ok`` False if a message left [TINY, HUGE].

    Fills ws exp_unary, alpha, inv_scale = 1/c_t and log_scale = m_t + log c_t for t < T.
    alpha[t, l] = e[t, l] sum_k alpha[t-1, k] E[k, l] / c_t (module docstring).
    """
    exp_unary, alpha, _, inv_scale, log_scale = ws
    T, K = unary.shape
    log_z = (T - 1) * trans_max if T > 1 else 0.0
    e_flat = exp_trans.reshape(K * K)
    for t in range(T):
        u = unary[t]
        m = u[0]
        for l in range(K):
            m = max_num(m, u[l])
        exp_into(unary[t], m, exp_unary[t], 0, K)
        if t == 0:
            for l in range(K):  # a loop, not a slice assignment: no shape-error path to compile
                alpha[0, l] = exp_unary[0, l]
        else:  # alpha[t - 1] @ E, row by row (``rowops.rows_sum``), times e[t]
            rows_sum(alpha[t], e_flat, None, alpha[t - 1], 0, K, K)
            _scale_by(alpha[t], exp_unary[t], K)
        c, ok = _sum_in_range(alpha[t], K)
        if not ok:
            return np.nan, False
        inv_scale[t] = 1.0 / c
        log_scale[t] = m + np.log(c)
        log_z += log_scale[t]
        for l in range(K):
            alpha[t, l] *= inv_scale[t]
    return log_z, True


@njit(cache=True, nogil=True, error_model="numpy")
def _scale_by(x, y, K):
    """x[:K] *= y[:K]."""
    for k in range(K):
        x[k] *= y[k]


@njit(cache=True, nogil=True, error_model="numpy")
def _sum_in_range(x, K):
    """(sum of x[:K], whether every entry lies in [TINY, HUGE)) -- False for NaN too."""
    c = 0.0
    n_out = 0.0  # a count, not a boolean: LLVM vectorizes it with the sum
    for k in range(K):
        c = add_reassoc(c, x[k])
        n_out = add_reassoc(n_out, 0.0 if TINY <= x[k] < HUGE else 1.0)
    return c, n_out == 0.0


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def scaled_backward(exp_trans, ws, T):
    """Scaled backward pass after :func:`scaled_forward`; return False if a message left range.

    beta[T-1] = 1, beta[t, k] = sum_l E[k, l] v[t+1, l]; overwrites exp_unary[t] (t >= 1) with
    v[t, l] = e[t, l] beta[t, l] / c_t, so that p(k, l at t) = alpha[t, k] E[k, l] v[t+1, l].
    Only reassociation/contraction flags (no nnan/ninf): they let the dot products vectorise,
    and the range check below still catches NaN.
    """
    exp_unary, _, beta, inv_scale, _ = ws
    K = exp_trans.shape[0]
    for k in range(K):
        beta[T - 1, k] = 1.0
    for t in range(T - 2, -1, -1):
        for l in range(K):
            exp_unary[t + 1, l] *= beta[t + 1, l] * inv_scale[t + 1]
        ok = True
        for k in range(K):
            s = 0.0
            for l in range(K):
                s += exp_trans[k, l] * exp_unary[t + 1, l]
            beta[t, k] = s
            ok &= TINY <= s < HUGE  # False for NaN too
        if not ok:
            return False
    return True


@njit(cache=True, nogil=True)
def scaled_log_marginals(unary, log_trans, trans_max, ws, log_node, log_edge):
    """Log marginals from scaled messages; log_node (T, K), log_edge (T-1, K, K), clipped <= 0.

    Replaces alpha, beta by their logs and exp_unary[t+1] by
    b[l] = u[t+1, l] - log_scale[t+1] + log beta[t+1, l] - max W; then
    log p(k, l) = log alpha[t, k] + W[k, l] + b[l].
    """
    exp_unary, alpha, beta, _, log_scale = ws
    T, K = unary.shape
    for t in range(T):
        log_inplace(alpha[t], K)
        log_inplace(beta[t], K)
        for k in range(K):
            log_node[t, k] = min(alpha[t, k] + beta[t, k], 0.0)
    for t in range(T - 1):
        b = exp_unary[t + 1]
        for l in range(K):
            b[l] = unary[t + 1, l] - log_scale[t + 1] + beta[t + 1, l] - trans_max
        for k in range(K):
            a = alpha[t, k]
            for l in range(K):
                log_edge[t, k, l] = min(a + log_trans[k, l] + b[l], 0.0)


@njit(cache=True, nogil=True)
def scaled_expectations(ws, T, node, edge_acc):
    """Node marginals and the un-weighted edge sum from scaled messages (after the backward pass).

    node (T, K) = alpha * beta; ``edge_acc`` (K, K) += sum_{t<T-1} alpha[t, k] v[t+1, l]. The
    summed edge marginals are ``exp_trans * edge_acc`` (elementwise), applied once by the caller.
    """
    _, alpha, beta, _, _ = ws
    K = node.shape[1]
    for t in range(T):
        for k in range(K):
            node[t, k] = alpha[t, k] * beta[t, k]
    v = ws[0]
    for t in range(T - 1):
        for k in range(K):
            a = alpha[t, k]
            for l in range(K):
                edge_acc[k, l] += a * v[t + 1, l]


@njit(cache=True, nogil=True)
def log_forward(unary, log_trans, log_alpha, log_c):
    """Exact log-space forward pass, renormalised at every position; returns log Z.

    a[t, l] = u[t, l] + logsumexp_k(log_alpha[t-1, k] + W[k, l]), log_c[t] = logsumexp_l a[t, l],
    log_alpha[t] = a[t] - log_c[t] (so each row is a log distribution and the messages never
    grow with |log Z|), log Z = sum_t log_c[t]. log_alpha (>=T, K), log_c (>=T,).
    """
    T, K = unary.shape
    scratch = np.empty(K)
    log_z = 0.0
    for t in range(T):
        for l in range(K):
            if t == 0:
                log_alpha[0, l] = unary[0, l]
                continue
            for k in range(K):
                scratch[k] = log_alpha[t - 1, k] + log_trans[k, l]
            log_alpha[t, l] = unary[t, l] + logsumexp(scratch)
        log_c[t] = logsumexp(log_alpha[t, :K])
        for l in range(K):
            log_alpha[t, l] -= log_c[t]
        log_z += log_c[t]
    return log_z


@njit(cache=True, nogil=True)
def log_backward(unary, log_trans, log_beta, log_c):
    """Exact log-space backward pass with the forward pass's normalisers; fills log_beta.

    log_beta[T-1] = 0, log_beta[t, k] = logsumexp_l(W[k, l] + u[t+1, l] + log_beta[t+1, l])
    - log_c[t+1], so that log_alpha[t] + log_beta[t] is the log node marginal.
    """
    T, K = unary.shape
    scratch = np.empty(K)
    for k in range(K):
        log_beta[T - 1, k] = 0.0
    for t in range(T - 2, -1, -1):
        for k in range(K):
            for l in range(K):
                scratch[l] = log_trans[k, l] + unary[t + 1, l] + log_beta[t + 1, l]
            log_beta[t, k] = logsumexp(scratch) - log_c[t + 1]


@njit(cache=True, nogil=True)
def log_space_marginals(unary, log_trans, log_alpha, log_beta, log_c, log_node, log_edge):
    """Log marginals from the normalised log messages, clipped at <= 0.

    log_node[t, k] = log_alpha[t, k] + log_beta[t, k];
    log_edge[t, k, l] = log_alpha[t, k] + W[k, l] + u[t+1, l] + log_beta[t+1, l] - log_c[t+1].
    """
    T, K = unary.shape
    for t in range(T):
        for k in range(K):
            log_node[t, k] = min(log_alpha[t, k] + log_beta[t, k], 0.0)
    for t in range(T - 1):
        for k in range(K):
            a = log_alpha[t, k] - log_c[t + 1]
            for l in range(K):
                s = a + log_trans[k, l] + unary[t + 1, l] + log_beta[t + 1, l]
                log_edge[t, k, l] = min(s, 0.0)


@njit(cache=True, nogil=True)
def forward_backward(unary, log_trans, exp_trans, trans_max, ws, log_node, log_edge):
    """Return log Z and fill the log marginals of one sequence.

    unary (T, K) float64; log_trans (K, K) float64 and (exp_trans, trans_max) from
    :func:`transition_exp`; ws the workspace tuple; outputs log_node (T, K) and log_edge
    (T-1, K, K), clipped at <= 0. Scaled messages, or exact log space when they under/overflow.
    A non-finite log Z (non-finite potentials) leaves the marginals meaningless.
    """
    T = unary.shape[0]
    log_z, ok = scaled_forward(unary, exp_trans, trans_max, ws)
    if ok and scaled_backward(exp_trans, ws, T):
        scaled_log_marginals(unary, log_trans, trans_max, ws, log_node, log_edge)
        return log_z
    return log_space_forward_backward(unary, log_trans, ws, log_node, log_edge)


@njit(cache=True, nogil=True)
def log_space_forward_backward(unary, log_trans, ws, log_node, log_edge):
    """Exact log-space fallback of :func:`forward_backward` (ws' rows reused as log messages)."""
    log_alpha, log_beta, log_c = ws[1], ws[2], ws[3]
    log_z = log_forward(unary, log_trans, log_alpha, log_c)
    log_backward(unary, log_trans, log_beta, log_c)
    log_space_marginals(unary, log_trans, log_alpha, log_beta, log_c, log_node, log_edge)
    return log_z


@njit(cache=True, nogil=True)
def log_partition(unary, log_trans, exp_trans, trans_max, ws):
    """Return log Z of one sequence by a forward pass only (scaled; exact log space fallback)."""
    log_z, ok = scaled_forward(unary, exp_trans, trans_max, ws)
    if ok:
        return log_z
    return log_forward(unary, log_trans, ws[1], ws[3])


@njit(cache=True, nogil=True)
def marginal_sums(unary, log_trans, fb, node, log_edge, edge_sum):
    """log Z, node marginals node[:T] and summed edge marginals edge_sum (K, K) of one sequence.

    Scaled forward-backward (sum_t p(y_t = k, y_t+1 = l) = E[k, l] sum_t alpha[t, k] v[t+1, l]),
    exact log space when the scaled messages leave their range. fb = (exp_trans, scaled ws).
    """
    exp_trans, scaled = fb[0], fb[1:]
    T, K = unary.shape
    trans_max = transition_exp(log_trans, exp_trans)
    log_z, ok = scaled_forward(unary, exp_trans, trans_max, scaled)
    if ok and scaled_backward(exp_trans, scaled, T):
        edge_sum[:, :] = 0.0
        scaled_expectations(scaled, T, node, edge_sum)
        for k in range(K):
            for l in range(K):
                edge_sum[k, l] *= exp_trans[k, l]
        return log_z
    log_z = forward_backward(unary, log_trans, exp_trans, trans_max, scaled, node, log_edge)
    exp_marginals(node[:T], log_edge[: T - 1], node, edge_sum)
    return log_z


@njit(cache=True, nogil=True)
def viterbi(unary, log_trans, delta, backptr, out):
    """MAP labelling into ``out`` (T,) int64; return its score.

    delta (>=T, K) float64 and backptr (>=T, K) int64 are scratch.
    delta[t, l] = u[t, l] + max_k(delta[t-1, k] + W[k, l]); ties go to the smallest label.
    """
    T, K = unary.shape
    for l in range(K):
        delta[0, l] = unary[0, l]
    for t in range(1, T):
        for l in range(K):
            best, arg = -np.inf, 0
            for k in range(K):
                s = delta[t - 1, k] + log_trans[k, l]
                if s > best:
                    best, arg = s, k
            delta[t, l] = best + unary[t, l]
            backptr[t, l] = arg
    arg = 0
    for l in range(1, K):
        if delta[T - 1, l] > delta[T - 1, arg]:
            arg = l
    best = delta[T - 1, arg]
    for t in range(T - 1, -1, -1):
        out[t] = arg
        arg = backptr[t, arg]
    return best


@njit(cache=True, nogil=True)
def gold_score(unary, log_trans, labels):
    """Return sum_t u[t, y_t] + sum_t W[y_t, y_{t+1}]; items/edges with label -1 are skipped."""
    T = unary.shape[0]
    s = 0.0
    for t in range(T):
        y = labels[t]
        if y >= 0:
            s += unary[t, y]
            if t + 1 < T and labels[t + 1] >= 0:
                s += log_trans[y, labels[t + 1]]
    return s


@njit(cache=True, nogil=True)
def scatter_expected(attrs, start, node, edge_sum, coef, A, n_bias, grad):
    """Add ``coef * E[F]`` of one sequence to the flat vector ``grad`` (d,) float64.

    node (T, K) float64 node marginals (probabilities) of tokens start..start+T-1; edge_sum
    (K, K) float64 summed edge marginals; emission rows get coef * value * node[t].
    """
    attr_offsets, attr_ids, attr_values = attrs
    T, K = node.shape
    for t in range(T):
        for p in range(attr_offsets[start + t], attr_offsets[start + t + 1]):
            j = attr_ids[p] * K
            c = coef * attr_values[p]
            for k in range(K):
                grad[j + k] += c * node[t, k]
    b = A * K
    for k in range(K if n_bias else 0):
        grad[b + K + k] += coef * node[0, k]
        grad[b + 2 * K + k] += coef * node[T - 1, k]
        for t in range(T):
            grad[b + k] += coef * node[t, k]
    off = (A + n_bias) * K
    for k in range(K):
        for l in range(K):
            grad[off + k * K + l] += coef * edge_sum[k, l]


@njit(cache=True, nogil=True)
def scatter_gold(attrs, start, labels, coef, A, K, n_bias, grad):
    """Add ``coef * F(x, y)`` of one sequence to ``grad`` (d,) float64.

    labels (T,) int64 gold labels of tokens start..start+T-1; a token with label -1 adds no node
    feature and the edges touching it no edge feature.
    """
    attr_offsets, attr_ids, attr_values = attrs
    T = labels.shape[0]
    b = A * K
    off = (A + n_bias) * K
    for t in range(T):
        y = labels[t]
        if y < 0:
            continue
        for p in range(attr_offsets[start + t], attr_offsets[start + t + 1]):
            grad[attr_ids[p] * K + y] += coef * attr_values[p]
        if n_bias:
            grad[b + y] += coef
            grad[b + K + y] += coef if t == 0 else 0.0
            grad[b + 2 * K + y] += coef if t == T - 1 else 0.0
        if t + 1 < T and labels[t + 1] >= 0:
            grad[off + y * K + labels[t + 1]] += coef


@njit(cache=True, nogil=True)
def exp_marginals(log_node, log_edge, node, edge_sum):
    """node (T, K) = exp(log_node); edge_sum (K, K) = sum_t exp(log_edge[t]) (overwritten)."""
    T, K = log_node.shape
    for t in range(T):
        for k in range(K):
            node[t, k] = np.exp(log_node[t, k])
    edge_sum[:, :] = 0.0
    for t in range(T - 1):
        for k in range(K):
            for l in range(K):
                edge_sum[k, l] += np.exp(log_edge[t, k, l])


@njit(cache=True, nogil=True)
def sequence_potentials(data, i, w, dims, ws):
    """Fill ws' unary (T, K) and exp_trans of sequence ``i``; return (T, log_trans, trans_max).

    data: SequenceData.arrays() tuple; w (d,) float64; dims = (A, K, n_bias);
    ws = (unary, exp_trans) + the scaled workspace tuple.
    """
    seq_offsets, attr_offsets, attr_ids, attr_values, _ = data
    A, K, n_bias = dims
    start, end = seq_offsets[i], seq_offsets[i + 1]
    unary_scores((attr_offsets, attr_ids, attr_values), start, end, w, A, K, n_bias, ws[0])
    off = (A + n_bias) * K
    log_trans = w[off : off + K * K].reshape((K, K))
    return end - start, log_trans, transition_exp(log_trans, ws[1])


@njit(cache=True, nogil=True)
def sequence_marginals(data, i, w, dims, ws, out):
    """Unary scores, transitions and :func:`forward_backward` of sequence ``i``; return log Z.

    Arguments as :func:`sequence_potentials`; out = (log_node, log_edge) buffers of at least
    (T, K) and (T-1, K, K) rows, filled in their first rows.
    """
    T, log_trans, trans_max = sequence_potentials(data, i, w, dims, ws)
    log_node, log_edge = out
    return forward_backward(
        ws[0][:T], log_trans, ws[1], trans_max, ws[2:], log_node[:T], log_edge[: T - 1]
    )


@njit(cache=True, nogil=True)
def sequence_log_partition(data, i, w, dims, ws):
    """log Z of sequence ``i`` by a forward pass; arguments as :func:`sequence_potentials`."""
    T, log_trans, trans_max = sequence_potentials(data, i, w, dims, ws)
    return log_partition(ws[0][:T], log_trans, ws[1], trans_max, ws[2:])
