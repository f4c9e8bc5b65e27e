"""OWL-QN (Andrew & Gao 2007), the orthant-wise L-BFGS that CRFsuite runs for ``c1 > 0``.

Minimises F(x) = f(x) + sigma |x|_1 for a smooth f given as value and gradient, as libLBFGS
(CRFsuite's optimiser) does with ``orthantwise_c = c1`` and its backtracking line search
(CRFsuite switches to it when c1 > 0):

- the pseudo-gradient pg of F (the one-sided derivative of least slope, 0 where both sides
  rise);
- the direction d = -H pg from the two-loop recursion on the pairs (s, y) of the smooth
  gradient, H_0 = (y.s / y.y) I, then d_j = 0 where d_j pg_j >= 0;
- the first step 1 / |d| (d = -pg), later steps from 1, halved until F(x') <= F(x) + 1e-4
  pg.(x' - x), each trial x' = x + step d projected on the orthant of x (of -pg where x is 0);
  at most ``max_linesearch`` trials;
- after each iteration ``callback(x, F, g, pg)`` (it may raise to stop).

F and f are on crfsdca's scale (P, the mean loss); libLBFGS's f = n P gives the same iterates
(the direction, the step and the test are invariant to scaling F).

The elastic net's certificate :func:`elastic_gap` bounds P(w) - P* at any w from the smooth
gradient there (the dual point nu(w)).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from crfsdca.structures.objectives import dot, squared_norm

FTOL = 1e-4  # libLBFGS's sufficient-decrease constant
MIN_STEP, MAX_STEP = 1e-20, 1e20


class LineSearchFailed(Exception):
    """No step along the direction gave a sufficient decrease (libLBFGS's error codes)."""


def pseudo_gradient(x: NDArray, g: NDArray, sigma: float) -> NDArray:
    """The pseudo-gradient of f + sigma |x|_1 at x, given the smooth gradient g."""
    pg = g + sigma * np.sign(x)
    zero = x == 0.0
    right, left = g[zero] + sigma, g[zero] - sigma
    pg[zero] = np.where(right < 0.0, right, np.where(left > 0.0, left, 0.0))
    return pg


def owlqn(
    fun: Callable[[NDArray], tuple[float, NDArray]],
    x0: NDArray,
    sigma: float,
    *,
    history: int,
    callback: Callable[[NDArray, float, NDArray, NDArray], None],
    max_linesearch: int = 20,
) -> NDArray:
    """Run OWL-QN from x0 until ``callback`` raises (or the line search fails:
    :class:`LineSearchFailed`, with the last iterate in its ``args[1]``).

    ``fun(x)`` returns F(x) (with the l1 term) and the gradient of the smooth part.
    """
    x = np.array(x0, dtype=np.float64, copy=True)
    fx, g = fun(x)
    pg = pseudo_gradient(x, g, sigma)
    d = -pg
    norm = float(np.sqrt(squared_norm(d)))
    if norm == 0.0:
        callback(x, fx, g, pg)
        return x
    step = 1.0 / norm
    pairs: list[tuple[NDArray, NDArray, float]] = []
    while True:
        x_new, f_new, g_new = _backtrack(fun, x, fx, pg, d, step, max_linesearch)
        s, y = x_new - x, g_new - g
        x, fx, g = x_new, f_new, g_new
        pg = pseudo_gradient(x, g, sigma)
        callback(x, fx, g, pg)
        ys, yy = dot(y, s), squared_norm(y)
        pairs.append((s, y, ys))
        if len(pairs) > history:
            pairs.pop(0)
        d = _direction(pg, pairs, ys / yy if yy > 0 else 1.0)
        d[d * pg >= 0.0] = 0.0
        step = 1.0


def _direction(pg: NDArray, pairs, h0: float) -> NDArray:
    """-H pg by the two-loop recursion (newest pair last)."""
    d = -pg
    alphas = []
    for s, y, ys in reversed(pairs):
        alpha = dot(s, d) / ys
        d -= alpha * y
        alphas.append(alpha)
    d *= h0
    for (s, y, ys), alpha in zip(pairs, reversed(alphas), strict=True):
        beta = dot(y, d) / ys
        d += (alpha - beta) * s
    return d


def _backtrack(fun, x, fx, pg, d, step, max_linesearch):
    """libLBFGS's ``line_search_backtracking_owlqn``: (x', F(x'), smooth gradient there)."""
    orthant = np.where(x == 0.0, -pg, x)
    for count in range(1, max_linesearch + 1):
        trial = x + step * d
        trial[trial * orthant <= 0.0] = 0.0
        f_trial, g_trial = fun(trial)
        if f_trial <= fx + FTOL * dot(trial - x, pg):
            return trial, f_trial, g_trial
        if step < MIN_STEP or step > MAX_STEP or count >= max_linesearch:
            break
        step *= 0.5
    raise LineSearchFailed("no sufficient decrease along the OWL-QN direction", x)


def elastic_gap(w: NDArray, grad: NDArray, lam: float, sigma: float) -> float:
    """P(w) - D(nu(w)) >= P(w) - P* for the elastic net, from w and the smooth gradient
    grad = lambda w + (1/n) sum_i (E_nu_i F - F_i) at w (nu_i = nu_i(w)).

    The dual point nu(w) has v = w_hat(nu) = w - grad / lambda; with tau = sigma / lambda,
    g(w) = |w|^2 / 2 + tau |w|_1 and u = S_tau(v) = grad g*(v) the gap is
    lambda [g(w) + g*(v) - <w, v>] = lambda sum_j [(w_j - u_j)^2 / 2 + tau (|w_j| - w_j s_j)]
    with v = u + tau s, s in the subdifferential of |.| at u (sign(u_j), or v_j / tau where
    u_j = 0): a sum of non-negative terms, without cancellation. With sigma = 0 it is
    |grad|^2 / (2 lambda); inf without an L2 term.
    """
    if not lam > 0:
        return float("inf")
    tau = sigma / lam
    v = w - grad / lam
    u = np.sign(v) * np.maximum(np.abs(v) - tau, 0.0)
    diff = w - u
    total = 0.5 * squared_norm(diff)
    if tau > 0:
        s = np.where(u != 0.0, np.sign(u), np.clip(v / tau, -1.0, 1.0))
        total += tau * float(np.maximum(np.abs(w) - w * s, 0.0).sum())
    return lam * total
