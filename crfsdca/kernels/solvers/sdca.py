"""Kernels of one SDCA block step (Le Priol et al. 2018, Alg. 2, eqs. 17-19): the block runs,
the block gap and the block update.

A block is sequence i with T tokens. Its dual variable mu_i is stored as log-marginals: edge
cliques (T-1, K, K) and nodes (T, K). On a tree the junction-tree entropy and KL are

    H~(mu) = sum_edges H(mu_e) + sum_nodes (1 - deg v) H(mu_v),

so for a chain the node coefficient is 1 for T = 1, 0 at the two ends and -1 inside
(``node_coefficient``). All sums below run over edge entries with coefficient +1 and node entries
with their coefficient, in probability space where no cancellation can occur (mu, nu >= 0, and
mu^gamma = (1 - gamma) mu + gamma nu is a sum of non-negative terms), with logs kept where
precision near the simplex border matters.

The step size along nu - mu is found by :mod:`crfsdca.kernels.solvers.line_search` (eq. 20).

Layout: a block is four contiguous segments of flat arrays -- the (T-1) K^2 edge entries
(coefficient 1), then the K entries of the first node, the (T-2) K interior ones (-1) and the K
of the last node (0 each when T >= 2; a single node has coefficient 1). Segment loops are written
so that LLVM vectorizes them (``crfsdca.kernels.numerics.fastmath``: flat unit-stride indexing,
selects instead of branches, ``add_reassoc`` sums, ``error_model="numpy"`` for divisions).
"""

import numpy as np

from crfsdca.kernels.jit import njit
from crfsdca.kernels.numerics.fastmath import add_reassoc, exp_into, fast_exp, fast_log
from crfsdca.kernels.primitives import BlockRuns

TINY = 1e-280  # below this, mix in log space to keep relative precision
# a block whose log-marginals on the line-searched segments are all above this never meets TINY:
# (1 - gamma) mu >= 2^-53 exp(-600) > 1e-277 for every double gamma < 1, so the line search can
# write its logs straight into the dual state (``update_block``'s ``in_place``)
IN_PLACE_LOG_MIN = -600.0
# entries with max(mu, nu) below this are left out of the single-precision predictor (they move
# f' by less than 1e-27); the others keep its mixtures normal float32 for gamma in [1e-6, 1 - 1e-6]
FLUSH32 = 1e-30
_Z32 = np.float32(0.0)


VEC = {"cache": True, "nogil": True, "error_model": "numpy"}


@njit(cache=True, nogil=True)
def _logaddexp(a, b):
    m = max(a, b)
    if m == -np.inf:
        return m
    return m + np.log1p(np.exp(-abs(a - b)))


@njit(cache=True, nogil=True)
def node_coefficient(t, T):
    """1 - deg(t) on a chain of length T: 1 if T == 1, 0 at the ends, -1 inside."""
    if T == 1:
        return 1.0
    if t == 0 or t == T - 1:
        return 0.0
    return -1.0


def chain_runs(T: int, K: int, edge_off: int = 0, node_off: int = 0) -> BlockRuns:
    """The runs of a chain block of T positions: the (T-1) K^2 edge entries (coefficient 1),
    then the K entries of the first node, the (T-2) K interior ones (-1) and the K of the last
    node (0 each when T >= 2; a single node has coefficient 1); empty runs are left out."""
    E = (T - 1) * K * K
    if T == 1:
        rows = [(0, K, 1.0, 1, node_off)]
    else:
        rows = [
            (0, E, 1.0, 0, edge_off),
            (E, E + K, 0.0, 1, node_off),
            (E + K, E + (T - 1) * K, -1.0, 1, node_off + K),
            (E + (T - 1) * K, E + T * K, 0.0, 1, node_off + (T - 1) * K),
        ]
    rows = [r for r in rows if r[1] > r[0]]
    lo, hi, coef, dst, off = (np.array(c) for c in zip(*rows, strict=True))
    return BlockRuns(
        lo.astype(np.int64), hi.astype(np.int64), coef.astype(np.float64),
        dst.astype(np.int64), off.astype(np.int64),
    )  # fmt: skip


