"""Compiled SAG-NUS epochs with compact gradient memory and just-in-time updates.

SAG (stochastic average gradient) for P(w) = (lambda/2)||w||^2 + (1/n) sum_i f_i(w) keeps the last
gradient y_i of every visited loss f_i and their sum d; one iteration on sequence i
(``baselines.md`` §1, §3) is

    g = grad f_i(w) = E_{p_w}[F(x_i, .)] - F(x_i, y_i),   d <- d + g - y_i,   y_i <- g,
    line search on L_i (one forward pass per trial),
    w <- (1 - alpha lambda) w - (alpha / m) d,
    L_max <- L_max params[DECAY]   (2^(-1/n) by default),

with m the number of sequences visited so far. SAG-NUS* (§4) skips the line search on some
visits: such a visit keeps L_i and, with params[SKIP_DECAY] = 0, leaves L_max alone too (no decay);
with params[SKIP_DECAY] = 1 it still decays L_max like every other iteration.

Memory (§2): y_i is stored as the node marginals (T_i, K) and the summed edge marginals (K, K) of
the last visit; g - y_i only touches the emission rows of the attributes present in x_i, the bias
rows and the transition rows (the gold part cancels after the first visit). The oracle calls are
the chain kernels' (``chain.marginal_sums`` at w, ``chain.log_partition`` per line-search trial).

Just-in-time updates (§5): w = c z, c <- c (1 - alpha lambda), z <- z - alpha / (m c) d, so that
with S the running sum of alpha / (m c) a row r whose d_r did not change since it was last brought
up to date (at S_r) is refreshed by z_r <- z_r - d_r (S - S_r) when a sequence that touches it is
visited. Every weight vector is handled in rows of K entries (attribute rows, then the bias rows,
then the K transition rows), and at the end of a call every row is refreshed and c folded into z,
so that ``z`` holds w again. The sampling, Lipschitz, step and lazy-update helpers (``draw``,
``lipschitz_begin``/``lipschitz_end``, ``take_step``, ``sync_sequence``, ``normalise``) serve the
tree kernel ``crfsdca.kernels.tree_sag`` too. The thin wrappers at the bottom check shapes once.
"""

import numpy as np
from numba import njit

from crfsdca.kernels import trees
from crfsdca.kernels.chain import (
    gold_score,
    log_partition,
    marginal_sums,
    transition_exp,
    unary_scores,
)

# indices into the float64 ``params`` vector
LAM, NON_UNIFORMITY, THRESHOLD, REVISIT, FIRST_VISIT, INITIAL_L = 0, 1, 2, 3, 4, 5
DECAY, STEP_RULE, SKIP, MAX_DOUBLINGS, BUDGET, RESCALE, SKIP_DECAY = 6, 7, 8, 9, 10, 11, 12
N_PARAMS = 13
# indices into the float64 ``scalars`` vector of the memory tuple
L_MAX, N_COVERED, L_SUM = 0, 1, 2
# stats: [line-search trials, then one count per line-search outcome]
SEARCHED, CAPPED, SKIPPED, SMALL_GRADIENT = 1, 2, 3, 4
N_STATS = 5


@njit(cache=True, nogil=True)
def draw(samplers, m, n, u, non_uniformity):
    """Next sequence (§3 step 1) from three uniforms u (3,).

    With probability (n - m)/n an uncovered sequence, uniformly; otherwise a covered one, drawn
    proportionally to L_i + lambda with probability ``non_uniformity``, uniformly otherwise.
    samplers = (uncovered indicator, covered indicator, L_i + lambda of covered) sum-trees.
    """
    uncovered, covered, weights = samplers
    if m < n and u[0] * n < n - m:
        return trees.draw(uncovered, u[2], n)
    if u[1] < non_uniformity and weights[1] > 0.0:
        return trees.draw(weights, u[2], n)
    return trees.draw(covered, u[2], n)


@njit(cache=True, nogil=True)
def _sync_row(r, K, z, d, s_now, s_last):
    """z_r <- z_r - d_r (S - S_r), S_r <- S (row r of K entries)."""
    delta = s_now - s_last[r]
    if delta != 0.0:
        for k in range(K):
            z[r * K + k] -= d[r * K + k] * delta
    s_last[r] = s_now


