"""Entropy and KL of one dual block, driven by its segment table alone.

A block (one example's marginals) is a flat array of log-probabilities; its segment table is a
list of runs ``(off[r], length[r], coef[r])``: entries off..off+length-1 carry the coefficient
coef (+1 for clique tables, -1 for separator tables, 1 - degree for the node tables of a tree).
For marginals of a junction tree, the entropy of the law is H = sum_r coef_r H(run r) and
KL(mu || nu) = sum_r coef_r KL(run r) (0 log 0 = 0). ``runs = (off, length, coef)``: int64,
int64, float64 arrays of one block, offsets local to the block.
"""

from __future__ import annotations

import numpy as np

from crfsdca.kernels.jit import njit


@njit(cache=True, nogil=True)
def _terms(log_p, log_q, runs, relative):
    """sum_r coef_r sum_{j in run r} p_j (log p_j - log q_j) if ``relative``, else with
    log q = 0 (float64 arithmetic, also for float32 storage; 0 log 0 = 0)."""
    off, length, coef = runs
    s = 0.0
    for r in range(off.size):
        for j in range(off[r], off[r] + length[r]):
            lp = np.float64(log_p[j])
            if lp != -np.inf:
                s += coef[r] * np.exp(lp) * (lp - np.float64(log_q[j]) if relative else lp)
    return s


@njit(cache=True, nogil=True)
def entropy(log_p, runs):
    """sum_r coef_r H(run r) of the log-probabilities log_p."""
    return -_terms(log_p, log_p, runs, False)


@njit(cache=True, nogil=True)
def kl(log_p, log_q, runs):
    """sum_r coef_r KL(run r of p || run r of q)."""
    return _terms(log_p, log_q, runs, True)
