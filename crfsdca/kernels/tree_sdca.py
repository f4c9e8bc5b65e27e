"""SDCA steps on tree-structured examples (the chain keeps its specialised kernels).

An example's dual block mu_i is its node marginals (n, K) and its edge marginals (n, K, K), row
v the edge parent(v)-v (roots' rows unused), stored as logs in the packed ``log_node`` (N, K)
and ``log_edge`` (N, K, K). The junction-tree entropy weighs edges by +1 and node v by
1 - degree(v). One step on example i (``docs/sdca.md`` sections 3 and 5):

1. nu_i = marginals at w (kernels.tree), g_i = KL~(mu_i || nu_i), delta = nu_i - mu_i;
2. the primal direction B delta (node differences on the example's attributes and bias rows,
   edge differences on the transition block of each edge's type) and
   cb = scale |B delta|^2 / (lambda n);
3. safe Newton on f'(gamma) = sum_c coef_c <delta_c, log nu_c - log mu^gamma_c> - gamma cb;
4. mu_i <- (1 - gamma) mu_i + gamma nu_i in log space, w <- w - gamma scale B delta / (lambda n).

Arrays: ``data``, ``graph`` and ``dims = (A, K, n_bias, n_types)`` as in kernels.tree;
``dual = (log_node, log_edge, entropies, gaps, step_sizes)``; ``params`` a
:class:`TreeStepParams`; the workspace from :func:`make_workspace`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from crfsdca.kernels import trees
from crfsdca.kernels.sdca_epoch import GAP, GAP_IMPORTANCE, MAX, _choose
from crfsdca.kernels.tree import _example, tree_entropy_terms, tree_kl_terms, tree_unary
from crfsdca.kernels.tree_scaled import scaled_marginals, scaled_upward


class TreeStepParams(NamedTuple):
    """Scalars of a tree SDCA run (see ``sdca_epoch.StepParams``)."""

    lam_n: float
    scale: float
    tol: float  # line-search tolerance on |f'|
    max_newton: int
    non_uniformity: float  # probability of drawing from the scheme's law (else uniform)


def make_workspace(max_n: int, K: int, max_attrs: int):
    """Buffers of one step: oracle work arrays, nu's logs, the direction's rows, nu's
    probabilities and the scaled recursions' arrays."""
    oracle = tuple(np.empty((max_n, K)) for _ in range(4)) + (np.empty(K), np.empty((max_n, K)))
    nu = (np.empty((max_n, K)), np.empty((max_n, K, K)), np.empty(max_n))
    direction = (np.empty(max_attrs, np.int64), np.empty((max_attrs, K)), np.empty((3, K)))
    probabilities = (np.empty((max_n, K)), np.empty((max_n, K, K)))
    scaled = tuple(np.empty((max_n, K)) for _ in range(4)) + (np.empty(max_n),)
    return oracle, nu, direction, probabilities, scaled


@njit(cache=True, nogil=True)
def _line(gamma, mu_n, mu_e, nu_n, nu_e, ln_n, ln_e, parents, degrees, cb):
    """(f'(gamma), f''(gamma)) of one block (KL form; see the module docstring)."""
    n, K = mu_n.shape
    d1, d2 = 0.0, 0.0
    for v in range(n):
        c = 1.0 - degrees[v]
        if c != 0.0:
            for k in range(K):
                m, q = mu_n[v, k], nu_n[v, k]
                d = q - m
                if d != 0.0:
                    mix = (1.0 - gamma) * m + gamma * q
                    d1 += c * d * (ln_n[v, k] - np.log(mix))
                    d2 -= c * d * d / mix
        if parents[v] >= 0:
            for j in range(K):
                for k in range(K):
                    m, q = mu_e[v, j, k], nu_e[v, j, k]
                    d = q - m
                    if d != 0.0:
                        mix = (1.0 - gamma) * m + gamma * q
                        d1 += d * (ln_e[v, j, k] - np.log(mix))
                        d2 -= d * d / mix
    return d1 - gamma * cb, d2 - cb


