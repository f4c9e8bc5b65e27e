"""SAG-NUS iterations on junction-tree examples (the chain's are in ``crfsdca.kernels.sag``).

The method, the sampling, the Lipschitz line search and skip rule, the just-in-time updates
w = c z and the row layout are those of ``kernels.sag`` (whose helpers run here unchanged);
only the example's oracle differs. The clique potentials are linear in w, so those of w = c z
are c times those of z (``kernels.junction_batch.potentials``); log Z and the clique marginals
come from ``kernels.junction_scaled.potential_marginals`` (scaled space, log-space fallback),
and each line-search trial is one collect pass of the same kernel on phi(w) - phi(g) / L.

Memory (``baselines.md`` §2): y_i is stored as the node marginals (n_i, K) and the factor sums
(F,) of the last visit: for every factor type t, the marginals of its factors' scopes summed
over the example, laid out like the factor blocks of w (entry woff[t] - woff[0] + j). A
gradient is held compactly as the rows of the example's distinct attributes ``emit`` (U, K)
and the flat ``rest`` (n_bias K + F,): the bias rows (count, first node, last node), then the
factor blocks, which start on row boundaries of w (rows of K entries).

Arrays: ``layout`` = ``layout.sequence_layout`` of the nodes; ``struct = (jt, assign, feat)``
as in kernels.junction_batch; ``dims = (A, K, n_bias, n_factor_rows)`` with n_factor_rows =
F / K; ``memory``, ``samplers``, ``params`` and the returned stats as in ``kernels.sag``,
except memory[2] (factor sums) of shape (n, F).
"""

import numpy as np
from numba import njit

from crfsdca.kernels import sag
from crfsdca.kernels.junction import projection
from crfsdca.kernels.junction_batch import clique_tables, potentials
from crfsdca.kernels.junction_scaled import potential_marginals


@njit(cache=True, nogil=True)
def gold_score(i, s, phi, jt, labels, K):
    """Score of the gold labelling of example i (first node s) under clique tables phi."""
    var_start, vars_, tab_off = jt[2], jt[3], jt[8]
    total = 0.0
    for c in range(jt[0][i], jt[0][i + 1]):
        j = 0
        for q in range(var_start[c], var_start[c + 1]):
            j = j * K + labels[s + vars_[q]]
        total += phi[tab_off[c] + j]
    return total


@njit(cache=True, nogil=True)
def clique_entries(i, jt, K):
    """Entries of example i's clique tables (they come first in its region)."""
    var_start, total = jt[2], 0
    for c in range(jt[0][i], jt[0][i + 1]):
        total += K ** (var_start[c + 1] - var_start[c])
    return total


@njit(cache=True, nogil=True)
def block_stats(i, log_marg, struct, K, node, fsum, prob, pidx):
    """Node marginals node (n, K) and factor sums fsum (F,) of example i from its clique
    log-marginals log_marg (region-local); prob, pidx: table-sized scratch."""
    jt, assign, feat = struct
    var_start, tab_off = jt[2], jt[8]
    node_start, node_ids, node_pos, fac_start, fac_type, fac_pos_start, fac_pos = assign[:7]
    woff = feat[0]
    fsum[:] = 0.0
    for c in range(jt[0][i], jt[0][i + 1]):
        m = var_start[c + 1] - var_start[c]
        size, t0 = K**m, tab_off[c]
        for idx in range(size):
            prob[idx] = np.exp(log_marg[t0 + idx])
        for r in range(node_start[c], node_start[c + 1]):
            v = node_ids[r]
            proj = projection(assign[7][r], m, K, node_pos, r, r + 1, pidx, jt)
            node[v, :] = 0.0
            for idx in range(size):
                node[v, proj[idx]] += prob[idx]
        for f in range(fac_start[c], fac_start[c + 1]):
            base = woff[fac_type[f]] - woff[0]
            lo, hi = fac_pos_start[f], fac_pos_start[f + 1]
            proj = projection(assign[8][f], m, K, fac_pos, lo, hi, pidx, jt)
            for idx in range(size):
                fsum[base + proj[idx]] += prob[idx]


