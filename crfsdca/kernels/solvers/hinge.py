"""The structured hinge loss (structured SVM) as a loss of the SDCA engine: its block step,
exact block gaps and losses, written once for every structure.

Shalev-Shwartz & Zhang's "Prox-SDCA for structured output learning" (section 3.3) and
block-coordinate Frank-Wolfe (Lacoste-Julien et al. 2013) are one dual ascent. The loss of
example i is H_i(w) = max_y [Delta(y, y_i) - w . (F(x_i, y_i) - F(x_i, y))], Delta the Hamming
loss. Its dual variable is a law alpha_i over labellings; the dual

    D(alpha) = (1/n) sum_i E_alpha_i[Delta(., y_i)] - (lambda / 2) |w_hat(alpha)|^2,
    w_hat(alpha) = (1 / (lambda n)) sum_i [F(x_i, y_i) - E_alpha_i F(x_i, .)],

depends on alpha_i only through its clique marginals mu_i (Delta and F decompose over nodes
and cliques), which are exactly the CRF's dual variables. So the hinge loss keeps the CRF's
dual state (the log-marginals of every block, where the structure's runs point: w_i =
(1 / (lambda n)) B_i mu_i is kept implicitly, on the example's support only, never as a dense
vector) and replaces the entropy H~(mu_i) by the linear term l_i = E_mu_i[Delta(., y_i)], held
in the state's per-example ``entropies``: the dual value D = mean(l_i) - (lambda/2)|w|^2 keeps
its form. The start is the gold corner (mu_i = the gold labelling: l_i = 0, w = 0).

A step on block i: the oracle is the loss-augmented MAP y* (``primitives.loss_augmented_map``,
a corner nu_i of the marginal polytope), delta = nu_i - mu_i, u_i = E_delta F (the CRF's
``block_direction``), and along gamma in [0, 1]

    f(gamma) = l_i + gamma (Delta* - l_i) - (lambda n / 2s) |w - gamma (s / (lambda n)) u_i|^2,
    f'(0) = Delta* - l_i + <w, u_i> = g_i,   f'(gamma) = g_i - gamma (lambda n / s) |(s/(lambda
    n)) u_i|^2,

with s the DisDCA scale (1 serial). g_i is the block's Frank-Wolfe gap, which is its exact share
of the duality gap P(w) - D (at scale 1); the maximiser gamma* = clip(g_i / (c |v_i|^2), 0, 1)
is BCFW's exact line search and the seed's closed-form step. With an l1 term (Prox-SDCA,
``crfsdca.kernels.solvers.prox``) the quadratic becomes the exact (lambda n / s) g*(v + gamma a),
piecewise quadratic, whose stationary point :func:`prox_step` finds exactly.

Pairwise steps move mass from an away corner nu- to y* (slope H_i - H(nu-), gamma <= the mass
of nu- in mu_i). PAIRWISE takes nu- as the worst labelling of mu_i's face (any labelling whose
cliques all have mass: many short drop steps on a corpus); ACTIVE (Osokin et al. 2016's BCPFW,
chains) keeps the labellings each block moved toward, with their weights alpha (``make_atoms``,
``move_atoms``), and takes nu- as the stored labelling of least augmented score, gamma <= its
weight. mu_i = sum_s alpha_s corner(y_s) + the untracked rest (mass a full active set, or a
resumed state, does not hold: Frank-Wolfe steps shrink it). SMOOTH is the entropy-smoothed
step of ``crfsdca.kernels.solvers.smooth``.
"""

from typing import NamedTuple

import numpy as np

from crfsdca.kernels.jit import njit
from crfsdca.kernels.numerics.cycles import cycles
from crfsdca.kernels.numerics.fastmath import fast_exp, fast_log
from crfsdca.kernels.primitives import (
    block_direction,
    block_direction_entries,
    block_runs,
    direction_capacity,
    loss_augmented_map,
)
from crfsdca.kernels.solvers.prox import prepare, quad_term
from crfsdca.kernels.solvers.smooth import smooth_step
from crfsdca.kernels.solvers.team import move
from crfsdca.kernels.structures.hamming import (  # noqa: F401
    MAP_ONLY,
    WITH_ATOMS,
    WITH_AWAY,
    WITH_LINEAR,
)

FW, PAIRWISE, SMOOTH, ACTIVE = 0, 1, 2, 3  # the block step (``HingeArrays.mode[1]``)


VEC = {"cache": True, "nogil": True, "error_model": "numpy"}


