"""The step sizes of the dual-free SPDC and their adaptation (Wang & Xiao 2017, Theorem 4 and
Algorithm 4), for the CRF loss.

Theorem 4 (Algorithm 7 without adaptation): with R = max_i ||a_i||, phi_i 1/gamma-smooth and
Delta = delta mu^2 the strong convexity that the data give the summed loss,

    sigma = sqrt(gamma (n lambda + Delta)) / (4 R),  tau = sqrt(gamma / (n lambda + Delta)) / (4 R),
    theta_x = (1 - tau sigma Delta / (n (4 + 2 sigma))) / (1 + tau lambda),
    theta_y = (1 + ((n - 1)/n) sigma / 2) / (1 + sigma / 2),     theta = max(theta_x, theta_y).

For a CRF (ours): the dual variable of example i is its marginals, the conjugate of the loss is
-H~, which is 1-strongly convex in the l1 norm of the joint law (Le Priol et al. 2018, §5), so
gamma = 1 (Pinsker: KL(p' || p) >= ||p' - p||_1^2 / 2), and the radius is the l1 -> l2 norm of
the example's feature map on the differences of two laws: the proof of Theorem 4 bounds
|<A_k^T (y' - y), x>| by ||A_k^T (y' - y)|| ||x||, and for y' - y = p' - p summing to 0,
||A_k^T (y' - y)|| <= ||y' - y||_1 max_{y, y''} ||F(x_k, y) - F(x_k, y'')|| / 2. The diameter is
estimated as Le Priol et al. (App. C) estimate it, R_i = ||F(x_i, y_i) - F(x_i, y~_i)||^2 against a
constant labelling (``crfsdca.kernels.solvers.radii``), so R^2 = max_i R_i / 4
(``radius="max"``, the theorem's) or mean_i R_i / 4 (``"mean"``, no guarantee).

Algorithm 4 (the robust heuristic), every T epochs: with the exact gap G_t = P(x_t) - D(mu_t)
and the rate of the period rho^ = G_t / G_{t-T},

    rho^ <= c_low rho:   Delta <- 2 Delta,  rho <- rho^   (faster than before: ask for more)
    rho^ >= c_high rho:  Delta <- Delta / 2, rho <- rho^  (slower: ask for less)
    otherwise:           nothing changes,

then sigma, tau (and theta) from Theorem 4 again. The first period is compared with rho = 1
(standing still; ours: the paper leaves the first estimate open).
"""

from __future__ import annotations

import math
from typing import NamedTuple


class Rates(NamedTuple):
    """sigma (dual), tau (primal) and theta (extrapolation) of Theorem 4."""

    sigma: float
    tau: float
    theta: float


def theorem4_rates(
    lam: float, n: int, radius2: float, delta: float, extrapolate: bool = True
) -> Rates:
    """Theorem 4's (sigma, tau, theta) for regularisation ``lam``, ``n`` examples, R^2 =
    ``radius2``, data convexity ``delta`` (gamma = 1); theta = 1 unless ``extrapolate`` is the
    theorem's rule (True)."""
    strength = n * lam + delta
    radius = math.sqrt(radius2)
    sigma = math.sqrt(strength) / (4.0 * radius)
    tau = 1.0 / (4.0 * radius * math.sqrt(strength))
    if not extrapolate:
        return Rates(sigma, tau, 1.0)
    theta_x = (1.0 - tau * sigma * delta / (n * (4.0 + 2.0 * sigma))) / (1.0 + tau * lam)
    theta_y = (1.0 + (n - 1) / n * sigma / 2.0) / (1.0 + sigma / 2.0)
    return Rates(sigma, tau, max(theta_x, theta_y))


class Adaptation(NamedTuple):
    """What Algorithm 4 keeps between periods: the data convexity estimate Delta, the last rate
    estimate rho, and the gap at the start of the current period (nan: not measured yet)."""

    delta: float
    rate: float
    gap: float


def adapt(state: Adaptation, gap: float, low: float, high: float) -> tuple[Adaptation, int]:
    """Algorithm 4 at the end of a period whose exact gap is ``gap``; returns the new state and
    the change (+1: Delta doubled, -1: halved, 0: kept). A period that starts without a
    positive gap (not measured, or at round-off) only records ``gap``."""
    if not (state.gap > 0 and math.isfinite(gap) and gap >= 0):
        return state._replace(gap=gap), 0
    rate = gap / state.gap
    if rate <= low * state.rate:
        return Adaptation(2.0 * state.delta, rate, gap), 1
    if rate >= high * state.rate:
        return Adaptation(0.5 * state.delta, rate, gap), -1
    return state._replace(gap=gap), 0
