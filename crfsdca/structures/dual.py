"""Dual state of SDCA: the clique marginals mu_i of every sequence, kept as logs.

Packed arrays (no per-sequence objects): ``log_node`` (N, K) for every token and ``log_edge``
(N - n, K, K) for every edge; the edges of sequence i start at ``seq_offsets[i] - i``. Alongside:
the cached junction-tree entropies H~(mu_i), the gap estimates g_i, and w = w_hat(mu) with
w_hat(mu) = (1 / (lambda n)) sum_i [F(x_i, y_i) - E_{mu_i} F(x_i, .)]
(Le Priol et al. 2018, eq. 16).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from crfsdca.kernels.numerics.threads import get_threads
from crfsdca.kernels.structures import chain_eg

INITIAL_GAP = 100.0  # the paper's initial gap estimate, so that a first pass visits everything


@dataclass
class DualState:
    """Plain arrays, cheap to checkpoint and to warm-start from."""

    log_node: NDArray[np.floating]
    log_edge: NDArray[np.floating]
    entropies: NDArray[np.float64]
    gap_estimates: NDArray[np.float64]
    weights: NDArray[np.float64]
    step_sizes: NDArray[np.float64]
    # the elastic net's dual-average vector v = w_hat(mu) (then weights = S_tau(v)); else None
    dual_average: NDArray[np.float64] | None = None

    def _arrays(self) -> tuple[NDArray, ...]:
        """Every array of the state, in field order (the dual average only when set)."""
        extra = () if self.dual_average is None else (self.dual_average,)
        fields = (self.log_node, self.log_edge, self.entropies, self.gap_estimates)
        return (*fields, self.weights, self.step_sizes, *extra)

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in self._arrays()))

    def copy(self) -> DualState:
        return DualState(*(np.array(a, copy=True) for a in self._arrays()))

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            "log_node": self.log_node,
            "log_edge": self.log_edge,
            "entropies": self.entropies,
            "gap_estimates": self.gap_estimates,
            "weights": self.weights,
            "step_sizes": self.step_sizes,
        } | ({} if self.dual_average is None else {"dual_average": self.dual_average})


def dual_state_bytes(
    n_items: int,
    n_sequences: int,
    n_labels: int,
    n_features: int,
    dtype: np.dtype | type = np.float64,
) -> int:
    """Bytes needed by a DualState (log-marginals dominate: (N - n) K^2 entries)."""
    item = np.dtype(dtype).itemsize
    K = n_labels
    return item * (n_items * K + (n_items - n_sequences) * K * K) + 8 * (
        3 * n_sequences + n_features
    )


def smoothed_empirical(problem, epsilon: float, dtype=np.float64) -> DualState:
    """mu_c = epsilon / K^|c| + (1 - epsilon) 1[y_c = gold] (eq. 21/26), w = w_hat(mu) exactly."""
    if not 0.0 < epsilon <= 1.0:
        raise ValueError(f"init_epsilon must be in (0, 1]; got {epsilon}")
    data, K = problem.train, problem.feature_map.n_labels
    n, N = data.n_sequences, data.n_items
    labels = data.labels
    off = np.log(epsilon / K) if epsilon < 1 else -np.log(K)
    on = np.log(epsilon / K + (1.0 - epsilon))
    log_node = np.full((N, K), off, dtype=dtype)
    log_node[np.arange(N), labels] = on
    off2 = np.log(epsilon / K**2)
    on2 = np.log(epsilon / K**2 + (1.0 - epsilon))
    is_edge = np.ones(N, bool)
    is_edge[data.seq_offsets[1:] - 1] = False  # last token of a sequence starts no edge
    src = np.flatnonzero(is_edge)
    entropies = smoothed_entropies(data.lengths, K, (off, on), (off2, on2), log_node.dtype)
    weights = None
    # the edge block's first write (mostly page faults) runs beside w_hat(mu), which does not
    # read it in float64
    with ThreadPoolExecutor(1) as pool:
        edge_block = pool.submit(filled, (N - n, K, K), off2, dtype)
        if np.dtype(dtype) == np.float64:  # float32 logs: the pass, with the kernel's float32 exp
            # sum_e mu_e in closed form: every edge carries off2, its gold pair on2
            p_off2, p_on2 = np.exp(off2), np.exp(on2)
            gold = np.bincount(labels[src] * K + labels[src + 1], minlength=K * K)
            edge_sums = ((N - n) * p_off2 + gold * (p_on2 - p_off2)).reshape(K, K)
            no_edges = np.empty((0, K, K), dtype)
            weights = problem.structure.weights_from_dual(log_node, no_edges, edge_sums=edge_sums)
        log_edge = edge_block.result()
    log_edge[np.arange(N - n), labels[src], labels[src + 1]] = on2
    return finish_state(problem, log_node, log_edge, entropies=entropies, weights=weights)


def filled(shape: tuple[int, ...], value: float, dtype=np.float64) -> NDArray:
    """``np.full(shape, value, dtype)`` written by numba's number of threads, one slice each: a
    dual's edge block is hundreds of MB, and most of the time of its first write goes to page
    faults (CoNLL-2000's 858 MB: 0.3-1.7 s on one thread on the machine of BENCHMARKS.md)."""
    out = np.empty(shape, dtype)
    flat = out.reshape(-1)
    threads = max(1, min(get_threads(), flat.size // (1 << 20)))
    if threads == 1:
        flat.fill(value)
        return out
    bounds = [flat.size * t // threads for t in range(threads + 1)]
    with ThreadPoolExecutor(threads) as pool:  # numpy's fill releases the GIL
        list(pool.map(lambda t: flat[bounds[t] : bounds[t + 1]].fill(value), range(threads)))
    return out


def smoothed_entropies(
    lengths, K: int, node_logs, edge_logs, dtype, edges=None
) -> NDArray[np.float64]:
    """H~(mu_i) of the smoothed empirical start in closed form: every node carries one entry
    ``on`` and K - 1 entries ``off``, every edge one ``on2`` and K^2 - 1 ``off2`` (as stored, in
    ``dtype``), so a tree of T nodes and E edges (``edges``; a chain's T - 1 when None) has
    E H(edge) + (T - 2 E) H(node), the nodes' coefficients 1 - degree summed (a chain: c_T = 1
    for T = 1 and 2 - T otherwise, ``crfsdca.kernels.solvers.sdca.node_coefficient``). Equal to
    the kernel's sum over the stored entries up to rounding (a few ulps of each block's entropy)."""

    def h(logs, size):
        off, on = (float(np.asarray(v, dtype)) for v in logs)
        return -(size - 1) * (np.exp(off) * off) - np.exp(on) * on

    h_node, h_edge = h(node_logs, K), h(edge_logs, K * K)
    T = np.asarray(lengths, np.float64)
    E = np.maximum(T - 1, 0) if edges is None else np.asarray(edges, np.float64)
    return E * h_edge + (T - 2 * E) * h_node


def gibbs_start(problem, score: float, dtype=np.float64) -> DualState:
    """Dual state at the marginals of exp(score (#gold labels + #gold transitions)), per
    sequence: the authors' start (sdca4crf), the empirical point up to ~exp(-2 score), so that
    w_hat(mu) ~ 0 and the first primal is about P(0) = (N / n) log K."""
    if not np.isfinite(score):
        raise ValueError(f"gibbs_score must be finite; got {score}")
    data, K = problem.train, problem.feature_map.n_labels
    log_node = np.empty((data.n_items, K))
    log_edge = np.empty((data.n_items - data.n_sequences, K, K))
    chain_eg.gibbs_marginals(
        data.seq_offsets, data.labels, K, score, log_node, log_edge, max(data.max_length, 1)
    )
    if np.dtype(dtype) != np.float64:
        log_node, log_edge = log_node.astype(dtype), log_edge.astype(dtype)
    return finish_state(problem, log_node, log_edge)


def finish_state(
    problem, log_node, log_edge, gap_estimates=None, entropies=None, weights=None
) -> DualState:
    """Entropies and w_hat(mu) (unless given) of given log-marginals; gap estimates default
    to 100."""
    n = problem.n_sequences
    structure = problem.structure
    if entropies is None:
        entropies = structure.entropies(log_node, log_edge)
    if weights is None:
        weights = structure.weights_from_dual(log_node, log_edge)
    if gap_estimates is None:
        gap_estimates = np.full(n, INITIAL_GAP)
    return DualState(
        log_node=log_node,
        log_edge=log_edge,
        entropies=entropies,
        gap_estimates=np.asarray(gap_estimates, float),
        weights=weights,
        step_sizes=np.full(n, 0.5),
    )


def weights_from_dual(problem, log_node, log_edge) -> NDArray[np.float64]:
    """w_hat(mu) = (F_gold_sum - sum_i E_{mu_i} F) / (lambda n) of chain marginals."""
    return problem.structure.weights_from_dual(log_node, log_edge)
