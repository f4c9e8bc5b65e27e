"""The step size of one SDCA block step (Le Priol et al. 2018, eq. 20), on the block buffers
that ``crfsdca.kernels.solvers.sdca.block_gap`` fills and ``update_block`` reads.

Line search (eq. 20, KL form): with c = lambda n / scale,

    f'(g)  = sum coef * delta * (log nu - log mu^g) - c g b
    f''(g) = -sum coef * delta^2 / mu^g - c b
    f'(0)  = symmetrised block KL >= 0,   f'(1) = -c b <= 0,

solved by safe bounded Newton (Numerical Recipes, rtsafe) on [0, 1], in two phases
(``line_search``), from the root of a quadratic model of f' (``model_start``: f'(0), f'(1) and
the integral of f' over [0, 1], which the block gap gives for free):

1. a single-precision predictor (``predict_step``) on float32 copies of mu, nu and log nu
   (sixteen lanes per instruction, and ``fastmath.approx_logf``, a logarithm without a division
   within a few float32 ulps: about a third of the cost of a double evaluation) takes
   safeguarded Newton or Halley steps (it also sums f''' = sum coef delta^3 / mu^g^2) until the
   estimated error of its estimate is below tol / 4 -- on CoNLL-2000, OCR and EWT 1.0-1.4
   evaluations per search;
2. the double-precision rtsafe starts from that estimate. Its first evaluation computes f' and
   the new log-marginals (for the update) but not f'': it takes the predictor's (one division per
   entry less), and usually accepts the estimate there (1.00-1.03 evaluations per search).

The predictor only moves the starting point: the returned step always passes the
double-precision test.

``safe_newton`` is the authors' search instead (sdca4crf's ``safe_newton``, the paper's §6.2 and
footnote 4), for the reproduction of those claims: float64 evaluations of f' and f'' from a
given start, no predictor; its first step is tested against the bracket [0, 1] (the first
evaluation does not narrow it), and it returns the point of its last step, not the last point
evaluated, once that step is below tol. With tol = 0.5 that is one Newton step from 0.5 (the
paper's Fig. 8 ablation).

With an l1 term (the elastic net, ``crfsdca.kernels.solvers.prox``) the term s cb of f' becomes the
exact derivative q(s) of the g* term along the step, continuous and piecewise linear with kinks
where a coordinate of v crosses +-tau (``prox.quad_term``, evaluated at every point tried, in
the predictor too); f' stays continuous and decreasing, so the bracket and the safeguards hold.

Runs, buffers and the float32 copies are those of :mod:`crfsdca.kernels.solvers.sdca`; segment loops
are written so that LLVM vectorizes them (``crfsdca.kernels.numerics.fastmath``).
"""

import numpy as np

from crfsdca.kernels.jit import njit
from crfsdca.kernels.numerics.fastmath import (
    add_reassoc,
    add_reassoc32,
    approx_logf,
    fast_log_normal,
    fast_log_positive,
)
from crfsdca.kernels.solvers.prox import quad_term
from crfsdca.kernels.solvers.sdca import TINY, VEC

_Z32 = np.float32(0.0)


@njit(inline="always", **VEC)
def _segment(gamma, bufs, lo, hi, second, log_mix, log_fn):
    """(sum delta (log nu - log mu^g), sum delta^2 / mu^g, entropy) on [lo, hi); the second sum
    is left at 0 when ``second`` is None (decided at compile time: no division in that loop).
    ``log_fn`` is the logarithm (inlined into ``_line_segment``, which picks it: a function
    argument of a cached kernel would not be found in the cache by the next process).

    Stores the new log-marginal min(log mu^g, 0) in log_mix (hi - lo entries: bufs' log_mix on
    [lo, hi), or the block's segment of the dual state), or -inf where mu^g <= TINY (those
    entries are mixed in log space by the update and left out of the entropy sum here).
    """
    mu, nu, lnu = bufs.mu[lo:hi], bufs.nu[lo:hi], bufs.log_nu[lo:hi]
    d1 = 0.0
    d2 = 0.0
    h = 0.0
    one_minus = 1.0 - gamma
    for p in range(hi - lo):
        m = mu[p]
        v = nu[p]
        d = v - m
        mg = one_minus * m + gamma * v
        # mg >= 0 finite: the log is exact for mg > 0; at mg = 0 (so d = 0) it is discarded
        lg = log_fn(mg)
        ok = mg > TINY
        lc = min(lg, 0.0)
        log_mix[p] = lc if ok else -np.inf
        h = add_reassoc(h, -mg * lc if ok else 0.0)
        nz = d != 0.0
        d1 = add_reassoc(d1, d * (lnu[p] - lg) if nz else 0.0)
        if second is not None:
            d2 = add_reassoc(d2, d * d / mg if nz else 0.0)
    return d1, d2, h


