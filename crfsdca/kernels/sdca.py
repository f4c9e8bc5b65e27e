"""Kernels of one SDCA block step on a chain (Le Priol et al. 2018, Alg. 2, eqs. 17-20).

A block is sequence i with T tokens. Its dual variable mu_i is stored as log-marginals: edge
cliques (T-1, K, K) and nodes (T, K). On a tree the junction-tree entropy and KL are

    H~(mu) = sum_edges H(mu_e) + sum_nodes (1 - deg v) H(mu_v),

so for a chain the node coefficient is 1 for T = 1, 0 at the two ends and -1 inside
(``node_coefficient``). All sums below run over edge entries with coefficient +1 and node entries
with their coefficient, in probability space where no cancellation can occur (mu, nu >= 0, and
mu^gamma = (1 - gamma) mu + gamma nu is a sum of non-negative terms), with logs kept where
precision near the simplex border matters.

Line search (eq. 20, KL form): with c = lambda n / scale,

    f'(g)  = sum coef * delta * (log nu - log mu^g) - c g b
    f''(g) = -sum coef * delta^2 / mu^g - c b
    f'(0)  = symmetrised block KL >= 0,   f'(1) = -c b <= 0,

solved by safe bounded Newton (Numerical Recipes, rtsafe) on [0, 1].
"""

import numpy as np
from numba import njit

TINY = 1e-280  # below this, mix in log space to keep relative precision


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


@njit(cache=True, nogil=True)
def _block_entry(lm, ln, coef, acc):
    """Accumulate one entry into acc = [kl, f'(0)]; returns (mu, nu) in probability space."""
    m = np.exp(lm)
    v = np.exp(ln)
    if m > 0.0:
        acc[0] += coef * m * (lm - ln)
    d = v - m
    if d != 0.0:
        acc[1] += coef * d * (ln - lm)
    return m, v


@njit(cache=True, nogil=True)
def block_gap(log_mu_node, log_mu_edge, log_nu_node, log_nu_edge, flat, acc):
    """Exponentiate a block and return its gap KL~(mu || nu) and f'(0).

    log_mu_node, log_nu_node (T, K); log_mu_edge, log_nu_edge (T-1, K, K) f8.
    flat = (mu, nu, log_nu): caller-owned flat buffers of length >= (T-1) K^2 + T K, filled
    edges first, then nodes. acc: (2,) f8 scratch.
    Returns (gap, fprime0).
    """
    mu, nu, log_nu = flat
    T, K = log_mu_node.shape
    acc[:] = 0.0
    p = 0
    for t in range(T - 1):
        for k in range(K):
            for l in range(K):
                ln = log_nu_edge[t, k, l]
                mu[p], nu[p] = _block_entry(log_mu_edge[t, k, l], ln, 1.0, acc)
                log_nu[p] = ln
                p += 1
    for t in range(T):
        coef = node_coefficient(t, T)
        for k in range(K):
            ln = log_nu_node[t, k]
            if coef != 0.0:
                mu[p], nu[p] = _block_entry(log_mu_node[t, k], ln, coef, acc)
            else:
                mu[p] = np.exp(log_mu_node[t, k])
                nu[p] = np.exp(ln)
            log_nu[p] = ln
            p += 1
    return max(acc[0], 0.0), acc[1]


@njit(cache=True, nogil=True)
def entry_coefficients(T, K, coef):
    """Fill coef (flat, edges then nodes) with the junction-tree coefficients; returns length."""
    p = 0
    for _ in range((T - 1) * K * K):
        coef[p] = 1.0
        p += 1
    for t in range(T):
        c = node_coefficient(t, T)
        for _ in range(K):
            coef[p] = c
            p += 1
    return p