@njit(**VEC)
def _mu_segment(log_mu, mu_off, bufs, b32, lo, hi):
    """Fill bufs' mu on [lo, hi) from the stored logs, and b32 = float32 (mu, nu, log nu)
    (0 where max(mu, nu) < FLUSH32) unless b32 is None; return the (KL, f'(0)) sums and, when
    b32 is given, the number of stored logs below ``IN_PLACE_LOG_MIN`` (else 0).

    bufs' nu and log_nu must already hold the oracle's probabilities and logs on [lo, hi).
    ``b32 is None`` is decided at compile time (numba prunes the branches per signature); the
    SDCA kernels always pass b32 (also where no line search follows: fixed steps, the exact gap
    pass, runs of coefficient 0), so that a run compiles this loop once.
    """
    n = hi - lo
    src = log_mu[mu_off : mu_off + n]
    mu, nu, lnu = bufs.mu[lo:hi], bufs.nu[lo:hi], bufs.log_nu[lo:hi]
    if b32 is not None:
        m32, v32, l32 = b32.mu[lo:hi], b32.nu[lo:hi], b32.log_nu[lo:hi]
    kl = 0.0
    fp = 0.0
    n_low = 0.0  # a sum: LLVM vectorizes it with the others (a maxnum reduction here it does not)
    for p in range(n):
        lm = np.float64(src[p])
        ln = lnu[p]
        m = fast_exp(lm)
        v = nu[p]
        mu[p] = m
        if b32 is not None:
            n_low = add_reassoc(n_low, 1.0 if lm < IN_PLACE_LOG_MIN else 0.0)
            keep = max(m, v) >= FLUSH32
            m32[p] = np.float32(m) if keep else _Z32
            v32[p] = np.float32(v) if keep else _Z32
            l32[p] = np.float32(ln)
        kl = add_reassoc(kl, m * (lm - ln) if m > 0.0 else 0.0)
        d = v - m
        fp = add_reassoc(fp, d * (ln - lm) if d != 0.0 else 0.0)
    return kl, fp, n_low


@njit(cache=True, nogil=True)
def block_gap_given_nu(mu_arrays, runs, bufs, b32):
    """(KL~(mu || nu), f'(0), n_low) of a block whose oracle marginals are already in ``bufs``.

    mu_arrays = (log_edge_flat, log_node_flat): the dual state's flat log-marginals, where the
    runs point (``BlockRuns``). bufs = (mu, nu, log_nu, log_mix) flat block buffers whose nu
    and log_nu hold the oracle's probabilities and logs (each structure's block oracle writes
    them there); mu is filled here on every run, and b32 = float32 (mu, nu, log nu) buffers of
    the same size for the line-search predictor, filled on every run (``_mu_segment``; None
    skips them). n_low counts the stored logs below ``IN_PLACE_LOG_MIN`` on the runs of non-zero
    coefficient when b32 is given (else 0); when there are none, the line search may write the
    new logs straight into the dual state (``line_search``'s ``outs``).
    """
    kl, fp, n_low = 0.0, 0.0, 0.0
    for r in range(runs.lo.shape[0]):
        lo, hi, c = runs.lo[r], runs.hi[r], runs.coef[r]
        src = mu_arrays[runs.dst[r]]
        if c == 0.0:  # mu only; the float32 copies here go unused (one compiled loop for all)
            _mu_segment(src, runs.off[r], bufs, b32, lo, hi)
            continue
        k, f, low = _mu_segment(src, runs.off[r], bufs, b32, lo, hi)
        kl += c * k
        fp += c * f
        n_low += low
    return max(kl, 0.0), fp, n_low


@njit(cache=True, nogil=True)
def block_gap(mu_arrays, nu_src, runs, bufs, b32):
    """Copy the oracle's flat log-marginals nu_src (block layout) into ``bufs``, exponentiate
    them and return (KL~(mu || nu), f'(0)) as :func:`block_gap_given_nu` (which also fills b32).
    """
    size = runs.hi.max()
    exp_into(nu_src, 0.0, bufs.nu, 0, size)
    bufs.log_nu[:size] = nu_src[:size]
    gap, fp0, _ = block_gap_given_nu(mu_arrays, runs, bufs, b32)
    return gap, fp0


@njit(cache=True, nogil=True)
def mix_log(gamma, m, v, lm, lv):
    """(log mg, mg) for mg = (1 - gamma) m + gamma v, m = exp(lm), v = exp(lv); precise near 0."""
    if gamma == 1.0:
        return lv, v
    mg = (1.0 - gamma) * m + gamma * v
    if mg > TINY:
        return min(np.log(mg), 0.0), mg
    if gamma == 0.0:
        return lm, m
    lg = _logaddexp(np.log1p(-gamma) + lm, np.log(gamma) + lv)
    return min(lg, 0.0), np.exp(lg)


@njit(**VEC)
def _copy_reusing(dst, off, log_mix, lo, hi):
    """mu <- mu^gamma on [lo, hi) into dst[off:] from the line search's log_mix (valid after it
    evaluated gamma); returns the number of entries near 0 (-inf there), which keep their value
    here and are mixed in log space by ``_fix_tiny``.
    """
    n_tiny = 0.0
    out, src = dst[off : off + hi - lo], log_mix[lo:hi]
    for p in range(hi - lo):
        v = src[p]
        ok = v > -np.inf
        out[p] = v if ok else out[p]
        n_tiny = add_reassoc(n_tiny, 0.0 if ok else 1.0)
    return n_tiny


