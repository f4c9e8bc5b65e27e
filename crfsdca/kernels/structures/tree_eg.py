"""Online exponentiated gradient (OEG) on tree-structured examples (chains:
``kernels.structures.chain_eg``).

Dual block i is a tree-structured law u_i with node marginals (n, K) and edge marginals
(n, K, K) (row v: the edge parent(v)-v; roots' rows unused), stored as logs like tree SDCA's
dual state. One EG step with learning rate eta (``baselines.md`` §6) is

    theta' = (1 - eta) theta + eta s(w),

with s(w) the CRF scores at w = w_hat(mu) (node scores, the transition table of each edge's
type) and theta the junction-tree reparameterisation of mu_i (Z(theta) = 1), as for chains:
theta_v(k, l) = log mu_v(p, v)(k, l) - log mu_p(k) on the edge of v, except for the first child
of a root (no subtraction); node tables are 0 except on isolated nodes (log mu_v). Every node p
thus loses (degree(p) - 1) log mu_p: the junction-tree factorisation. A forbidden entry
(log mu = -inf) stays forbidden. The marginals of theta' (one oracle call per trial) come from
the tree kernel ``kernels.structures.tree_scaled.potential_marginals`` (per-node and per-edge
potentials). The step is accepted when the dual grows,

    Delta(n D) = H~(mu') - H~(mu_i) - lambda n (<w, v> + ||v||^2 / 2) > 0,
    v = -(1/(lambda n)) E_{mu' - mu_i}[F(x_i, .)],

otherwise eta_i is halved and the trial repeated (at most ``max_halvings`` times).

This module holds the tree's exponentiated-gradient primitives
(``crfsdca.kernels.primitives``) on
``kernels.structures.tree_blocks.TreeBlocks``; the visit itself is
``crfsdca.kernels.solvers.oeg_epoch``.
``dual`` an ``oeg.OEGDual`` (log_node (N, K), log_edge (N, K, K)).
"""

from typing import NamedTuple

import numpy as np

from crfsdca.kernels.jit import njit
from crfsdca.kernels.primitives import implements, oeg_accept, oeg_change, oeg_prepare, oeg_trial
from crfsdca.kernels.structures.direction import compact_dot, scatter_rows
from crfsdca.kernels.structures.tree import tree_entropy_terms, tree_unary
from crfsdca.kernels.structures.tree_blocks import TreeBlocks, add_features
from crfsdca.kernels.structures.tree_scaled import block_stats, potential_marginals


class TreeOEGWorkspace(NamedTuple):
    """Buffers of a tree's OEG visit (``make_workspace``): theta(mu), s - theta(mu) and psi
    (each a (node, edge) pair), the oracle's buffers (log space, scaled, probabilities), log mu'
    (node, edge), the (node, edge-sum) marginals of mu' and of mu_i, the compact direction v
    (emit, rest), the degrees, the node scores and the identity edge types."""

    base: tuple
    diff: tuple
    psi: tuple
    oracle: tuple
    log_node: np.ndarray
    log_edge: np.ndarray
    new: tuple
    old: tuple
    direction: tuple
    degrees: np.ndarray
    unary: np.ndarray
    identity: np.ndarray


@njit(cache=True, nogil=True)
def _eg_direction(lmn, lme, scores, local, base, diff):
    """theta(mu) (module docstring) into base and s(w) - theta(mu) into diff.

    lmn (n, K), lme (n, K, K) log mu; scores = (unary (n, K), log_pair (n_types, K, K)) at w;
    local = (parents, types, (children_start, children)); base, diff = (node, edge) tables.
    """
    unary, log_pair = scores
    parents, types, (start, children) = local
    b_node, b_edge = base
    d_node, d_edge = diff
    n, K = lmn.shape
    for v in range(n):
        p = parents[v]
        isolated = p < 0 and start[v + 1] == start[v]
        for k in range(K):
            lm = lmn[v, k]
            b_node[v, k] = lm if isolated else 0.0
            d_node[v, k] = 0.0 if lm == -np.inf else unary[v, k] - b_node[v, k]
        if p < 0:
            continue
        sub = parents[p] >= 0 or children[start[p]] != v
        table = log_pair[types[v]]
        for j in range(K):
            s = lmn[p, j] if sub else 0.0
            for k in range(K):
                lm = lme[v, j, k]
                b = -np.inf if lm == -np.inf else lm - s
                b_edge[v, j, k] = b
                d_edge[v, j, k] = 0.0 if lm == -np.inf else table[j, k] - b