@njit(**VEC)
def _line_segment(gamma, bufs, lo, hi, second, log_mix, normal):
    """``_segment`` with the logarithm for positive numbers, or, when ``normal`` (every mu^g
    normal: the in-place case, all stored logs above ``IN_PLACE_LOG_MIN``), the one without the
    subnormal scaling (``fast_log_normal``, the same bits): two loops, chosen at run time."""
    if normal:
        return _segment(gamma, bufs, lo, hi, second, log_mix, fast_log_normal)
    return _segment(gamma, bufs, lo, hi, second, log_mix, fast_log_positive)


@njit(cache=True, nogil=True)
def _log_target(bufs, runs, r, outs, in_place):
    """Where the line search leaves the new logs of run r: bufs' log_mix on the run, or, with
    outs given and ``in_place``, the run's segment of the dual state (one compiled loop serves
    both: the choice is made at run time)."""
    lo, hi = runs.lo[r], runs.hi[r]
    if outs is None:  # decided at compile time
        return bufs[3][lo:hi]
    if in_place:
        o = runs.off[r]
        return outs[runs.dst[r]][o : o + hi - lo]
    return bufs[3][lo:hi]


@njit(cache=True, nogil=True)
def line_derivatives(gamma, bufs, runs, cb, outs=None, pw=None, in_place=True):
    """f'(gamma), f''(gamma) of eq. 20 (KL form), cb = c * b = lambda n b / scale, and the
    junction-tree entropy of mu^gamma (without the entries <= TINY).

    Leaves the new log-marginals of the runs of non-zero coefficient (see ``_line_segment``) in
    bufs' log_mix, for ``update_block`` to copy, or, when given, in ``outs`` = the dual state's
    (log_edge_flat, log_node_flat) where the runs point (float64), when ``in_place``: only for
    a block whose stored logs there are all above ``IN_PLACE_LOG_MIN`` (no entry near 0 that the
    update would have to mix in log space).
    """
    d1, d2, h = 0.0, 0.0, 0.0
    for r in range(runs.lo.shape[0]):
        lo, hi, c = runs.lo[r], runs.hi[r], runs.coef[r]
        if c == 0.0:
            continue
        dst = _log_target(bufs, runs, r, outs, in_place)
        normal = outs is not None and in_place
        a1, a2, ah = _line_segment(gamma, bufs, lo, hi, 1.0, dst, normal)
        d1 += c * a1
        d2 += c * a2
        h += c * ah
    q, dq = quad_term(gamma, cb, pw)
    return d1 - q, -d2 - dq, h


@njit(cache=True, nogil=True)
def line_slope(gamma, bufs, runs, cb, outs=None, pw=None, in_place=True):
    """f'(gamma) and the entropy of mu^gamma as ``line_derivatives``, without f'' (one division
    per entry less), for the evaluation that starts from the predictor's estimate."""
    d1, h = 0.0, 0.0
    for r in range(runs.lo.shape[0]):
        lo, hi, c = runs.lo[r], runs.hi[r], runs.coef[r]
        if c == 0.0:
            continue
        dst = _log_target(bufs, runs, r, outs, in_place)
        normal = outs is not None and in_place
        a1, _, ah = _line_segment(gamma, bufs, lo, hi, None, dst, normal)
        d1 += c * a1
        h += c * ah
    return d1 - quad_term(gamma, cb, pw)[0], h


