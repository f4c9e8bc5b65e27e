"""The chain's online exponentiated gradient (OEG) primitives on the dual clique marginals.

Dual block i is a chain distribution u_i with marginals mu_i (stored as logs, like SDCA's
DualState). One EG step with learning rate eta (``baselines.md`` §6, Collins et al. 2008) is

    u'_i(y) propto u_i(y)^(1 - eta) p(y | x_i; w)^eta,  i.e.  theta' = (1 - eta) theta + eta s(w),

with theta any clique log-potentials of u_i and s(w) the CRF clique scores at w = w_hat(mu). We
take theta from the junction-tree reparameterisation of mu_i (no separate storage, Z(theta) = 1):
theta_0(k, l) = log mu_{0,1}(k, l), theta_t(k, l) = log mu_{t,t+1}(k, l) - log mu_t(k) (t >= 1),
and fold the node scores into the edges: psi_t(k, l) = theta'_t(k, l) with s_t(k, l) =
W(k, l) + u_{t+1}(l), and psi_first(k) = eta u_0(k) (for T = 1: (1 - eta) log mu_0 + eta u_0).
One forward-backward on the position-dependent potentials psi gives mu' (one oracle call per
trial). The step is accepted when the dual grows,

    Delta(n D) = H~(mu') - H~(mu_i) - lambda n (<w, v> + ||v||^2 / 2) > 0,
    v = w_hat change = -(1/(lambda n)) E_{mu' - mu_i}[F(x_i, .)],

otherwise eta_i is halved and the trial repeated (at most ``max_halvings`` times).

The marginals of psi come from the chain kernel for position-dependent potentials,
``crfsdca.kernels.structures.chain_pairwise.pairwise_marginals`` (one oracle call per trial).

The primal change only needs the node marginals and the summed edge marginals of mu' and mu_i
(``crfsdca.kernels.structures.chain_blocks.add_features``): v = -(1/(lambda n)) (E_{mu'}[F] -
E_{mu_i}[F]). This module holds the chain's exponentiated-gradient primitives
(``crfsdca.kernels.primitives``); the OEG visit itself is ``crfsdca.kernels.solvers.oeg_epoch``,
written once for every structure.
"""

from typing import NamedTuple

import numpy as np

from crfsdca.kernels.jit import njit
from crfsdca.kernels.numerics.fastmath import add_reassoc, fast_exp
from crfsdca.kernels.primitives import implements, oeg_accept, oeg_change, oeg_prepare, oeg_trial
from crfsdca.kernels.structures.chain import unary_scores
from crfsdca.kernels.structures.chain_blocks import ChainBlocks, add_features
from crfsdca.kernels.structures.chain_pairwise import pairwise_marginals
from crfsdca.kernels.structures.direction import compact_dot, scatter_rows

VEC = {"cache": True, "nogil": True, "error_model": "numpy"}


class ChainOEGWorkspace(NamedTuple):
    """Buffers of a chain's OEG visit (``make_workspace``): node scores at w, theta(mu),
    s - theta(mu) and psi (each an (edge, first-node) pair), the forward-backward buffers,
    log mu' (node, edge), the (node, edge-sum) marginals of mu' and of mu_i, and the compact
    direction v (emit, rest)."""

    unary: np.ndarray
    base: tuple
    diff: tuple
    psi: tuple
    pairwise: tuple
    log_node: np.ndarray
    log_edge: np.ndarray
    new: tuple
    old: tuple
    direction: tuple


@njit(**VEC)
def _eg_direction(lmn, lme, unary, w_trans, base, diff):
    """theta(mu) (reparameterised, module docstring) into base and s(w) - theta(mu) into diff.

    lmn (T, K), lme (T-1, K, K) log mu; unary (T, K) and w_trans (K, K) the scores at w.
    base = (edge part (T-1, K, K), first-node part (K,)), diff likewise. A forbidden entry
    (log mu = -inf) stays forbidden (base -inf, diff 0).
    """
    T, K = unary.shape
    b_edge, b_first = base
    d_edge, d_first = diff
    for k in range(K):
        b_first[k] = lmn[0, k] if T == 1 else 0.0
        d_first[k] = 0.0 if b_first[k] == -np.inf else unary[0, k] - b_first[k]
    for t in range(T - 1):
        for k in range(K):
            sub = lmn[t, k] if t > 0 else 0.0
            for l in range(K):
                lm = lme[t, k, l]
                b = -np.inf if lm == -np.inf else lm - sub
                b_edge[t, k, l] = b
                d_edge[t, k, l] = 0.0 if lm == -np.inf else w_trans[k, l] + unary[t + 1, l] - b