@njit(cache=True, nogil=True)
def _mix(eta, base, diff, psi, parents):
    """psi = base + eta diff on every node table and every edge table (non-roots)."""
    b_node, b_edge = base
    d_node, d_edge = diff
    p_node, p_edge = psi
    n, K = parents.shape[0], b_node.shape[1]
    for v in range(n):
        for k in range(K):
            p_node[v, k] = b_node[v, k] + eta * d_node[v, k]
        if parents[v] >= 0:
            for j in range(K):
                for k in range(K):
                    p_edge[v, j, k] = b_edge[v, j, k] + eta * d_edge[v, j, k]


@njit(cache=True, nogil=True)
def _trial(eta, ex, sa, w, dims, lam_n, ws, local):
    """One EG trial: mu' at eta (one oracle call); returns (log Z, H~(mu'), Delta(n D)).

    ws a ``TreeOEGWorkspace``, local the oracle's local graph of the example (``_local``)."""
    psi, lnn, lne, new, old, deg = ws.psi, ws.log_node, ws.log_edge, ws.new, ws.old, ws.degrees
    s, e, _, graph = ex
    n = e - s
    parents, types = graph[0][s:e], graph[1][s:e]
    _mix(eta, ws.base, ws.diff, psi, parents)
    log_space, scaled, probs = ws.oracle
    log_z = potential_marginals(psi[0][:n], psi[1][:n], local, log_space, scaled, probs, lnn, lne)
    if not np.isfinite(log_z):
        return log_z, 0.0, 0.0
    h_new = tree_entropy_terms(lnn[:n], lne[:n], parents, deg[:n])
    block_stats(lnn, lne, parents, types, new[0], new[1])
    emit, rest = ws.direction
    U = sa.shape[0]
    emit[:U] = 0.0
    rest[:, :] = 0.0
    kappa = -1.0 / lam_n
    add_features(ex, new[0][:n], new[1], kappa, 0.0, emit, rest)
    add_features(ex, old[0][:n], old[1], -kappa, 0.0, emit, rest)
    a, b = compact_dot(sa, dims[0], w, emit[:U], rest)
    return log_z, h_new, h_new - lam_n * (a + 0.5 * b)


@njit(cache=True, nogil=True)
def _prepare(i, layout, graph, dual, w, dims, ws):
    """Scores at w, theta(mu_i) and its direction, mu_i's statistics, the degrees, the local
    graph of the oracle; returns (s, e, local graph)."""
    parents, types, order, child_start, children = graph
    A, K, n_bias, n_types = dims
    s, e = layout.seq_offsets[i], layout.seq_offsets[i + 1]
    n = e - s
    unary, deg, identity = ws.unary, ws.degrees, ws.identity
    tree_unary(layout[:5], graph, s, e, w, dims, unary)
    off = (A + n_bias) * K
    log_pair = w[off : off + n_types * K * K].reshape((n_types, K, K))
    start = child_start[s : e + 1]
    lmn, lme = dual.log_node[s:e], dual.log_edge[s:e]
    local = (parents[s:e], types[s:e], (start, children))
    _eg_direction(lmn, lme, (unary[:n], log_pair), local, ws.base, ws.diff)
    block_stats(lmn, lme, parents[s:e], types[s:e], ws.old[0], ws.old[1])
    for v in range(n):
        deg[v] = start[v + 1] - start[v] + (1 if parents[s + v] >= 0 else 0)
        identity[v] = v
    return s, e, (parents[s:e], order[s:e], (start, children), identity[:n])


@njit(cache=True, nogil=True)
def _local(s, i, ws):
    """The oracle's local graph of example i (identity edge types from ``_prepare``)."""
    parents, _, order, child_start, children = s.graph
    a, b = s.layout.seq_offsets[i], s.layout.seq_offsets[i + 1]
    return (parents[a:b], order[a:b], (child_start[a : b + 1], children), ws.identity[: b - a])