@njit(cache=True, nogil=True)
def _rtsafe(fp0, blk, cb, tol, max_iter):
    """Safe Newton for the root of f' on [0, 1]; returns (gamma, iterations)."""
    mu_n, mu_e, nu_n, nu_e, ln_n, ln_e, parents, degrees = blk
    if fp0 <= 0.0:
        return 0.0, 0
    if cb <= 0.0:
        return 1.0, 0
    x_l, x_h = 1.0, 0.0  # u(x_l) < 0 < u(x_h)
    gamma = 0.5  # f'(0) is infinite where nu has support that mu lacks
    if np.isfinite(fp0):
        gamma = min(max(fp0 / (fp0 + cb), 1e-3), 0.999)  # the secant of f' on [0, 1]
    dx_old = dx = 1.0
    u, du = _line(gamma, mu_n, mu_e, nu_n, nu_e, ln_n, ln_e, parents, degrees, cb)
    for it in range(1, max_iter + 1):
        if ((gamma - x_h) * du - u) * ((gamma - x_l) * du - u) > 0.0 or abs(2 * u) > abs(
            dx_old * du
        ):
            dx_old, dx = dx, 0.5 * (x_h - x_l)
            gamma = x_l + dx
        else:
            dx_old, dx = dx, u / du
            gamma -= dx
        if abs(dx) < tol:
            return gamma, it
        u, du = _line(gamma, mu_n, mu_e, nu_n, nu_e, ln_n, ln_e, parents, degrees, cb)
        if u < 0.0:
            x_l = gamma
        else:
            x_h = gamma
    return gamma, max_iter


@njit(cache=True, nogil=True)
def _direction(data, graph, s, e, nu_n, mu_n, nu_e, mu_e, dims, types, ws):
    """Unique attributes of the example and B delta on them (rows), on the bias rows; returns
    (number of unique attributes, |B delta|^2). Edge differences are read from the blocks."""
    _, attr_offsets, attr_ids, attr_values, _ = data
    parents, _, _, child_start, _ = graph
    ids, rows, bias = ws
    A, K, n_bias, n_types = dims
    uniq = np.unique(attr_ids[attr_offsets[s] : attr_offsets[e]])
    U = uniq.size
    ids[:U] = uniq
    rows[:U] = 0.0
    bias[:] = 0.0
    for v in range(e - s):
        g = s + v
        for q in range(attr_offsets[g], attr_offsets[g + 1]):
            r = np.searchsorted(uniq, attr_ids[q])
            x = attr_values[q]
            for k in range(K):
                rows[r, k] += x * (nu_n[v, k] - mu_n[v, k])
        if n_bias:
            for k in range(K):
                d = nu_n[v, k] - mu_n[v, k]
                bias[0, k] += d
                if parents[g] < 0:
                    bias[1, k] += d
                if child_start[g + 1] == child_start[g]:
                    bias[2, k] += d
    sq = 0.0
    for r in range(U):
        for k in range(K):
            sq += rows[r, k] * rows[r, k]
    for r in range(3):
        for k in range(K):
            sq += bias[r, k] * bias[r, k]
    # transitions: per type, the sum of the edges' differences (types repeat within a tree)
    trans = np.zeros((n_types, K, K))
    for v in range(e - s):
        if parents[s + v] >= 0:
            t = types[v]
            for j in range(K):
                for k in range(K):
                    trans[t, j, k] += nu_e[v, j, k] - mu_e[v, j, k]
    for t in range(n_types):
        for j in range(K):
            for k in range(K):
                sq += trans[t, j, k] * trans[t, j, k]
    return U, sq, trans


