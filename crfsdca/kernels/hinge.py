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
``crfsdca.kernels.prox``) the quadratic becomes the exact (lambda n / s) g*(v + gamma a),
piecewise quadratic, whose stationary point :func:`prox_step` finds exactly.
"""

from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
from numba import get_num_threads

from crfsdca.kernels.cycles import cycles
from crfsdca.kernels.jit import njit
from crfsdca.kernels.primitives import (
    add_block_direction,
    block_direction,
    block_direction_entries,
    block_runs,
    direction_capacity,
    loss_augmented_map,
)
from crfsdca.kernels.prox import apply_step, prepare, quad_term
from crfsdca.kernels.sdca import update_block


class HingeArrays(NamedTuple):
    """Buffers of the loss-augmented MAP and of <w, u_i>: the decoded labelling ``path``,
    ``backptr`` and ``chosen`` (int64, the decoders' back pointers), ``scores`` (float64, the
    decoders' tables) and the direction's flat entries ``idx``, ``val``."""

    path: np.ndarray
    backptr: np.ndarray
    chosen: np.ndarray
    scores: np.ndarray
    idx: np.ndarray
    val: np.ndarray


def make_hinge(structure, sws) -> HingeArrays:
    """HingeArrays for ``structure`` (a structure's kernel type; ``sws`` its step workspace):
    every decoder buffer has the largest block's size, which bounds its nodes times labels,
    cliques and tables."""
    size = max(int(structure.max_block), 1)
    capacity = max(int(_capacity(structure, sws)), 1)
    ints = (np.zeros(size, np.int64) for _ in range(3))
    return HingeArrays(*ints, np.zeros(size), np.zeros(capacity, np.int64), np.zeros(capacity))


@njit(cache=True, nogil=True)
def _capacity(structure, sws):
    return direction_capacity(structure, sws)


@njit(cache=True, nogil=True)
def hamming_augment(unary, labels):
    """unary[t, k] += 1 for every k != labels[t] (the Hamming loss added to the node scores);
    the score of the gold labelling is left unchanged."""
    T, K = unary.shape
    for t in range(T):
        y = labels[t]
        for k in range(K):
            if k != y:
                unary[t, k] += 1.0


@njit(cache=True, nogil=True)
def hamming(path, labels):
    """The number of positions where path and labels differ (as a float)."""
    d = 0.0
    for t in range(path.shape[0]):
        d += 1.0 if path[t] != labels[t] else 0.0
    return d


@njit(cache=True, nogil=True)
def corner_entry(nu, log_nu, lo, size, hit):
    """Entries [lo, lo + size) of the block buffers: 1 (log 0) at lo + hit, 0 (log -inf) else."""
    for p in range(lo, lo + size):
        nu[p] = 0.0
        log_nu[p] = -np.inf
    nu[lo + hit] = 1.0
    log_nu[lo + hit] = 0.0


@njit(cache=True, nogil=True)
def fill_mu(mu_arrays, runs, bufs):
    """bufs.mu = mu_i from the stored logs on every run of the block."""
    mu = bufs.mu
    for r in range(runs.lo.shape[0]):
        src = mu_arrays[runs.dst[r]]
        o = runs.off[r]
        for p in range(runs.lo[r], runs.hi[r]):
            mu[p] = np.exp(np.float64(src[o + p - runs.lo[r]]))


@njit(cache=True, nogil=True)
def _dot(w, idx, val, m):
    s = 0.0
    for p in range(m):
        s += w[idx[p]] * val[p]
    return s


@njit(cache=True, nogil=True)
def closed_form_step(gap, cb, fixed):
    """argmax over [0, 1] of gap gamma - cb gamma^2 / 2 (``fixed`` > 0: that step)."""
    if fixed > 0.0:
        return fixed
    if gap <= 0.0:
        return 0.0
    if cb <= gap:
        return 1.0
    return gap / cb


@njit(cache=True, nogil=True)
def prox_step(gap, pw, q1, fixed):
    """The root in [0, 1] of gap - q(gamma), q the elastic net's non-decreasing, continuous,
    piecewise linear quad term (``prox.quad_term``, q(0) = 0): Newton inside the bracket, which
    is exact on the root's linear piece, bisection when Newton leaves it."""
    if fixed > 0.0:
        return fixed
    if gap <= 0.0:
        return 0.0
    if gap >= q1:
        return 1.0
    lo, hi = 0.0, 1.0
    g = 0.5
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
        if hi - lo <= 1e-15 or nxt == g:
            return nxt
        g = nxt
    return g


@njit(cache=True, nogil=True)
def _block(i, structure, mu_arrays, l_i, w, ws, hws, kappa, idx, val):
    """The loss-augmented MAP of block i and its Frank-Wolfe gap: returns (Delta*, H_i, g_i,
    |kappa u_i|^2, number of direction entries in idx, val); mu_i, nu_i and u_i stay in ws."""
    bufs, _, sws = ws
    loss, h = loss_augmented_map(structure, i, w, sws, bufs, hws)
    if not np.isfinite(h):
        return loss, h, 0.0, 0.0, 0
    fill_mu(mu_arrays, block_runs(structure.runs, i), bufs)
    b = block_direction(structure, i, bufs, sws, kappa)
    m = block_direction_entries(structure, i, sws, idx, val)
    gap = loss - l_i + _dot(w, idx, val, m)
    return loss, h, max(gap, 0.0), b, m


@njit(cache=True, nogil=True)
def hinge_step(i, structure, dual, w, params, ws, prox, hws):
    """One SDCA step of the hinge loss on example i, with the return values of the SDCA step
    (``sdca_epoch._step``: gap before the step, gamma, 0 Newton iterations, status, cycles,
    0): the exact step of the module docstring, then mu_i, l_i and w (or v and w = S_tau(v)
    on the step's support, with the elastic net's ``prox``) move."""
    bufs = ws[0]
    lam_n, scale = params.lam_n, params.scale
    mu_arrays = (dual.log_edge, dual.log_node)
    kappa = -scale / lam_n
    c0 = cycles()
    if prox is None:
        idx, val = hws.idx, hws.val
    else:
        idx, val = prox.idx, prox.a
    loss, h, gap, b, m = _block(i, structure, mu_arrays, dual.entropies[i], w, ws, hws, kappa,
                                idx, val)  # fmt: skip
    c1 = cycles()
    if not np.isfinite(h):
        return 0.0, 0.0, 0, 1, (c1 - c0, 0, 0), 0
    if prox is None:
        gamma = closed_form_step(gap, lam_n / scale * b, params.fixed_step)
    else:
        pw, q1 = prepare(prox, m, kappa, w, lam_n / scale)
        gamma = prox_step(gap, pw, q1, params.fixed_step)
    c2 = cycles()
    if gamma > 0.0:
        runs = block_runs(structure.runs, i)
        update_block(gamma, mu_arrays, runs, bufs, False, 0.0)
        dual.entropies[i] += gamma * (loss - dual.entropies[i])
        if prox is None:
            add_block_direction(structure, i, gamma * kappa, ws[2], w)
        else:
            apply_step(gamma, prox, m, w)
    dual.step_sizes[i] = gamma
    return gap, gamma, 0, 0, (c1 - c0, 0, c2 - c1), 0


@njit(cache=True, nogil=True)
def _exact(structure, mu_arrays, ls, w, lo, hi, gaps, losses, ws, hws):
    """losses[i] = H_i(w) and, unless gaps is empty, gaps[i] = the exact block gap of mu_i at
    w (scale 1), for examples lo..hi-1; nan where the oracle is non-finite."""
    with_gaps = gaps.shape[0] > 0
    for i in range(lo, hi):
        if not with_gaps:
            _, h = loss_augmented_map(structure, i, w, ws[2], ws[0], hws)
            losses[i] = h if np.isfinite(h) else np.nan
            continue
        # the gap reads u_i itself: its scale kappa (here -1) does not enter it
        _, h, gap, _, _ = _block(i, structure, mu_arrays, ls[i], w, ws, hws, -1.0, hws.idx,
                                 hws.val)  # fmt: skip
        ok = np.isfinite(h)
        losses[i] = h if ok else np.nan
        gaps[i] = gap if ok else np.nan


# -- thin Python wrappers ------------------------------------------------------------------------
def exact(structure, log_edge, log_node, losses_l, w, with_gaps=True):
    """(hinge losses H_i(w), exact block gaps) of every example, in chunks on numba's number of
    threads (each example alone: the result does not depend on the threads). Without gaps the
    dual state is not read (``log_edge``, ``log_node``, ``losses_l`` may be empty)."""
    from crfsdca.kernels.sdca_epoch import make_workspace

    n = structure.runs.start.size - 1
    losses = np.empty(n)
    gaps = np.empty(n if with_gaps else 0)
    mu_arrays = (_flat(log_edge), _flat(log_node))
    ls = np.ascontiguousarray(losses_l, np.float64) if with_gaps else np.zeros(0)
    threads = max(1, min(n, get_num_threads()))
    bounds = [n * c // threads for c in range(threads + 1)]

    def run(lo, hi):
        ws = make_workspace(structure)
        _exact(structure, mu_arrays, ls, w, lo, hi, gaps, losses, ws, make_hinge(structure, ws[2]))

    if threads == 1:
        run(0, n)
    else:
        with ThreadPoolExecutor(threads) as pool:
            for job in [pool.submit(run, a, b) for a, b in zip(bounds[:-1], bounds[1:])]:
                job.result()
    return losses, gaps


def _flat(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(-1)