@njit(**VEC)
def _mix(eta, base, diff, psi, T):
    """psi = base + eta diff on the first T-1 edge tables and the first-node table."""
    b_edge, b_first = base
    d_edge, d_first = diff
    p_edge, p_first = psi
    K = b_first.shape[0]
    for k in range(K):
        p_first[k] = b_first[k] + eta * d_first[k]
    for t in range(T - 1):
        for k in range(K):
            for l in range(K):
                p_edge[t, k, l] = b_edge[t, k, l] + eta * d_edge[t, k, l]


@njit(**VEC)
def block_stats(log_node, log_edge, T, node, edge_sum):
    """Node marginals node (T, K), summed edge marginals edge_sum (K, K); return H~(mu).

    H~(mu) = sum_t H(mu_{t,t+1}) - sum_{0 < t < T-1} H(mu_t) (+ H(mu_0) when T = 1).
    """
    K = log_node.shape[1]
    edge_sum[:, :] = 0.0
    h = 0.0
    for t in range(T - 1):
        for k in range(K):
            for l in range(K):
                lm = log_edge[t, k, l]
                m = fast_exp(lm)
                edge_sum[k, l] += m
                h = add_reassoc(h, -m * lm if m > 0.0 else 0.0)
    for t in range(T):
        hn = 0.0
        for k in range(K):
            lm = log_node[t, k]
            m = fast_exp(lm)
            node[t, k] = m
            hn = add_reassoc(hn, -m * lm if m > 0.0 else 0.0)
        if T == 1:
            h += hn
        elif 0 < t < T - 1:
            h -= hn
    return h


@njit(cache=True, nogil=True)
def _direction(seq, sa, new, old, w, dims, kappa, v):
    """v = kappa (E_new[F] - E_old[F]) on the support (compact); return (<w, v>, ||v||^2).

    new, old = (node marginals (T, K), summed edge marginals (K, K)); v = (emit (U, K), rest).
    """
    emit, rest = v
    U = sa.shape[0]
    emit[:U] = 0.0
    rest[:, :] = 0.0
    add_features(seq, new[0], new[1], kappa, 0.0, emit, rest)
    add_features(seq, old[0], old[1], -kappa, 0.0, emit, rest)
    return compact_dot(sa, dims[0], w, emit[:U], rest)


@njit(cache=True, nogil=True)
def _trial(eta, seq, sa, w, dims, lam_n, ws, old):
    """One EG trial: mu' at eta (one oracle call); returns (log Z, H~(mu'), Delta(n D)).

    ws a ``ChainOEGWorkspace``; old = mu_i's (node, edge-sum) marginals."""
    T = seq[1] - seq[0]
    psi, lnn, lne, new = ws.psi, ws.log_node, ws.log_edge, ws.new
    _mix(eta, ws.base, ws.diff, psi, T)
    log_z = pairwise_marginals(psi[0][: T - 1], psi[1], ws.pairwise, lnn, lne)
    if not np.isfinite(log_z):
        return log_z, 0.0, 0.0
    h_new = block_stats(lnn, lne, T, new[0], new[1])
    a, b = _direction(seq, sa, (new[0][:T], new[1]), old, w, dims, -1.0 / lam_n, ws.direction)
    return log_z, h_new, h_new - lam_n * (a + 0.5 * b)


@implements(oeg_prepare, ChainBlocks)
def _oeg_prepare(s, i, dual, w, sws):
    lay = s.layout
    A, K, nb = s.dims
    unary = sws.unary
    t0, t1 = lay.seq_offsets[i], lay.seq_offsets[i + 1]
    T = t1 - t0
    lmn, lme = dual.log_node[t0:t1], dual.log_edge[t0 - i : t1 - i - 1]
    unary_scores((lay.attr_offsets, lay.attr_ids, lay.attr_values), t0, t1, w, A, K, nb, unary)
    off = (A + nb) * K
    trans = w[off : off + K * K].reshape((K, K))
    _eg_direction(lmn, lme, unary[:T], trans, sws.base, sws.diff)
    block_stats(lmn, lme, T, sws.old[0], sws.old[1])