@njit(cache=True, nogil=True)
def sync_sequence(sa, A, n_rest, K, z, d, s_now, s_last):
    """Refresh the rows a step on a sequence reads and writes: its attributes, bias, transitions."""
    for s in range(sa.shape[0]):
        _sync_row(sa[s], K, z, d, s_now, s_last)
    for r in range(A, A + n_rest):
        _sync_row(r, K, z, d, s_now, s_last)


@njit(cache=True, nogil=True)
def normalise(z, d, lazy, s_last, K):
    """Refresh every row and fold c into z: z <- c (z - d (S - S_r)); then c = 1, S = 0."""
    c, s_now = lazy[0], lazy[1]
    for r in range(s_last.shape[0]):
        delta = s_now - s_last[r]
        for k in range(K):
            j = r * K + k
            z[j] = c * (z[j] - d[j] * delta)
        s_last[r] = 0.0
    lazy[0] = 1.0
    lazy[1] = 0.0


@njit(cache=True, nogil=True)
def _scores(attrs, t0, t1, z, c, dims, unary, log_trans):
    """Node scores (T, K) and transition scores (K, K) of w = c z for tokens t0..t1-1."""
    A, K, n_bias = dims
    unary_scores(attrs, t0, t1, z, A, K, n_bias, unary)
    for t in range(t1 - t0):
        for k in range(K):
            unary[t, k] *= c
    off = (A + n_bias) * K
    for k in range(K):
        for l in range(K):
            log_trans[k, l] = c * z[off + k * K + l]


@njit(cache=True, nogil=True)
def add_features(seq, node, edge_sum, coef, gold_coef, emit, rest):
    """emit, rest += coef E_node[F(x_i, .)] - gold_coef F(x_i, y_i) on the support of sequence i.

    seq = (t0, t1, attr_offsets, attr_values, entry_slot, labels); node (T, K) and edge_sum (K, K)
    marginals; emit (U, K) rows of the sequence's distinct attributes (entry_slot order), rest
    (n_bias + K, K) the bias rows then the transition matrix.
    """
    t0, t1, attr_offsets, attr_values, entry_slot, labels = seq
    T, K = t1 - t0, node.shape[1]
    nb = rest.shape[0] - K
    for t in range(T):
        y = labels[t0 + t]
        for p in range(attr_offsets[t0 + t], attr_offsets[t0 + t + 1]):
            s, v = entry_slot[p], attr_values[p]
            for k in range(K):
                emit[s, k] += coef * v * node[t, k]
            emit[s, y] -= gold_coef * v
        for k in range(K if nb else 0):
            rest[0, k] += coef * node[t, k]
            rest[1, k] += coef * node[t, k] if t == 0 else 0.0
            rest[2, k] += coef * node[t, k] if t == T - 1 else 0.0
        if nb:
            rest[0, y] -= gold_coef
            rest[1, y] -= gold_coef if t == 0 else 0.0
            rest[2, y] -= gold_coef if t == T - 1 else 0.0
        if t + 1 < T:
            rest[nb + y, labels[t0 + t + 1]] -= gold_coef
    for k in range(K):
        for l in range(K):
            rest[nb + k, l] += coef * edge_sum[k, l]


@njit(cache=True, nogil=True)
def _direction_scores(seq, emit, rest, ug):
    """Node scores ug (T, K) of the compact vector (emit, rest) (its transitions: rest[nb:])."""
    t0, t1, attr_offsets, attr_values, entry_slot, _ = seq
    T, K = t1 - t0, emit.shape[1]
    nb = rest.shape[0] - K
    for t in range(T):
        for k in range(K):
            ug[t, k] = rest[0, k] if nb else 0.0
            if nb and t == 0:
                ug[t, k] += rest[1, k]
            if nb and t == T - 1:
                ug[t, k] += rest[2, k]
        for p in range(attr_offsets[t0 + t], attr_offsets[t0 + t + 1]):
            s, v = entry_slot[p], attr_values[p]
            for k in range(K):
                ug[t, k] += v * emit[s, k]


