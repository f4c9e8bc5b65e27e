"""Chains with position-dependent pairwise potentials: log Z and log marginals of

    p(y) propto exp(psi0(y_0) + sum_t psi_t(y_t, y_t+1)),   psi (T-1, K, K), psi0 (K,),

the chain's kernel for potentials that are not w-based (OEG's trials and Gibbs starts; the tree
counterpart is ``crfsdca.kernels.structures.tree_scaled.potential_marginals``). Node potentials are
folded into the edge tables by the caller.

Forward-backward in scaled probability space, as in ``crfsdca.kernels.structures.chain``: with
E_t(k, l) = exp(psi_t(k, l) - M_t), alpha[t+1, l] = sum_k alpha[t, k] E_t(k, l) / c_{t+1},
beta[t, k] = sum_l E_t(k, l) beta[t+1, l] / c_{t+1}, log Z = sum_t (M_t + log c_t);
p_t(k) = alpha[t, k] beta[t, k], log p_t(k, l) = log alpha[t, k] + psi_t(k, l) - M_t - log c_{t+1}
+ log beta[t+1, l]. Exact log space when a message leaves [TINY, HUGE). The O(T K^2) loops use
the vectorizable ``fast_exp`` / ``fast_log`` (``crfsdca.kernels.numerics.fastmath``): unlike the
chain CRF, whose transition table is shared by all positions, every position here has its own K^2
potentials to exponentiate, once per trial.
"""

import numpy as np

from crfsdca.kernels.jit import njit
from crfsdca.kernels.numerics.fastmath import add_reassoc, fast_exp, fast_log
from crfsdca.kernels.numerics.logspace import logsumexp
from crfsdca.kernels.structures.chain import HUGE, TINY

VEC = {"cache": True, "nogil": True, "error_model": "numpy"}


@njit(cache=True, nogil=True)
def _table_max(table):
    """Largest entry of a (K, K) table."""
    m = table[0, 0]
    for k in range(table.shape[0]):
        for l in range(table.shape[1]):
            m = max(m, table[k, l])
    return m


@njit(**VEC)
def _scaled_forward(psi, psi0, ws):
    """Scaled forward pass on potentials psi (T-1, K, K), psi0 (K,); returns (log Z, ok).

    ws = (E (>=T-1, K, K), alpha (>=T, K), beta, inv_c (>=T,), log_c, shift); fills E, alpha,
    inv_c = 1/c_t, log_c = log c_t and shift[t] = M_{t-1} (shift[0] = max psi0).
    """
    E, alpha, _, inv_c, log_c, shift = ws
    T, K = psi.shape[0] + 1, psi0.shape[0]
    m = np.max(psi0)
    shift[0] = m
    for k in range(K):
        alpha[0, k] = fast_exp(psi0[k] - m)
    for t in range(T):
        if t > 0:
            m = _table_max(psi[t - 1])
            shift[t] = m
            for l in range(K):
                alpha[t, l] = 0.0
            for k in range(K):
                a = alpha[t - 1, k]
                for l in range(K):
                    e = fast_exp(psi[t - 1, k, l] - m)
                    E[t - 1, k, l] = e
                    alpha[t, l] += a * e
        c, ok = 0.0, True
        for l in range(K):
            c += alpha[t, l]
            ok &= TINY <= alpha[t, l] < HUGE  # False for NaN too
        if not ok:
            return np.nan, False
        inv_c[t], log_c[t] = 1.0 / c, np.log(c)
        for l in range(K):
            alpha[t, l] *= inv_c[t]
    return np.sum(shift[:T]) + np.sum(log_c[:T]), True


@njit(**VEC)
def _scaled_backward(ws, T, K):
    """beta[T-1] = 1, beta[t, k] = sum_l E_t(k, l) beta[t+1, l] / c_{t+1}; False out of range."""
    E, _, beta, inv_c, _, _ = ws
    for k in range(K):
        beta[T - 1, k] = 1.0
    for t in range(T - 2, -1, -1):
        ok = True
        for k in range(K):
            s = 0.0
            for l in range(K):
                s = add_reassoc(s, E[t, k, l] * beta[t + 1, l])
            beta[t, k] = s * inv_c[t + 1]
            ok &= TINY <= beta[t, k] < HUGE
        if not ok:
            return False
    return True


@njit(**VEC)
def _scaled_log_marginals(psi, ws, T, log_node, log_edge):
    """Log node and edge marginals from the scaled messages (module docstring), clipped <= 0."""
    _, alpha, beta, _, log_c, shift = ws
    K = alpha.shape[1]
    for t in range(T):
        for k in range(K):
            alpha[t, k] = fast_log(alpha[t, k])
            beta[t, k] = fast_log(beta[t, k])
            log_node[t, k] = min(alpha[t, k] + beta[t, k], 0.0)
    for t in range(T - 1):
        off = shift[t + 1] + log_c[t + 1]
        for k in range(K):
            a = alpha[t, k] - off
            for l in range(K):
                log_edge[t, k, l] = min(a + psi[t, k, l] + beta[t + 1, l], 0.0)


@njit(cache=True, nogil=True)
def _log_space_marginals(psi, psi0, ws, T, log_node, log_edge):
    """Exact log-space forward-backward (fallback); returns log Z, fills the log marginals.

    la[0] = psi0, la[t+1, l] = lse_k(la[t, k] + psi_t(k, l)); lb[T-1] = 0,
    lb[t, k] = lse_l(psi_t(k, l) + lb[t+1, l]).
    """
    la, lb = ws[1], ws[2]
    K = psi0.shape[0]
    scratch = np.empty(K)
    la[0, :K] = psi0
    for t in range(T - 1):
        for l in range(K):
            for k in range(K):
                scratch[k] = la[t, k] + psi[t, k, l]
            la[t + 1, l] = logsumexp(scratch)
    log_z = logsumexp(la[T - 1, :K])
    lb[T - 1, :K] = 0.0
    for t in range(T - 2, -1, -1):
        for k in range(K):
            for l in range(K):
                scratch[l] = psi[t, k, l] + lb[t + 1, l]
            lb[t, k] = logsumexp(scratch)
    for t in range(T):
        for k in range(K):
            log_node[t, k] = min(la[t, k] + lb[t, k] - log_z, 0.0)
    for t in range(T - 1):
        for k in range(K):
            for l in range(K):
                log_edge[t, k, l] = min(la[t, k] + psi[t, k, l] + lb[t + 1, l] - log_z, 0.0)
    return log_z


@njit(cache=True, nogil=True)
def pairwise_marginals(psi, psi0, ws, log_node, log_edge):
    """log Z and log marginals of p(y) propto exp(psi0(y_0) + sum_t psi_t(y_t, y_t+1)).

    psi (T-1, K, K), psi0 (K,) float64 (entries may be -inf); ws the forward-backward buffers
    of ``make_workspace``; log_node (>=T, K) and log_edge (>=T-1, K, K) outputs. One oracle
    call.
    """
    T, K = psi.shape[0] + 1, psi0.shape[0]
    log_z, ok = _scaled_forward(psi, psi0, ws)
    if ok and _scaled_backward(ws, T, K):
        _scaled_log_marginals(psi, ws, T, log_node, log_edge)
        return log_z
    return _log_space_marginals(psi, psi0, ws, T, log_node, log_edge)
