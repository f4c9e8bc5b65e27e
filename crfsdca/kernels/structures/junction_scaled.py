"""Junction-tree sum-product in scaled probability space: the fast path of the junction oracle's
batch value and gradient and of the SDCA step (the log-space kernels of
:mod:`crfsdca.kernels.structures.junction` are the exact fallback).

Potentials are exponentiated once: e[v, k] = exp(u[v, k] - max_k u[v]) per node and
E_t = exp(W_t - max W_t) per factor type (:func:`exp_blocks`, once per weight vector); a clique
table is the product of its nodes' and factors' entries, normalised to max 1, its log scale
kept. Collect (children first): b_c = P_c * prod of the children's messages, the message
U_c[s] = sum over entries projecting to s of b_c, normalised to max 1 with its log scale, so
that log Z = (sum of the potentials' log scales) + sum over roots of their messages' scales and
log sum b_root. Distribute (parents first): D_ch[s] ~ sum of P_c * D_c * the other children's
messages, normalised to max 1; the clique marginal is P_c * D_c * prod U_ch normalised to sum 1,
the separator's U_c * D_c normalised to sum 1. Scales cancel in the marginals. An example whose
tables, messages or marginals fall below ``TINY`` (or are not finite) fails (``ok`` False) and
is redone in log space by the caller. :func:`potential_marginals` runs the same recursions on
given per-clique log potentials (SAG-NUS's and OEG's oracle calls), with the log-space fallback
built in.

Workspaces as in kernels.structures.junction and kernels.structures.junction_batch (``mws``,
``bws``) plus
``ews = (eblocks, escales)``: the exponentiated factor blocks (laid out from feat's first
offset) and their log scales (one per factor type).
"""

from __future__ import annotations

import numpy as np

from crfsdca.kernels.jit import njit
from crfsdca.kernels.numerics.logspace import subtract_row_max
from crfsdca.kernels.structures.junction import collect, distribute, gather, projection
from crfsdca.kernels.structures.junction_batch import (
    add_expected,
    clique_table,
    marginals,
    node_unary,
)

TINY = 1e-280


@njit(cache=True, nogil=True)
def exp_blocks(w, feat, K, ews):
    """eblocks = exp(W_t - max W_t) for every factor type t; escales[t] = max W_t."""
    woff, arity = feat
    eblocks, escales = ews
    for t in range(escales.size):
        a, size = woff[t], K ** arity[t]
        m = w[a]
        for j in range(size):
            m = max(m, w[a + j])
        escales[t] = m
        for j in range(size):
            eblocks[a - woff[0] + j] = np.exp(w[a + j] - m)


@njit(cache=True, nogil=True)
def _potentials(data, jt, assign, feat, i, w, dims, ews, unary, P, pidx):
    """Scaled clique tables of example i into P; returns (sum of log scales, ok)."""
    seq_offsets = data[0]
    ex_cliques, tab_off = jt[0], jt[8]
    fac_start, fac_type = assign[3], assign[4]
    eblocks, escales = ews
    woff = feat[0]
    K = dims[1]
    s = seq_offsets[i]
    n = seq_offsets[i + 1] - s
    node_unary(data, s, s + n, w, dims, unary)
    total = subtract_row_max(unary, n, K, 0.0)
    for v in range(n):
        for k in range(K):
            unary[v, k] = np.exp(unary[v, k])
    for c in range(ex_cliques[i], ex_cliques[i + 1]):
        size, _ = clique_table(c, jt, assign, woff, woff[0], unary, eblocks, K, P, pidx, True)
        t0 = tab_off[c]
        for f in range(fac_start[c], fac_start[c + 1]):
            total += escales[fac_type[f]]
        top = 0.0
        for idx in range(size):
            top = max(top, P[t0 + idx])
        if not (top > TINY and np.isfinite(top)):
            return 0.0, False
        for idx in range(size):
            P[t0 + idx] /= top
        total += np.log(top)
    return total, True


@njit(cache=True, nogil=True)
def _sum_to(c, pat, pos, size, m, jt, K, ws, out, so):
    """out[so + s] = sum of tmp over entries projecting to s (separator of c at positions pos),
    normalised to max 1; returns log of the normaliser (nan when it is not > TINY)."""
    sep_start, tmp, pidx = jt[10], ws[2], ws[5]
    lo, hi = sep_start[c], sep_start[c + 1]
    ssize = K ** (hi - lo)
    proj = projection(pat, m, K, pos, lo, hi, pidx, jt)
    for s in range(ssize):
        out[so + s] = 0.0
    for idx in range(size):
        out[so + proj[idx]] += tmp[idx]
    top = 0.0
    for s in range(ssize):
        top = max(top, out[so + s])
    if not (top > TINY and np.isfinite(top)):
        return np.nan
    for s in range(ssize):
        out[so + s] /= top
    return np.log(top)


@njit(cache=True, nogil=True)
def scaled_marginals(data, jt, assign, feat, i, w, dims, ws, ews):
    """(log Z, ok) of example i; when ok, its clique and separator marginals (probabilities,
    each >= TINY) into bws.marg (region-local)."""
    mws, bws = ws
    log_z, ok = _potentials(data, jt, assign, feat, i, w, dims, ews, bws[0], bws[1], mws[5])
    if not ok:
        return 0.0, False
    return _sum_product(i, bws[1], log_z, jt, dims[1], mws, bws[2], True)