@njit(cache=True, nogil=True)
def _line_search(L, f, gsq, scores, trial, fb, y, max_doublings):
    """Smallest L 2^j, j = 0..max_doublings, with f(w - g/L) <= f(w) - ||g||^2 / (2L) (§3.3).

    scores = (unary, log_trans) at w and (ug, tg) of g; trial = (unary, trans) scratch; y gold
    labels. Each trial is one forward pass (one oracle call). Returns (L, trials, doublings),
    doublings = -1 when the cap was reached without success.
    """
    unary, log_trans, ug, tg = scores
    tu, tt = trial
    T, K = unary.shape
    for j in range(max_doublings + 1):
        inv = 1.0 / L
        for t in range(T):
            for k in range(K):
                tu[t, k] = unary[t, k] - inv * ug[t, k]
        for k in range(K):
            for l in range(K):
                tt[k, l] = log_trans[k, l] - inv * tg[k, l]
        trans_max = transition_exp(tt, fb[0])
        log_z = log_partition(tu[:T], tt, fb[0], trans_max, fb[1:])
        if log_z - gold_score(tu[:T], tt, y) <= f - 0.5 * gsq * inv:
            return L, j + 1, j
        if j < max_doublings:
            L *= 2.0
    return L, max_doublings + 1, -1


@njit(cache=True, nogil=True)
def scatter_rows(sa, A, emit, rest, out, K):
    """out += the compact vector (emit rows at attributes sa, rest rows from row A on)."""
    for s in range(sa.shape[0]):
        base = sa[s] * K
        for k in range(K):
            out[base + k] += emit[s, k]
    base = A * K
    for r in range(rest.shape[0]):
        for k in range(K):
            out[base + r * K + k] += rest[r, k]


@njit(cache=True, nogil=True)
def _start_lipschitz(i, was_covered, memory, samplers, params):
    """L_i before the line search (first visit: initial or half the mean; revisit: kept).

    Marks i covered on a first visit and removes L_i from the running sum (added back later).
    """
    lipschitz, covered, scalars = memory[3], memory[4], memory[7]
    if was_covered:
        scalars[L_SUM] -= lipschitz[i]
        return lipschitz[i]
    m = scalars[N_COVERED]
    L = params[INITIAL_L]
    if params[FIRST_VISIT] == 1.0 and m > 0:
        L = 0.5 * scalars[L_SUM] / m
    covered[i] = True
    scalars[N_COVERED] = m + 1.0
    trees.update(samplers[0], i, 0.0, False)
    trees.update(samplers[1], i, 1.0, False)
    return L


@njit(cache=True, nogil=True)
def lipschitz_begin(i, was_covered, memory, samplers, params):
    """(L_i for the visit's line search, skipped): skipped when the §4 skip budget of i lasts.

    A skipped visit keeps L_i (no revisit factor); otherwise a revisit starts from
    params[REVISIT] L_i.
    """
    skips = memory[6]
    L = _start_lipschitz(i, was_covered, memory, samplers, params)
    if params[SKIP] == 1.0 and skips[i] > 0:
        skips[i] -= 1
        return L, True
    if was_covered:
        L *= params[REVISIT]
    return L, False


@njit(cache=True, nogil=True)
def lipschitz_end(i, L, outcome, doublings, memory, samplers, params):
    """Store L_i = L after a visit with ``outcome`` (and its line search's ``doublings``).

    First-test successes feed the §4 skip rule; a skipped visit raises L_max to L_i only when
    it also decays L_max (params[SKIP_DECAY] = 1).
    """
    lipschitz, successes, skips, scalars = memory[3], memory[5], memory[6], memory[7]
    if outcome != SKIPPED:
        if doublings == 0:
            successes[i] += 1
            skips[i] = 1 << min(successes[i] - 1, 62) if params[SKIP] == 1.0 else 0
        else:
            successes[i] = 0
    lipschitz[i] = L
    scalars[L_SUM] += L
    if outcome != SKIPPED or params[SKIP_DECAY] == 1.0:
        scalars[L_MAX] = max(scalars[L_MAX], L)
    trees.update(samplers[2], i, L + params[LAM], False)