@njit(cache=True, nogil=True)
def line_derivatives(gamma, bufs, size, cb):
    """f'(gamma) and f''(gamma) of eq. 20 (KL form); cb = c * b = lambda n b / scale.

    bufs = (mu, nu, log_nu, coef, log_mix): flat (edges then nodes) arrays, first ``size``
    entries used. Writes log_mix[p] = log mu^gamma_p wherever coef != 0 and delta_p != 0, so
    that the update at this gamma needs no further log.
    """
    mu, nu, log_nu, coef, log_mix = bufs
    d1 = 0.0
    d2 = 0.0
    one_minus = 1.0 - gamma
    for p in range(size):
        c = coef[p]
        d = nu[p] - mu[p]
        if c == 0.0 or d == 0.0:
            continue
        mg = one_minus * mu[p] + gamma * nu[p]
        lg = np.log(mg)
        log_mix[p] = lg
        d1 += c * d * (log_nu[p] - lg)
        d2 += c * d * d / mg
    return d1 - gamma * cb, -d2 - cb


@njit(cache=True, nogil=True)
def rtsafe(bufs, size, cb, fprime0, gamma0, tol, max_iter):
    """Safe bounded Newton on f' over [0, 1] from gamma0 (Numerical Recipes' rtsafe).

    Returns (gamma, n_evaluations, status, evaluated): status 0 = converged (the last step was
    below tol), 1 = max_iter reached; evaluated = True when gamma is the last point where
    ``line_derivatives`` ran, so that bufs' log_mix holds log mu^gamma.
    """
    if not fprime0 > 0.0:
        return 0.0, 0, 0, False
    if cb <= 0.0:
        return 1.0, 0, 0, False
    x_l, x_h = 1.0, 0.0  # f'(x_l) < 0 < f'(x_h)
    gamma = min(max(gamma0, 1e-6), 1.0 - 1e-6)
    dx_old = 1.0
    dx = 1.0
    u, du = line_derivatives(gamma, bufs, size, cb)
    for it in range(1, max_iter + 1):
        if u < 0.0:
            x_l = gamma
        else:
            x_h = gamma
        newton_leaves = ((gamma - x_h) * du - u) * ((gamma - x_l) * du - u) > 0.0
        bisect = newton_leaves or abs(2.0 * u) > abs(dx_old * du)
        dx_old = dx
        if bisect:
            dx = 0.5 * (x_h - x_l)
            step = x_l + dx
        else:
            dx = u / du
            step = gamma - dx
        # gamma is within |dx| of the root after a Newton step, within 2|dx| after a bisection
        if abs(dx) < (0.5 * tol if bisect else tol):
            return gamma, it, 0, True  # its logs are in bufs
        gamma = step
        u, du = line_derivatives(gamma, bufs, size, cb)
    return gamma, max_iter, 1, True


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


@njit(cache=True, nogil=True)
def _mixed(gamma, p, bufs, lm, lv, have_logs):
    """(log mg, mg) of entry p, reusing the line search's log where it is valid."""
    mu, nu, _, coef, log_mix = bufs
    m, v = mu[p], nu[p]
    mg = (1.0 - gamma) * m + gamma * v
    if mg <= TINY or gamma == 1.0 or gamma == 0.0:
        return mix_log(gamma, m, v, lm, lv)
    if m == v:
        return lm, m
    if have_logs and coef[p] != 0.0:
        return min(log_mix[p], 0.0), mg
    return min(np.log(mg), 0.0), mg


@njit(cache=True, nogil=True)
def update_block(gamma, log_mu, log_nu, bufs, have_logs):
    """mu <- (1 - gamma) mu + gamma nu, kept as logs; returns the new entropy H~(mu).

    log_mu = (log_mu_node (T, K), log_mu_edge (T-1, K, K)), log_nu likewise; bufs as in
    ``line_derivatives`` (mu, nu from ``block_gap``; log_mix valid when have_logs).
    """
    log_mu_node, log_mu_edge = log_mu
    log_nu_node, log_nu_edge = log_nu
    T, K = log_mu_node.shape
    entropy = 0.0
    p = 0
    for t in range(T - 1):
        for k in range(K):
            for l in range(K):
                lm, m = _mixed(
                    gamma, p, bufs, log_mu_edge[t, k, l], log_nu_edge[t, k, l], have_logs
                )
                log_mu_edge[t, k, l] = lm
                if m > 0.0:
                    entropy -= m * lm
                p += 1
    for t in range(T):
        coef = node_coefficient(t, T)
        for k in range(K):
            lm, m = _mixed(gamma, p, bufs, log_mu_node[t, k], log_nu_node[t, k], have_logs)
            log_mu_node[t, k] = lm
            if coef != 0.0 and m > 0.0:
                entropy -= coef * m * lm
            p += 1
    return entropy