class HingeArrays(NamedTuple):
    """Buffers of the loss-augmented MAP and of the step: the decoded labelling ``path``,
    ``backptr`` and ``chosen`` (int64, the decoders' back pointers), ``ids`` (0, 1, 2, ...),
    ``scores`` and ``pair`` (float64, the decoders' tables), ``mu`` (a copy of mu_i), the
    direction's flat entries ``idx``, ``val``, ``out`` = (Hamming loss of y-, H of y-,
    <mu_i, augmented scores> - gold score) of the last call (the smoothed oracle: out[0] =
    E_nu Hamming), ``mode`` = (what the MAP computes: MAP_ONLY, WITH_LINEAR or WITH_AWAY; the
    step: FW, PAIRWISE, SMOOTH or ACTIVE), ``temp`` = (the temperature g of the SMOOTH step,
    ``crfsdca.kernels.solvers.smooth``) and the ACTIVE step's atoms (``make_atoms``): the
    stored labellings ``atoms`` (M, tokens) of every block, their weights ``alpha`` (n, M),
    their number ``count`` (n,) and ``pick`` = (block, away atom or -1, MAP atom or -1, token
    offset, length) of the last step."""

    path: np.ndarray
    backptr: np.ndarray
    chosen: np.ndarray
    ids: np.ndarray
    scores: np.ndarray
    pair: np.ndarray
    mu: np.ndarray
    idx: np.ndarray
    val: np.ndarray
    out: np.ndarray
    mode: np.ndarray
    temp: np.ndarray
    atoms: np.ndarray
    alpha: np.ndarray
    count: np.ndarray
    pick: np.ndarray


def make_hinge(
    structure, sws, step: int = FW, what: int = WITH_LINEAR, temperature: float = 1.0
) -> HingeArrays:
    """HingeArrays for ``structure`` (a structure's kernel type; ``sws`` its step workspace):
    every decoder buffer has the largest block's size, which bounds its nodes times labels,
    cliques and tables. ``step``: FW, PAIRWISE (which computes the away corner too), SMOOTH
    (at ``temperature``) or ACTIVE (its atoms empty here: ``make_atoms``)."""
    size = max(int(structure.max_block), 1)
    capacity = max(int(_capacity(structure, sws)), 1)
    ints = (np.zeros(size, np.int64) for _ in range(3))
    K = int(structure.dims[1])  # pair: a chain's T K^2 edge tables (as a tree's, one a node)
    floats = (np.zeros(size), np.zeros(size + K * K), np.zeros(size))
    what = {PAIRWISE: WITH_AWAY, ACTIVE: WITH_ATOMS}.get(step, what)
    mode = np.array([what, step], np.int64)
    entries = (np.zeros(capacity, np.int64), np.zeros(capacity))
    temp = np.array([float(temperature)])
    atoms = make_atoms(0, 0, 0)
    return HingeArrays(*ints, np.arange(size), *floats, *entries, np.zeros(3), mode, temp, *atoms)


def make_atoms(n: int, tokens: int, m: int) -> tuple:
    """(atoms, alpha, count, pick) of the ACTIVE step for n blocks of ``tokens`` tokens in all,
    at most m atoms a block, none stored yet (all of mu_i's mass untracked)."""
    atoms = np.zeros((m, tokens), np.int32)
    return atoms, np.zeros((n, m)), np.zeros(n, np.int64), np.zeros(5, np.int64)


@njit(cache=True, nogil=True)
def _capacity(structure, sws):
    return direction_capacity(structure, sws)


@njit(**VEC)
def _exp_segment(src, dst, n):
    """dst[:n] = exp(src[:n]) (vectorized; exp(-inf) = 0)."""
    for p in range(n):
        dst[p] = fast_exp(np.float64(src[p]))


@njit(cache=True, nogil=True)
def fill_mu(mu_arrays, runs, bufs):
    """bufs.mu = mu_i from the stored logs on every run of the block."""
    for r in range(runs.lo.shape[0]):
        lo, hi, o = runs.lo[r], runs.hi[r], runs.off[r]
        _exp_segment(mu_arrays[runs.dst[r]][o : o + hi - lo], bufs.mu[lo:hi], hi - lo)


@njit(cache=True, nogil=True)
def closed_form_step(gap, cb, top, fixed):
    """argmax over [0, top] of gap gamma - cb gamma^2 / 2 (``fixed`` > 0: min(fixed, top))."""
    if fixed > 0.0:
        return min(fixed, top)
    if gap <= 0.0:
        return 0.0
    if cb * top <= gap:
        return top
    return gap / cb