@implements(oeg_prepare, TreeBlocks)
def _oeg_prepare(s, i, dual, w, sws):
    return _prepare(i, s.layout, s.graph, dual, w, s.dims, sws)


@implements(oeg_trial, TreeBlocks)
def _oeg_trial(s, i, eta, w, lam_n, sws):
    lay = s.layout
    sa = lay.slot_attrs[lay.uattr_offsets[i] : lay.uattr_offsets[i + 1]]
    ex = (lay.seq_offsets[i], lay.seq_offsets[i + 1], lay, s.graph)
    return _trial(eta, ex, sa, w, s.dims, lam_n, sws, _local(s, i, sws))


@implements(oeg_accept, TreeBlocks)
def _oeg_accept(s, i, dual, w, sws):
    lay = s.layout
    a, b = lay.seq_offsets[i], lay.seq_offsets[i + 1]
    parents = s.graph[0]
    dual.log_node[a:b] = sws.log_node[: b - a]
    for v in range(b - a):
        if parents[a + v] >= 0:
            dual.log_edge[a + v] = sws.log_edge[v]
    sa = lay.slot_attrs[lay.uattr_offsets[i] : lay.uattr_offsets[i + 1]]
    emit, rest = sws.direction
    scatter_rows(sa, s.dims[0], emit[: sa.shape[0]], rest, w, s.dims[1])


@implements(oeg_change, TreeBlocks)
def _oeg_change(s, i, sws):
    lay = s.layout
    emit, rest = sws.direction
    return emit[: lay.uattr_offsets[i + 1] - lay.uattr_offsets[i]], rest


@njit(cache=True, nogil=True)
def _gibbs_marginals(layout, graph, score, log_node, log_edge, ws):
    """Marginals of p(y) propto exp(score (#gold labels of y + #gold edges of y)), per example."""
    seq_offsets, labels = layout.seq_offsets, layout.labels
    parents, _, order, child_start, children = graph
    p_node, p_edge = ws.psi
    log_space, scaled, probs = ws.oracle
    identity = ws.identity
    for i in range(seq_offsets.shape[0] - 1):
        s, e = seq_offsets[i], seq_offsets[i + 1]
        n = e - s
        for v in range(n):
            identity[v] = v
            p_node[v, :] = 0.0
            p_node[v, labels[s + v]] = score
            p_edge[v, :, :] = 0.0
            if parents[s + v] >= 0:
                p_edge[v, labels[s + parents[s + v]], labels[s + v]] = score
        local = (parents[s:e], order[s:e], (child_start[s : e + 1], children), identity[:n])
        potential_marginals(p_node[:n], p_edge[:n], local, log_space, scaled, probs,
                            log_node[s:e], log_edge[s:e])  # fmt: skip


# -- thin Python wrappers ------------------------------------------------------------------------
def make_workspace(max_n: int, dims: tuple[int, int, int, int], max_U: int) -> TreeOEGWorkspace:
    """The :class:`TreeOEGWorkspace` of examples of up to max_n nodes."""
    A, K, n_bias, n_types = dims
    n, U = max(int(max_n), 1), max(int(max_U), 1)

    def pair():
        return np.empty((n, K)), np.empty((n, K, K))

    def stats():
        return np.empty((n, K)), np.empty((n_types, K, K))

    ws = (*(np.empty((n, K)) for _ in range(4)), np.empty(K))
    sws = (*(np.empty((n, K)) for _ in range(4)), np.empty(n))
    probs = (np.empty((n, K, K)), np.empty(n), np.empty((n, K)), np.empty((n, K, K)), np.empty(n))
    bufs = (pair(), pair(), pair(), (ws, sws, probs), np.empty((n, K)), np.empty((n, K, K)))
    bufs += (stats(), stats(), (np.empty((U, K)), np.empty((n_bias + n_types * K, K))))
    bufs += (np.empty(n, np.int64), np.empty((n, K)), np.empty(n, np.int64))
    return TreeOEGWorkspace(*bufs)


def gibbs_marginals(layout, graph, K, score, log_node, log_edge, max_n):
    """Fill log_node (N, K), log_edge (N, K, K) with the Gibbs-``score`` marginals (§6)."""
    ws = make_workspace(max_n, (0, K, 0, 1), 1)
    _gibbs_marginals(layout, graph, float(score), log_node, log_edge, ws)
