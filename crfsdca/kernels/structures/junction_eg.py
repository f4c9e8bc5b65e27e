"""Online exponentiated gradient (OEG) on junction-tree examples (chains:
``kernels.structures.chain_eg``).

Dual block i is a junction-tree law u_i given by its clique and separator marginals, stored as
logs like junction SDCA's dual state (the example's region of the flat table array: clique
tables, then separator tables). One EG step with learning rate eta (``baselines.md`` §6) is

    theta' = (1 - eta) theta + eta s(w),

with s(w) the clique potentials at w = w_hat(mu) (``kernels.structures.junction_batch.potentials``)
and theta the junction-tree reparameterisation of mu_i (Z(theta) = 1): theta_c = log mu_c -
log mu_sep(c) projected onto c's table, theta_c = log mu_c at a root clique. A forbidden entry
(log mu = -inf) stays forbidden. The marginals of theta' (one oracle call per trial) come from
the junction kernel ``kernels.structures.junction_scaled.potential_marginals``. The step is accepted
when the dual grows,

    Delta(n D) = H~(mu') - H~(mu_i) - lambda n (<w, v> + ||v||^2 / 2) > 0,
    v = -(1/(lambda n)) E_{mu' - mu_i}[F(x_i, .)],

H~ the entropy over the segment table (cliques +1, separators -1; ``kernels.numerics.segments``);
otherwise eta_i is halved and the trial repeated (at most ``max_halvings`` times). v needs only
the node marginals and factor sums of mu' and mu_i
(``kernels.structures.junction_blocks.add_features``).

This module holds the junction tree's exponentiated-gradient primitives
(``crfsdca.kernels.primitives``) on
``kernels.structures.junction_blocks.JunctionBlocks``; the visit itself is
``crfsdca.kernels.solvers.oeg_epoch``.
``dual`` an ``oeg.OEGDual`` (log_node empty, log_edge the float64 log tables).
"""

from typing import NamedTuple

import numpy as np

from crfsdca.kernels.jit import njit
from crfsdca.kernels.numerics import segments
from crfsdca.kernels.primitives import implements, oeg_accept, oeg_change, oeg_prepare, oeg_trial
from crfsdca.kernels.structures.direction import compact_dot, scatter_rows
from crfsdca.kernels.structures.junction import projection
from crfsdca.kernels.structures.junction_batch import potentials
from crfsdca.kernels.structures.junction_blocks import (
    JunctionBlocks,
    add_features,
    block_stats,
    clique_entries,
)
from crfsdca.kernels.structures.junction_scaled import potential_marginals


class JunctionOEGWorkspace(NamedTuple):
    """Buffers of a junction tree's OEG visit (``make_workspace``): node scores and clique
    potentials at w, theta(mu), s - theta(mu), psi, log mu', the oracle's (message workspace,
    scratch) and projection indices, the (node, factor-sum) statistics of mu' and of mu_i, the
    compact direction v (emit, flat rest) and a table of probabilities."""

    unary: np.ndarray
    scores: np.ndarray
    base: np.ndarray
    diff: np.ndarray
    psi: np.ndarray
    log_mu: np.ndarray
    messages: tuple
    pidx: np.ndarray
    new: tuple
    old: tuple
    direction: tuple
    prob: np.ndarray


@njit(cache=True, nogil=True)
def _eg_direction(i, lmu, scores, jt, K, base, diff, pidx):
    """theta(mu) (module docstring) into base and s(w) - theta(mu) into diff (clique tables,
    region-local); lmu the example's log tables, scores its clique potentials at w."""
    var_start, parent, tab_off, sep_off = jt[2], jt[4], jt[8], jt[9]
    sep_start, sep_child = jt[10], jt[11]
    for c in range(jt[0][i], jt[0][i + 1]):
        m = var_start[c + 1] - var_start[c]
        size, t0 = K**m, tab_off[c]
        has_sep = parent[c] >= 0
        proj = pidx  # unread at a root clique
        if has_sep:
            lo, hi = sep_start[c], sep_start[c + 1]
            proj = projection(jt[13][c], m, K, sep_child, lo, hi, pidx, jt)
        for idx in range(size):
            lm = lmu[t0 + idx]
            if lm == -np.inf:
                base[t0 + idx], diff[t0 + idx] = -np.inf, 0.0
            else:
                b = lm - lmu[sep_off[c] + proj[idx]] if has_sep else lm
                base[t0 + idx], diff[t0 + idx] = b, scores[t0 + idx] - b