@njit(cache=True, nogil=True)
def add_features(ex, node, fsum, coef, gold_coef, emit, rest):
    """emit, rest += coef E[F(x_i, .)] - gold_coef F(x_i, y_i) on the support of example i.

    ex = (i, s, e, layout, struct); node (n, K) marginals and fsum (F,) factor sums; emit (U, K)
    rows of the distinct attributes (entry_slot order); rest (n_bias K + F,) flat.
    """
    i, s, e, layout, struct = ex
    attr_offsets, attr_values, labels, entry_slot = layout[1], layout[3], layout[4], layout[5]
    K, F = node.shape[1], fsum.shape[0]
    nbk, n = rest.shape[0] - F, e - s
    for v in range(n):
        g = s + v
        y = labels[g]
        for q in range(attr_offsets[g], attr_offsets[g + 1]):
            slot, x = entry_slot[q], attr_values[q]
            for k in range(K):
                emit[slot, k] += coef * x * node[v, k]
            emit[slot, y] -= gold_coef * x
        for k in range(K if nbk else 0):
            mk = coef * node[v, k] - (gold_coef if k == y else 0.0)
            rest[k] += mk
            rest[K + k] += mk if v == 0 else 0.0
            rest[2 * K + k] += mk if v == n - 1 else 0.0
    for j in range(F):
        rest[nbk + j] += coef * fsum[j]
    if gold_coef != 0.0:
        jt, assign, feat = struct[0], struct[1], struct[2]
        var_start, vars_ = jt[2], jt[3]
        fac_start, fac_type, fac_pos_start, fac_pos = assign[3], assign[4], assign[5], assign[6]
        woff = feat[0]
        for c in range(jt[0][i], jt[0][i + 1]):
            for f in range(fac_start[c], fac_start[c + 1]):
                j = 0
                for q in range(fac_pos_start[f], fac_pos_start[f + 1]):
                    j = j * K + labels[s + vars_[var_start[c] + fac_pos[q]]]
                rest[nbk + woff[fac_type[f]] - woff[0] + j] -= gold_coef


@njit(cache=True, nogil=True)
def _direction_scores(ex, emit, rest, nbk, ug):
    """Node scores ug (n, K) of the compact vector (emit, rest) with nbk bias entries."""
    _, s, e, layout, _ = ex
    attr_offsets, attr_values, entry_slot = layout[1], layout[3], layout[5]
    K, n = emit.shape[1], e - s
    for v in range(n):
        for k in range(K):
            u = 0.0
            if nbk:
                u = rest[k] + (rest[K + k] if v == 0 else 0.0)
                u += rest[2 * K + k] if v == n - 1 else 0.0
            ug[v, k] = u
        for q in range(attr_offsets[s + v], attr_offsets[s + v + 1]):
            slot, x = entry_slot[q], attr_values[q]
            for k in range(K):
                ug[v, k] += x * emit[slot, k]


@njit(cache=True, nogil=True)
def _line_search(L, f, gsq, ls, max_doublings):
    """Smallest L 2^j, j = 0..max_doublings, with f(w - g/L) <= f(w) - ||g||^2 / (2L) (§3.3).

    ls = (phi at w, phi of g, trial tables, clique entries, i, s, jt, labels, K, oracle ws,
    marginals scratch). Each trial is one collect pass (one oracle call). Returns (L, trials,
    doublings), doublings = -1 when the cap was reached.
    """
    phi, phi_g, trial, size, i, s, jt, labels, K, ows, marg = ls
    for j in range(max_doublings + 1):
        inv = 1.0 / L
        for t in range(size):
            trial[t] = phi[t] - inv * phi_g[t]
        log_z = potential_marginals(i, trial, jt, K, ows, marg, False)
        if log_z - gold_score(i, s, trial, jt, labels, K) <= f - 0.5 * gsq * inv:
            return L, j + 1, j
        if j < max_doublings:
            L *= 2.0
    return L, max_doublings + 1, -1


