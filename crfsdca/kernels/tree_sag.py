"""SAG-NUS iterations on tree-structured examples (the chain's are in ``crfsdca.kernels.sag``).

The method, the sampling, the Lipschitz line search and skip rule, the just-in-time updates
w = c z and the row layout are those of ``kernels.sag`` (whose helpers run here unchanged);
only the example's oracle differs: log Z, node marginals and summed edge marginals come from
the tree oracle kernels (``kernels.tree_scaled.marginal_sums``, scaled space with the log-space
fallback of ``kernels.tree``), and each line-search trial is one upward pass
(``kernels.tree_scaled.log_partition``).

Memory (``baselines.md`` §2): y_i is stored as the node marginals (n_i, K) and, per edge type,
the summed edge marginals (n_types, K, K) of the last visit. A gradient is held compactly as the
rows of the example's distinct attributes ``emit`` (U, K) and ``rest`` (n_bias + n_types K, K):
the bias rows (count, root, leaf), then the transition block of every edge type.

Arrays: ``layout`` = ``sdca_epoch.sequence_layout`` of the nodes (an example's nodes are its
items), ``graph = (parents, types, order, child_start, children)`` packed as in kernels.tree,
``dims = (A, K, n_bias, n_types)``; ``memory``, ``samplers``, ``params`` and the returned stats as
in ``kernels.sag``, except memory[2] (edge sums) of shape (n, n_types, K, K).
"""

import numpy as np
from numba import njit

from crfsdca.kernels import sag
from crfsdca.kernels.tree import tree_unary
from crfsdca.kernels.tree_scaled import exp_tables, log_partition, marginal_sums


@njit(cache=True, nogil=True)
def _scores(layout, graph, s, e, z, c, dims, unary, log_pair):
    """Node scores unary (n, K) and transition tables log_pair (n_types, K, K) of w = c z."""
    A, K, n_bias, n_types = dims
    tree_unary(layout[:5], graph, s, e, z, dims, unary)
    for v in range(e - s):
        for k in range(K):
            unary[v, k] *= c
    off = (A + n_bias) * K
    for t in range(n_types):
        for j in range(K):
            for k in range(K):
                log_pair[t, j, k] = c * z[off + (t * K + j) * K + k]


@njit(cache=True, nogil=True)
def gold_score(ex, unary, log_pair):
    """Score of the gold labelling of example ex = (s, e, layout, graph)."""
    s, e, layout, graph = ex
    labels, parents, types = layout[4], graph[0], graph[1]
    total = 0.0
    for v in range(e - s):
        y = labels[s + v]
        total += unary[v, y]
        p = parents[s + v]
        if p >= 0:
            total += log_pair[types[s + v], labels[s + p], y]
    return total


@njit(cache=True, nogil=True)
def add_features(ex, node, edge_sum, coef, gold_coef, emit, rest):
    """emit, rest += coef E[F(x_i, .)] - gold_coef F(x_i, y_i) on the support of example i.

    ex = (s, e, layout, graph); node (n, K) and edge_sum (n_types, K, K) marginals; emit (U, K)
    rows of the distinct attributes (entry_slot order); rest the bias rows then the blocks.
    """
    s, e, layout, graph = ex
    attr_offsets, attr_values, labels, entry_slot = layout[1], layout[3], layout[4], layout[5]
    parents, types, _, child_start, _ = graph
    K, n_types = node.shape[1], edge_sum.shape[0]
    nb = rest.shape[0] - n_types * K
    for v in range(e - s):
        g = s + v
        y = labels[g]
        for q in range(attr_offsets[g], attr_offsets[g + 1]):
            slot, x = entry_slot[q], attr_values[q]
            for k in range(K):
                emit[slot, k] += coef * x * node[v, k]
            emit[slot, y] -= gold_coef * x
        if nb:
            root, leaf = parents[g] < 0, child_start[g + 1] == child_start[g]
            for k in range(K):
                m = coef * node[v, k] - (gold_coef if k == y else 0.0)
                rest[0, k] += m
                rest[1, k] += m if root else 0.0
                rest[2, k] += m if leaf else 0.0
        if parents[g] >= 0:
            rest[nb + types[g] * K + labels[s + parents[g]], y] -= gold_coef
    for t in range(n_types):
        for j in range(K):
            for k in range(K):
                rest[nb + t * K + j, k] += coef * edge_sum[t, j, k]


