"""Scalar and vector helpers in log space, safe with ``-inf`` entries.

``-inf`` stands for probability 0 ("forbidden"); NaN propagates. None of these functions uses
``fastmath`` because its no-inf/no-NaN assumptions would break exactly those cases.
"""

from __future__ import annotations

import numpy as np

from crfsdca.kernels.jit import njit

LOG_HALF = -np.log(2.0)


@njit(cache=True, nogil=True)
def logsumexp(x):
    """Return ``log(sum(exp(x)))`` of a 1-d float64 array, shifted by its maximum.

    An empty array or an all ``-inf`` array gives ``-inf``; a ``+inf`` entry gives ``+inf``;
    NaN gives NaN.
    """
    n = x.shape[0]
    if n == 0:
        return -np.inf
    m = x[0]
    for i in range(1, n):
        if x[i] > m:
            m = x[i]
    if m == -np.inf or m == np.inf:
        return m
    s = 0.0
    for i in range(n):
        s += np.exp(x[i] - m)
    return m + np.log(s)


@njit(cache=True, nogil=True)
def logaddexp(a, b):
    """Return ``log(exp(a) + exp(b))`` for two float64 scalars (``-inf`` allowed)."""
    if a < b:
        a, b = b, a
    if b == -np.inf:
        return a
    return a + np.log1p(np.exp(b - a))


@njit(cache=True, nogil=True)
def log1mexp(x):
    """Return ``log(1 - exp(x))`` for ``x <= 0`` accurately (Maechler 2012).

    ``x = 0`` gives ``-inf``, ``x = -inf`` gives 0; ``x > 0`` gives NaN.
    """
    if x > 0.0:
        return np.nan
    if x > LOG_HALF:
        return np.log(-np.expm1(x))
    return np.log1p(-np.exp(x))


@njit(cache=True, nogil=True)
def kl_terms(log_p, log_q):
    """Return ``sum(exp(log_p) * (log_p - log_q))`` over a flat pair of log-probability arrays.

    Entries with ``log_p = -inf`` contribute 0 (0 log 0 = 0), whatever ``log_q`` is. The sum is
    the KL divergence when both arrays hold normalised distributions; no clipping here.
    """
    s = 0.0
    for i in range(log_p.shape[0]):
        lp = log_p[i]
        if lp != -np.inf:
            s += np.exp(lp) * (lp - log_q[i])
    return s


@njit(cache=True, nogil=True)
def entropy_terms(log_p):
    """Return ``-sum(exp(log_p) * log_p)`` of a flat log-probability array (``-inf`` gives 0)."""
    s = 0.0
    for i in range(log_p.shape[0]):
        lp = log_p[i]
        if lp != -np.inf:
            s -= np.exp(lp) * lp
    return s


@njit(cache=True, nogil=True)
def subtract_row_max(x, n, K, total):
    """x[v, :K] -= max_k x[v, k] for the first n rows; returns ``total`` plus those maxima,
    added row by row (the log scale of the rows exponentiated next)."""
    for v in range(n):
        m = x[v, 0]
        for k in range(1, K):
            m = max(m, x[v, k])
        total += m
        for k in range(K):
            x[v, k] -= m
    return total