@njit(cache=True, nogil=True)
def _gradient(ex, node, fsum, g_emit, g_rest, U):
    """Compact g = E_nu[F] - F(x_i, y_i) into (g_emit, g_rest); returns ||g||^2."""
    g_emit[:U] = 0.0
    g_rest[:] = 0.0
    add_features(ex, node, fsum, 1.0, 1.0, g_emit, g_rest)
    return np.sum(g_emit[:U] ** 2) + np.sum(g_rest**2)


@njit(cache=True, nogil=True)
def _update_memory(i, ex, sa, memory, bufs, A, K):
    """d <- d + g - y_i on the support, then store the new marginals as y_i (§2)."""
    grad_sum, node_mem, fsum_mem, covered = memory[0], memory[1], memory[2], memory[4]
    s, e = ex[1], ex[2]
    node, fsum, g_emit, g_rest, dd_emit, dd_rest = bufs[3:9]
    U, R = sa.shape[0], g_rest.shape[0] // K
    if covered[i]:
        dd_emit[:U] = 0.0
        dd_rest[:] = 0.0
        add_features(ex, node, fsum, 1.0, 0.0, dd_emit, dd_rest)
        add_features(ex, node_mem[s:e], fsum_mem[i], -1.0, 0.0, dd_emit, dd_rest)
        sag.scatter_rows(sa, A, dd_emit[:U], dd_rest.reshape((R, K)), grad_sum, K)
    else:
        sag.scatter_rows(sa, A, g_emit[:U], g_rest.reshape((R, K)), grad_sum, K)
    node_mem[s:e] = node[: e - s]
    fsum_mem[i] = fsum


@njit(cache=True, nogil=True)
def _lipschitz_step(i, was_covered, f, gsq, ls, memory, samplers, params):
    """§3 step 3 with the §4 skip rule (as ``kernels.sag``); returns (oracle calls, outcome)."""
    L, skipped = sag.lipschitz_begin(i, was_covered, memory, samplers, params)
    calls, outcome, doublings = 0, sag.SKIPPED, 0
    if not skipped:
        outcome = sag.SMALL_GRADIENT
        if gsq > params[sag.THRESHOLD]:
            L, calls, doublings = _line_search(L, f, gsq, ls, int(params[sag.MAX_DOUBLINGS]))
            outcome = sag.CAPPED if doublings < 0 else sag.SEARCHED
    sag.lipschitz_end(i, L, outcome, doublings, memory, samplers, params)
    return calls, outcome


@njit(cache=True, nogil=True)
def _step(i, layout, struct, memory, samplers, z, dims, params, ws):
    """One SAG-NUS iteration on example i; returns (oracle calls, status, line-search outcome)."""
    jt, assign, feat = struct
    A, K, nb, n_frows = dims
    lazy, s_last, bufs, ows = ws
    unary, phi, marg, node, fsum = bufs[:5]
    pidx = ows[0][5]
    s, e = layout[0][i], layout[0][i + 1]
    n = e - s
    sa = layout[7][layout[6][i] : layout[6][i + 1]]
    sag.sync_sequence(sa, A, nb + n_frows, K, z, memory[0], lazy[1], s_last)
    potentials(layout[:5], jt, assign, feat, i, z, (A, K, nb), unary, phi, pidx)
    size, c = clique_entries(i, jt, K), lazy[0]
    for t in range(size):
        phi[t] *= c
    log_z = potential_marginals(i, phi, jt, K, ows, marg, True)
    if not np.isfinite(log_z):
        return 1, 1, sag.SEARCHED
    labels = layout[4]
    f = log_z - gold_score(i, s, phi, jt, labels, K)
    block_stats(i, marg, struct, K, node, fsum, bufs[12], pidx)
    ex = (i, s, e, layout, struct)
    gsq = _gradient(ex, node[:n], fsum, bufs[5], bufs[6], sa.shape[0])
    was_covered = memory[4][i]
    _update_memory(i, ex, sa, memory, bufs, A, K)
    _direction_scores(ex, bufs[5], bufs[6], nb * K, bufs[9])
    clique_tables(jt, assign, feat[0], feat[0][0] - nb * K, i, bufs[9], bufs[6], K, bufs[10], pidx)
    ls = (phi, bufs[10], bufs[11], size, i, s, jt, labels, K, ows, marg)
    calls, outcome = _lipschitz_step(i, was_covered, f, gsq, ls, memory, samplers, params)
    decay = outcome != sag.SKIPPED or params[sag.SKIP_DECAY] == 1.0
    sag.take_step(memory, lazy, params, memory[3].shape[0], s_last, z, K, decay)
    return 1 + calls, 0, outcome


