"""The SDCA local step on junction-tree examples (a
:class:`~crfsdca.junction_oracle.JunctionProblem`).

The same runner interface as :class:`~crfsdca.solvers.local.LocalSDCA` and
:class:`~crfsdca.solvers.local_tree.TreeLocalSDCA` (it inherits the latter's ``run_until_eval``,
``local_round``, ``report`` and ``objective_terms``); the steps run in
:mod:`crfsdca.kernels.junction_sdca`. Sampling schemes: uniform, gap, max.

The dual state is a :class:`~crfsdca.dual.DualState` whose ``log_edge`` holds the flat table
array of every example (clique tables, then separator tables, region by region; float64 or
float32) and whose ``log_node`` is empty: node marginals are projections of the clique tables.
Its size, sum over examples of sum_c K^|c| + sum_s K^|s| entries, is checked against the
available memory before anything is allocated: (T - 2) K^3 + (T - 3) K^2 per second-order
chain of length T, about 2.2e9 entries (16 GiB in float64) on CoNLL-2000's training set.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from crfsdca.dual import DualState
from crfsdca.junction_oracle import check_labels, exp_workspace, make_workspace
from crfsdca.kernels import junction_batch, junction_sdca
from crfsdca.objectives import lambda_n, weights_from_expectations
from crfsdca.samplers import INITIAL_GAP, TreeSampler
from crfsdca.solvers.local_tree import COUNTERS, TreeLocalSDCA

if TYPE_CHECKING:
    from crfsdca.junction_oracle import JunctionData, JunctionProblem
    from crfsdca.solvers.sdca import SDCAConfig, SDCAState


def junction_dual_bytes(data: JunctionData, n_features: int, dtype=np.float64) -> int:
    """Bytes of the junction dual state: the tables, three per-example arrays and w."""
    return np.dtype(dtype).itemsize * data.n_table_entries + 8 * (3 * data.n_sequences + n_features)


def junction_smoothed_empirical(problem: JunctionProblem, epsilon: float, dtype) -> DualState:
    """mu_t = epsilon / K^|t| + (1 - epsilon) 1[y_t = gold] on every clique and separator
    table t (consistent: a clique's projection is its separator's table)."""
    if not 0.0 < epsilon <= 1.0:
        raise ValueError(f"init_epsilon must be in (0, 1]; got {epsilon}")
    data, oracle = problem.train, problem.oracle
    check_labels(data)
    tables = np.empty(data.n_table_entries, dtype)
    junction_batch.empirical_tables(
        oracle._data, oracle._jt, problem.feature_map.n_labels, epsilon, tables
    )
    return junction_finish_state(problem, tables)


def junction_finish_state(problem: JunctionProblem, tables) -> DualState:
    n = problem.n_sequences
    return DualState(
        log_node=np.empty((0, problem.feature_map.n_labels), tables.dtype),
        log_edge=tables,
        entropies=junction_sdca.all_entropies(problem.oracle.packed_structure, tables),
        gap_estimates=np.full(n, INITIAL_GAP),
        weights=junction_weights_from_dual(problem, tables),
        step_sizes=np.full(n, 0.5),
    )


def junction_weights_from_dual(problem: JunctionProblem, tables) -> NDArray[np.float64]:
    """w_hat(mu) = (sum_i F(x_i, y_i) - E_mu_i F) / (lambda n)."""
    oracle = problem.oracle
    expected = oracle.expected_features(tables)
    return weights_from_expectations(oracle.gold_features(), expected, lambda_n(problem))


class JunctionLocalSDCA(TreeLocalSDCA):
    """SDCA steps on one shard of junction-tree examples (see the module docstring)."""

    def __init__(
        self, problem: JunctionProblem, cfg: SDCAConfig, state: SDCAState, *, scale: float = 1.0
    ) -> None:
        if cfg.sampling.replace("_", "-") in ("importance", "gap-importance"):
            raise ValueError(f"sampling {cfg.sampling!r} is not available for junction trees")
        if cfg.fixed_step > 0:
            raise ValueError("junction trees run SDCA with the line search only")
        self.problem, self.cfg, self.state, self.scale = problem, cfg, state, float(scale)
        self.rng = np.random.default_rng()
        self.rng.bit_generator.state = state.rng_state
        data, fm = problem.train, problem.feature_map
        self.n = data.n_sequences
        self.lam_n = lambda_n(problem)
        self.sampler = TreeSampler(cfg.sampling, state.dual.gap_estimates)
        oracle = problem.oracle
        self.dims = oracle._dims
        self.structure = oracle.packed_structure
        max_attrs = int(np.diff(data.attr_offsets[data.seq_offsets]).max(initial=1))
        n_factor = fm.n_features - (fm.factor_offset(0) if fm.factor_arities else fm.n_features)
        step_ws = junction_sdca.make_step_workspace(
            int(data.region_sizes.max()), fm.n_labels, max(max_attrs, 1), n_factor
        )
        self.workspace = make_workspace(data, fm.n_labels) + (step_ws, exp_workspace(fm))
        self.counters = dict(state.counters or dict.fromkeys(COUNTERS, 0.0))
        self.certified = False

    def _dual(self) -> tuple:
        d = self.state.dual
        return (d.log_edge, d.entropies, d.gap_estimates, d.step_sizes)

    def _kernel_steps(self, params, draws: np.ndarray) -> tuple:
        """The compiled junction steps (``TreeLocalSDCA.run_steps`` does the rest)."""
        return junction_sdca.run_steps(
            self.problem.oracle._data, self.structure, self._dual(), self.state.dual.weights,
            (self.sampler.code, self.sampler.tree, self.sampler.multipliers), self.dims, params,
            draws, self.workspace,
        )  # fmt: skip

    def exact_pass(self, check: bool) -> None:
        d = self.state.dual
        gaps = junction_sdca.exact_gaps(
            self.problem.oracle._data, self.structure, d.log_edge, d.weights, self.dims,
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

    def primal_contribution(self) -> NDArray[np.float64]:
        return junction_weights_from_dual(self.problem, self.state.dual.log_edge)