@njit(cache=True, nogil=True)
def _trial(eta, ex, sa, w, dims, lam_n, ws, rr):
    """One EG trial: mu' at eta (one oracle call); returns (log Z, H~(mu'), Delta(n D)).

    ws a ``JunctionOEGWorkspace``, rr the example's segment table (``_runs``)."""
    i, s, e, layout, struct = ex
    jt = struct[0]
    base, diff, psi, out, ows = ws.base, ws.diff, ws.psi, ws.log_mu, ws.messages
    new, old = ws.new, ws.old
    K = dims[1]
    for t in range(clique_entries(i, jt, K)):
        psi[t] = base[t] + eta * diff[t]
    log_z = potential_marginals(i, psi, jt, K, ows, out, True)
    if not np.isfinite(log_z):
        return log_z, 0.0, 0.0
    h_new = segments.entropy(out, rr)
    n = e - s
    block_stats(i, out, struct[:3], K, new[0], new[1], ws.prob, ws.pidx)
    emit, rest = ws.direction
    U = sa.shape[0]
    emit[:U] = 0.0
    rest[:] = 0.0
    kappa = -1.0 / lam_n
    add_features(ex, new[0][:n], new[1], kappa, 0.0, emit, rest)
    add_features(ex, old[0][:n], old[1], -kappa, 0.0, emit, rest)
    a, b = compact_dot(sa, dims[0], w, emit[:U], rest.reshape((rest.shape[0] // K, K)))
    return log_z, h_new, h_new - lam_n * (a + 0.5 * b)


@njit(cache=True, nogil=True)
def _runs(s, i):
    """(offsets, lengths, coefficients) of example i's segment table."""
    a, b = s.runs.start[i], s.runs.start[i + 1]
    lo = s.runs.lo[a:b]
    return lo, s.runs.hi[a:b] - lo, s.runs.coef[a:b]


@implements(oeg_prepare, JunctionBlocks)
def _oeg_prepare(s, i, dual, w, sws):
    lo, hi = s.jt[1][i], s.jt[1][i + 1]
    lmu = dual.log_edge[lo:hi]
    scores, pidx = sws.scores, sws.pidx
    potentials(s.data, s.jt, s.assign, s.feat, i, w, s.dims, sws.unary, scores, pidx)
    _eg_direction(i, lmu, scores, s.jt, s.dims[1], sws.base, sws.diff, pidx)
    old = sws.old
    struct = (s.jt, s.assign, s.feat)
    block_stats(i, lmu, struct, s.dims[1], old[0], old[1], sws.prob, pidx)


@implements(oeg_trial, JunctionBlocks)
def _oeg_trial(s, i, eta, w, lam_n, sws):
    lay = s.layout
    sa = lay.slot_attrs[lay.uattr_offsets[i] : lay.uattr_offsets[i + 1]]
    ex = (i, lay.seq_offsets[i], lay.seq_offsets[i + 1], lay, (s.jt, s.assign, s.feat))
    return _trial(eta, ex, sa, w, s.dims, lam_n, sws, _runs(s, i))


@implements(oeg_accept, JunctionBlocks)
def _oeg_accept(s, i, dual, w, sws):
    lo, hi = s.jt[1][i], s.jt[1][i + 1]
    dual.log_edge[lo:hi] = sws.log_mu[: hi - lo]
    A, K = s.dims[0], s.dims[1]
    emit, rest = sws.direction
    lay = s.layout
    sa = lay.slot_attrs[lay.uattr_offsets[i] : lay.uattr_offsets[i + 1]]
    scatter_rows(sa, A, emit[: sa.shape[0]], rest.reshape((rest.shape[0] // K, K)), w, K)


@implements(oeg_change, JunctionBlocks)
def _oeg_change(s, i, sws):
    lay, K = s.layout, s.dims[1]
    emit, rest = sws.direction
    U = lay.uattr_offsets[i + 1] - lay.uattr_offsets[i]
    return emit[:U], rest.reshape((rest.shape[0] // K, K))


# -- thin Python wrappers ------------------------------------------------------------------------
def make_workspace(max_n: int, dims: tuple[int, int, int, int], max_U: int, mws, sizes):
    """The :class:`JunctionOEGWorkspace` of the largest example; ``mws`` the junction message
    workspace (its sixth array: the projection indices), ``sizes = (largest region, largest
    table)``."""
    A, K, n_bias, n_frows = dims
    n, U, F = max(int(max_n), 1), max(int(max_U), 1), n_frows * K
    R, table = int(sizes[0]), int(sizes[1])

    def stats():
        return np.empty((n, K)), np.empty(F)

    bufs = (np.empty(R), np.empty(R), np.empty(R), np.empty(R), (mws, np.empty(R)), mws[5])
    bufs += (stats(), stats(), (np.empty((U, K)), np.empty(n_bias * K + F)), np.empty(table))
    return JunctionOEGWorkspace(np.empty((n, K)), np.empty(R), *bufs)