@njit(cache=True, nogil=True)
def block_entropy(log_mu_node, log_mu_edge):
    """Junction-tree entropy H~(mu) of one block from its log-marginals."""
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


@njit(cache=True, nogil=True)
def primal_direction(seq, delta_src, w, dims, v_emit, v_rest):
    """Sparse primal direction v_i = kappa * E_delta[F(x_i, .)] and (a, b) = (<w, v>, ||v||^2).

    seq = (t0, t1, attr_offsets, attr_ids, attr_values, entry_slot, slot_attrs): tokens
    [t0, t1); entry_slot maps each attribute entry to its row in v_emit; slot_attrs (U,) gives
    the attribute id of each row. delta_src = (mu, nu) flat buffers of ``block_gap``.
    dims = (A, K, n_bias, kappa) with kappa = -scale / (lambda n).
    v_emit (U, K) and v_rest (n_bias + K, K) are caller-owned and overwritten; v_rest holds the
    bias rows then the transition matrix.
    """
    t0, t1, attr_offsets, attr_ids, attr_values, entry_slot, slot_attrs = seq
    mu, nu = delta_src
    A, K, n_bias, kappa = dims
    T = t1 - t0
    U = slot_attrs.shape[0]
    v_emit[:U] = 0.0
    v_rest[:] = 0.0
    node0 = (T - 1) * K * K
    for t in range(T):
        base = node0 + t * K
        for p in range(attr_offsets[t0 + t], attr_offsets[t0 + t + 1]):
            s = entry_slot[p]
            val = attr_values[p]
            for k in range(K):
                v_emit[s, k] += val * (nu[base + k] - mu[base + k])
        if n_bias > 0:
            for k in range(K):
                d = nu[base + k] - mu[base + k]
                v_rest[0, k] += d
                if t == 0:
                    v_rest[1, k] += d
                if t == T - 1:
                    v_rest[2, k] += d
    for q in range(node0):
        kl = q % (K * K)
        v_rest[n_bias + kl // K, kl % K] += nu[q] - mu[q]
    return _scale_and_dot(slot_attrs, w, dims, v_emit, v_rest)


@njit(cache=True, nogil=True)
def _scale_and_dot(slot_attrs, w, dims, v_emit, v_rest):
    """Multiply v by kappa in place; return (<w, v>, ||v||^2) over its support."""
    A, K, n_bias, kappa = dims
    a = 0.0
    b = 0.0
    for s in range(slot_attrs.shape[0]):
        base = slot_attrs[s] * K
        for k in range(K):
            x = kappa * v_emit[s, k]
            v_emit[s, k] = x
            a += w[base + k] * x
            b += x * x
    base = A * K
    for r in range(n_bias + K):
        for k in range(K):
            x = kappa * v_rest[r, k]
            v_rest[r, k] = x
            a += w[base + r * K + k] * x
            b += x * x
    return a, b


@njit(cache=True, nogil=True)
def add_direction(gamma, slot_attrs, v_emit, v_rest, w, K, A):
    """w <- w + gamma v on the support of v (emission rows of slot_attrs, bias, transitions)."""
    for s in range(slot_attrs.shape[0]):
        base = slot_attrs[s] * K
        for k in range(K):
            w[base + k] += gamma * v_emit[s, k]
    base = A * K
    R = v_rest.shape[0]
    for r in range(R):
        for k in range(K):
            w[base + r * K + k] += gamma * v_rest[r, k]
