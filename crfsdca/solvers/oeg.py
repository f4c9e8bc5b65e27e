"""Online exponentiated gradient (OEG) on the dual (Collins et al. 2008), a baseline of [LPL].

Each visit of sequence i moves its dual block geometrically toward the model's conditional at
w = w_hat(mu): u'_i propto u_i^(1 - eta_i) p(. | x_i; w)^eta_i (``baselines.md`` §6), one
forward-backward per trial, and accepts the first trial that increases the dual

    D(mu) = (1/n) sum_i H~(mu_i) - (lambda/2) ||w_hat(mu)||^2,

halving the per-sequence learning rate eta_i after every rejected trial. The dual state (log
clique marginals, cached entropies, w = w_hat(mu) updated sparsely) is SDCA's
:class:`crfsdca.structures.dual.DualState`, so OEG reports the dual value and the exact duality gap
P(w_hat(mu)) - D(mu) at every evaluation. The stretch between two evaluations runs in one
compiled kernel (``crfsdca.kernels.structures.chain_eg``; on a
:class:`~crfsdca.structures.tree.TreeProblem`,
``crfsdca.kernels.structures.tree_eg`` with tree SDCA's dual state and starts; on a
:class:`~crfsdca.structures.junction.JunctionProblem`, ``crfsdca.kernels.structures.junction_eg``
with junction
SDCA's clique and separator tables and its smoothed start).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from crfsdca.kernels.solvers import oeg, oeg_epoch
from crfsdca.solvers.base import RunState, SolverConfig, check_dual_start, option
from crfsdca.solvers.loop import LoopSolver, Runner, chunk_budget
from crfsdca.solvers.sag_nus import DRAW_BLOCK
from crfsdca.solvers.sdca import _check_memory as check_memory
from crfsdca.solvers.sdca import initial_dual
from crfsdca.structures.dual import (
    DualState,
)
from crfsdca.structures.objectives import dual_value, lambda_n, squared_norm
from crfsdca.structures.problem import Problem

if TYPE_CHECKING:
    from crfsdca.solvers.monitor import Monitor

INITS = ("smoothed", "gibbs", "uniform")
SAMPLINGS = ("uniform", "permutation")


@dataclass(frozen=True, kw_only=True)
class OEGConfig(SolverConfig):
    """Options of OEG (baselines.md §6 and §8)."""

    init: str = option(
        "smoothed", "dual start: smoothed (SDCA's epsilon-mix) | gibbs (score on gold) | uniform"
    )
    init_epsilon: float = option(1e-3, "weight of the uniform law in the smoothed start")
    gibbs_score: float = option(10.0, "score of gold labels and transitions in the gibbs start")
    learning_rate: float = option(0.5, "initial learning rate eta_i of every sequence, in (0, 1]")
    learning_rate_growth: float = option(
        1.0, "eta_i is multiplied by this after an accepted step (capped at 1; 1 = never grows)"
    )
    max_halvings: int = option(30, "halvings of eta_i in one visit before the visit is skipped")
    oeg_sampling: str = option(
        "uniform", "order of visits: uniform (with replacement) | permutation (random epochs)"
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.init not in INITS:
            raise ValueError(f"init must be one of {', '.join(INITS)}; got {self.init!r}")
        if self.oeg_sampling not in SAMPLINGS:
            raise ValueError(
                f"oeg_sampling must be one of {', '.join(SAMPLINGS)}; got {self.oeg_sampling!r}"
            )
        if not 0.0 < self.learning_rate <= 1.0:
            raise ValueError(f"learning_rate must be in (0, 1]; got {self.learning_rate}")
        if not self.learning_rate_growth >= 1.0:
            raise ValueError(f"learning_rate_growth must be >= 1; got {self.learning_rate_growth}")
        if self.max_halvings < 0:
            raise ValueError(f"max_halvings must be >= 0; got {self.max_halvings}")
        check_dual_start(self.init_epsilon, self.gibbs_score)


@dataclass(kw_only=True)
class OEGState(RunState):
    """Dual state, per-sequence learning rates, RNG and counters."""

    dual: DualState
    learning_rates: NDArray[np.float64]
    order: NDArray[np.int64]

    def to_checkpoint(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """(arrays, JSON header) holding this state exactly."""
        return {
            **self.dual.arrays(),
            "learning_rates": self.learning_rates,
            "order": self.order,
        }, self.run_header()

    @classmethod
    def from_checkpoint(cls, arrays: dict[str, np.ndarray], header: dict[str, Any]) -> OEGState:
        names = [name for name in DualState.__dataclass_fields__ if name in arrays]
        dual = DualState(**{name: arrays[name] for name in names})
        return cls(
            dual=dual,
            learning_rates=arrays["learning_rates"],
            order=arrays["order"],
            **cls.run_fields(header),
        )


class OEG(LoopSolver):
    """Online exponentiated gradient with per-sequence learning rates."""

    name: ClassVar[str] = "oeg"
    config_class: ClassVar[type[SolverConfig]] = OEGConfig
    config: OEGConfig

    def initial_state(self, problem: Problem) -> OEGState:
        """Dual start of ``init`` with w = w_hat(mu) exactly, eta_i = learning_rate, after the
        memory check (float64 log-marginals)."""
        cfg, structure = self.config, problem.structure
        need, detail = structure.dual_size(np.float64)
        what = f"the OEG dual state {detail}".rstrip()
        check_memory(need, what, "use fewer sequences (--max-sequences)")
        dual = initial_dual(problem, cfg)
        rng = np.random.default_rng(cfg.seed)
        n = problem.n_sequences
        return OEGState(
            dual=dual,
            learning_rates=np.full(n, cfg.learning_rate),
            rng_state=rng.bit_generator.state,
            order=np.zeros(0, np.int64),
        )

    def runner(self, problem: Problem, state: OEGState) -> _Runner:
        return _Runner(problem, self.config, state)


class _Runner(Runner):
    """The arrays handed to the OEG kernel, and the bookkeeping around it."""

    counter_names = ("halvings", "skipped_visits", "visits")

    def __init__(self, problem: Problem, cfg: OEGConfig, state: OEGState) -> None:
        super().__init__(problem, cfg, state)
        self.workspace = self.structure.oeg_workspace()

    def run_kernel(self, dual: oeg.OEGDual, params: oeg.OEGParams, indices: np.ndarray) -> tuple:
        """The compiled visits of ``indices`` (``kernels.solvers.oeg_epoch.run_steps``)."""
        w = self.state.dual.weights
        blocks = self.structure.blocks
        return oeg_epoch.run_steps(blocks, dual, w, params, indices, self.workspace)

    @property
    def weights(self) -> NDArray[np.float64]:
        return self.state.dual.weights

    def params(self, budget: int) -> oeg.OEGParams:
        return oeg.OEGParams(
            lam_n=float(lambda_n(self.problem)),
            max_halvings=int(self.cfg.max_halvings),
            growth=float(self.cfg.learning_rate_growth),
            budget=int(budget),
        )

    def indices(self, size: int) -> NDArray[np.int64]:
        """The next ``size`` visits (uniform, or consecutive random permutations)."""
        if self.cfg.oeg_sampling == "uniform":
            return self.rng.integers(0, self.n, size=size)
        st = self.state
        while st.order.size < size:
            st.order = np.concatenate([st.order, self.rng.permutation(self.n)])
        return st.order[:size]

    def run(self, indices: NDArray[np.int64], budget: int) -> tuple[int, int]:
        """Run the kernel on ``indices``; returns (visits, oracle calls)."""
        d, st = self.state.dual, self.state
        dual = oeg.OEGDual(d.log_node, d.log_edge, d.entropies, st.learning_rates)
        done, calls, status, stats = self.run_kernel(dual, self.params(budget), indices)
        if self.cfg.oeg_sampling == "permutation":
            st.order = st.order[done + (status != 0) :]
        st.oracle_calls += calls
        st.updates += int(stats[0])
        self.counters["visits"] += done
        self.counters["halvings"] += float(stats[1])
        self.counters["skipped_visits"] += float(stats[2])
        if status != 0:
            raise FloatingPointError(
                f"non-finite log partition in OEG at epoch {st.oracle_calls / self.n:.3g},"
                f" sequence {status - 1}; attributes with huge values? scale dense features"
            )
        return done, calls

    def run_until_eval(self) -> None:
        """Run visits until eval_every epochs of oracle calls (or max_epochs) are spent."""
        st = self.state
        remaining = chunk_budget(self.cfg, self.n, st.oracle_calls)
        while remaining > 0:  # blocks of indices: every visit costs at least one oracle call
            indices = self.indices(min(remaining, DRAW_BLOCK))
            st.rng_state = self.rng.bit_generator.state
            remaining -= self.run(indices, remaining)[1]

    def report(self, monitor: Monitor) -> dict[str, Any]:
        d, st = self.state.dual, self.state
        wsq = squared_norm(d.weights)
        dual = dual_value(self.problem.regularization, wsq, float(d.entropies.sum()), self.n)
        return {
            "oracle_calls": st.oracle_calls,
            "updates": st.updates,
            "dual": dual,
            "extra": {k: float(v) for k, v in self.counters.items()},
        }
