"""What every structure's adaptive primal-dual method (SPDC) shares: the parameters of a call
(``SPDCParams``), the primal iterate it moves (``SPDCPrimal``), the dual state (``SPDCDual``) and
the support arithmetic on w. The iterations are ``crfsdca.kernels.solvers.spdc_epoch``.

The saddle function of the CRF (Wang & Xiao 2017, eq. 3, with y_i = mu_i - 1[gold]) is

    L(x, mu) = (1/n) sum_i [H~(mu_i) - x . B_i mu_i] + (lambda/2) ||x||^2,

B_i mu_i = F(x_i, y_i) - E_{mu_i}[F(x_i, .)]: its maximum over mu is P(x), its minimum over x is
the dual D(mu), reached at w_hat(mu) = (1/(lambda n)) sum_i B_i mu_i = -u / lambda, u the running
mean (1/n) sum_i A_i^T y_i of Algorithm 7. One step on example k with rates sigma, tau and
extrapolation theta (Algorithm 7, the dual-free SPDC):

    mu_k'  = the marginals of (theta(mu_k) + sigma s_k(x~)) / (1 + sigma)   (one oracle call)
    x'     = (x - tau (u + E_{mu_k' - mu_k}[F])) / (1 + tau lambda)
    x~'    = x' + theta (x' - x).

The dual step is OEG's exponentiated-gradient step at the rate eta = sigma / (1 + sigma) taken
at x~ instead of w_hat(mu), with no acceptance test (``crfsdca.kernels.primitives``:
``oeg_prepare``, ``oeg_trial``, ``oeg_accept``); its primal change v = w_hat' - w_hat =
-(1/(lambda n)) E_{mu_k' - mu_k}[F] is ``oeg_change``.

The primal step moves every coordinate of x; written in e = x - w_hat it is sparse (ours):
with rho = 1 / (1 + tau lambda),

    e' = rho e + (rho tau lambda n - 1) v,     x' - x = -tau lambda e' + tau lambda (n - 1) v,

so e = beta z with a scalar beta <- rho beta and z <- z + ((rho tau lambda n - 1) / beta) v on
the support of v, and x~ = w_hat + (1 - theta tau lambda) e + theta tau lambda (n - 1) v_prev
is needed only on the support of the next example. ``prev`` holds theta tau lambda (n - 1) v of
the last step (zero elsewhere), ``scalars`` beta and the theta tau lambda of that step: the
next extrapolation is the one that step set up, also when the rates change in between (as in
Algorithm 7, where the adaptation follows the step's extrapolation).
"""

from typing import NamedTuple

import numpy as np

from crfsdca.kernels.jit import njit


class SPDCParams(NamedTuple):
    """What an SPDC call is told (``crfsdca.solvers.spdc`` derives it from sigma, tau, theta)."""

    eta: float  # sigma / (1 + sigma): the rate of the dual (exponentiated-gradient) step
    rho: float  # 1 / (1 + tau lambda): the prox of tau (lambda/2) ||.||^2
    z_coef: float  # rho tau lambda n - 1: e <- rho e + z_coef v
    tau_lam: float  # tau lambda
    theta: float  # the extrapolation
    n: int  # examples
    lam_n: float  # lambda n
    budget: int  # oracle calls at most
    rescale: float  # fold beta into z when it falls below this


class SPDCPrimal(NamedTuple):
    """The primal iterate x = w_hat(mu) + beta z, and the extrapolation's memory."""

    z: object  # (d,) float64
    prev: object  # (d,) float64: theta tau lambda (n - 1) v of the last step, 0 off its support
    point: object  # (d,) float64: x~ on the support of the example being visited (scratch)
    scalars: object  # (2,) float64: beta, the theta tau lambda of the last step (0: no step)
    last: object  # (1,) int64: the example of the last step (-1: none)


class SPDCDual(NamedTuple):
    """The dual state a call updates, in the structure's layout (as SDCA's ``DualState``)."""

    log_node: object
    log_edge: object
    entropies: object


# indices into ``SPDCPrimal.scalars``
BETA, LAST_PULL = 0, 1


@njit(cache=True, nogil=True)
def extrapolate(sa, A, R, K, w_hat, primal):
    """primal.point = x~ = w_hat + (1 - theta tau lambda) beta z + prev on the rows an example
    reads: its attribute rows sa, then rows A to A + R - 1."""
    a = (1.0 - primal.scalars[LAST_PULL]) * primal.scalars[BETA]
    z, prev, out = primal.z, primal.prev, primal.point
    for s in range(sa.shape[0]):
        _combine(w_hat, z, prev, out, sa[s] * K, K, a)
    _combine(w_hat, z, prev, out, A * K, R * K, a)


@njit(cache=True, nogil=True)
def _combine(w, z, prev, out, off, m, a):
    for j in range(off, off + m):
        out[j] = w[j] + a * z[j] + prev[j]


@njit(cache=True, nogil=True)
def clear_rows(sa, A, R, K, out):
    """out = 0 on the attribute rows sa and rows A to A + R - 1."""
    for s in range(sa.shape[0]):
        out[sa[s] * K : sa[s] * K + K] = 0.0
    out[A * K : (A + R) * K] = 0.0


def fold(primal: SPDCPrimal) -> None:
    """z <- beta z, beta <- 1 (x unchanged)."""
    primal.z *= primal.scalars[BETA]
    primal.scalars[BETA] = 1.0


def primal_point(w_hat: np.ndarray, primal: SPDCPrimal) -> np.ndarray:
    """x = w_hat + beta z (a new array)."""
    return w_hat + primal.scalars[BETA] * primal.z