@njit(cache=True, nogil=True)
def prox_step(gap, pw, top, fixed):
    """The root in [0, top] of gap - q(gamma) (top if positive there), q the elastic net's
    non-decreasing, continuous, piecewise linear quad term (``prox.quad_term``, q(0) = 0):
    Newton inside the bracket, which is exact on the root's linear piece, bisection when
    Newton leaves it."""
    if fixed > 0.0:
        return min(fixed, top)
    if gap <= 0.0:
        return 0.0
    if gap >= quad_term(top, 0.0, pw)[0]:
        return top
    lo, hi = 0.0, top
    g = 0.5 * top
    for _ in range(200):
        q, dq = quad_term(g, 0.0, pw)
        r = gap - q
        if r == 0.0:
            return g
        if r > 0.0:
            lo = g
        else:
            hi = g
        nxt = g + r / dq if dq > 0.0 else 0.5 * (lo + hi)
        if not lo < nxt < hi:
            nxt = 0.5 * (lo + hi)
        if hi - lo <= 1e-15 * top or nxt == g:
            return nxt
        g = nxt
    return g


@njit(cache=True, nogil=True)
def _gamma_max(runs, bufs):
    """The largest pairwise step: min mu_i over the entries of the away corner nu- (held in
    bufs.log_mix) that nu+ leaves (gamma_max of pairwise Frank-Wolfe)."""
    mu, away, nu = bufs.mu, bufs.log_mix, bufs.nu
    top = 1.0
    for r in range(runs.lo.shape[0]):
        for p in range(runs.lo[r], runs.hi[r]):
            if away[p] > 0.0 and nu[p] == 0.0:
                top = min(top, mu[p])
    return top


@njit(cache=True, nogil=True)
def _swap_in_away(runs, bufs, hws):
    """Keep mu_i in hws.mu and put nu- in bufs.mu: ``block_direction`` then gives the
    pairwise direction E_{nu+ - nu-} F."""
    mu, away, keep = bufs.mu, bufs.log_mix, hws.mu
    for r in range(runs.lo.shape[0]):
        for p in range(runs.lo[r], runs.hi[r]):
            keep[p] = mu[p]
            mu[p] = away[p]


@njit(**VEC)
def _mix_segment(gamma, dst, keep, nu, away, n):
    """dst[p] = log(keep + gamma (nu - away)) where nu != away (log 0 = -inf; a value that
    rounds below 0 is 0), dst[p] kept elsewhere (vectorized)."""
    for p in range(n):
        m = max(keep[p] + gamma * (nu[p] - away[p]), 0.0)
        new = fast_log(m)
        dst[p] = new if nu[p] != away[p] else dst[p]


@njit(cache=True, nogil=True)
def _mix_update(gamma, mu_arrays, runs, keep, nu, away):
    """mu_i <- keep + gamma (nu - away) as logs in the dual state, where nu and away differ:
    the Frank-Wolfe step (keep = away = mu_i, nu = nu+) and the pairwise one (keep = mu_i,
    nu = nu+, away = nu-). Entries that reach 0, or round below it, are dropped (log 0 =
    -inf); entries where nu = away keep their stored logs."""
    for r in range(runs.lo.shape[0]):
        lo, hi, o = runs.lo[r], runs.hi[r], runs.off[r]
        dst = mu_arrays[runs.dst[r]][o : o + hi - lo]
        _mix_segment(gamma, dst, keep[lo:hi], nu[lo:hi], away[lo:hi], hi - lo)


@njit(cache=True, nogil=True)
def _block(i, structure, mu_arrays, w, ws, hws):
    """mu_i into bufs and the loss-augmented MAP of block i (with the linear value and, in
    WITH_AWAY mode, the away corner); returns (Delta*, H_i, g_i), g_i = H_i - (<mu_i,
    augmented scores> - gold score) the block's Frank-Wolfe gap."""
    bufs, _, sws = ws
    fill_mu(mu_arrays, block_runs(structure.runs, i), bufs)
    loss, h = loss_augmented_map(structure, i, w, sws, bufs, hws)
    return loss, h, max(h - hws.out[2], 0.0)


