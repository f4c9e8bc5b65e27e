"""SAG-NUS and SAG-NUS* (Schmidt et al. 2015), the primal baselines of Le Priol et al. 2018.

Stochastic average gradient with non-uniform sampling (``baselines.md`` §1-§5): each iteration
draws sequence i (uncovered sequences first with probability (n - m)/n, then half uniformly and
half proportionally to L_i + lambda), calls the oracle at w, replaces the stored gradient of f_i
in the sum d, runs a per-sequence Lipschitz line search (one forward pass per trial) and takes

    w <- (1 - alpha lambda) w - (alpha / m) d,
    alpha = ((n - m)/n) / (L_max + lambda) + (m/n) [.5 / (L_max + lambda) + .5 / (L_mean + lambda)].

SAG-NUS* (``sag-nus-skip``) is the same method with the line-search skipping rule of §4: after
c_i consecutive line searches on sequence i that passed their first test, the next 2^(c_i - 1)
visits of i skip it. A skipped visit still calls the oracle and updates w; with
``skipped_visit="freeze"`` (default) it leaves the Lipschitz estimates alone: L_i keeps its value
(no revisit factor) and L_max is neither raised nor decayed, the decay of L_max being the
counterpart of the increases that line searches make. ``skipped_visit="decay"`` keeps the earlier
rule, under which a skipped visit still decays L_max.

The gradients are stored as marginals (§2) and w is updated just in time (§5); the whole stretch
between two evaluations runs in one compiled kernel (``crfsdca.kernels.solvers.sag_epoch``), written
once for every structure: each structure (``crfsdca.structures``) gives its oracle and the layout of
y_i (on trees, edge sums per edge type; on junction trees, factor marginals per factor type).

SAG is a primal method; with ``certificate`` on, every evaluation also reports the dual value
D(nu(w)) = P(w) - ||grad P(w)||^2 / (2 lambda) of the oracle marginals at w (Le Priol et al.
2018, eqs. 7-8), so that the reported gap certifies P(w) - P* and ``tol`` can stop the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from crfsdca.kernels.solvers import sag, sag_epoch
from crfsdca.kernels.solvers.trees import build
from crfsdca.solvers.base import RunState, SolverConfig, option
from crfsdca.solvers.base import check_choice as _check_choice
from crfsdca.solvers.loop import LoopSolver, Runner, chunk_budget
from crfsdca.solvers.samplers import tree_capacity
from crfsdca.structures.objectives import squared_norm
from crfsdca.structures.problem import Problem

if TYPE_CHECKING:
    from crfsdca.solvers.monitor import Monitor

STEP_RULES = ("mixed", "lmax")
FIRST_VISITS = ("initial", "half-mean")
SKIP_RULES = ("never", "doubling", "linear")
SKIPPED_VISITS = ("freeze", "decay")
RESCALE_BELOW = 1e-100  # fold c into z below this scale (§5; ours)
DRAW_BLOCK = 1 << 16  # steps drawn at once (bounds the memory of the uniforms)
COUNTERS = ("line_search_trials", "line_searches", "capped_line_searches", "skipped_line_searches")


@dataclass(frozen=True, kw_only=True)
class SAGNUSConfig(SolverConfig):
    """Options of SAG-NUS (defaults: Schmidt's SAG_LipschitzLS constants, baselines.md §3)."""

    non_uniformity: float = option(
        0.5, "fraction of covered draws taken proportionally to L_i + lambda (the rest uniform)"
    )
    step_size: str = option(
        "mixed", "alpha: mixed (of 1/(L_max+lambda), 1/(L_mean+lambda)) | lmax (1/(L_max+lambda))"
    )
    initial_lipschitz: float = option(1.0, "initial L_max and L_i of an unvisited sequence")
    first_visit: str = option(
        "initial", "L_i at a first visit: initial | half-mean (half the mean L_i of covered)"
    )
    revisit_factor: float = option(0.5, "L_i is multiplied by this before a revisit's line search")
    line_search_threshold: float = option(1.49e-8, "no line search when ||g_i||^2 <= this")
    max_doublings: int = option(50, "cap on the doublings of L_i in one line search")
    lipschitz_growth: float = option(
        2.0, "a failed line-search test multiplies L_i by this (the doubling of baselines.md §3)"
    )
    lipschitz_halflife: float = option(
        1.0, "L_max halves every this many n iterations (factor 2^(-1/(h n)) per iteration)"
    )
    skip_line_search: str = option(
        "never",
        "never | doubling: after c_i first-test successes skip 2^(c_i-1) line searches | linear:"
        " skip c_i",
    )
    skipped_visit: str = option(
        "freeze",
        "a visit whose line search is skipped: freeze (L_i and L_max untouched, no decay) | decay"
        " (L_i kept, L_max still decays)",
    )
    certificate: bool = option(
        True, "report the dual D(nu(w)) = P(w) - ||grad P(w)||^2/(2 lambda) at evaluations"
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.non_uniformity <= 1.0:
            raise ValueError(f"non_uniformity must be in [0, 1]; got {self.non_uniformity}")
        _check_choice("step_size", self.step_size, STEP_RULES)
        _check_choice("first_visit", self.first_visit, FIRST_VISITS)
        _check_choice("skip_line_search", self.skip_line_search, SKIP_RULES)
        _check_choice("skipped_visit", self.skipped_visit, SKIPPED_VISITS)
        if not self.lipschitz_growth > 1.0:
            raise ValueError(f"lipschitz_growth must be > 1; got {self.lipschitz_growth}")
        for name in ("initial_lipschitz", "revisit_factor", "lipschitz_halflife"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0; got {getattr(self, name)}")
        if not self.line_search_threshold >= 0:
            raise ValueError(
                f"line_search_threshold must be >= 0; got {self.line_search_threshold}"
            )
        if self.max_doublings < 0:
            raise ValueError(f"max_doublings must be >= 0; got {self.max_doublings}")


@dataclass(frozen=True, kw_only=True)
class SAGNUSSkipConfig(SAGNUSConfig):
    """Options of SAG-NUS*: SAG-NUS with line-search skipping (baselines.md §4)."""

    skip_line_search: str = option(
        "doubling",
        "never | doubling: after c_i first-test successes skip 2^(c_i-1) line searches | linear:"
        " skip c_i",
    )


@dataclass
class SAGMemory:
    """Gradient memory of SAG (§2) and the Lipschitz estimates (§3); w is exact (c = 1)."""

    weights: NDArray[np.float64]
    grad_sum: NDArray[np.float64]
    node_marginals: NDArray[np.float64]
    edge_sums: NDArray[np.float64]
    lipschitz: NDArray[np.float64]
    covered: NDArray[np.bool_]
    successes: NDArray[np.int64]
    skips: NDArray[np.int64]
    lipschitz_max: NDArray[np.float64]

    @classmethod
    def zeros(cls, problem: Problem, initial_lipschitz: float) -> SAGMemory:
        data, K = problem.train, problem.feature_map.n_labels
        n = data.n_sequences
        fm = problem.feature_map
        sums = problem.structure.sag_sums_shape()
        return cls(
            weights=fm.zeros(),
            grad_sum=fm.zeros(),
            node_marginals=np.zeros((data.n_items, K)),
            edge_sums=np.zeros((n, *sums)),
            lipschitz=np.full(n, float(initial_lipschitz)),
            covered=np.zeros(n, np.bool_),
            successes=np.zeros(n, np.int64),
            skips=np.zeros(n, np.int64),
            lipschitz_max=np.array([float(initial_lipschitz)]),
        )

    def arrays(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(kw_only=True)
class SAGState(RunState):
    """Everything needed to continue a run: memory, RNG, counters."""

    memory: SAGMemory

    def to_checkpoint(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """(arrays, JSON header) holding this state exactly."""
        return self.memory.arrays(), self.run_header()

    @classmethod
    def from_checkpoint(cls, arrays: dict[str, np.ndarray], header: dict[str, Any]) -> SAGState:
        memory = SAGMemory(**{name: arrays[name] for name in SAGMemory.__dataclass_fields__})
        return cls(memory=memory, **cls.run_fields(header))


class SAGNUS(LoopSolver):
    """Stochastic average gradient with non-uniform sampling and Lipschitz line searches."""

    name: ClassVar[str] = "sag-nus"
    config_class: ClassVar[type[SolverConfig]] = SAGNUSConfig
    config: SAGNUSConfig

    def initial_state(self, problem: Problem) -> SAGState:
        """w = 0, empty memory, L_i = L_max = initial_lipschitz (§1)."""
        rng = np.random.default_rng(self.config.seed)
        memory = SAGMemory.zeros(problem, self.config.initial_lipschitz)
        return SAGState(memory=memory, rng_state=rng.bit_generator.state)

    def runner(self, problem: Problem, state: SAGState) -> _Runner:
        return _Runner(problem, self.config, state)


class SAGNUSSkip(SAGNUS):
    """SAG-NUS* : SAG-NUS that skips line searches on sequences whose L_i keeps sufficing."""

    name: ClassVar[str] = "sag-nus-skip"
    config_class: ClassVar[type[SolverConfig]] = SAGNUSSkipConfig


class _Runner(Runner):
    """The arrays handed to the SAG kernel, and the bookkeeping around it."""

    counter_names = COUNTERS
    rescale_below = RESCALE_BELOW

    def __init__(self, problem: Problem, cfg: SAGNUSConfig, state: SAGState) -> None:
        super().__init__(problem, cfg, state)
        self.workspace = self.structure.sag_workspace()

    @property
    def weights(self) -> NDArray[np.float64]:
        return self.state.memory.weights

    def params(self, budget: int) -> sag.SAGParams:
        cfg = self.cfg
        return sag.SAGParams(
            lam=float(self.problem.regularization),
            non_uniformity=float(cfg.non_uniformity),
            threshold=float(cfg.line_search_threshold),
            revisit=float(cfg.revisit_factor),
            half_mean_first=cfg.first_visit == "half-mean",
            initial_l=float(cfg.initial_lipschitz),
            decay=2.0 ** (-1.0 / (cfg.lipschitz_halflife * self.n)),
            mixed_step=cfg.step_size == "mixed",
            skip=cfg.skip_line_search != "never",
            max_doublings=int(cfg.max_doublings),
            budget=int(budget),
            rescale=float(self.rescale_below),
            skip_decay=cfg.skipped_visit == "decay",
            growth=float(cfg.lipschitz_growth),
            skip_linear=cfg.skip_line_search == "linear",
        )

    def kernel_memory(self) -> sag.SAGMemory:
        """The kernel's view of the memory; the running sums are recomputed exactly."""
        mem = self.state.memory
        covered = mem.covered
        scalars = np.array(
            [mem.lipschitz_max[0], covered.sum(), mem.lipschitz[covered].sum()], dtype=float
        )
        return sag.SAGMemory(
            grad_sum=mem.grad_sum, node=mem.node_marginals, sums=mem.edge_sums,
            lipschitz=mem.lipschitz, covered=covered, successes=mem.successes, skips=mem.skips,
            scalars=scalars,
        )  # fmt: skip

    def samplers(self) -> tuple:
        """Sum-trees of the uncovered and covered indicators and of L_i + lambda (covered)."""
        mem, cap = self.state.memory, tree_capacity(self.n)
        leaves = (
            (~mem.covered).astype(float),
            mem.covered.astype(float),
            np.where(mem.covered, mem.lipschitz + self.problem.regularization, 0.0),
        )
        out = []
        for scores in leaves:
            tree = np.zeros(2 * cap)
            build(tree, scores, False)
            out.append(tree)
        return tuple(out)

    def run_kernel(self, memory: sag.SAGMemory, params: sag.SAGParams, draws: np.ndarray) -> tuple:
        """The compiled iterations on ``draws`` (``kernels.solvers.sag_epoch.run_steps``)."""
        weights = self.state.memory.weights
        return sag_epoch.run_steps(
            self.structure.blocks, memory, self.samplers(), weights, params, draws, self.workspace
        )

    def run(self, draws: np.ndarray, budget: int) -> tuple[int, int, np.ndarray]:
        """Run the kernel on ``draws``; update counters; returns (updates, calls, chosen)."""
        memory = self.kernel_memory()
        done, calls, status, stats, chosen = self.run_kernel(memory, self.params(budget), draws)
        self.state.memory.lipschitz_max[0] = memory.scalars[sag.L_MAX]
        self.state.oracle_calls += calls
        self.state.updates += done
        searches = stats[sag.SEARCHED] + stats[sag.CAPPED]
        values = (stats[0], searches, stats[sag.CAPPED], stats[sag.SKIPPED])
        for key, value in zip(COUNTERS, values, strict=True):
            self.counters[key] += float(value)
        if status != 0:
            epoch = self.state.oracle_calls / self.n
            raise FloatingPointError(
                f"non-finite log partition in {self.cfg.__class__.__name__[:-6]} at epoch"
                f" {epoch:.3g}, sequence {status - 1}; attributes with huge values? scale dense"
                " features"
            )
        return done, calls, chosen

    def run_until_eval(self) -> None:
        """Run iterations until eval_every epochs of oracle calls (or max_epochs) are spent."""
        st = self.state
        remaining = chunk_budget(self.cfg, self.n, st.oracle_calls)
        while remaining > 0:  # blocks of draws: every step costs at least one oracle call
            draws = self.rng.random((min(remaining, DRAW_BLOCK), 3))
            st.rng_state = self.rng.bit_generator.state
            remaining -= self.run(draws, remaining)[1]

    def report(self, monitor: Monitor) -> dict[str, Any]:
        """Counters for the monitor, and the certificate D(nu(w)) (not counted as solver time)."""
        st = self.state
        out: dict[str, Any] = {
            "oracle_calls": st.oracle_calls,
            "updates": st.updates,
            "extra": {k: float(v) for k, v in self.counters.items()},
        }
        if self.cfg.certificate:
            with monitor.paused():
                primal, grad = self.problem.primal_and_gradient(self.weights)
            out["primal"] = primal
            out["dual"] = primal - squared_norm(grad) / (2.0 * self.problem.regularization)
        return out