@njit(cache=True, nogil=True)
def _step(i, data, graph, dual, w, dims, params, ws):
    """One SDCA step on example i; returns (gap before the step, gamma, iterations, status)."""
    seq_offsets = data[0]
    parents, types_all, _, child_start, _ = graph
    log_node, log_edge, entropies, _, step_sizes = dual
    lam_n, scale, tol, max_newton = params.lam_n, params.scale, params.tol, params.max_newton
    oracle_ws, nu_ws, dir_ws = ws[0], ws[1], ws[2]
    ln_n, ln_e, root_z = nu_ws
    A, K, n_bias, n_types = dims
    s, e = seq_offsets[i], seq_offsets[i + 1]
    n = e - s
    par, deg = parents[s:e], _degrees(parents, child_start, s, e)
    nu_n, nu_e = ws[3][0][:n], ws[3][1][:n]
    ok = _scaled_oracle(data, graph, i, w, dims, oracle_ws, ws[4], nu_n, nu_e)
    ln_n, ln_e = ln_n[:n], ln_e[:n]
    if ok:
        for v in range(n):
            for k in range(K):
                ln_n[v, k] = np.log(nu_n[v, k])
            if par[v] >= 0:
                for j in range(K):
                    for k in range(K):
                        ln_e[v, j, k] = np.log(nu_e[v, j, k])
    else:  # an entry underflowed: the exact log-space recursions
        log_z, _, _ = _example(data, graph, i, w, dims, oracle_ws, ln_n, ln_e, root_z)
        if not np.isfinite(log_z):
            return 0.0, 0.0, 0, 1
    for v in range(n):  # clip the oracle's logs at 0; roots' edge rows are unused
        for k in range(K):
            ln_n[v, k] = min(ln_n[v, k], 0.0)
            nu_n[v, k] = np.exp(ln_n[v, k])
        if par[v] >= 0:
            for j in range(K):
                for k in range(K):
                    ln_e[v, j, k] = min(ln_e[v, j, k], 0.0)
                    nu_e[v, j, k] = np.exp(ln_e[v, j, k])
        else:
            ln_e[v] = 0.0
            nu_e[v] = 1.0
    lmu_n, lmu_e = log_node[s:e], log_edge[s:e]
    gap = max(tree_kl_terms(lmu_n, lmu_e, ln_n, ln_e, par, deg), 0.0)
    mu_n, mu_e = np.exp(lmu_n), np.exp(lmu_e)
    types = types_all[s:e]
    U, sq, trans = _direction(data, graph, s, e, nu_n, mu_n, nu_e, mu_e, dims, types, dir_ws)
    fp0 = tree_kl_terms(lmu_n, lmu_e, ln_n, ln_e, par, deg) + tree_kl_terms(
        ln_n, ln_e, lmu_n, lmu_e, par, deg
    )
    cb = scale * sq / lam_n
    blk = (mu_n, mu_e, nu_n, nu_e, ln_n, ln_e, par, deg)
    gamma, its = _rtsafe(fp0, blk, cb, tol, max_newton)
    if gamma > 0.0:
        a, c = np.log1p(-gamma) if gamma < 1.0 else -np.inf, np.log(gamma)
        for v in range(n):
            for k in range(K):
                lmu_n[v, k] = min(_logaddexp(a + lmu_n[v, k], c + ln_n[v, k]), 0.0)
            if par[v] >= 0:
                for j in range(K):
                    for k in range(K):
                        lmu_e[v, j, k] = min(_logaddexp(a + lmu_e[v, j, k], c + ln_e[v, j, k]), 0.0)
        entropies[i] = tree_entropy_terms(lmu_n, lmu_e, par, deg)
        _add_direction(-gamma * scale / lam_n, U, dir_ws, trans, w, dims)
    step_sizes[i] = gamma
    return gap, gamma, its, 0


@njit(cache=True, nogil=True)
def _scaled_oracle(data, graph, i, w, dims, oracle_ws, sws, nu_n, nu_e):
    """nu_i's probabilities by the scaled recursions; False when they underflow."""
    seq_offsets = data[0]
    parents, types, order, _, _ = graph
    A, K, n_bias, n_types = dims
    s, e = seq_offsets[i], seq_offsets[i + 1]
    unary = oracle_ws[5]
    tree_unary(data, graph, s, e, w, dims, unary)
    off = (A + n_bias) * K
    log_pair = w[off : off + n_types * K * K].reshape(n_types, K, K)
    pair_max = np.empty(n_types)
    exp_pair = np.empty((n_types, K, K))
    for t in range(n_types):
        pair_max[t] = log_pair[t].max()
        for j in range(K):
            for k in range(K):
                exp_pair[t, j, k] = np.exp(log_pair[t, j, k] - pair_max[t])
    args = (parents[s:e], types[s:e], order[s:e])
    _, ok = scaled_upward(unary[: e - s], exp_pair, pair_max, *args, sws)
    if not ok:
        return False
    return scaled_marginals(exp_pair, *args, sws, nu_n, nu_e)


@njit(cache=True, nogil=True)
def _logaddexp(a, b):
    if a == -np.inf:
        return b
    if b == -np.inf:
        return a
    m = max(a, b)
    return m + np.log1p(np.exp(-abs(a - b)))