@njit(cache=True, nogil=True)
def hinge_step(i, structure, dual, w, params, ws, prox, hws, team, s):
    """One SDCA step of the hinge loss on example i, with the return values of the SDCA step
    (``sdca_epoch._step``: gap before the step, gamma, 0 Newton iterations, status, cycles,
    0): the exact step of the module docstring along the Frank-Wolfe direction nu+ - mu_i or,
    in PAIRWISE mode, along nu+ - nu- (nu- the away corner: the worst labelling of mu_i's
    support, gamma <= gamma_max), then mu_i, l_i and w (or v and w = S_tau(v) on the step's
    support, with the elastic net's ``prox``) move. In SMOOTH mode the step of the smoothed
    loss (``smooth.smooth_step``, without the elastic net) instead."""
    if prox is None:  # noqa: SIM102 (numba prunes the branch on None at compile time)
        if hws.mode[1] == SMOOTH:
            return smooth_step(i, structure, dual, w, params, ws, hws, team, s)
    bufs, _, sws = ws
    lam_n, scale = params.lam_n, params.scale
    mu_arrays = (dual.log_edge, dual.log_node)
    runs = block_runs(structure.runs, i)
    kappa = -scale / lam_n
    c0 = cycles()
    loss, h, gap = _block(i, structure, mu_arrays, w, ws, hws)
    c1 = cycles()
    if not np.isfinite(h):
        return 0.0, 0.0, 0, 1, (c1 - c0, 0, 0), 0
    top, slope, gain = 1.0, gap, loss - dual.entropies[i]
    step = hws.mode[1]
    pairwise = step != FW and np.isfinite(hws.out[1])
    if pairwise and step == ACTIVE:  # no atom, or the MAP is the away atom: a FW step
        away = hws.pick[1]
        top = hws.alpha[i, away] if away >= 0 else 0.0
        pairwise = top > 0.0 and away != hws.pick[2]
    elif pairwise:  # no away corner, or a zero step (underflow): a Frank-Wolfe step instead
        top = _gamma_max(runs, bufs)
        pairwise = top > 0.0
    if pairwise:  # nu- replaces mu_i in the direction
        _swap_in_away(runs, bufs, hws)
        slope, gain = h - hws.out[1], loss - hws.out[0]
    else:
        top = 1.0
    b = block_direction(structure, i, bufs, sws, kappa)
    if prox is None:
        gamma = closed_form_step(slope, lam_n / scale * b, top, params.fixed_step)
        m = 0
    else:
        m = block_direction_entries(structure, i, sws, prox.idx, prox.a)
        pw, _ = prepare(prox, m, kappa, w, lam_n / scale)
        gamma = prox_step(slope, pw, top, params.fixed_step)
    c2 = cycles()
    if gamma > 0.0:
        if pairwise:
            _mix_update(gamma, mu_arrays, runs, hws.mu, bufs.nu, bufs.mu)
        else:
            _mix_update(gamma, mu_arrays, runs, bufs.mu, bufs.nu, bufs.mu)
        dual.entropies[i] += gamma * gain
        move(structure, i, gamma, kappa, sws, w, prox, m, team, s)
        if step == ACTIVE:
            move_atoms(hws, gamma, pairwise, top)
    dual.step_sizes[i] = gamma
    return gap, gamma, 0, 0, (c1 - c0, 0, c2 - c1), 0


@njit(cache=True, nogil=True)
def move_atoms(hws, gamma, pairwise, top):
    """The atoms' weights after a step of size gamma toward the MAP labelling (hws.path) of
    block pick[0]: from the away atom pick[1] (dropped at gamma = top) or, Frank-Wolfe, from
    every atom (times 1 - gamma); the MAP gains gamma, as a new atom when it is none and there
    is room (else that mass joins the untracked rest, which no pairwise step takes from).
    Atoms whose weight reaches 0 are removed (the last one takes their place)."""
    i, away, fw, t0, T = hws.pick[0], hws.pick[1], hws.pick[2], hws.pick[3], hws.pick[4]
    alpha, atoms = hws.alpha[i], hws.atoms
    count = hws.count[i]
    if pairwise:
        alpha[away] = 0.0 if gamma >= top else alpha[away] - gamma
    else:
        for s in range(count):
            alpha[s] *= 1.0 - gamma
    if fw >= 0:
        alpha[fw] += gamma
    elif count < alpha.shape[0]:
        atoms[count, t0 : t0 + T] = hws.path[:T]
        alpha[count] = gamma
        count += 1
    s = 0
    while s < count:
        if alpha[s] > 0.0:
            s += 1
            continue
        count -= 1
        alpha[s], alpha[count] = alpha[count], 0.0
        atoms[s, t0 : t0 + T] = atoms[count, t0 : t0 + T]
    hws.count[i] = count


@njit(cache=True, nogil=True)
def exact_blocks(structure, mu_arrays, w, lo, hi, gaps, losses, ws, hws):
    """losses[i] = H_i(w) and, unless gaps is empty, gaps[i] = the exact block gap of mu_i at
    w, for examples lo..hi-1; nan where the oracle is non-finite."""
    for i in range(lo, hi):
        if gaps.shape[0] == 0:
            _, h = loss_augmented_map(structure, i, w, ws[2], ws[0], hws)
            losses[i] = h if np.isfinite(h) else np.nan
            continue
        _, h, gap = _block(i, structure, mu_arrays, w, ws, hws)
        ok = np.isfinite(h)
        losses[i] = h if ok else np.nan
        gaps[i] = gap if ok else np.nan
