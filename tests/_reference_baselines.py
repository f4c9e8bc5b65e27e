"""Plain NumPy SAG-NUS, OEG and the dual-free SPDC for tiny chains: dense vectors, full
gradients, full joints.

Slow and obviously correct. SAG stores the whole gradient y_i of every sequence and updates the
whole of w at every step (no marginal memory, no just-in-time scaling); OEG keeps every dual
block as a full distribution over the K^T labelings. The compiled solvers must agree with them
on the same draws.
"""

from types import SimpleNamespace

import numpy as np
from _reference_sdca import enumerate_sequence, expected_features, feature_vector
from scipy.special import logsumexp


class EnumerationOracle:
    """f_i(w) = log Z_i(w) - w.F(x_i, y_i) and its gradient by enumerating every labeling."""

    def __init__(self, problem):
        self.problem = problem
        data, fm = problem.train, problem.feature_map
        self.gold = [self._gold(i) for i in range(problem.n_sequences)]
        self.tables = [enumerate_sequence(data, fm, i, fm.zeros()) for i in range(data.n_sequences)]

    def _gold(self, i):
        data, fm = self.problem.train, self.problem.feature_map
        so = data.seq_offsets
        return feature_vector(data, fm, i, list(data.labels[so[i] : so[i + 1]]))

    def log_joint(self, i, w):
        """log p(y | x_i; w) of every labeling (enumeration order)."""
        scores = self.tables[i][2] @ w
        return scores - logsumexp(scores)

    def value(self, i, w):
        return logsumexp(self.tables[i][2] @ w) - self.gold[i] @ w

    def value_and_gradient(self, i, w):
        p = np.exp(self.log_joint(i, w))
        return self.value(i, w), p @ self.tables[i][2] - self.gold[i]


class ChainOracle(EnumerationOracle):
    """The same quantities from the compiled forward-backward (for lazy-versus-dense checks)."""

    def __init__(self, problem):
        self.problem = problem
        self.gold = [self._gold(i) for i in range(problem.n_sequences)]

    def value(self, i, w):
        return self.problem.oracle.log_partition(i, w) - self.gold[i] @ w

    def value_and_gradient(self, i, w):
        log_z, log_node, log_edge = self.problem.oracle.marginals(i, w)
        data, fm = self.problem.train, self.problem.feature_map
        expected = expected_features(data, fm, i, np.exp(log_node), np.exp(log_edge))
        return log_z - self.gold[i] @ w, expected - self.gold[i]


class SagNusReference:
    """SAG-NUS (baselines.md §1, §3, §4) with dense state, driven by the kernel's uniforms."""

    def __init__(self, problem, oracle, cfg):
        self.problem, self.oracle, self.cfg = problem, oracle, cfg
        n, d = problem.n_sequences, problem.feature_map.n_features
        self.w, self.d, self.y = np.zeros(d), np.zeros(d), np.zeros((n, d))
        self.L = np.full(n, cfg.initial_lipschitz)
        self.l_max = cfg.initial_lipschitz
        self.covered = np.zeros(n, bool)
        self.successes = np.zeros(n, int)
        self.skips = np.zeros(n, int)
        self.oracle_calls = 0

    def draw(self, u):
        n, lam = self.problem.n_sequences, self.problem.regularization
        m = int(self.covered.sum())
        if m < n and u[0] * n < n - m:
            return np.flatnonzero(~self.covered)[int(u[2] * (n - m))]
        idx = np.flatnonzero(self.covered)
        if u[1] < self.cfg.non_uniformity:
            weights = self.L[idx] + lam
            cum = np.cumsum(weights)
            return idx[min(np.searchsorted(cum, u[2] * cum[-1], side="right"), m - 1)]
        return idx[int(u[2] * m)]

    def line_search(self, i, L, f, g):
        """Growing search on f_i(w - g/L) <= f_i(w) - |g|^2/(2L); returns (L, doublings)."""
        gsq = g @ g
        for j in range(self.cfg.max_doublings + 1):
            self.oracle_calls += 1
            if self.oracle.value(i, self.w - g / L) <= f - gsq / (2 * L):
                return L, j
            if j < self.cfg.max_doublings:
                L *= self.cfg.lipschitz_growth
        return L, -1

    def lipschitz(self, i, was_covered, f, g):
        """Update L_i and L_max (§3 step 3, §4); returns True when the line search was skipped."""
        cfg = self.cfg
        if not was_covered:
            m = self.covered.sum()
            L = cfg.initial_lipschitz
            if cfg.first_visit == "half-mean" and m > 0:
                L = 0.5 * self.L[self.covered].mean()
            self.covered[i] = True
        else:
            L = self.L[i]
        skip = cfg.skip_line_search != "never"
        if skip and self.skips[i] > 0:  # L_i stays; L_max only moves under the "decay" rule
            self.skips[i] -= 1
            if cfg.skipped_visit == "decay":
                self.l_max = max(self.l_max, L)
            return True
        L = L * cfg.revisit_factor if was_covered else L
        doublings = 0
        if g @ g > cfg.line_search_threshold:
            L, doublings = self.line_search(i, L, f, g)
        if doublings == 0:
            self.successes[i] += 1
            c = self.successes[i]
            budget = c if cfg.skip_line_search == "linear" else 2 ** (c - 1)
            self.skips[i] = budget if skip else 0
        else:
            self.successes[i] = 0
        self.L[i] = L
        self.l_max = max(self.l_max, L)
        return False

    def step(self, u):
        """One iteration from the uniforms u (3,); returns the sequence drawn."""
        cfg, lam, n = self.cfg, self.problem.regularization, self.problem.n_sequences
        i = self.draw(u)
        f, g = self.oracle.value_and_gradient(i, self.w)
        self.oracle_calls += 1
        self.d += g - self.y[i]
        self.y[i] = g
        was_covered = bool(self.covered[i])
        skipped = self.lipschitz(i, was_covered, f, g)
        m = self.covered.sum()
        l_mean = self.L[self.covered].mean()
        alpha = 1 / (self.l_max + lam)
        if cfg.step_size == "mixed":
            alpha = (n - m) / n / (self.l_max + lam) + m / n * (
                0.5 / (self.l_max + lam) + 0.5 / (l_mean + lam)
            )
        self.w = (1 - alpha * lam) * self.w - alpha / m * self.d
        if not skipped or cfg.skipped_visit == "decay":
            self.l_max *= 2.0 ** (-1.0 / (cfg.lipschitz_halflife * n))
        return i


