"""The shared parts of SAG-NUS: sampling, lazy updates, Lipschitz bookkeeping and the step.

SAG (stochastic average gradient) for P(w) = (lambda/2)||w||^2 + (1/n) sum_i f_i(w) keeps the last
gradient y_i of every visited loss f_i and their sum d; one iteration on example i
(``baselines.md`` §1, §3) is

    g = grad f_i(w) = E_{p_w}[F(x_i, .)] - F(x_i, y_i),   d <- d + g - y_i,   y_i <- g,
    line search on L_i (one oracle call per trial),
    w <- (1 - alpha lambda) w - (alpha / m) d,
    L_max <- L_max params.decay   (2^(-1/n) by default),

with m the number of examples visited so far. SAG-NUS* (§4) skips the line search on some
visits: such a visit keeps L_i and, with ``params.skip_decay`` false, leaves L_max alone too
(no decay); with ``params.skip_decay`` it still decays L_max like every other iteration. The
iteration itself
is ``crfsdca.kernels.solvers.sag_epoch``, written once for every structure; each structure stores
y_i as the marginals of its last visit (§2) and reads them through its SAG primitives.

Just-in-time updates (§5): w = c z, c <- c (1 - alpha lambda), z <- z - alpha / (m c) d, so that
with S the running sum of alpha / (m c) a row r whose d_r did not change since it was last brought
up to date (at S_r) is refreshed by z_r <- z_r - d_r (S - S_r) when an example that touches it is
visited. Every weight vector is handled in rows of K entries (attribute rows, then the bias rows,
then the transition or factor rows), and at the end of a call every row is refreshed and c folded
into z, so that ``z`` holds w again.
"""

from typing import NamedTuple

from crfsdca.kernels.jit import njit
from crfsdca.kernels.solvers import trees


class SAGMemory(NamedTuple):
    """SAG's gradient memory (§2) and Lipschitz estimates (§3), as the kernels read them."""

    grad_sum: object  # (d,) float64: d = sum_i y_i, the summed stored gradients
    node: object  # (N, K) float64: every example's node marginals at its last visit
    sums: object  # (n, ...) float64: its summed clique marginals (shape: the structure's)
    lipschitz: object  # (n,) float64: L_i
    covered: object  # (n,) bool: visited at least once
    successes: object  # (n,) int64: line searches in a row that needed no doubling
    skips: object  # (n,) int64: line searches left to skip (§4)
    scalars: object  # (3,) float64: L_max, covered count, sum of the covered L_i


class SAGParams(NamedTuple):
    """What a SAG-NUS call is told (``crfsdca.solvers.sag_nus.SAGNUSConfig`` explains each)."""

    lam: float  # lambda
    non_uniformity: float  # probability of drawing a covered example by L_i + lambda
    threshold: float  # line search only when ||g_i||^2 exceeds this
    revisit: float  # a revisit's line search starts from revisit * L_i
    half_mean_first: bool  # a first visit starts from half the mean L_i (else initial_l)
    initial_l: float
    decay: float  # L_max <- decay * L_max after each iteration
    mixed_step: bool  # the paper's mixed step size (else 1 / (L_max + lambda))
    skip: bool  # §4's doubling skips of the line search
    max_doublings: int
    budget: int  # oracle calls at most
    rescale: float  # fold the lazy scale c into z when it falls below this
    skip_decay: bool  # a skipped visit still decays (and may raise) L_max
    growth: float = 2.0  # a failed line-search test multiplies L_i by this
    skip_linear: bool = False  # §4's skip budget after c successes: c (else 2^(c - 1))


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
def _start_lipschitz(i, was_covered, memory, samplers, params):
    """L_i before the line search (first visit: initial or half the mean; revisit: kept).

    Marks i covered on a first visit and removes L_i from the running sum (added back later).
    """
    lipschitz, covered, scalars = memory.lipschitz, memory.covered, memory.scalars
    if was_covered:
        scalars[L_SUM] -= lipschitz[i]
        return lipschitz[i]
    m = scalars[N_COVERED]
    L = params.initial_l
    if params.half_mean_first and m > 0:
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
    params.revisit L_i.
    """
    skips = memory.skips
    L = _start_lipschitz(i, was_covered, memory, samplers, params)
    if params.skip and skips[i] > 0:
        skips[i] -= 1
        return L, True
    if was_covered:
        L *= params.revisit
    return L, False


@njit(cache=True, nogil=True)
def lipschitz_end(i, L, outcome, doublings, memory, samplers, params):
    """Store L_i = L after a visit with ``outcome`` (and its line search's ``doublings``).

    First-test successes feed the §4 skip rule; a skipped visit raises L_max to L_i only when
    it also decays L_max (``params.skip_decay``).
    """
    lipschitz, successes, skips = memory.lipschitz, memory.successes, memory.skips
    scalars = memory.scalars
    if outcome != SKIPPED:
        if doublings == 0:
            successes[i] += 1
            budget = successes[i] if params.skip_linear else 1 << min(successes[i] - 1, 62)
            skips[i] = budget if params.skip else 0
        else:
            successes[i] = 0
    lipschitz[i] = L
    scalars[L_SUM] += L
    if outcome != SKIPPED or params.skip_decay:
        scalars[L_MAX] = max(scalars[L_MAX], L)
    trees.update(samplers[2], i, L + params.lam, False)


@njit(cache=True, nogil=True)
def take_step(memory, lazy, params, n, s_last, z, K, decay):
    """w <- (1 - alpha lambda) w - (alpha/m) d as c, S updates (§3 steps 4-6, §5).

    L_max then decays by params.decay when ``decay`` (not after a frozen skipped visit).
    """
    scalars = memory.scalars
    lam, m = params.lam, scalars[N_COVERED]
    l_max, l_bar = scalars[L_MAX], scalars[L_SUM] / m
    alpha = 1.0 / (l_max + lam)
    if params.mixed_step:
        alpha = ((n - m) / n) / (l_max + lam) + (m / n) * (
            0.5 / (l_max + lam) + 0.5 / (l_bar + lam)
        )
    c = lazy[0] * (1.0 - alpha * lam)
    lazy[0] = c
    lazy[1] += alpha / (m * c)
    if decay:
        scalars[L_MAX] = l_max * params.decay
    if c < params.rescale:
        normalise(z, memory.grad_sum, lazy, s_last, K)
