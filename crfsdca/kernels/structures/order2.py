"""Second-order chains' fast path of the junction tree's SDCA primitives
(``crfsdca.kernels.structures.junction_blocks``).

A second-order chain of T >= 3 nodes (``crfsdca.structures.junction_tree.second_order_chain``:
cliques (t, t+1, t+2) in a path, clique 0 the root, separators (t, t+1), bigram factors (type 0,
K^2) on every (t, t+1), trigram factors (type 1, K^3) on every clique) is recognised when the
problem is packed (``JunctionBlocks.order2``); its block oracle and primal direction then run
here, on contiguous rows of K entries, instead of the generic kernels' projections:

- the clique potential factorises as P_t[a, b, c] = Q[a, b, c] e_{t+2}[c] (clique 0 also
  carries e_0[a] e_1[b] E_2[a, b]), with Q = exp(W_3[a, b, c] + W_2[b, c] - max) built once per
  call and e_v = exp(u_v - max u_v) per node: emissions enter per node, not per table entry;
- scaled forward messages F_t[a, b] (over (y_t, y_{t+1}), into clique t; max 1) and backward
  H_t[b, c] = e_{t+2}[c] G_t[b, c]: one K^3 pass forward, one backward that writes the clique
  marginal F_t Q H_t and the next message together; the separator (t, t+1) marginal is
  F_t[a, b] sum_c Q H_t, a by-product;
- the primal direction projects each clique difference once: trigram block += D, the bigram
  block and the newest node's difference from the column sums S[b, c] = sum_a D[a, b, c].

Same tolerance rule as ``kernels.structures.junction_scaled``: a message normaliser or a marginal
below
``TINY`` (or not finite) returns ok False and the caller runs the generic oracle (scaled, then
log space). Workspace: :func:`make_workspace`.
"""

from __future__ import annotations

import numpy as np

from crfsdca.kernels.jit import njit
from crfsdca.kernels.numerics.fastmath import add_reassoc, fast_exp, fast_log_normal, max_num
from crfsdca.kernels.numerics.logspace import subtract_row_max
from crfsdca.kernels.numerics.rowops import rows_sum
from crfsdca.kernels.structures.junction_batch import node_unary
from crfsdca.kernels.structures.junction_scaled import TINY


def make_workspace(max_len, K, enabled):
    """``ows`` of :func:`block_marginals` and :func:`direction` (size-one arrays when the
    structure has no second-order fast path): the factor tables (Q, Qt, Q2, lQ, E2), the
    forward messages fin (T, K^2) and node factors e (T, K), five K^2 scratch rows and the b and
    c of j = b K + c."""
    n, k = (max(max_len, 1), K) if enabled else (1, 1)
    kk = k * k
    bidx, cidx = np.divmod(np.arange(kk, dtype=np.int64), k)
    tables = (np.empty(k**3), np.empty(k**3), np.empty(k**3), np.empty(k**3), np.empty(kk))
    rows = (np.empty(kk), np.empty(kk), np.empty(kk), np.empty(kk), np.empty(kk))
    return tables, (np.empty((n, kk)), np.empty((n, k))), rows, (bidx, cidx)


@njit(cache=True, nogil=True)
def _factor_tables(w, woff, K, tables):
    """Q[a, b, c] = exp(W_3[a, b, c] + W_2[b, c] - M) and its log lQ, the same entries ordered
    (b, a, c) in Qt and (b, c, a) in Q2 (the forward and backward passes sum K contiguous rows
    per b), E2 = exp(W_2 - m2); returns (M, m2)."""
    Q, Qt, Q2, lQ, E2 = tables
    b2, b3 = woff[0], woff[1]
    KK = K * K
    m2 = w[b2]
    for j in range(KK):
        m2 = max_num(m2, w[b2 + j])
    M = w[b3] + w[b2]
    for a in range(K):
        for j in range(KK):
            M = max_num(M, w[b3 + a * KK + j] + w[b2 + j])
    for j in range(KK):
        E2[j] = fast_exp(w[b2 + j] - m2)
    for a in range(K):
        for j in range(KK):
            lQ[a * KK + j] = w[b3 + a * KK + j] + w[b2 + j] - M
    for j in range(K * KK):
        Q[j] = fast_exp(lQ[j])
    for a in range(K):
        for b in range(K):
            src, dst = (a * K + b) * K, (b * K + a) * K
            for c in range(K):
                Qt[dst + c] = Q[src + c]
    for a in range(K):
        for j in range(KK):
            Q2[j * K + a] = Q[a * KK + j]
    return M, m2