@njit(**VEC)
def _line_segment32(gamma, b32, lo, hi):
    """Single-precision (sum delta (log nu - log mu^g), sum delta^2 / mu^g, sum delta^3 / mu^g^2)
    on [lo, hi)."""
    m32, v32, l32 = b32.mu[lo:hi], b32.nu[lo:hi], b32.log_nu[lo:hi]
    g = np.float32(gamma)
    one_minus = np.float32(1.0 - gamma)
    d1 = _Z32
    d2 = _Z32
    d3 = _Z32
    for p in range(hi - lo):
        m = m32[p]
        v = v32[p]
        d = v - m
        mg = one_minus * m + g * v
        lg = approx_logf(mg)
        nz = d != _Z32
        q = d / mg  # |q| <= 1 / min(gamma, 1 - gamma): no overflow
        d1 = add_reassoc32(d1, d * (l32[p] - lg) if nz else _Z32)
        d2 = add_reassoc32(d2, d * q if nz else _Z32)
        d3 = add_reassoc32(d3, d * q * q if nz else _Z32)
    return np.float64(d1), np.float64(d2), np.float64(d3)


@njit(cache=True, nogil=True)
def line_derivatives32(gamma, b32, runs, cb, pw=None):
    """f'(gamma), f''(gamma) as ``line_derivatives`` and the third derivative
    sum coef delta^3 / mu^g^2, in single precision (predictor)."""
    d1, d2, d3 = 0.0, 0.0, 0.0
    for r in range(runs.lo.shape[0]):
        c = runs.coef[r]
        if c == 0.0:
            continue
        a1, a2, a3 = _line_segment32(gamma, b32, runs.lo[r], runs.hi[r])
        d1 += c * a1
        d2 += c * a2
        d3 += c * a3
    q, dq = quad_term(gamma, cb, pw)
    return d1 - q, -d2 - dq, d3


@njit(cache=True, nogil=True)
def model_start(kl, fprime0, cb):
    """Root in (0, 1) of a quadratic model of f' built from what the block gap already knows.

    f'(g) = e(g) - g cb, where e(g) = sum coef delta (log nu - log mu^g) is minus the slope of
    g -> KL~(mu^g || nu); hence e(0) = f'(0) = fprime0, e(1) = 0 and the integral of e over
    [0, 1] is KL~(mu || nu) = kl (the block gap). The quadratic
    q(g) = e0 (1 - g) + c g (1 - g) with those three values has c = 6 kl - 3 e0, clipped to
    [-e0, e0] so that q decreases; the root of q(g) - g cb solves c g^2 + a g - e0 = 0 with
    a = e0 - c + cb > 0, taken in its cancellation-free form. With c = 0 it is the secant
    root e0 / (e0 + cb). Returns 0.5 when f'(0) <= 0 or cb <= 0 (no search is needed then).
    """
    if not (fprime0 > 0.0 and cb > 0.0):
        return 0.5
    c = min(max(6.0 * kl - 3.0 * fprime0, -fprime0), fprime0)
    a = fprime0 - c + cb
    return 2.0 * fprime0 / (a + np.sqrt(max(a * a + 4.0 * c * fprime0, 0.0)))


@njit(cache=True, nogil=True)
def _newton_or_bisect(gamma, u, du, x_l, x_h, dx_old):
    """rtsafe's safeguarded step from gamma, given f'(gamma) = u and f''(gamma) = du and the
    bracket [x_h, x_l] already updated with gamma; returns (next point, dx, bisected)."""
    newton_leaves = ((gamma - x_h) * du - u) * ((gamma - x_l) * du - u) > 0.0
    if newton_leaves or abs(2.0 * u) > abs(dx_old * du):
        dx = 0.5 * (x_h - x_l)
        return x_l + dx, dx, True
    dx = u / du
    return gamma - dx, dx, False


