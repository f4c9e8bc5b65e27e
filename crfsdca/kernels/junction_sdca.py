"""SDCA steps on junction-tree examples, through the segment table.

An example's dual block mu_i is its region of the flat table array ``log_tab`` (clique tables,
then separator tables, as logs; see kernels.junction); its segment table (clique run +1,
separator run -1) is all that the gap, entropy, line search and update read
(:mod:`crfsdca.kernels.segments`). One step on example i (``docs/sdca.md`` sections 3 and 5):

1. nu_i = clique and separator marginals at w, g_i = KL~(mu_i || nu_i), delta = nu_i - mu_i;
2. the primal direction B delta (node differences, projected from the clique tables, on the
   example's attributes and bias rows; clique differences projected onto each factor's scope
   on the factor blocks) and cb = scale |B delta|^2 / (lambda n);
3. safe Newton on f'(gamma) over the segment table;
4. mu_i <- (1 - gamma) mu_i + gamma nu_i in log space, w <- w - gamma scale B delta / (lambda n).

Arrays: ``data`` and ``dims = (A, K, n_bias)`` as in kernels.junction_batch;
``struct = (jt, assign, feat, runs)`` with ``runs = (seg_start, seg_off, seg_len, seg_coef)``
(the runs of example i are seg_start[i] to seg_start[i + 1], offsets local to its region);
``dual = (log_tab, entropies, gaps, step_sizes)`` (log_tab float64 or float32);
``params`` a ``kernels.tree_sdca.TreeStepParams``; the workspace ``ws = (mws,
bws, sws, ews)``: the oracle's three (kernels.junction_scaled) and ``sws = (mu, nu, ids, rows,
bias, fdiff, pk)``. nu_i comes from the scaled recursions, from the log-space ones when an entry
underflows.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from crfsdca.kernels import segments, trees
from crfsdca.kernels.junction import projection
from crfsdca.kernels.junction_batch import marginals
from crfsdca.kernels.junction_scaled import exp_blocks, scaled_marginals
from crfsdca.kernels.sdca_epoch import GAP, GAP_IMPORTANCE, MAX, _choose


def make_step_workspace(region: int, K: int, max_attrs: int, n_factor_weights: int):
    """sws: mu and nu probabilities of a region, the direction's rows, bias, factor blocks."""
    return (
        np.empty(region), np.empty(region), np.empty(max_attrs, np.int64),
        np.empty((max_attrs, K)), np.empty((3, K)), np.empty(n_factor_weights), np.empty(K),
    )  # fmt: skip


@njit(cache=True, nogil=True)
def _runs(runs, i):
    seg_start, seg_off, seg_len, seg_coef = runs
    a, b = seg_start[i], seg_start[i + 1]
    return seg_off[a:b], seg_len[a:b], seg_coef[a:b]


@njit(cache=True, nogil=True)
def _direction(i, data, jt, assign, feat, dims, mu, nu, sws, pidx):
    """B delta on the example's unique attributes (rows), the bias rows and the factor blocks
    (fdiff, from feat's first offset); returns (number of unique attributes, |B delta|^2)."""
    seq_offsets, attr_offsets, attr_ids, attr_values, _ = data
    ex_cliques, var_start, tab_off = jt[0], jt[2], jt[8]
    node_start, node_ids, node_pos, fac_start, fac_type, fac_pos_start, fac_pos = assign[:7]
    woff = feat[0]
    _, _, ids, rows, bias, fdiff, pk = sws
    A, K, n_bias = dims
    s, e = seq_offsets[i], seq_offsets[i + 1]
    uniq = np.unique(attr_ids[attr_offsets[s] : attr_offsets[e]])
    U = uniq.size
    ids[:U] = uniq
    rows[:U] = 0.0
    bias[:] = 0.0
    fdiff[:] = 0.0
    for c in range(ex_cliques[i], ex_cliques[i + 1]):
        m = var_start[c + 1] - var_start[c]
        size = K**m
        t0 = tab_off[c]
        for r in range(node_start[c], node_start[c + 1]):
            v = node_ids[r]
            proj = projection(assign[7][r], m, K, node_pos, r, r + 1, pidx, jt)
            pk[:] = 0.0
            for idx in range(size):
                pk[proj[idx]] += nu[t0 + idx] - mu[t0 + idx]
            g = s + v
            for q in range(attr_offsets[g], attr_offsets[g + 1]):
                row, x = np.searchsorted(uniq, attr_ids[q]), attr_values[q]
                for k in range(K):
                    rows[row, k] += x * pk[k]
            if n_bias:
                for k in range(K):
                    bias[0, k] += pk[k]
                    if v == 0:
                        bias[1, k] += pk[k]
                    if v == e - s - 1:
                        bias[2, k] += pk[k]
        for f in range(fac_start[c], fac_start[c + 1]):
            base = woff[fac_type[f]] - woff[0]
            lo, hi = fac_pos_start[f], fac_pos_start[f + 1]
            proj = projection(assign[8][f], m, K, fac_pos, lo, hi, pidx, jt)
            for idx in range(size):
                fdiff[base + proj[idx]] += nu[t0 + idx] - mu[t0 + idx]
    return U, _norm_sq(U, rows, bias, fdiff)