class OegReference:
    """OEG (baselines.md §6) on full joint distributions u_i over the K^T labelings."""

    def __init__(self, problem, log_node, log_edge, cfg):
        self.problem, self.cfg = problem, cfg
        self.oracle = EnumerationOracle(problem)
        so = problem.train.seq_offsets
        n = problem.n_sequences
        self.log_u = [
            self._joint(i, log_node[so[i] : so[i + 1]], log_edge[so[i] - i : so[i + 1] - i - 1])
            for i in range(n)
        ]
        lam_n = problem.regularization * n
        self.w = sum(self.oracle.gold[i] - self._mean(i, self.log_u[i]) for i in range(n)) / lam_n
        self.rates = np.full(n, cfg.learning_rate)
        self.oracle_calls = 0

    def _joint(self, i, log_node, log_edge):
        """log u(y) = sum_t log mu_{t,t+1}(y_t, y_t+1) - sum_{inner t} log mu_t(y_t)."""
        ys = self.oracle.tables[i][0]
        T = log_node.shape[0]
        out = []
        for y in ys:
            if T == 1:
                out.append(log_node[0, y[0]])
                continue
            s = sum(log_edge[t, y[t], y[t + 1]] for t in range(T - 1))
            out.append(s - sum(log_node[t, y[t]] for t in range(1, T - 1)))
        return np.array(out)

    def _mean(self, i, log_u):
        return np.exp(log_u) @ self.oracle.tables[i][2]

    def marginals(self, i):
        """(node (T, K), edge (T-1, K, K)) marginals of u_i."""
        ys = self.oracle.tables[i][0]
        T, K = len(ys[0]), self.problem.feature_map.n_labels
        node, edge = np.zeros((T, K)), np.zeros((max(T - 1, 0), K, K))
        for y, p in zip(ys, np.exp(self.log_u[i]), strict=True):
            node[np.arange(T), list(y)] += p
            for t in range(T - 1):
                edge[t, y[t], y[t + 1]] += p
        return node, edge

    @staticmethod
    def entropy(log_u):
        return -np.sum(np.exp(log_u) * log_u)

    def step(self, i):
        """One visit of sequence i; returns True when the step was accepted."""
        lam_n = self.problem.regularization * self.problem.n_sequences
        log_p = self.oracle.log_joint(i, self.w)
        eta = self.rates[i]
        for _ in range(self.cfg.max_halvings + 1):
            self.oracle_calls += 1
            mixed = (1 - eta) * self.log_u[i] + eta * log_p
            log_new = mixed - logsumexp(mixed)
            dw = -(self._mean(i, log_new) - self._mean(i, self.log_u[i])) / lam_n
            w_new = self.w + dw
            gain = self.entropy(log_new) - self.entropy(self.log_u[i])
            gain -= 0.5 * lam_n * (w_new @ w_new - self.w @ self.w)
            if gain > 0:
                self.log_u[i], self.w = log_new, w_new
                self.rates[i] = min(eta * self.cfg.learning_rate_growth, 1.0)
                return True
            eta /= 2
        return False


class SpdcReference(OegReference):
    """The dual-free SPDC (Wang & Xiao 2017, Algorithm 7) as written: full joints u_i, a dense
    primal x, the dense running mean u = (1/n) sum_i (E_{u_i}[F] - F_i) and the extrapolated
    point x~, every step touching all of x."""

    def __init__(self, problem, log_node, log_edge, x0=None):
        super().__init__(problem, log_node, log_edge, SimpleNamespace(learning_rate=0.5))
        self.u = -problem.regularization * self.w
        self.x = self.w.copy() if x0 is None else np.array(x0, dtype=float)
        self.x_bar = self.x.copy()

    def step(self, k, rates):
        """One step on example k with rates = (sigma, tau, theta)."""
        sigma, tau, theta = rates
        lam = self.problem.regularization
        scores = self.oracle.tables[k][2] @ self.x_bar
        mixed = (self.log_u[k] + sigma * scores) / (1 + sigma)
        log_new = mixed - logsumexp(mixed)
        change = self._mean(k, log_new) - self._mean(k, self.log_u[k])
        x_new = (self.x - tau * (self.u + change)) / (1 + tau * lam)
        self.u = self.u + change / self.problem.n_sequences
        self.x_bar = x_new + theta * (x_new - self.x)
        self.x, self.log_u[k] = x_new, log_new
        self.w = -self.u / lam
