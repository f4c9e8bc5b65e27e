"""Entropy, KL, line search and the log-space update of one dual block, driven by its segment
table alone.

A block (one example's marginals) is a flat array of log-probabilities; its segment table is a
list of runs ``(off[r], length[r], coef[r])``: entries off..off+length-1 carry the coefficient
coef (+1 for clique tables, -1 for separator tables, 1 - degree for the node tables of a tree).
For marginals of a junction tree, the entropy of the law is H = sum_r coef_r H(run r) and
KL(mu || nu) = sum_r coef_r KL(run r) (0 log 0 = 0). ``runs = (off, length, coef)``: int64,
int64, float64 arrays of one block, offsets local to the block.

SDCA's step on a block (``docs/sdca.md`` sections 3 and 5): with delta = nu - mu and
cb = scale |B delta|^2 / (lambda n), the dual along mu + gamma delta has
f'(gamma) = sum_r coef_r <delta_r, log nu_r - log mu^gamma_r> - gamma cb, with
mu^gamma = (1 - gamma) mu + gamma nu; :func:`newton` finds its root on [0, 1] (safe Newton) and
:func:`mix` applies mu <- mu^gamma (in log space) and returns the new entropy.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def entropy(log_p, runs):
    """sum_r coef_r H(run r) of the log-probabilities log_p (float64 arithmetic, also for
    float32 storage; 0 log 0 = 0)."""
    off, length, coef = runs
    h = 0.0
    for r in range(off.size):
        for j in range(off[r], off[r] + length[r]):
            lp = np.float64(log_p[j])
            if lp != -np.inf:
                h -= coef[r] * np.exp(lp) * lp
    return h


@njit(cache=True, nogil=True)
def kl(log_p, log_q, runs):
    """sum_r coef_r KL(run r of p || run r of q) (float64 arithmetic; 0 log 0 = 0)."""
    off, length, coef = runs
    s = 0.0
    for r in range(off.size):
        for j in range(off[r], off[r] + length[r]):
            lp = np.float64(log_p[j])
            if lp != -np.inf:
                s += coef[r] * np.exp(lp) * (lp - np.float64(log_q[j]))
    return s


@njit(cache=True, nogil=True)
def line(gamma, mu, nu, log_nu, runs, cb):
    """(f'(gamma), f''(gamma)) of a block: mu, nu probabilities, log_nu logs (see module)."""
    off, length, coef = runs
    d1, d2 = 0.0, 0.0
    for r in range(off.size):
        c = coef[r]
        if c == 0.0:
            continue
        for j in range(off[r], off[r] + length[r]):
            m, q = mu[j], nu[j]
            d = q - m
            if d != 0.0:
                mix_ = (1.0 - gamma) * m + gamma * q
                d1 += c * d * (log_nu[j] - np.log(mix_))
                d2 -= c * d * d / mix_
    return d1 - gamma * cb, d2 - cb


@njit(cache=True, nogil=True)
def newton(fp0, mu, nu, log_nu, runs, cb, tol, max_iter):
    """Safe Newton for the root of f' on [0, 1] (f'(0) = fp0); returns (gamma, iterations)."""
    if fp0 <= 0.0:
        return 0.0, 0
    if cb <= 0.0:
        return 1.0, 0
    x_l, x_h = 1.0, 0.0  # u(x_l) < 0 < u(x_h)
    gamma = 0.5  # f'(0) is infinite where nu has support that mu lacks
    if np.isfinite(fp0):
        gamma = min(max(fp0 / (fp0 + cb), 1e-3), 0.999)  # the secant of f' on [0, 1]
    dx_old = dx = 1.0
    u, du = line(gamma, mu, nu, log_nu, runs, cb)
    for it in range(1, max_iter + 1):
        if ((gamma - x_h) * du - u) * ((gamma - x_l) * du - u) > 0.0 or abs(2 * u) > abs(
            dx_old * du
        ):
            dx_old, dx = dx, 0.5 * (x_h - x_l)
            gamma = x_l + dx
        else:
            dx_old, dx = dx, u / du
            gamma -= dx
        if abs(dx) < tol:
            return gamma, it
        u, du = line(gamma, mu, nu, log_nu, runs, cb)
        if u < 0.0:
            x_l = gamma
        else:
            x_h = gamma
    return gamma, max_iter


@njit(cache=True, nogil=True)
def kl_pair(mu, nu, log_mu, log_nu, runs):
    """(KL(mu || nu), KL(mu || nu) + KL(nu || mu)) over the segment table, from the
    probabilities and their logs (no exp per entry; 0 log 0 = 0 as in :func:`kl`)."""
    off, length, coef = runs
    a, b = 0.0, 0.0
    for r in range(off.size):
        c = coef[r]
        for j in range(off[r], off[r] + length[r]):
            lm, ln = log_mu[j], log_nu[j]
            if lm != -np.inf:
                a += c * mu[j] * (lm - ln)
            if ln != -np.inf:
                b += c * nu[j] * (ln - lm)
    return a, a + b


@njit(cache=True, nogil=True)
def mix(mu, nu, log_mu, log_nu, runs, gamma):
    """log_mu <- log((1 - gamma) mu + gamma nu) on the runs' entries, clipped at 0; returns
    the entropy sum_r coef_r H(run r) of the result as stored. The mixture is formed in
    probability space (mu, nu: the probabilities of log_mu, log_nu) and in log space where it
    underflows."""
    off, length, coef = runs
    a = np.log1p(-gamma) if gamma < 1.0 else -np.inf
    c = np.log(gamma) if gamma > 0.0 else -np.inf
    h = 0.0
    for r in range(off.size):
        for j in range(off[r], off[r] + length[r]):
            p = (1.0 - gamma) * mu[j] + gamma * nu[j]
            if p > 1e-300:
                v = np.log(p)
            else:
                x, y = a + log_mu[j], c + log_nu[j]
                if x == -np.inf:
                    v = y
                elif y == -np.inf:
                    v = x
                else:
                    v = max(x, y) + np.log1p(np.exp(-abs(x - y)))
                p = np.exp(v)
            if v > 0.0:
                v, p = 0.0, 1.0
            log_mu[j] = v
            stored = np.float64(log_mu[j])  # float32 storage rounds
            if stored != v:
                p = np.exp(stored)
            if stored != -np.inf:
                h -= coef[r] * p * stored
    return h
