"""The SDCA local step on tree-structured examples (:class:`~crfsdca.tree_oracle.TreeProblem`).

The same runner interface as :class:`~crfsdca.solvers.local.LocalSDCA` (``run_until_eval``,
``report``, ``exact_pass``, ``local_round``, ``objective_terms``, ``primal_contribution``), so
that ``SDCA.solve`` and the shared evaluation loop run trees unchanged; the steps run in
:mod:`crfsdca.kernels.tree_sdca`. Sampling schemes: uniform, gap, max (importance weights need
the radii of chains).
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from crfsdca.dual import DualState
from crfsdca.kernels import tree_sdca
from crfsdca.objectives import dual_value, lambda_n, weights_from_expectations
from crfsdca.samplers import INITIAL_GAP, TreeSampler

if TYPE_CHECKING:
    from crfsdca.monitor import Monitor
    from crfsdca.solvers.sdca import SDCAConfig, SDCAState
    from crfsdca.tree_oracle import TreeProblem

COUNTERS = ("newton_iterations", "exact_passes", "step_seconds")


def tree_smoothed_empirical(problem: TreeProblem, epsilon: float) -> DualState:
    """mu_c = epsilon / K^|c| + (1 - epsilon) 1[y_c = gold] on every node and edge."""
    if not 0.0 < epsilon <= 1.0:
        raise ValueError(f"init_epsilon must be in (0, 1]; got {epsilon}")
    data, K = problem.train, problem.feature_map.n_labels
    N, labels = data.n_items, data.labels
    parents = data.packed[0]
    starts = np.repeat(data.seq_offsets[:-1], data.lengths)  # first node of each node's example
    log_node = np.full((N, K), np.log(epsilon / K) if epsilon < 1 else -np.log(K))
    log_node[np.arange(N), labels] = np.log(epsilon / K + 1.0 - epsilon)
    log_edge = np.full((N, K, K), np.log(epsilon / K**2))
    child = np.flatnonzero(parents >= 0)
    parent_labels = labels[starts[child] + parents[child]]
    log_edge[child, parent_labels, labels[child]] = np.log(epsilon / K**2 + 1.0 - epsilon)
    return tree_finish_state(problem, log_node, log_edge)


def tree_finish_state(problem: TreeProblem, log_node, log_edge) -> DualState:
    data = problem.train
    entropies = tree_sdca.all_entropies(data.seq_offsets, data.packed, log_node, log_edge)
    return DualState(
        log_node=log_node,
        log_edge=log_edge,
        entropies=entropies,
        gap_estimates=np.full(data.n_sequences, INITIAL_GAP),
        weights=tree_weights_from_dual(problem, log_node, log_edge),
        step_sizes=np.full(data.n_sequences, 0.5),
    )


def tree_weights_from_dual(problem: TreeProblem, log_node, log_edge) -> NDArray[np.float64]:
    """w_hat(mu) = (sum_i F(x_i, y_i) - E_mu_i F) / (lambda n)."""
    expected = problem.feature_map.zeros()
    data = problem.train
    tree_sdca.expected_features(
        data.nodes.arrays(), data.packed, log_node, log_edge, _dims(problem), expected
    )
    gold = problem.oracle.gold_features()
    return weights_from_expectations(gold, expected, lambda_n(problem))


def _dims(problem: TreeProblem) -> tuple[int, int, int, int]:
    fm = problem.feature_map
    return (fm.n_attributes, fm.n_labels, fm.n_bias_rows, fm.n_edge_types)


class TreeLocalSDCA:
    """SDCA steps on one shard of tree-structured examples (see the module docstring)."""

    def __init__(
        self, problem: TreeProblem, cfg: SDCAConfig, state: SDCAState, *, scale: float = 1.0
    ) -> None:
        if cfg.sampling.replace("_", "-") in ("importance", "gap-importance"):
            raise ValueError(f"sampling {cfg.sampling!r} is not available for trees yet")
        if cfg.fixed_step > 0 or cfg.dual_dtype != "float64":
            raise ValueError("trees run SDCA with the line search and float64 duals only")
        self.problem, self.cfg, self.state, self.scale = problem, cfg, state, float(scale)
        self.rng = np.random.default_rng()
        self.rng.bit_generator.state = state.rng_state
        data = problem.train
        self.n = data.n_sequences
        self.lam_n = lambda_n(problem)
        self.sampler = TreeSampler(cfg.sampling, state.dual.gap_estimates)
        self.dims = _dims(problem)
        max_attrs = int(np.diff(data.attr_offsets[data.seq_offsets]).max(initial=1))
        self.workspace = tree_sdca.make_workspace(
            max(data.max_length, 1), problem.feature_map.n_labels, max(max_attrs, 1)
        )
        self.counters = dict(state.counters or dict.fromkeys(COUNTERS, 0.0))
        self.certified = False

    @property
    def weights(self) -> NDArray[np.float64]:
        return self.state.dual.weights

    def _dual(self) -> tuple:
        d = self.state.dual
        return (d.log_node, d.log_edge, d.entropies, d.gap_estimates, d.step_sizes)

    def run_steps(self, n_steps: int, scale: float | None = None) -> int:
        st, cfg = self.state, self.cfg
        self.sampler.rebuild(st.dual.gap_estimates)
        draws = self.rng.random((n_steps, 2))
        st.rng_state = self.rng.bit_generator.state
        params = tree_sdca.TreeStepParams(
            lam_n=float(self.lam_n),
            scale=float(self.scale if scale is None else scale),
            tol=float(cfg.line_search_tol),
            max_newton=int(cfg.max_newton_iterations),
            non_uniformity=float(cfg.non_uniformity),
        )
        start = time.perf_counter()
        done, status, newton = self._kernel_steps(params, draws)
        self.counters["step_seconds"] += time.perf_counter() - start
        if status:
            raise FloatingPointError(
                f"non-finite values in SDCA at epoch {st.oracle_calls / self.n:.3g}, example"
                f" {status - 1}"
            )
        st.oracle_calls += done
        st.updates += done
        self.counters["newton_iterations"] += newton
        return done

    def _kernel_steps(self, params: tree_sdca.TreeStepParams, draws: np.ndarray) -> tuple:
        """The compiled steps: (steps done, status, Newton iterations)."""
        data = self.problem.train
        return tree_sdca.run_steps(
            data.nodes.arrays(), data.packed, self._dual(), self.state.dual.weights,
            (self.sampler.code, self.sampler.tree, self.sampler.multipliers), self.dims, params,
            draws, self.workspace,
        )  # fmt: skip

    def run_until_eval(self) -> bool:
        """Steps up to the next evaluation; an exact pass when the estimate reaches tol."""
        cfg, st = self.cfg, self.state
        steps = max(1, int(round(cfg.eval_every * self.n)))
        steps = max(1, min(steps, int(math.ceil(cfg.max_epochs * self.n)) - st.oracle_calls))
        self.run_steps(steps)
        if st.dual.gap_estimates.mean() <= cfg.tol:
            self.exact_pass(check=True)
            return True
        return False

    def local_round(self, w: NDArray[np.float64], n_steps: int, variant: str = "practical"):
        if variant != "practical":
            raise ValueError("trees run the practical DisDCA variant only")
        self.state.dual.weights = np.array(w, dtype=np.float64, copy=True)
        self.run_steps(n_steps)
        return (self.state.dual.weights - w) / self.scale

    def exact_pass(self, check: bool) -> None:
        d, data = self.state.dual, self.problem.train
        gaps = tree_sdca.exact_gaps(
            data.nodes.arrays(), data.packed, d.log_node, d.log_edge, d.weights, self.dims,
            self.workspace,
        )  # fmt: skip
        if not np.all(np.isfinite(gaps)):
            raise FloatingPointError("non-finite values in the exact gap pass")
        d.gap_estimates[:] = gaps
        self.sampler.rebuild(gaps)
        self.state.oracle_calls += self.n
        self.counters["exact_passes"] += 1
        if check and gaps.mean() <= self.cfg.tol:
            self.certified = True

    def report(self, monitor: Monitor | None = None) -> dict[str, Any]:
        d, st = self.state.dual, self.state
        wsq = float(d.weights @ d.weights)
        dual = dual_value(self.problem.regularization, wsq, float(d.entropies.sum()), self.n)
        return {
            "oracle_calls": st.oracle_calls,
            "updates": st.updates,
            "dual": dual,
            "gap_estimate": float(d.gap_estimates.mean()),
            "extra": {k: float(v) for k, v in self.counters.items()},
        }

    def objective_terms(self, w: NDArray[np.float64]) -> dict[str, float]:
        loss, _ = self.problem.oracle.value_and_gradient(w)
        d = self.state.dual
        return {
            "loss": float(loss),
            "entropy": float(d.entropies.sum()),
            "gap_estimate": float(d.gap_estimates.sum()),
            "n": float(self.n),
        }

    def primal_contribution(self) -> NDArray[np.float64]:
        d = self.state.dual
        return tree_weights_from_dual(self.problem, d.log_node, d.log_edge)
