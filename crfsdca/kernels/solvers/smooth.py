"""The structured hinge loss smoothed by entropy (softmax-margin), stepped as the CRF is.

At temperature g > 0 the loss of example i is l_i^g(w) = g log sum_y exp([Delta(y, y_i) +
w . (F(x_i, y) - F(x_i, y_i))] / g), an upper bound of the hinge loss H_i(w) within g log |Y|.
On the hinge loss's dual state (the clique marginals mu_i, ``crfsdca.kernels.solvers.hinge``)
its dual is

    D_g(mu) = (1/n) sum_i [E_mu_i Delta(., y_i) + g H~(mu_i)] - (lambda / 2) |w_hat(mu)|^2,

the hinge loss's dual plus g times the CRF's entropy, so a block step of D_g is the CRF's
(Shalev-Shwartz & Zhang: a smooth approximation of a non-smooth loss converges linearly): the
oracle nu_i is the marginals of exp((w F + Delta) / g) (``primitives.smoothed_oracle``), and
along mu_i + s (nu_i - mu_i), with c = lambda n / scale and b = |kappa u_i|^2,

    f'(s) / g = sum coef delta (log nu_i - log mu_i^s) - s (c b / g),

the CRF's line search (``line_search``) with c b divided by g. The block's gap of D_g is g
KL~(mu_i || nu_i). mu_i stays in the marginal polytope, and l_i = E_mu_i Delta (the hinge
dual's linear term, in the state's ``entropies``) moves with it: the hinge loss's exact primal
and dual keep certifying its own duality gap, which is at most the smoothed gap plus g (1/n)
sum_i H~(mu_i). The solver lowers g as the smoothed gap falls below that term
(``crfsdca.solvers.local``); mu carries over.
"""

import numpy as np

from crfsdca.kernels.jit import njit
from crfsdca.kernels.numerics.cycles import cycles
from crfsdca.kernels.primitives import block_direction, block_runs, smoothed_oracle
from crfsdca.kernels.solvers.line_search import line_search, model_start
from crfsdca.kernels.solvers.sdca import block_gap_given_nu, update_block
from crfsdca.kernels.solvers.team import move


@njit(cache=True, nogil=True)
def smooth_step(i, structure, dual, w, params, ws, hws, team, s):
    """One step of D_g on example i (g = hws.temp[0]; see the module docstring), with the
    return values of the SDCA step (``sdca_epoch._step``): the smoothed block gap before the
    step, gamma, Newton evaluations, status, cycles (oracle, block gap, line search) and the
    single-precision predictor's evaluations. Without the elastic net."""
    bufs, b32, sws = ws
    lam_n, scale = params.lam_n, params.scale
    g = hws.temp[0]
    runs = block_runs(structure.runs, i)
    mu_arrays = (dual.log_edge, dual.log_node)
    c0 = cycles()
    log_z = smoothed_oracle(structure, i, w, sws, bufs, hws)
    c1 = cycles()
    if not np.isfinite(log_z):
        return 0.0, 0.0, 0, 1, (c1 - c0, 0, 0), 0
    expected = hws.out[0]
    kl, fp0, _ = block_gap_given_nu(mu_arrays, runs, bufs, b32)
    c2 = cycles()
    kappa = -scale / lam_n
    cb = lam_n / scale * block_direction(structure, i, bufs, sws, kappa) / g
    if params.fixed_step > 0.0:
        gamma, its, status, have_logs, h, n32 = params.fixed_step, 0, 0, False, 0.0, 0
    else:
        start = model_start(kl, fp0, cb)
        tol, max_newton = params.tol, params.max_newton
        gamma, its, status, have_logs, h, n32 = line_search(
            bufs, b32, runs, cb, fp0, start, tol, max_newton, None, None, False
        )
    c3 = cycles()
    if gamma > 0.0:
        update_block(gamma, mu_arrays, runs, bufs, have_logs, h, False)
        dual.entropies[i] += gamma * (expected - dual.entropies[i])
        move(structure, i, gamma, kappa, sws, w, None, 0, team, s)
    dual.step_sizes[i] = gamma
    return g * kl, gamma, its, 2 * status, (c1 - c0, c2 - c1, c3 - c2), n32