@njit(cache=True, nogil=True)
def _predictor_step(gamma, u, du, d3, x_l, x_h, dx_old):
    """rtsafe's safeguarded step, made a Halley step where that stays in the bracket.

    Returns (next point, dx, bisected, estimated error of the next point). For the root of
    u = f' with u' = du, u'' = d3 and dx = u / du, Halley's step is dx / (1 - dx d3 / (2 du)),
    used when that factor is in [0.5, 2]. With c = |d3 / (2 du)| the error after a Newton step is
    about c dx^2 and after a Halley step about c^2 |dx|^3 (its fourth-derivative term taken of
    the same size); the double-precision check makes up for a wrong estimate.
    """
    step, dx, bisect = _newton_or_bisect(gamma, u, du, x_l, x_h, dx_old)
    if bisect:
        return step, dx, True, np.inf
    c = abs(d3 / (2.0 * du))
    factor = 1.0 - dx * d3 / (2.0 * du)
    if 0.5 <= factor <= 2.0:
        halley = dx / factor
        if min(x_l, x_h) < gamma - halley < max(x_l, x_h):
            return gamma - halley, halley, False, c * c * abs(halley) ** 3
    return step, dx, False, c * dx * dx


@njit(cache=True, nogil=True)
def predict_step(b32, runs, cb, gamma0, tol, max_iter, pw=None):
    """Single-precision safeguarded Newton-Halley iteration from gamma0 (``_predictor_step``);
    returns (the estimate after the last step, evaluations, f'' at the last evaluated point or
    0.0 if none is finite). It stops once its step is below tol or the estimated error of its
    estimate is below tol / 4, so that the double-precision rtsafe usually accepts the estimate
    at its first evaluation. Entries flushed in b32 are ignored: only a starting point."""
    x_l, x_h = 1.0, 0.0
    gamma = min(max(gamma0, 1e-6), 1.0 - 1e-6)
    dx_old = 1.0
    dx = 1.0
    for it in range(1, max_iter + 1):
        u, du, d3 = line_derivatives32(gamma, b32, runs, cb, pw)
        if not (np.isfinite(u) and np.isfinite(du) and np.isfinite(d3)):
            return gamma0, it, 0.0
        if u < 0.0:
            x_l = gamma
        else:
            x_h = gamma
        step, new_dx, bisect, err = _predictor_step(gamma, u, du, d3, x_l, x_h, dx_old)
        dx_old, dx = dx, new_dx
        gamma = min(max(step, 1e-6), 1.0 - 1e-6)
        if abs(dx) < (0.5 * tol if bisect else tol) or err < 0.25 * tol:
            return gamma, it, du
    return gamma, max_iter, du


@njit(cache=True, nogil=True)
def line_search(
    bufs, b32, runs, cb, fprime0, gamma0, tol, max_iter, outs=None, pw=None, in_place=True
):
    """Step size of eq. 20: the single-precision predictor, then ``rtsafe`` from its estimate.

    Returns rtsafe's (gamma, n_evaluations, status, evaluated, entropy) plus the predictor's
    evaluations. With max_iter = 1 (the one-Newton-step ablation) there is no predictor. outs,
    in_place: where rtsafe's evaluations leave their logs (``line_derivatives``). pw: the elastic
    net's
    exact quadratic term along the step (``crfsdca.kernels.solvers.prox.quad_term``; cb is then
    q(1) >= 0); None: plain SDCA's s cb, decided at compile time.
    """
    if not fprime0 > 0.0 or cb <= 0.0 or max_iter < 2:
        start, n32, du32 = gamma0, 0, 0.0
    else:
        start, n32, du32 = predict_step(b32, runs, cb, gamma0, tol, max_iter, pw)
    return (*rtsafe(bufs, runs, cb, fprime0, start, tol, max_iter, du32, outs, pw, in_place), n32)