@njit(cache=True, nogil=True)
def _direction_scores(ex, emit, rest, nb, ug):
    """Node scores ug (n, K) of the compact vector (emit, rest) with nb bias rows."""
    s, e, layout, graph = ex
    attr_offsets, attr_values, entry_slot = layout[1], layout[3], layout[5]
    parents, _, _, child_start, _ = graph
    K = emit.shape[1]
    for v in range(e - s):
        g = s + v
        root, leaf = parents[g] < 0, child_start[g + 1] == child_start[g]
        for k in range(K):
            u = 0.0
            if nb:
                u = rest[0, k] + (rest[1, k] if root else 0.0) + (rest[2, k] if leaf else 0.0)
            ug[v, k] = u
        for q in range(attr_offsets[g], attr_offsets[g + 1]):
            slot, x = entry_slot[q], attr_values[q]
            for k in range(K):
                ug[v, k] += x * emit[slot, k]


@njit(cache=True, nogil=True)
def _line_search(L, f, gsq, scores, ex, oracle, trial, max_doublings):
    """Smallest L 2^j, j = 0..max_doublings, with f(w - g/L) <= f(w) - ||g||^2 / (2L) (§3.3).

    scores = (unary, log_pair) at w and (ug, g_pairs) of g; oracle = (local, ws, sws); trial =
    (unary, log_pair, exp_pair, pair_max) scratch. Each trial is one upward pass (one oracle
    call). Returns (L, trials, doublings), doublings = -1 when the cap was reached.
    """
    unary, log_pair, ug, g_pairs = scores
    tu, tp, texp, tmax = trial
    local, ws, sws = oracle
    n, K = unary.shape
    for j in range(max_doublings + 1):
        inv = 1.0 / L
        for v in range(n):
            for k in range(K):
                tu[v, k] = unary[v, k] - inv * ug[v, k]
        for t in range(log_pair.shape[0]):
            for a in range(K):
                for b in range(K):
                    tp[t, a, b] = log_pair[t, a, b] - inv * g_pairs[t * K + a, b]
        exp_tables(tp, texp, tmax)
        log_z = log_partition(tu[:n], (tp, texp, tmax), local, ws, sws)
        if log_z - gold_score(ex, tu, tp) <= f - 0.5 * gsq * inv:
            return L, j + 1, j
        if j < max_doublings:
            L *= 2.0
    return L, max_doublings + 1, -1


@njit(cache=True, nogil=True)
def _gradient(ex, node, edge_sum, g_emit, g_rest, U):
    """Compact g = E_nu[F] - F(x_i, y_i) into (g_emit, g_rest); returns ||g||^2."""
    g_emit[:U] = 0.0
    g_rest[:, :] = 0.0
    add_features(ex, node, edge_sum, 1.0, 1.0, g_emit, g_rest)
    return np.sum(g_emit[:U] ** 2) + np.sum(g_rest**2)


@njit(cache=True, nogil=True)
def _update_memory(i, ex, sa, memory, bufs, A):
    """d <- d + g - y_i on the support, then store the new marginals as y_i (§2)."""
    grad_sum, node_mem, edge_mem, covered = memory[0], memory[1], memory[2], memory[4]
    s, e = ex[0], ex[1]
    node, edge_sum, g_emit, g_rest, dd_emit, dd_rest = bufs[2:8]
    U, K = sa.shape[0], node.shape[1]
    if covered[i]:
        dd_emit[:U] = 0.0
        dd_rest[:, :] = 0.0
        add_features(ex, node, edge_sum, 1.0, 0.0, dd_emit, dd_rest)
        add_features(ex, node_mem[s:e], edge_mem[i], -1.0, 0.0, dd_emit, dd_rest)
        sag.scatter_rows(sa, A, dd_emit[:U], dd_rest, grad_sum, K)
    else:
        sag.scatter_rows(sa, A, g_emit[:U], g_rest, grad_sum, K)
    node_mem[s:e] = node[: e - s]
    edge_mem[i] = edge_sum


@njit(cache=True, nogil=True)
def _lipschitz_step(i, was_covered, f, gsq, ls_args, memory, samplers, params):
    """§3 step 3 with the §4 skip rule (as ``kernels.sag``); returns (oracle calls, outcome)."""
    L, skipped = sag.lipschitz_begin(i, was_covered, memory, samplers, params)
    calls, outcome, doublings = 0, sag.SKIPPED, 0
    if not skipped:
        outcome = sag.SMALL_GRADIENT
        if gsq > params[sag.THRESHOLD]:
            scores, ex, oracle, trial = ls_args
            max_d = int(params[sag.MAX_DOUBLINGS])
            L, calls, doublings = _line_search(L, f, gsq, scores, ex, oracle, trial, max_d)
            outcome = sag.CAPPED if doublings < 0 else sag.SEARCHED
    sag.lipschitz_end(i, L, outcome, doublings, memory, samplers, params)
    return calls, outcome