@njit(cache=True, nogil=True)
def _lipschitz_step(i, was_covered, f, gsq, ls_args, memory, samplers, params):
    """§3 step 3 (and the §4 skip rule); returns (oracle calls, outcome).

    outcome: SEARCHED, CAPPED (the doubling cap was reached), SKIPPED (§4 skip budget) or
    SMALL_GRADIENT (||g||^2 <= threshold: no test).
    """
    L, skipped = lipschitz_begin(i, was_covered, memory, samplers, params)
    calls, outcome, doublings = 0, SKIPPED, 0
    if not skipped:
        outcome = SMALL_GRADIENT
        if gsq > params[THRESHOLD]:
            scores, trial, fb, y = ls_args
            max_d = int(params[MAX_DOUBLINGS])
            L, calls, doublings = _line_search(L, f, gsq, scores, trial, fb, y, max_d)
            outcome = CAPPED if doublings < 0 else SEARCHED
    lipschitz_end(i, L, outcome, doublings, memory, samplers, params)
    return calls, outcome


@njit(cache=True, nogil=True)
def take_step(memory, lazy, params, n, s_last, z, K, decay):
    """w <- (1 - alpha lambda) w - (alpha/m) d as c, S updates (§3 steps 4-6, §5).

    L_max then decays by params[DECAY] when ``decay`` (not after a frozen skipped visit).
    """
    scalars = memory[7]
    lam, m = params[LAM], scalars[N_COVERED]
    l_max, l_bar = scalars[L_MAX], scalars[L_SUM] / m
    alpha = 1.0 / (l_max + lam)
    if params[STEP_RULE] == 0.0:
        alpha = ((n - m) / n) / (l_max + lam) + (m / n) * (
            0.5 / (l_max + lam) + 0.5 / (l_bar + lam)
        )
    c = lazy[0] * (1.0 - alpha * lam)
    lazy[0] = c
    lazy[1] += alpha / (m * c)
    if decay:
        scalars[L_MAX] = l_max * params[DECAY]
    if c < params[RESCALE]:
        normalise(z, memory[0], lazy, s_last, K)


@njit(cache=True, nogil=True)
def _gradient(seq, node, edge_sum, bufs, U):
    """Compact g = E_nu[F] - F(x_i, y_i) into bufs' (g_emit, g_rest); returns ||g||^2."""
    g_emit, g_rest = bufs[5], bufs[6]
    g_emit[:U] = 0.0
    g_rest[:, :] = 0.0
    add_features(seq, node, edge_sum, 1.0, 1.0, g_emit, g_rest)
    return np.sum(g_emit[:U] ** 2) + np.sum(g_rest**2)


@njit(cache=True, nogil=True)
def _update_memory(i, seq, sa, memory, bufs, dims):
    """d <- d + g - y_i on the support, then store the new marginals as y_i (§2)."""
    grad_sum, node_mem, edge_mem, covered = memory[0], memory[1], memory[2], memory[4]
    A, K, _ = dims
    t0, t1 = seq[0], seq[1]
    node, edge_sum = bufs[2], bufs[4]
    g_emit, g_rest, dd_emit, dd_rest = bufs[5], bufs[6], bufs[7], bufs[8]
    U = sa.shape[0]
    if covered[i]:
        dd_emit[:U] = 0.0
        dd_rest[:, :] = 0.0
        add_features(seq, node, edge_sum, 1.0, 0.0, dd_emit, dd_rest)
        add_features(seq, node_mem[t0:t1], edge_mem[i], -1.0, 0.0, dd_emit, dd_rest)
        scatter_rows(sa, A, dd_emit[:U], dd_rest, grad_sum, K)
    else:
        scatter_rows(sa, A, g_emit[:U], g_rest, grad_sum, K)
    node_mem[t0:t1] = node[: t1 - t0]
    edge_mem[i] = edge_sum