@implements(oeg_trial, ChainBlocks)
def _oeg_trial(s, i, eta, w, lam_n, sws):
    lay = s.layout
    t0, t1 = lay.seq_offsets[i], lay.seq_offsets[i + 1]
    old_node, old_edge = sws.old
    sa = lay.slot_attrs[lay.uattr_offsets[i] : lay.uattr_offsets[i + 1]]
    seq = (t0, t1, lay.attr_offsets, lay.attr_values, lay.entry_slot, lay.labels)
    return _trial(eta, seq, sa, w, s.dims, lam_n, sws, (old_node[: t1 - t0], old_edge))


@implements(oeg_accept, ChainBlocks)
def _oeg_accept(s, i, dual, w, sws):
    lay = s.layout
    t0, t1 = lay.seq_offsets[i], lay.seq_offsets[i + 1]
    T = t1 - t0
    dual.log_node[t0:t1] = sws.log_node[:T]
    dual.log_edge[t0 - i : t1 - i - 1] = sws.log_edge[: T - 1]
    sa = lay.slot_attrs[lay.uattr_offsets[i] : lay.uattr_offsets[i + 1]]
    emit, rest = sws.direction
    scatter_rows(sa, s.dims[0], emit[: sa.shape[0]], rest, w, s.dims[1])


@implements(oeg_change, ChainBlocks)
def _oeg_change(s, i, sws):
    lay = s.layout
    emit, rest = sws.direction
    return emit[: lay.uattr_offsets[i + 1] - lay.uattr_offsets[i]], rest


@njit(cache=True, nogil=True)
def _gibbs_marginals(seq_offsets, labels, score, log_node, log_edge, ws):
    """Marginals of p(y) propto exp(score (#gold labels of y + #gold transitions of y)).

    Node potentials are folded into the edges as in the EG step: psi_first(k) = score [k = y_0],
    psi_t(k, l) = score ([k = y_t and l = y_t+1] + [l = y_t+1]).
    """
    p_edge, p_first = ws.psi
    pws = ws.pairwise
    for i in range(seq_offsets.shape[0] - 1):
        t0, t1 = seq_offsets[i], seq_offsets[i + 1]
        T = t1 - t0
        p_first[:] = 0.0
        p_first[labels[t0]] = score
        for t in range(T - 1):
            p_edge[t, :, :] = 0.0
            p_edge[t, :, labels[t0 + t + 1]] = score
            p_edge[t, labels[t0 + t], labels[t0 + t + 1]] += score
        lmn, lme = log_node[t0:t1], log_edge[t0 - i : t1 - i - 1]
        pairwise_marginals(p_edge[: T - 1], p_first, pws, lmn, lme)


# -- thin Python wrappers ------------------------------------------------------------------------
def make_workspace(max_T: int, dims: tuple[int, int, int], max_U: int) -> ChainOEGWorkspace:
    """The :class:`ChainOEGWorkspace` of sequences of up to max_T tokens."""
    A, K, n_bias = dims
    T, E1 = max(int(max_T), 1), max(int(max_T) - 1, 1)

    def pair():
        return np.empty((E1, K, K)), np.empty(K)

    pws = (np.empty((E1, K, K)), np.empty((T, K)), np.empty((T, K)), *np.empty((3, T)))
    bufs = (pair(), pair(), pair(), pws, np.empty((T, K)), np.empty((E1, K, K)))
    bufs += ((np.empty((T, K)), np.empty((K, K))), (np.empty((T, K)), np.empty((K, K))))
    bufs += ((np.empty((max(int(max_U), 1), K)), np.empty((n_bias + K, K))),)
    return ChainOEGWorkspace(np.empty((T, K)), *bufs)


def gibbs_marginals(seq_offsets, labels, K, score, log_node, log_edge, max_T):
    """Fill log_node (N, K), log_edge (N - n, K, K) with the Gibbs-``score`` marginals (§6)."""
    ws = make_workspace(max_T, (0, K, 0), 1)
    _gibbs_marginals(seq_offsets, labels, float(score), log_node, log_edge, ws)
