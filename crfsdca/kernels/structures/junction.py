"""Sum-product and max-product on junction trees, in log space, driven by a clique order.

Packed structure ``jt`` (all int64, :class:`crfsdca.structures.junction.JunctionData` builds it):

- ``ex_cliques`` (n + 1,): the cliques of example i are ``ex_cliques[i]`` to ``ex_cliques[i+1]``;
- ``ex_region`` (n + 1,): example i's tables are entries ``ex_region[i]`` to ``ex_region[i+1]`` of
  the flat table arrays (the dual state, the marginals): first its clique tables, then the
  separator tables of its non-root cliques;
- ``var_start`` (C + 1,), ``vars``: the nodes of each clique (indices local to the example);
- ``parent`` (C,), ``order`` (C,), ``child_start`` (C + 1,), ``children``: the clique tree with
  global clique ids (-1 for a root); ``order`` lists each example's cliques parents first;
- ``tab_off``, ``sep_off`` (C,): offsets of a clique's table and of its separator table, local to
  the example's region (``sep_off`` of a root is unused);
- ``sep_start`` (C + 1,), ``sep_child``, ``sep_parent``: the separator c ∩ parent(c) as positions
  in c and in parent(c);
- ``sep_pat_child``, ``sep_pat_parent`` (C,), ``pat_off`` (P + 1,), ``pat_data``: the projection
  pattern of each separator on c's and on the parent's table, and the cached projection arrays
  (:func:`projection`; -1: not cached, computed per table).

A clique of m nodes has a table of K^m entries; entry ``idx`` gives node at position p the label
``(idx // K^(m-1-p)) % K``. Projections onto separators and factor scopes are this digit
arithmetic, so no per-entry index arrays are stored.

Collect (children before parents): b_c = phi_c + sum of the children's messages, the message
up_c[s] = logsumexp of b_c over the entries projecting to s. Distribute (parents first):
down_c[s] = logsumexp over parent entries of (phi_p + down_p + the other children's messages),
summed, never subtracted, so -inf scores stay exact. The clique log-marginal is
phi_c + down_c + sum of the children's messages - log Z_r (Z_r of c's tree), the separator's
up_c + down_c - log Z_r. Workspace ``ws = (up, down, tmp, acc, cz, pidx)``: two region-sized,
two table-sized float64 arrays, one (max cliques,) float64 and one table-sized int64 (the
projection of the current table onto one separator or scope, :func:`fill_projection`).
Kernels neither raise nor print.
"""

from __future__ import annotations

import numpy as np

from crfsdca.kernels.jit import njit
from crfsdca.kernels.numerics.logspace import logsumexp


@njit(cache=True, nogil=True)
def _strides(m, K, out):
    """out[p] = K^(m-1-p): the weight of position p's label in a table of m nodes."""
    s = 1
    for p in range(m - 1, -1, -1):
        out[p] = s
        s *= K
    return s