@njit(cache=True, nogil=True)
def _step(i, layout, memory, samplers, z, dims, params, ws):
    """One SAG-NUS iteration on sequence i; returns (oracle calls, status, line-search outcome)."""
    _, attr_offsets, attr_ids, attr_values, labels, entry_slot, uattr_offsets, slot_attrs = layout
    A, K, nb = dims
    fb, lazy, s_last, bufs = ws
    unary, log_trans, node, log_edge, edge_sum = bufs[:5]
    t0, t1 = layout[0][i], layout[0][i + 1]
    T = t1 - t0
    sa = slot_attrs[uattr_offsets[i] : uattr_offsets[i + 1]]
    sync_sequence(sa, A, nb + K, K, z, memory[0], lazy[1], s_last)
    _scores((attr_offsets, attr_ids, attr_values), t0, t1, z, lazy[0], dims, unary, log_trans)
    log_z = marginal_sums(unary[:T], log_trans, fb, node, log_edge, edge_sum)
    if not np.isfinite(log_z):
        return 1, 1, SEARCHED
    y = labels[t0:t1]
    f = log_z - gold_score(unary[:T], log_trans, y)
    seq = (t0, t1, attr_offsets, attr_values, entry_slot, labels)
    gsq = _gradient(seq, node[:T], edge_sum, bufs, sa.shape[0])
    was_covered = memory[4][i]
    _update_memory(i, seq, sa, memory, bufs, dims)
    ug = bufs[9]
    _direction_scores(seq, bufs[5], bufs[6], ug)
    scores = (unary[:T], log_trans, ug[:T], bufs[6][nb:])
    ls_args = (scores, (bufs[10], bufs[11]), fb, y)
    calls, outcome = _lipschitz_step(i, was_covered, f, gsq, ls_args, memory, samplers, params)
    decay = outcome != SKIPPED or params[SKIP_DECAY] == 1.0
    take_step(memory, lazy, params, memory[3].shape[0], s_last, z, K, decay)
    return 1 + calls, 0, outcome


@njit(cache=True, nogil=True)
def _run_steps(layout, memory, samplers, z, dims, params, draws, ws):
    """Iterations on draws (steps, 3) until they run out or params[BUDGET] oracle calls are made.

    Returns (steps done, oracle calls, status, stats, chosen indices); status 0 = ok, i + 1 =
    non-finite log Z on sequence i (w then holds the iterate before that step).
    """
    fb, lazy, s_last, bufs = ws
    n, K = memory[3].shape[0], dims[1]
    stats = np.zeros(N_STATS)
    chosen = np.full(draws.shape[0], -1, np.int64)
    lazy[0], lazy[1] = 1.0, 0.0
    s_last[:] = 0.0
    done, calls, status = 0, 0, 0
    for s in range(draws.shape[0]):
        if calls >= params[BUDGET]:
            break
        i = draw(samplers, int(memory[7][N_COVERED]), n, draws[s], params[NON_UNIFORMITY])
        chosen[s] = i
        c, st, outcome = _step(i, layout, memory, samplers, z, dims, params, ws)
        calls += c
        if st != 0:
            status = i + 1
            break
        done += 1
        stats[0] += c - 1
        stats[outcome] += 1.0
    normalise(z, memory[0], lazy, s_last, K)
    return done, calls, status, stats, chosen


# -- thin Python wrappers ------------------------------------------------------------------------
def make_workspace(max_T: int, dims: tuple[int, int, int], max_U: int):
    """Workspace (forward-backward buffers, lazy (c, S), S_r of every row, step buffers).

    Step buffers: unary, log_trans, node, log_edge, edge_sum, g (emit, rest), d change (emit,
    rest), node scores of g, trial unary, trial transitions.
    """
    A, K, n_bias = dims
    T, U, R = max(int(max_T), 1), max(int(max_U), 1), n_bias + K
    fb = (np.empty((K, K)), *(np.empty((T, K)) for _ in range(3)), np.empty(T), np.empty(T))
    shapes = [(T, K), (K, K), (T, K), (max(T - 1, 1), K, K), (K, K), (U, K), (R, K), (U, K)]
    shapes += [(R, K), (T, K), (T, K), (K, K)]
    bufs = tuple(np.empty(shape) for shape in shapes)
    return fb, np.ones(2), np.zeros(A + n_bias + K), bufs


def run_steps(layout, memory, samplers, z, dims, params, draws, ws):
    """Run SAG-NUS iterations (see ``_run_steps``); returns (done, calls, status, stats, chosen)."""
    if params.shape != (N_PARAMS,) or draws.ndim != 2 or draws.shape[1] != 3:
        raise ValueError(
            f"expected params ({N_PARAMS},) and draws (steps, 3); got "
            f"{params.shape} and {draws.shape}"
        )
    done, calls, status, stats, chosen = _run_steps(
        layout, memory, samplers, z, dims, params, draws, ws
    )
    return int(done), int(calls), int(status), stats, chosen[: done + (status != 0)]