@njit(cache=True, nogil=True)
def _degrees(parents, child_start, s, e):
    deg = np.empty(e - s, np.int64)
    for v in range(e - s):
        g = s + v
        deg[v] = child_start[g + 1] - child_start[g] + (1 if parents[g] >= 0 else 0)
    return deg


@njit(cache=True, nogil=True)
def _add_direction(coef, U, dir_ws, trans, w, dims):
    """w += coef * B delta (rows of the example's attributes, bias rows, transition blocks)."""
    ids, rows, bias = dir_ws
    A, K, n_bias, n_types = dims
    for r in range(U):
        base = ids[r] * K
        for k in range(K):
            w[base + k] += coef * rows[r, k]
    if n_bias:
        for r in range(3):
            for k in range(K):
                w[A * K + r * K + k] += coef * bias[r, k]
    off = (A + n_bias) * K
    for t in range(n_types):
        for j in range(K):
            for k in range(K):
                w[off + t * K * K + j * K + k] += coef * trans[t, j, k]


@njit(cache=True, nogil=True)
def run_steps(data, graph, dual, w, sampler, dims, params, draws, ws):
    """Run draws.shape[0] steps; returns (steps done, status, newton iterations).

    status 0 = ok, i + 1 = non-finite log partition on example i. ``sampler = (code, tree,
    multipliers)`` as for chains (the scheme's law with probability params.non_uniformity, else
    uniform).
    """
    code, tree, mult = sampler
    gaps = dual[3]
    n = gaps.shape[0]
    newton = 0
    for step in range(draws.shape[0]):
        i = _choose(code, params.non_uniformity, tree, draws[step, 0], draws[step, 1], n)
        g, _, its, status = _step(i, data, graph, dual, w, dims, params, ws)
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
def expected_features(data, graph, log_node, log_edge, dims, out):
    """out += sum_i E_mu_i F(x_i, .) for marginals stored like the dual state."""
    seq_offsets, attr_offsets, attr_ids, attr_values, _ = data
    parents, types, _, child_start, _ = graph
    A, K, n_bias, _ = dims
    off = (A + n_bias) * K
    for g in range(seq_offsets[-1]):
        for k in range(K):
            m = np.exp(log_node[g, k])
            for q in range(attr_offsets[g], attr_offsets[g + 1]):
                out[attr_ids[q] * K + k] += attr_values[q] * m
            if n_bias:
                out[A * K + k] += m
                if parents[g] < 0:
                    out[A * K + K + k] += m
                if child_start[g + 1] == child_start[g]:
                    out[A * K + 2 * K + k] += m
        if parents[g] >= 0:
            t0 = off + types[g] * K * K
            for j in range(K):
                for k in range(K):
                    out[t0 + j * K + k] += np.exp(log_edge[g, j, k])


@njit(cache=True, nogil=True)
def all_entropies(seq_offsets, graph, log_node, log_edge):
    """H~(mu_i) of every example."""
    parents, _, _, child_start, _ = graph
    out = np.empty(seq_offsets.size - 1)
    for i in range(out.size):
        s, e = seq_offsets[i], seq_offsets[i + 1]
        deg = _degrees(parents, child_start, s, e)
        out[i] = tree_entropy_terms(log_node[s:e], log_edge[s:e], parents[s:e], deg)
    return out


@njit(cache=True, nogil=True)
def exact_gaps(data, graph, log_node, log_edge, w, dims, ws):
    """g_i = KL~(mu_i || nu_i(w)) of every example (n oracle calls); nan if non-finite."""
    seq_offsets = data[0]
    parents, _, _, child_start, _ = graph
    oracle_ws, nu_ws = ws[0], ws[1]
    ln_n, ln_e, root_z = nu_ws
    out = np.empty(seq_offsets.size - 1)
    for i in range(out.size):
        s, e = seq_offsets[i], seq_offsets[i + 1]
        log_z, _, _ = _example(data, graph, i, w, dims, oracle_ws, ln_n, ln_e, root_z)
        if not np.isfinite(log_z):
            out[i] = np.nan
            continue
        deg = _degrees(parents, child_start, s, e)
        kl = tree_kl_terms(log_node[s:e], log_edge[s:e], ln_n[: e - s], ln_e[: e - s],
                           parents[s:e], deg)  # fmt: skip
        out[i] = max(kl, 0.0)
    return out