@njit(**VEC)
def _update_computing(gamma, dst, off, bufs, lo, hi, coef):
    """mu <- mu^gamma on [lo, hi) into dst[off:], computing log mu^gamma (fixed steps,
    coefficient-0 nodes); returns (coef * entropy, number of entries near 0 left to ``_fix_tiny``).
    """
    mu, nu = bufs.mu[lo:hi], bufs.nu[lo:hi]
    out = dst[off : off + hi - lo]
    entropy = 0.0
    n_tiny = 0.0
    one_minus = 1.0 - gamma
    for p in range(hi - lo):
        m = mu[p]
        mg = one_minus * m + gamma * nu[p]
        ok = mg > TINY
        old = out[p]
        new = min(fast_log(mg), 0.0) if ok and m != nu[p] else old
        out[p] = new
        entropy = add_reassoc(entropy, -coef * mg * new if ok else 0.0)
        n_tiny = add_reassoc(n_tiny, 0.0 if ok else 1.0)
    return entropy, n_tiny


@njit(cache=True, nogil=True)
def _fix_tiny(gamma, dst, off, bufs, lo, hi, coef):
    """Log-space mixing for the entries whose mixture underflows; returns their coef * entropy."""
    mu, nu, lnu, _ = bufs
    entropy = 0.0
    for p in range(lo, hi):
        mg = (1.0 - gamma) * mu[p] + gamma * nu[p]
        if mg <= TINY:
            lm, m = mix_log(gamma, mu[p], nu[p], dst[off + p - lo], lnu[p])
            dst[off + p - lo] = lm
            if m > 0.0:
                entropy -= coef * m * lm
    return entropy


@njit(cache=True, nogil=True)
def _update_range(gamma, dst, off, bufs, lo, hi, coef, reuse):
    """Update [lo, hi); returns coef * its entropy (0 when reusing: the line search has it)."""
    if gamma == 1.0:  # exactly nu
        _, _, lnu, _ = bufs
        entropy = 0.0
        for p in range(lo, hi):
            dst[off + p - lo] = lnu[p]
            entropy -= coef * bufs.nu[p] * lnu[p] if bufs.nu[p] > 0.0 else 0.0
        return entropy
    if reuse:
        entropy, n_tiny = 0.0, _copy_reusing(dst, off, bufs.log_mix, lo, hi)
    else:
        entropy, n_tiny = _update_computing(gamma, dst, off, bufs, lo, hi, coef)
    if n_tiny > 0:
        entropy += _fix_tiny(gamma, dst, off, bufs, lo, hi, coef)
    return entropy


@njit(cache=True, nogil=True, inline="always")
def update_block(gamma, mu_arrays, runs, bufs, have_logs, ls_entropy, in_place=False):
    """mu <- (1 - gamma) mu + gamma nu in the dual state (as logs); returns H~(mu) after.

    mu_arrays = (log_edge_flat, log_node_flat) as in ``block_gap_given_nu``; have_logs: bufs'
    log_mix holds the new logs from the last line-search evaluation, at gamma, which also gave
    ls_entropy (ignored otherwise). in_place (with have_logs): that evaluation wrote them into
    the dual state itself (``line_search``'s ``outs``; no entry near 0), so only the runs of
    coefficient 0 are left to update.
    """
    reuse = have_logs and gamma != 1.0  # gamma = 1 copies log nu instead
    entropy = ls_entropy if reuse else 0.0
    done = reuse and in_place
    for r in range(runs.lo.shape[0]):
        lo, hi, c = runs.lo[r], runs.hi[r], runs.coef[r]
        dst = mu_arrays[runs.dst[r]]
        if c == 0.0 or not done:  # runs of coefficient 0 compute their logs (no reuse)
            entropy += _update_range(gamma, dst, runs.off[r], bufs, lo, hi, c, reuse and c != 0.0)
    return entropy


@njit(cache=True, nogil=True)
def block_entropy(log_mu_node, log_mu_edge):
    """Junction-tree entropy H~(mu) of one block from its log-marginals (T, K), (T-1, K, K)."""
    T, K = log_mu_node.shape
    entropy = 0.0
    for t in range(T - 1):
        for k in range(K):
            for l in range(K):
                lm = log_mu_edge[t, k, l]
                if lm > -np.inf:
                    entropy -= np.exp(lm) * lm
    for t in range(T):
        coef = node_coefficient(t, T)
        if coef == 0.0:
            continue
        for k in range(K):
            lm = log_mu_node[t, k]
            if lm > -np.inf:
                entropy -= coef * np.exp(lm) * lm
    return entropy