@njit(cache=True, nogil=True)
def _step(i, layout, graph, memory, samplers, z, dims, params, ws):
    """One SAG-NUS iteration on example i; returns (oracle calls, status, line-search outcome)."""
    uattr_offsets, slot_attrs = layout[6], layout[7]
    parents, types, order, child_start, children = graph
    A, K, nb, n_types = dims
    lazy, s_last, bufs, oracle_ws, trial = ws
    unary, log_pair, node, edge_sum = bufs[0], bufs[1], bufs[2], bufs[3]
    s, e = layout[0][i], layout[0][i + 1]
    n = e - s
    sa = slot_attrs[uattr_offsets[i] : uattr_offsets[i + 1]]
    sag.sync_sequence(sa, A, nb + n_types * K, K, z, memory[0], lazy[1], s_last)
    _scores(layout, graph, s, e, z, lazy[0], dims, unary, log_pair)
    tables = (log_pair, bufs[9], bufs[10])
    exp_tables(log_pair, bufs[9], bufs[10])
    local = (parents[s:e], types[s:e], order[s:e], (child_start[s : e + 1], children))
    ws_log, sws, logs = oracle_ws
    log_z = marginal_sums(unary[:n], tables, local, ws_log, sws, logs, node[:n], edge_sum)
    if not np.isfinite(log_z):
        return 1, 1, sag.SEARCHED
    ex = (s, e, layout, graph)
    f = log_z - gold_score(ex, unary, log_pair)
    gsq = _gradient(ex, node[:n], edge_sum, bufs[4], bufs[5], sa.shape[0])
    was_covered = memory[4][i]
    _update_memory(i, ex, sa, memory, bufs, A)
    ug = bufs[8]
    _direction_scores(ex, bufs[4], bufs[5], nb, ug)
    scores = (unary[:n], log_pair, ug[:n], bufs[5][nb:])
    ls_args = (scores, ex, (local, ws_log, sws), trial)
    calls, outcome = _lipschitz_step(i, was_covered, f, gsq, ls_args, memory, samplers, params)
    decay = outcome != sag.SKIPPED or params[sag.SKIP_DECAY] == 1.0
    sag.take_step(memory, lazy, params, memory[3].shape[0], s_last, z, K, decay)
    return 1 + calls, 0, outcome


@njit(cache=True, nogil=True)
def _run_steps(layout, graph, memory, samplers, z, dims, params, draws, ws):
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
        c, st, outcome = _step(i, layout, graph, memory, samplers, z, dims, params, ws)
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
def make_workspace(max_n: int, dims: tuple[int, int, int, int], max_U: int):
    """Workspace (lazy (c, S), S_r of every row, step buffers, oracle buffers, trial buffers).

    Step buffers: unary, log_pair, node, edge sums, g (emit, rest), d change (emit, rest), node
    scores of g, exp_pair and pair_max of log_pair. Oracle buffers: kernels.tree's log-space
    work arrays, the scaled ones, the fallback's log marginals. Trial buffers: unary, log_pair,
    exp_pair, pair_max.
    """
    A, K, n_bias, n_types = dims
    n, U, R = max(int(max_n), 1), max(int(max_U), 1), n_bias + n_types * K
    shapes = [(n, K), (n_types, K, K), (n, K), (n_types, K, K), (U, K), (R, K), (U, K), (R, K)]
    shapes += [(n, K), (n_types, K, K), (n_types,)]
    bufs = tuple(np.empty(shape) for shape in shapes)
    ws_log = (*(np.empty((n, K)) for _ in range(4)), np.empty(K))
    sws = (*(np.empty((n, K)) for _ in range(4)), np.empty(n))
    logs = (np.empty((n, K)), np.empty((n, K, K)), np.empty(n))
    trial = (np.empty((n, K)), *(np.empty((n_types, K, K)) for _ in range(2)), np.empty(n_types))
    return np.ones(2), np.zeros(A + R), bufs, (ws_log, sws, logs), trial


def run_steps(layout, graph, memory, samplers, z, dims, params, draws, ws):
    """Run SAG-NUS iterations on trees; returns (done, calls, status, stats, chosen)."""
    if params.shape != (sag.N_PARAMS,) or draws.ndim != 2 or draws.shape[1] != 3:
        raise ValueError(
            f"expected params ({sag.N_PARAMS},) and draws (steps, 3); got "
            f"{params.shape} and {draws.shape}"
        )
    done, calls, status, stats, chosen = _run_steps(
        layout, graph, memory, samplers, z, dims, params, draws, ws
    )
    return int(done), int(calls), int(status), stats, chosen[: done + (status != 0)]