@njit(cache=True, nogil=True)
def _norm_sq(U, rows, bias, fdiff):
    """|B delta|^2: the first U rows, the bias rows and the factor blocks."""
    sq = 0.0
    for r in range(U):
        for k in range(rows.shape[1]):
            sq += rows[r, k] * rows[r, k]
    for r in range(3):
        for k in range(bias.shape[1]):
            sq += bias[r, k] * bias[r, k]
    for j in range(fdiff.size):
        sq += fdiff[j] * fdiff[j]
    return sq


@njit(cache=True, nogil=True)
def _add_direction(coef, U, sws, w, dims, fbase):
    """w += coef * B delta (rows of the example's attributes, bias rows, factor blocks)."""
    _, _, ids, rows, bias, fdiff, _ = sws
    A, K, n_bias = dims
    for r in range(U):
        base = ids[r] * K
        for k in range(K):
            w[base + k] += coef * rows[r, k]
    if n_bias:
        for r in range(3):
            for k in range(K):
                w[A * K + r * K + k] += coef * bias[r, k]
    for j in range(fdiff.size):
        w[fbase + j] += coef * fdiff[j]


@njit(cache=True, nogil=True)
def _step(i, data, struct, dual, w, dims, params, ws):
    """One SDCA step on example i; returns (gap before the step, gamma, iterations, status)."""
    jt, assign, feat, runs = struct
    log_tab, entropies, _, step_sizes = dual
    lam_n, scale, tol, max_newton = params.lam_n, params.scale, params.tol, params.max_newton
    mws, bws, sws, ews = ws
    lo, hi = jt[1][i], jt[1][i + 1]
    R = hi - lo
    lnu, lmu = bws[2][:R], log_tab[lo:hi]
    mu, nu = sws[0][:R], sws[1][:R]
    exp_blocks(w, feat, dims[1], ews)
    _, ok = scaled_marginals(data, jt, assign, feat, i, w, dims, (mws, bws), ews)
    if ok:  # probabilities, each >= TINY
        for j in range(R):
            nu[j] = min(lnu[j], 1.0)
            lnu[j] = np.log(nu[j])
    else:  # an entry underflowed: the exact log-space recursions
        log_z = marginals(data, jt, assign, feat, i, w, dims, (mws, bws))
        if not np.isfinite(log_z):
            return 0.0, 0.0, 0, 1
        for j in range(R):
            lnu[j] = min(lnu[j], 0.0)
            nu[j] = np.exp(lnu[j])
    for j in range(R):
        mu[j] = np.exp(np.float64(lmu[j]))
    rr = _runs(runs, i)
    kl_mn, fp0 = segments.kl_pair(mu, nu, lmu, lnu, rr)
    U, sq = _direction(i, data, jt, assign, feat, dims, mu, nu, sws, mws[5])
    cb = scale * sq / lam_n
    gamma, its = segments.newton(fp0, mu, nu, lnu, rr, cb, tol, max_newton)
    if gamma > 0.0:
        entropies[i] = segments.mix(mu, nu, lmu, lnu, rr, gamma)
        _add_direction(-gamma * scale / lam_n, U, sws, w, dims, feat[0][0])
    step_sizes[i] = gamma
    return max(kl_mn, 0.0), gamma, its, 0


@njit(cache=True, nogil=True)
def run_steps(data, struct, dual, w, sampler, dims, params, draws, ws):
    """Run draws.shape[0] steps; returns (steps done, status, newton iterations).

    status 0 = ok, i + 1 = non-finite log partition on example i. ``sampler = (code, tree,
    multipliers)`` as for chains (the scheme's law with probability params.non_uniformity,
    else uniform).
    """
    code, tree, mult = sampler
    gaps = dual[2]
    n = gaps.shape[0]
    newton = 0
    for step in range(draws.shape[0]):
        i = _choose(code, params.non_uniformity, tree, draws[step, 0], draws[step, 1], n)
        g, _, its, status = _step(i, data, struct, dual, w, dims, params, ws)
        if status:
            return step, i + 1, newton
        newton += its
        gaps[i] = g
        if code in (GAP, MAX):
            trees.update(tree, i, g, code == MAX)
        elif code == GAP_IMPORTANCE:
            trees.update(tree, i, g * mult[i], False)
    return draws.shape[0], 0, newton


@njit(cache=True, nogil=True)
def all_entropies(struct, log_tab):
    """H~(mu_i) of every example (segment table)."""
    ex_region, runs = struct[0][1], struct[3]
    out = np.empty(ex_region.size - 1)
    for i in range(out.size):
        out[i] = segments.entropy(log_tab[ex_region[i] : ex_region[i + 1]], _runs(runs, i))
    return out


@njit(cache=True, nogil=True)
def exact_gaps(data, struct, log_tab, w, dims, ws):
    """g_i = KL~(mu_i || nu_i(w)) of every example (n oracle calls); nan if non-finite."""
    jt, assign, feat, runs = struct
    mws, bws = ws[0], ws[1]
    ex_region = jt[1]
    out = np.empty(ex_region.size - 1)
    for i in range(out.size):
        lo, hi = ex_region[i], ex_region[i + 1]
        log_z = marginals(data, jt, assign, feat, i, w, dims, (mws, bws))
        if not np.isfinite(log_z):
            out[i] = np.nan
            continue
        out[i] = max(segments.kl(log_tab[lo:hi], bws[2][: hi - lo], _runs(runs, i)), 0.0)
    return out