@njit(cache=True, nogil=True)
def project(idx, strides, K, pos, lo, hi):
    """Index in the table of the nodes at positions pos[lo:hi] of entry idx's labels."""
    s = 0
    for q in range(lo, hi):
        s = s * K + (idx // strides[pos[q]]) % K
    return s


@njit(cache=True, nogil=True)
def fill_projection(m, K, pos, lo, hi, out):
    """out[idx] = project(idx, ...) for every entry of a table of m nodes, by an odometer over
    the labels of the first m - 1 nodes and a plain loop over the last (no division per
    entry); returns K^m."""
    coef = np.zeros(4, np.int64)
    step = 1
    for q in range(hi - 1, lo - 1, -1):
        coef[pos[q]] = step
        step *= K
    last = coef[m - 1]
    digits = np.zeros(4, np.int64)
    s = 0
    idx = 0
    for _ in range(K ** (m - 1)):
        for k in range(K):
            out[idx + k] = s + k * last
        idx += K
        p = m - 2
        while p >= 0 and digits[p] == K - 1:
            digits[p] = 0
            s -= (K - 1) * coef[p]
            p -= 1
        if p >= 0:
            digits[p] += 1
            s += coef[p]
    return idx


@njit(cache=True, nogil=True)
def projection(pat, m, K, pos, lo, hi, pidx, jt):
    """The projection array (entry -> index in the table of the nodes at positions pos[lo:hi])
    of a table of m nodes: pattern ``pat`` of the cache ``(jt[15], jt[16])``, or filled into
    pidx when pat < 0 (a pattern over the cache's budget)."""
    if pat >= 0:
        return jt[16][jt[15][pat] : jt[15][pat + 1]]
    fill_projection(m, K, pos, lo, hi, pidx)
    return pidx


@njit(cache=True, nogil=True)
def combine(dst, d0, size, src, s0, proj, product):
    """dst[d0 + idx] += src[s0 + proj[idx]] for idx < size (log space), or *= with
    ``product`` (scaled space)."""
    if product:
        for idx in range(size):
            dst[d0 + idx] *= src[s0 + proj[idx]]
    else:
        for idx in range(size):
            dst[d0 + idx] += src[s0 + proj[idx]]


@njit(cache=True, nogil=True)
def gather(c, skip, with_down, table, jt, K, ws, product):
    """tmp[:size] = table_c (+ down_c) + the messages of c's children except ``skip``, in log
    space; with ``product`` the same in scaled space, with products. Returns (size, m)."""
    var_start, parent, child_start, children = jt[2], jt[4], jt[6], jt[7]
    tab_off, sep_off, sep_start, sep_child, sep_parent = jt[8], jt[9], jt[10], jt[11], jt[12]
    up, down, tmp, pidx = ws[0], ws[1], ws[2], ws[5]
    m = var_start[c + 1] - var_start[c]
    size, t0 = K**m, tab_off[c]
    for idx in range(size):
        tmp[idx] = table[t0 + idx]
    if with_down and parent[c] >= 0:
        proj = projection(jt[13][c], m, K, sep_child, sep_start[c], sep_start[c + 1], pidx, jt)
        combine(tmp, 0, size, down, sep_off[c], proj, product)
    for q in range(child_start[c], child_start[c + 1]):
        ch = children[q]
        if ch != skip:
            lo, hi = sep_start[ch], sep_start[ch + 1]
            proj = projection(jt[14][ch], m, K, sep_parent, lo, hi, pidx, jt)
            combine(tmp, 0, size, up, sep_off[ch], proj, product)
    return size, m


@njit(cache=True, nogil=True)
def _marginalize(tmp, size, pidx, ssize, out, so, acc, use_max, arg):
    """out[so + s] = logsumexp (or max, argmax into arg[so + s]) of tmp over the entries idx
    with pidx[idx] = s."""
    for s in range(ssize):
        out[so + s] = -np.inf
        acc[s] = 0.0
        if use_max:
            arg[so + s] = -1
    for idx in range(size):
        s = pidx[idx]
        if tmp[idx] > out[so + s] or (use_max and arg[so + s] < 0):
            out[so + s] = tmp[idx]
            if use_max:
                arg[so + s] = idx
    if use_max:
        return
    for idx in range(size):
        s = pidx[idx]
        m = out[so + s]
        if np.isfinite(m):
            acc[s] += np.exp(tmp[idx] - m)
    for s in range(ssize):
        if np.isfinite(out[so + s]):
            out[so + s] += np.log(acc[s])


@njit(cache=True, nogil=True)
def _message(c, pat, pos, tmp, size, m, jt, K, ws, out, so, use_max, arg):
    """Marginalize tmp (a table of m nodes) onto c's separator at positions pos[...] of it
    (projection pattern pat)."""
    sep_start, pidx, acc = jt[10], ws[5], ws[3]
    lo, hi = sep_start[c], sep_start[c + 1]
    proj = projection(pat, m, K, pos, lo, hi, pidx, jt)
    _marginalize(tmp, size, proj, K ** (hi - lo), out, so, acc, use_max, arg)


@njit(cache=True, nogil=True)
def collect(i, phi, jt, K, ws):
    """Upward messages of example i (children before parents); returns log Z (over roots)."""
    ex_cliques, parent, order, sep_off, sep_child = jt[0], jt[4], jt[5], jt[9], jt[11]
    up, tmp, acc = ws[0], ws[2], ws[3]
    log_z = 0.0
    for q in range(ex_cliques[i + 1] - 1, ex_cliques[i] - 1, -1):
        c = order[q]
        size, m = gather(c, -1, False, phi, jt, K, ws, False)
        if parent[c] < 0:
            log_z += logsumexp(tmp[:size])
        else:
            _message(c, jt[13][c], sep_child, tmp, size, m, jt, K, ws, up, sep_off[c], False, acc)
    return log_z


@njit(cache=True, nogil=True)
def distribute(i, phi, jt, K, ws, out):
    """Downward messages of example i after :func:`collect`; log-marginals of its cliques and
    separators into out (region-local, like phi)."""
    ex_cliques, parent, order, child_start, children = jt[0], jt[4], jt[5], jt[6], jt[7]
    tab_off, sep_off, sep_start, sep_parent = jt[8], jt[9], jt[10], jt[12]
    up, down, tmp, acc, cz = ws[0], ws[1], ws[2], ws[3], ws[4]
    c0 = ex_cliques[i]
    for q in range(c0, ex_cliques[i + 1]):
        c = order[q]
        size, m = gather(c, -1, True, phi, jt, K, ws, False)
        if parent[c] < 0:
            cz[c - c0] = logsumexp(tmp[:size])
        else:
            cz[c - c0] = cz[parent[c] - c0]
        z = cz[c - c0]
        t0 = tab_off[c]
        for idx in range(size):
            out[t0 + idx] = tmp[idx] - z
        if parent[c] >= 0:
            so = sep_off[c]
            for s in range(K ** (sep_start[c + 1] - sep_start[c])):
                out[so + s] = up[so + s] + down[so + s] - z
        for r in range(child_start[c], child_start[c + 1]):
            ch = children[r]
            size, m = gather(c, ch, True, phi, jt, K, ws, False)
            pat = jt[14][ch]
            _message(ch, pat, sep_parent, tmp, size, m, jt, K, ws, down, sep_off[ch], False, acc)


@njit(cache=True, nogil=True)
def viterbi(i, phi, jt, K, ws, backptr, chosen, out):
    """MAP labels of example i into out (its nodes, local); returns the best total score.

    Max-messages upward with the best clique entry behind each separator entry (backptr,
    region-local), then each clique's entry is read from its parent's, roots first."""
    ex_cliques, var_start, vars_, parent, order = jt[0], jt[2], jt[3], jt[4], jt[5]
    sep_off, sep_start, sep_child, sep_parent = jt[9], jt[10], jt[11], jt[12]
    up, tmp = ws[0], ws[2]
    c0 = ex_cliques[i]
    total = 0.0
    for q in range(ex_cliques[i + 1] - 1, c0 - 1, -1):
        c = order[q]
        size, m = gather(c, -1, False, phi, jt, K, ws, False)
        if parent[c] < 0:
            best = 0
            for idx in range(1, size):
                if tmp[idx] > tmp[best]:
                    best = idx
            chosen[c - c0] = best
            total += tmp[best]
        else:
            pat = jt[13][c]
            _message(c, pat, sep_child, tmp, size, m, jt, K, ws, up, sep_off[c], True, backptr)
    strides = np.empty(4, np.int64)
    for q in range(c0, ex_cliques[i + 1]):
        c = order[q]
        p = parent[c]
        if p >= 0:
            _strides(var_start[p + 1] - var_start[p], K, strides)
            s = project(chosen[p - c0], strides, K, sep_parent, sep_start[c], sep_start[c + 1])
            chosen[c - c0] = backptr[sep_off[c] + s]
        m = var_start[c + 1] - var_start[c]
        _strides(m, K, strides)
        for pos in range(m):
            out[vars_[var_start[c] + pos]] = (chosen[c - c0] // strides[pos]) % K
    return total