@njit(cache=True, nogil=True)
def _sum_product(i, P, log_z, jt, K, mws, marg, with_marginals):
    """Scaled collect (and distribute when ``with_marginals``) of example i on the scaled
    clique tables P whose log scales sum to log_z; returns (log Z, ok)."""
    ex_cliques, parent, order, child_start, children = jt[0], jt[4], jt[5], jt[6], jt[7]
    tab_off, sep_off, sep_start, sep_child, sep_parent = jt[8], jt[9], jt[10], jt[11], jt[12]
    up, down, tmp, lsum = mws[0], mws[1], mws[2], mws[4]
    c0 = ex_cliques[i]
    for q in range(ex_cliques[i + 1] - 1, c0 - 1, -1):
        c = order[q]
        size, m = gather(c, -1, False, P, jt, K, mws, True)
        acc = 0.0
        for r in range(child_start[c], child_start[c + 1]):
            acc += lsum[children[r] - c0]
        if parent[c] < 0:
            total = 0.0
            for idx in range(size):
                total += tmp[idx]
            if not (total > TINY and np.isfinite(total)):
                return 0.0, False
            log_z += acc + np.log(total)
        else:
            scale = _sum_to(c, jt[13][c], sep_child, size, m, jt, K, mws, up, sep_off[c])
            if not np.isfinite(scale):
                return 0.0, False
            lsum[c - c0] = acc + scale
    for q in range(c0, ex_cliques[i + 1] if with_marginals else c0):
        c = order[q]
        size, m = gather(c, -1, True, P, jt, K, mws, True)
        if not _normalise(tmp, size, marg, tab_off[c]):
            return 0.0, False
        if parent[c] >= 0:
            so, ssize = sep_off[c], K ** (sep_start[c + 1] - sep_start[c])
            for s in range(ssize):
                tmp[s] = up[so + s] * down[so + s]
            if not _normalise(tmp, ssize, marg, so):
                return 0.0, False
        for r in range(child_start[c], child_start[c + 1]):
            ch = children[r]
            size, m = gather(c, ch, True, P, jt, K, mws, True)
            scale = _sum_to(ch, jt[14][ch], sep_parent, size, m, jt, K, mws, down, sep_off[ch])
            if not np.isfinite(scale):
                return 0.0, False
    return log_z, True


@njit(cache=True, nogil=True)
def potential_marginals(i, phi, jt, K, ws, out, with_marginals):
    """log Z of p(y) propto exp(sum_c phi_c[y_c]) for per-clique log potentials phi of example
    i (region-local clique tables, -inf allowed); when ``with_marginals``, the clique and
    separator log-marginals into out (region-local, each <= 0).

    ``ws = (mws, P)``: the message workspace and a region-sized scratch. Scaled space when every
    marginal stays >= TINY, else the exact log-space recursions of kernels.structures.junction.
    """
    mws, P = ws
    ex_cliques, var_start, tab_off = jt[0], jt[2], jt[8]
    log_z, ok = 0.0, True
    for c in range(ex_cliques[i], ex_cliques[i + 1]):
        size, t0 = K ** (var_start[c + 1] - var_start[c]), tab_off[c]
        top = -np.inf
        for idx in range(size):
            top = max(top, phi[t0 + idx])
        if not np.isfinite(top):
            ok = False
            break
        log_z += top
        for idx in range(size):
            P[t0 + idx] = np.exp(phi[t0 + idx] - top)
    if ok:
        log_z, ok = _sum_product(i, P, log_z, jt, K, mws, out, with_marginals)
    R = jt[1][i + 1] - jt[1][i]
    if ok:
        for j in range(R if with_marginals else 0):
            out[j] = min(np.log(out[j]), 0.0)
        return log_z
    log_z = collect(i, phi, jt, K, mws)
    if with_marginals and np.isfinite(log_z):
        distribute(i, phi, jt, K, mws, out)
        for j in range(R):  # rounding can leave a log marginal a hair above 0
            out[j] = min(out[j], 0.0)
    return log_z


@njit(cache=True, nogil=True)
def _normalise(x, size, out, t0):
    """out[t0 + idx] = x[idx] / sum(x); False when an entry falls below TINY."""
    total = 0.0
    for idx in range(size):
        total += x[idx]
    if not (total > 0.0 and np.isfinite(total)):
        return False
    for idx in range(size):
        p = x[idx] / total
        if p < TINY:
            return False
        out[t0 + idx] = p
    return True


@njit(cache=True, nogil=True)
def batch_value_and_expected(data, jt, assign, feat, w, dims, ws, ews, grad):
    """sum_i log Z_i and grad = sum_i E_nu_i F (zeroed here), scaled with the log-space
    fallback per example; returns (sum, index of the first non-finite log Z or -1)."""
    mws, bws = ws
    exp_blocks(w, feat, dims[1], ews)
    grad[:] = 0.0
    total = 0.0
    scratch = (bws[3], bws[4], mws[5])
    for i in range(data[0].size - 1):
        log_z, ok = scaled_marginals(data, jt, assign, feat, i, w, dims, ws, ews)
        if not ok:
            log_z = marginals(data, jt, assign, feat, i, w, dims, ws)
        if not np.isfinite(log_z):
            return total, i
        total += log_z
        add_expected(data, jt, assign, feat, i, bws[2], dims, 1.0, grad, scratch, ok)
    return total, -1
