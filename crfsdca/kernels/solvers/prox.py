"""Prox-SDCA for the elastic net (Shalev-Shwartz & Zhang, "L1 regularization"; ``docs/sdca.md``
section 10), written once for every structure.

P(w) = (1/n) sum_i loss_i(w) + (lambda/2) |w|^2 + sigma |w|_1 = (1/n) sum_i loss_i + lambda g(w)
with g(w) = |w|^2 / 2 + tau |w|_1, tau = sigma / lambda. The dual keeps the dual-average vector
v = (1 / (lambda n)) sum_i [F(x_i, y_i) - E_mu_i F] (the w_hat(mu) of plain SDCA) and the
weights w = grad g*(v) = S_tau(v), the soft-thresholding of v; g*(v) = |S_tau(v)|^2 / 2, so
D(mu) = (1/n) sum_i H~(mu_i) - (lambda/2) |w|^2 keeps its form, and the gap is still the mean
block KL at w (Fenchel-Young: g(w) + g*(v) = <w, v>).

A step on block i moves v along a = kappa u_i (``block_direction``, kappa = -scale / (lambda n)).
Along the step size s, the quadratic term of plain SDCA, (lambda n / scale) s |a|^2 / 2 ... is
replaced by the exact (lambda n / scale) [g*(v + s a) - g*(v)], whose derivative is

    q(s)  = c sum_j a_j (S_tau(v_j + s a_j) - w_j),      c = lambda n / scale,
    q'(s) = c sum_{j : |v_j + s a_j| > tau} a_j^2,

(the - c <w, a> part is carried by f'(0), the KL form of ``crfsdca.kernels.solvers.sdca``): q is
continuous, piecewise linear and non-decreasing, with kinks where a coordinate of v + s a
crosses +-tau. The line search evaluates it exactly at every point it tries (``quad_term``),
over the support of a only, so f' stays exact, continuous and decreasing and rtsafe's bracket
and bisection safeguard hold across the kinks. With tau = 0 it is s c |a|^2, plain SDCA.
"""

from typing import NamedTuple

import numpy as np

from crfsdca.kernels.jit import njit
from crfsdca.kernels.numerics.fastmath import add_reassoc

VEC = {"cache": True, "nogil": True, "error_model": "numpy"}


class ProxArrays(NamedTuple):
    """The dual-average vector v (d,) and tau, and the step's buffers on a block's support:
    flat indices, a = kappa u_i, v and w there (each of the structure's direction capacity)."""

    v: np.ndarray
    tau: float
    idx: np.ndarray
    a: np.ndarray
    vv: np.ndarray
    ww: np.ndarray


def make_prox(v: np.ndarray, tau: float, capacity: int) -> ProxArrays:
    """ProxArrays on the dense v with buffers for ``capacity`` support entries."""
    size = max(int(capacity), 1)
    return ProxArrays(
        v, float(tau), np.empty(size, np.int64), np.empty(size), np.empty(size), np.empty(size)
    )


@njit(cache=True, nogil=True)
def soft(x, tau):
    """S_tau(x) = sign(x) max(|x| - tau, 0)."""
    if x > tau:
        return x - tau
    if x < -tau:
        return x + tau
    return 0.0


def soft_threshold(v: np.ndarray, tau: float) -> np.ndarray:
    """S_tau(v) elementwise (NumPy)."""
    return np.sign(v) * np.maximum(np.abs(v) - tau, 0.0)


@njit(**VEC)
def quad_sums(s, a, vv, ww, m, tau):
    """(sum_j a_j (S_tau(v_j + s a_j) - w_j), sum_{|v_j + s a_j| > tau} a_j^2) over m entries."""
    q = 0.0
    dq = 0.0
    for p in range(m):
        ap = a[p]
        z = vv[p] + s * ap
        up = z - tau
        down = z + tau
        st = up if up > 0.0 else (down if down < 0.0 else 0.0)
        q = add_reassoc(q, ap * (st - ww[p]))
        dq = add_reassoc(dq, ap * ap if (up > 0.0 or down < 0.0) else 0.0)
    return q, dq


@njit(cache=True, nogil=True)
def quad_term(s, cb, pw):
    """(q(s), q'(s)) of the module docstring; pw None (plain SDCA, decided at compile time):
    (s cb, cb) with cb = c |a|^2. pw = (a, vv, ww, m, tau, c)."""
    if pw is None:
        return s * cb, cb
    a, vv, ww, m, tau, c = pw
    q, dq = quad_sums(s, a, vv, ww, m, tau)
    return c * q, c * dq


@njit(cache=True, nogil=True)
def prepare(prox, m, kappa, w, c):
    """a = kappa u_i (val already holds u_i on its m support entries), v and w gathered there;
    returns (pw, q(1)) for the line search (q(1) >= 0; 0: the step does not move w)."""
    idx, a, vv, ww, v = prox.idx, prox.a, prox.vv, prox.ww, prox.v
    for p in range(m):
        j = idx[p]
        a[p] *= kappa
        vv[p] = v[j]
        ww[p] = w[j]
    pw = (a, vv, ww, m, prox.tau, c)
    q1, _ = quad_term(1.0, 0.0, pw)
    return pw, max(q1, 0.0)


@njit(cache=True, nogil=True)
def apply_step(gamma, prox, m, w):
    """v <- v + gamma a and w <- S_tau(v) on the support of the step."""
    idx, a, vv, v, tau = prox.idx, prox.a, prox.vv, prox.v, prox.tau
    for p in range(m):
        j = idx[p]
        z = vv[p] + gamma * a[p]
        v[j] = z
        w[j] = soft(z, tau)


@njit(cache=True, nogil=True)
def record_step(gamma, prox, m, delta):
    """delta <- delta + gamma a on the support of the step: the change of v that
    ``apply_step`` made (a thread's own record of it, ``sdca_epoch.Team``)."""
    idx, a = prox.idx, prox.a
    for p in range(m):
        delta[idx[p]] += gamma * a[p]