@njit(cache=True, nogil=True)
def _normalise_max(x, n):
    """x[:n] /= max(x[:n]); returns the log of the max (nan when it is not > TINY)."""
    top = 0.0
    for j in range(n):
        top = max_num(top, x[j])
    if not (top > TINY and np.isfinite(top)):
        return np.nan
    inv = 1.0 / top
    for j in range(n):
        x[j] *= inv
    return np.log(top)


@njit(cache=True, nogil=True)
def _probabilities(nu, lnu, lo, n, inv):
    """nu[lo:lo+n] = min(nu * inv, 1), lnu = log nu; False when one falls below TINY."""
    neg_low = -1.0
    for j in range(lo, lo + n):
        p = min(nu[j] * inv, 1.0)
        nu[j] = p
        neg_low = max_num(neg_low, -p)
    if not -neg_low >= TINY:
        return False
    for j in range(lo, lo + n):
        lnu[j] = fast_log_normal(nu[j])
    return True


@njit(cache=True, nogil=True)
def block_marginals(s, i, w, ows, unary, nu, lnu):
    """(log Z_i, ok) of second-order chain i (T >= 3 nodes) at w; when ok, its clique and
    separator marginals (each >= TINY) into nu and their logs into lnu (region-local; a clique
    entry's log is log F + log Q + log H - log total, no log per entry)."""
    tables, (fin, e), (H, g, gT, lf, lH), (bidx, cidx) = ows
    Q, Qt, Q2, lQ, E2 = tables
    A, K, n_bias = s.dims
    KK = K * K
    jt = s.jt
    c0, tab_off, sep_off = jt[0][i], jt[8], jt[9]
    a0 = s.data[0][i]
    T = s.data[0][i + 1] - a0
    M, m2 = _factor_tables(w, s.feat[0], K, tables)
    node_unary(s.data, a0, a0 + T, w, s.dims, unary)
    log_z = subtract_row_max(unary, T, K, (T - 2) * M + m2)
    for v in range(T):
        for k in range(K):
            e[v, k] = fast_exp(unary[v, k])
    f = fin[0]
    for a in range(K):
        for b in range(K):
            f[a * K + b] = e[0, a] * e[1, b] * E2[a * K + b]
    scale = _normalise_max(f, KK)
    if not np.isfinite(scale):
        return 0.0, False
    log_z += scale
    for t in range(T - 3):  # fin[t + 1][b, c] = e_{t+2}[c] sum_a fin[t][a, b] Q[a, b, c]
        f, out, et = fin[t], fin[t + 1], e[t + 2]
        for a in range(K):
            for b in range(K):
                gT[b * K + a] = f[a * K + b]
        for b in range(K):
            rows_sum(out[b * K : b * K + K], Qt, None, gT, b * K, b * K + K, K)
        for j in range(KK):
            out[j] *= et[cidx[j]]
        scale = _normalise_max(out, KK)
        if not np.isfinite(scale):
            return 0.0, False
        log_z += scale
    for j in range(KK):
        H[j] = e[T - 1, cidx[j]]
    for t in range(T - 3, -1, -1):  # clique t: marginal fin[t] Q H / total, g = sum_c Q H
        f, t0 = fin[t], tab_off[c0 + t]
        for b in range(K):  # gT[b, a] = sum_c H[b, c] Q2[b, c, a]
            rows_sum(gT[b * K : b * K + K], Q2, None, H, b * K, b * K + K, K)
        total = 0.0
        for a in range(K):
            for b in range(K):
                x = gT[b * K + a]
                g[a * K + b] = x
                total += f[a * K + b] * x
        if not (total > 0.0 and np.isfinite(total)):
            return 0.0, False
        log_total = np.log(total)
        if t == T - 3:
            log_z += log_total
        inv = 1.0 / total
        neg_low = -1.0
        for a in range(K):
            q, fa = a * KK, a * K
            for j in range(KK):
                p = min(f[fa + bidx[j]] * Q[q + j] * H[j] * inv, 1.0)
                nu[t0 + q + j] = p
                neg_low = max_num(neg_low, -p)
        if not -neg_low >= TINY:
            return 0.0, False
        for j in range(KK):
            lf[j] = np.log(f[j]) - log_total
            lH[j] = np.log(H[j])
        for a in range(K):
            q, fa = a * KK, a * K
            for j in range(KK):
                lnu[t0 + q + j] = min(lf[fa + bidx[j]] + lQ[q + j] + lH[j], 0.0)
        if t == 0:
            break
        so = sep_off[c0 + t]
        for j in range(KK):
            nu[so + j] = f[j] * g[j]
        if not _probabilities(nu, lnu, so, KK, inv):
            return 0.0, False
        if not np.isfinite(_normalise_max(g, KK)):
            return 0.0, False
        et = e[t + 1]
        for j in range(KK):
            H[j] = et[cidx[j]] * g[j]
    return log_z, True