@njit(cache=True, nogil=True)
def rtsafe(
    bufs, runs, cb, fprime0, gamma0, tol, max_iter, du0=0.0, outs=None, pw=None, in_place=True
):
    """Safe bounded Newton on f' over [0, 1] from gamma0 (Numerical Recipes' rtsafe).

    du0 < 0: f'' near gamma0 from the predictor (at its last evaluation, one converged step
    away); the first evaluation then computes f' only and steps with du0. f'' only sizes the Newton
    step, which is also the convergence test, so an f'' off by a relative e moves the accepted
    point by at most e * tol; every later evaluation computes f'' in double precision.

    Returns (gamma, n_evaluations, status, evaluated, entropy): status 0 = converged (the last
    step was below tol), 1 = max_iter reached; evaluated = True when gamma is the last point where
    ``line_derivatives`` or ``line_slope`` ran, so that bufs' log_mix (or ``outs``, see
    ``line_derivatives``) holds log mu^gamma and entropy its value.
    """
    if not fprime0 > 0.0:
        return 0.0, 0, 0, False, 0.0
    if cb <= 0.0:
        return 1.0, 0, 0, False, 0.0
    x_l, x_h = 1.0, 0.0  # f'(x_l) < 0 < f'(x_h)
    gamma = min(max(gamma0, 1e-6), 1.0 - 1e-6)
    dx_old = 1.0
    dx = 1.0
    if du0 < 0.0:
        u, h = line_slope(gamma, bufs, runs, cb, outs, pw, in_place)
        du = du0
    else:
        u, du, h = line_derivatives(gamma, bufs, runs, cb, outs, pw, in_place)
    for it in range(1, max_iter + 1):
        if u < 0.0:
            x_l = gamma
        else:
            x_h = gamma
        step, new_dx, bisect = _newton_or_bisect(gamma, u, du, x_l, x_h, dx_old)
        dx_old, dx = dx, new_dx
        # gamma is within |dx| of the root after a Newton step, within 2|dx| after a bisection
        if abs(dx) < (0.5 * tol if bisect else tol):
            return gamma, it, 0, True, h  # its logs are in bufs (or outs)
        gamma = step
        u, du, h = line_derivatives(gamma, bufs, runs, cb, outs, pw, in_place)
    return gamma, max_iter, 1, True, h


@njit(cache=True, nogil=True)
def safe_newton(bufs, runs, cb, fprime0, gamma0, tol, max_iter, outs=None, pw=None, in_place=True):
    """The authors' safe bounded Newton on f' over [0, 1] from gamma0 (module docstring).

    Returns (gamma, n_evaluations, status, evaluated, entropy) as ``rtsafe``: status 1 when
    max_iter evaluations did not converge; evaluated is False at convergence (gamma is the point
    of the last step, not evaluated: ``update_block`` computes its logs), True otherwise.
    """
    if not fprime0 > 0.0:
        return 0.0, 0, 0, False, 0.0
    if cb <= 0.0:
        return 1.0, 0, 0, False, 0.0
    x_l, x_h = 1.0, 0.0  # f'(x_l) < 0 < f'(x_h)
    gamma = min(max(gamma0, 1e-6), 1.0 - 1e-6)
    dx_old = 1.0
    dx = 1.0
    u, du, h = line_derivatives(gamma, bufs, runs, cb, outs, pw, in_place)
    for it in range(1, max_iter + 1):
        newton = u / du
        step = gamma - newton
        if (step - x_h) * (step - x_l) <= 0.0 and abs(newton) <= 0.5 * abs(dx_old):
            dx_old, dx = dx, newton
            gamma = step
        else:
            dx_old, dx = dx, 0.5 * (x_h - x_l)
            gamma = x_l + dx
        if abs(dx) < tol:
            return gamma, it, 0, False, 0.0
        u, du, h = line_derivatives(gamma, bufs, runs, cb, outs, pw, in_place)
        if u < 0.0:
            x_l = gamma
        else:
            x_h = gamma
    return gamma, max_iter + 1, 1, True, h