@njit(cache=True, nogil=True)
def _run_steps(layout, struct, memory, samplers, z, dims, params, draws, ws):
    """Iterations on draws (steps, 3) until they run out or params[BUDGET] oracle calls are made.

    Returns (steps done, oracle calls, status, stats, chosen indices) as ``kernels.sag``.
    """
    lazy, s_last = ws[0], ws[1]
    n, K = memory[3].shape[0], dims[1]
    stats = np.zeros(sag.N_STATS)
    chosen = np.full(draws.shape[0], -1, np.int64)
    lazy[0], lazy[1] = 1.0, 0.0
    s_last[:] = 0.0
    done, calls, status = 0, 0, 0
    for s in range(draws.shape[0]):
        if calls >= params[sag.BUDGET]:
            break
        i = sag.draw(
            samplers, int(memory[7][sag.N_COVERED]), n, draws[s], params[sag.NON_UNIFORMITY]
        )
        chosen[s] = i
        c, st, outcome = _step(i, layout, struct, memory, samplers, z, dims, params, ws)
        calls += c
        if st != 0:
            status = i + 1
            break
        done += 1
        stats[0] += c - 1
        stats[outcome] += 1.0
    sag.normalise(z, memory[0], lazy, s_last, K)
    return done, calls, status, stats, chosen


# -- thin Python wrappers ------------------------------------------------------------------------
def make_workspace(max_n: int, dims: tuple[int, int, int, int], max_U: int, mws, sizes):
    """Workspace (lazy (c, S), S_r of every row, step buffers, oracle buffers (mws, P)).

    ``mws`` the junction message workspace, ``sizes = (largest region, largest table)``. Step
    buffers: unary, phi, log marginals, node marginals, factor sums, g (emit, rest), d change
    (emit, rest), node scores of g, phi of g, trial phi, a table of probabilities.
    """
    A, K, n_bias, n_frows = dims
    n, U, F = max(int(max_n), 1), max(int(max_U), 1), n_frows * K
    R, table = int(sizes[0]), int(sizes[1])
    bufs = (np.empty((n, K)), np.empty(R), np.empty(R), np.empty((n, K)), np.empty(F))
    bufs += (np.empty((U, K)), np.empty(n_bias * K + F), np.empty((U, K)))
    bufs += (np.empty(n_bias * K + F), np.empty((n, K)), np.empty(R), np.empty(R))
    bufs += (np.empty(table),)
    return np.ones(2), np.zeros(A + n_bias + n_frows), bufs, (mws, np.empty(R))


def run_steps(layout, struct, memory, samplers, z, dims, params, draws, ws):
    """Run SAG-NUS iterations on junction trees; returns (done, calls, status, stats, chosen)."""
    if params.shape != (sag.N_PARAMS,) or draws.ndim != 2 or draws.shape[1] != 3:
        raise ValueError(
            f"expected params ({sag.N_PARAMS},) and draws (steps, 3); got "
            f"{params.shape} and {draws.shape}"
        )
    done, calls, status, stats, chosen = _run_steps(
        layout, struct, memory, samplers, z, dims, params, draws, ws
    )
    return int(done), int(calls), int(status), stats, chosen[: done + (status != 0)]