@njit(cache=True, nogil=True)
def add_node_difference(s, a0, v, T, d, dws):
    """Add node v's marginal difference d (K,) to the rows of its attributes (``dws[1]``, by
    the layout's entry slots) and to the bias rows (``dws[2]``) of an example of T nodes."""
    lay = s.layout
    attr_offsets, attr_values, entry_slot = lay[1], lay[3], lay[5]
    rows, bias = dws[1], dws[2]
    K, n_bias = s.dims[1], s.dims[2]
    g = a0 + v
    for q in range(attr_offsets[g], attr_offsets[g + 1]):
        row, x = entry_slot[q], attr_values[q]
        for k in range(K):
            rows[row, k] += x * d[k]
    if n_bias:
        for k in range(K):
            bias[0, k] += d[k]
        if v == 0:
            for k in range(K):
                bias[1, k] += d[k]
        if v == T - 1:
            for k in range(K):
                bias[2, k] += d[k]


@njit(cache=True, nogil=True)
def direction(s, i, mu, nu, dws, ows):
    """B delta of second-order chain i (T >= 3) on its distinct attributes, the bias rows and
    the factor blocks, as ``junction_blocks._direction``; returns (U, |B delta|^2)."""
    ids, rows, bias, fdiff, pk = dws
    S, R = ows[2][0], ows[2][1]
    lay = s.layout
    A, K, n_bias = s.dims
    KK = K * K
    a0 = lay[0][i]
    T = lay[0][i + 1] - a0
    u0, u1 = lay[6][i], lay[6][i + 1]
    U = u1 - u0
    ids[:U] = lay[7][u0:u1]
    rows[:U] = 0.0
    bias[:] = 0.0
    fdiff[:] = 0.0
    woff = s.feat[0]
    b3 = woff[1] - woff[0]
    c0, tab_off = s.jt[0][i], s.jt[8]
    for t in range(T - 2):
        t0 = tab_off[c0 + t]
        S[:] = 0.0
        for a in range(K):
            q, o = t0 + a * KK, b3 + a * KK
            for j in range(KK):
                d = nu[q + j] - mu[q + j]
                fdiff[o + j] += d
                S[j] += d
        if t == 0:
            for r in range(KK):
                acc = 0.0
                for c in range(K):
                    acc += nu[t0 + r * K + c] - mu[t0 + r * K + c]
                R[r] = acc
        pk[:] = 0.0
        for b in range(K):
            for c in range(K):
                fdiff[b * K + c] += S[b * K + c]
                pk[c] += S[b * K + c]
        if t == 0:  # nodes 0, 1 and the bigram (0, 1) live in clique 0
            for j in range(KK):
                fdiff[j] += R[j]
            d0, d1 = S[:K], S[K : 2 * K]  # S is free again: node 0 and node 1 differences
            d0[:] = 0.0
            d1[:] = 0.0
            for a in range(K):
                for b in range(K):
                    d0[a] += R[a * K + b]
                    d1[b] += R[a * K + b]
            add_node_difference(s, a0, 0, T, d0, dws)
            add_node_difference(s, a0, 1, T, d1, dws)
        add_node_difference(s, a0, t + 2, T, pk, dws)
    sq = 0.0
    for r in range(U):
        for k in range(K):
            sq = add_reassoc(sq, rows[r, k] * rows[r, k])
    for r in range(3):
        for k in range(K):
            sq += bias[r, k] * bias[r, k]
    for j in range(fdiff.size):
        sq = add_reassoc(sq, fdiff[j] * fdiff[j])
    return U, sq
