"""The adaptive dual-free SPDC of Wang & Xiao (ICML 2017, Algorithm 7 with Algorithm 4), on the
CRF loss of every structure.

A primal-dual method on the saddle function of the CRF, whose dual variables are the clique
marginals mu_i (held as SDCA's :class:`~crfsdca.structures.dual.DualState`: log-marginals,
cached entropies, w_hat(mu)) and whose primal variable x is a weight vector of its own. Each
step draws an example uniformly, moves its marginals toward the model's at the extrapolated
point x~ by a Bregman (entropy) proximal step, one oracle call, and takes a proximal gradient
step on x (``crfsdca.kernels.solvers.spdc`` has the math, ``spdc_epoch`` the compiled steps,
written once for every structure). Its step sizes are Theorem 4's, adapted every
``adapt_period`` epochs by Algorithm 4 from the exact duality gap (``crfsdca.solvers.spdc_rates``):
the method's guess of the strong convexity that the data give, which the paper shows primal-dual
methods can exploit.

Every evaluation reports P(x) and the dual D(mu) of the iterate's own marginals, so the gap
P(x) - D(mu) >= P(x) - P* certifies x (as SDCA's and OEG's gaps do theirs). The gaps that the
adaptation reads are measured by the solver (a pass of log-partitions, n oracle calls, counted
and timed; ``adapt="off"`` measures none).

Why no Euclidean ("plain") SPDC: its dual step is the proximal map of sigma (-H~) in the
Euclidean norm over the marginal polytope, max_mu <mu, s> + H~(mu) - ||mu - mu_k||^2 / (2 sigma),
which has a closed form nowhere in a CRF: on a single node (multinomial logistic loss) it is a
one-dimensional root search on the normaliser with a Lambert W per label, on any example with an
edge an iterative solve whose every iterate needs inference. The Bregman step of the dual-free
variant is one oracle call on every structure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from crfsdca.kernels.solvers import spdc, spdc_epoch
from crfsdca.solvers.base import RunState, SolverConfig, check_dual_start, option
from crfsdca.solvers.base import check_choice as _check_choice
from crfsdca.solvers.loop import LoopSolver, Runner, chunk_budget
from crfsdca.solvers.oeg import INITS
from crfsdca.solvers.sdca import _check_memory as check_memory
from crfsdca.solvers.sdca import initial_dual
from crfsdca.solvers.spdc_rates import Adaptation, Rates, adapt, theorem4_rates
from crfsdca.structures.dual import DualState
from crfsdca.structures.objectives import dual_value, lambda_n, squared_norm
from crfsdca.structures.problem import Problem
from crfsdca.structures.radii import example_radii

if TYPE_CHECKING:
    from crfsdca.solvers.monitor import Monitor

ADAPT_RULES = ("robust", "off")
EXTRAPOLATIONS = ("theorem", "one")
RADII = ("max", "mean")
DUAL_DTYPES = ("float64", "float32")
PRIMAL_STARTS = ("zero", "dual")
STEP_BLOCK = 1 << 16  # steps drawn at once (bounds the memory of the indices)
RESCALE_BELOW = 1e-100  # fold beta into z below this (ours)
COUNTERS = ("gap_passes", "convexity_doublings", "convexity_halvings")


@dataclass(frozen=True, kw_only=True)
class SPDCConfig(SolverConfig):
    """Options of the dual-free SPDC (Wang & Xiao 2017; defaults: their experiments' T, c)."""

    adapt: str = option(
        "robust", "step-size adaptation: robust (Algorithm 4 on the exact gap) | off (Theorem 4)"
    )
    adapt_period: float = option(10.0, "epochs of steps between two adaptations (T)")
    rate_low: float = option(
        0.95, "double the data-convexity estimate when a period's gap rate is below this x the last"
    )
    rate_high: float = option(
        1.5, "halve the data-convexity estimate when a period's gap rate is above this x the last"
    )
    data_convexity: float = option(
        1.0, "first estimate of the data's strong convexity delta mu^2, in units of lambda n"
    )
    extrapolation: str = option("theorem", "theta: theorem (Theorem 4's) | one (theta = 1)")
    radius: str = option(
        "max", "R^2 of the step sizes from the radii R_i: max (Theorem 4's) | mean (no guarantee)"
    )
    radius_scale: float = option(
        1.0, "multiply R^2 by this (< 1: larger steps than the theorem allows, no guarantee)"
    )
    primal_start: str = option(
        "zero", "first primal iterate x: zero | dual (w_hat of the dual start, as SDCA's and OEG's)"
    )
    init: str = option(
        "smoothed", "dual start: smoothed (SDCA's epsilon-mix) | gibbs (score on gold) | uniform"
    )
    init_epsilon: float = option(1e-3, "weight of the uniform law in the smoothed start")
    gibbs_score: float = option(10.0, "score of gold labels and transitions in the gibbs start")
    dual_dtype: str = option("float64", "storage of the dual log-marginals: float64 | float32")

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_choice("adapt", self.adapt, ADAPT_RULES)
        _check_choice("extrapolation", self.extrapolation, EXTRAPOLATIONS)
        _check_choice("radius", self.radius, RADII)
        _check_choice("init", self.init, INITS)
        _check_choice("primal_start", self.primal_start, PRIMAL_STARTS)
        _check_choice("dual_dtype", self.dual_dtype, DUAL_DTYPES)
        if not (self.adapt_period > 0 and np.isfinite(self.adapt_period)):
            raise ValueError(f"adapt_period must be a finite number > 0; got {self.adapt_period}")
        if not 0.0 < self.rate_low < 1.0:
            raise ValueError(f"rate_low must be in (0, 1); got {self.rate_low}")
        if not (self.rate_high > 1.0 and np.isfinite(self.rate_high)):
            raise ValueError(f"rate_high must be a finite number > 1; got {self.rate_high}")
        if not (self.radius_scale > 0 and np.isfinite(self.radius_scale)):
            raise ValueError(f"radius_scale must be a finite number > 0; got {self.radius_scale}")
        if not (self.data_convexity >= 0 and np.isfinite(self.data_convexity)):
            raise ValueError(
                f"data_convexity must be a finite number >= 0; got {self.data_convexity}"
            )
        if self.adapt == "robust" and self.data_convexity == 0:
            raise ValueError("data_convexity must be > 0 with adapt robust (it is doubled)")
        check_dual_start(self.init_epsilon, self.gibbs_score)


@dataclass(kw_only=True)
class SPDCState(RunState):
    """Dual state (w_hat(mu) in ``dual.weights``), the primal iterate x = w_hat + beta z and
    the extrapolation's memory, the adaptation, RNG and counters."""

    dual: DualState
    z: NDArray[np.float64]
    prev: NDArray[np.float64]
    scalars: NDArray[np.float64]  # beta, theta tau lambda of the last step
    last: NDArray[np.int64]  # the last step's example (-1: none)
    adaptation: Adaptation
    next_adapt: int  # the step count of the next adaptation

    def to_checkpoint(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """(arrays, JSON header) holding this state exactly."""
        arrays = {**self.dual.arrays(), "z": self.z, "prev": self.prev}
        arrays |= {"scalars": self.scalars, "last": self.last}
        header = self.run_header() | {
            "adaptation": list(self.adaptation),
            "next_adapt": self.next_adapt,
        }
        return arrays, header

    @classmethod
    def from_checkpoint(cls, arrays: dict[str, np.ndarray], header: dict[str, Any]) -> SPDCState:
        names = [name for name in DualState.__dataclass_fields__ if name in arrays]
        return cls(
            dual=DualState(**{name: arrays[name] for name in names}),
            z=arrays["z"],
            prev=arrays["prev"],
            scalars=arrays["scalars"],
            last=arrays["last"],
            adaptation=Adaptation(*map(float, header["adaptation"])),
            next_adapt=int(header["next_adapt"]),
            **cls.run_fields(header),
        )


def _memory_fixes(dtype: np.dtype) -> str:
    options = ["--dual-dtype float32 (half the size)"] if dtype.itemsize > 4 else []
    options.append("fewer sequences (--max-sequences)")
    options.append("--solver sag-nus (node marginals only)")
    return "use " + ", ".join(options[:-1]) + " or " + options[-1]


class SPDC(LoopSolver):
    """Adaptive dual-free stochastic primal-dual coordinate method (ADF-SPDC)."""

    name: ClassVar[str] = "spdc-df"
    config_class: ClassVar[type[SolverConfig]] = SPDCConfig
    config: SPDCConfig

    def initial_state(self, problem: Problem) -> SPDCState:
        """The dual start of ``init`` with w_hat(mu) exact, and x = 0 (``primal_start``
        zero: e = x - w_hat = -w_hat) or x = w_hat(mu), after the memory check (the dual
        state and three weight vectors). At a small lambda, w_hat of a dual start is large
        (it scales as 1 / lambda) and P there far above P(0)."""
        cfg, structure = self.config, problem.structure
        dtype = np.dtype(cfg.dual_dtype)
        need, detail = structure.dual_size(dtype)
        d = problem.feature_map.n_features
        what = f"the SPDC state {detail}".rstrip()
        check_memory(need + 24 * d, what, _memory_fixes(dtype))
        dual = initial_dual(problem, cfg, dtype)
        rng = np.random.default_rng(cfg.seed)
        delta = cfg.data_convexity * lambda_n(problem)
        period = max(1, int(round(cfg.adapt_period * problem.n_sequences)))
        return SPDCState(
            dual=dual,
            z=-dual.weights if cfg.primal_start == "zero" else np.zeros(d),
            prev=np.zeros(d),
            scalars=np.array([1.0, 0.0]),
            last=np.array([-1], np.int64),
            adaptation=Adaptation(delta, 1.0, float("nan")),
            next_adapt=period,
            rng_state=rng.bit_generator.state,
        )

    def runner(self, problem: Problem, state: SPDCState) -> _Runner:
        return _Runner(problem, self.config, state)


class _Runner(Runner):
    """The arrays handed to the SPDC kernel, the rates, and the adaptation around it."""

    counter_names = COUNTERS
    rescale_below = RESCALE_BELOW

    def __init__(self, problem: Problem, cfg: SPDCConfig, state: SPDCState) -> None:
        super().__init__(problem, cfg, state)
        self.workspace = self.structure.oeg_workspace()
        radii = example_radii(problem)  # R^2 = max_i R_i / 4 (crfsdca.solvers.spdc_rates)
        stat = radii.max() if cfg.radius == "max" else radii.mean()
        self.radius2 = max(float(stat), 1.0) / 4.0 * cfg.radius_scale
        self.period = max(1, int(round(cfg.adapt_period * self.n)))
        self.point = np.zeros_like(state.z)  # x~ on the visited example's rows (scratch)
        self.measured: tuple[int, float] | None = None  # (steps, P(x)) of the last gap pass
        self.passes_fit = True  # False once a gap pass would end beyond max_epochs

    @property
    def adapting(self) -> bool:
        return self.cfg.adapt == "robust"

    @property
    def weights(self) -> NDArray[np.float64]:
        st = self.state
        return spdc.primal_point(st.dual.weights, self.primal())

    def rates(self) -> Rates:
        lam = self.problem.regularization
        delta = self.state.adaptation.delta
        extrapolate = self.cfg.extrapolation == "theorem"
        return theorem4_rates(lam, self.n, self.radius2, delta, extrapolate)

    def params(self, budget: int) -> spdc.SPDCParams:
        sigma, tau, theta = self.rates()
        lam = self.problem.regularization
        rho = 1.0 / (1.0 + tau * lam)
        return spdc.SPDCParams(
            eta=sigma / (1.0 + sigma),
            rho=rho,
            z_coef=rho * tau * lam * self.n - 1.0,
            tau_lam=tau * lam,
            theta=theta,
            n=self.n,
            lam_n=float(lambda_n(self.problem)),
            budget=int(budget),
            rescale=float(self.rescale_below),
        )

    def primal(self) -> spdc.SPDCPrimal:
        st = self.state
        return spdc.SPDCPrimal(st.z, st.prev, self.point, st.scalars, st.last)

    def dual(self) -> float:
        d = self.state.dual
        wsq = squared_norm(d.weights)
        return dual_value(self.problem.regularization, wsq, float(d.entropies.sum()), self.n)

    def run(self, indices: NDArray[np.int64]) -> int:
        """Steps on ``indices``; returns the steps done (each one oracle call)."""
        st = self.state
        d = st.dual
        dual = spdc.SPDCDual(d.log_node, d.log_edge, d.entropies)
        blocks, primal = self.structure.blocks, self.primal()
        params = self.params(indices.size)
        done, status = spdc_epoch.run_steps(
            blocks, dual, d.weights, primal, params, indices, self.workspace
        )
        st.oracle_calls += done
        st.updates += done
        if status != 0:
            raise FloatingPointError(
                f"non-finite log partition in SPDC at epoch {st.oracle_calls / self.n:.3g},"
                f" sequence {status - 1}; attributes with huge values? scale dense features"
            )
        return done

    def measure(self) -> float:
        """The exact gap P(x) - D(mu) of the iterate (n oracle calls, counted)."""
        st = self.state
        primal = self.problem.primal(self.weights)
        st.oracle_calls += self.n
        self.counters["gap_passes"] += 1.0
        self.measured = (st.updates, primal)
        return primal - self.dual()

    def adapt_due(self) -> bool:
        """Whether a gap pass is due: the first period's reference, or a period's end."""
        st = self.state
        due = np.isnan(st.adaptation.gap) or st.updates >= st.next_adapt
        return self.adapting and self.passes_fit and due

    def adapt(self) -> int:
        """Algorithm 4 at the end of a period (or the first gap, at the start); returns the
        oracle calls spent. A pass that would end beyond max_epochs is not taken: the run then
        ends without adapting again."""
        st, cfg = self.state, self.cfg
        if st.oracle_calls + self.n > math.ceil(cfg.max_epochs * self.n):
            self.passes_fit = False
            return 0
        if not np.isnan(st.adaptation.gap):
            st.next_adapt += self.period
        st.adaptation, change = adapt(st.adaptation, self.measure(), cfg.rate_low, cfg.rate_high)
        if change > 0:
            self.counters["convexity_doublings"] += 1.0
        elif change < 0:
            self.counters["convexity_halvings"] += 1.0
        return self.n

    def run_until_eval(self) -> None:
        """Run steps until eval_every epochs of oracle calls (or max_epochs) are spent, with the
        adaptation's gap passes among them (a pass may end a chunk up to n calls late, never
        beyond max_epochs)."""
        st = self.state
        remaining = chunk_budget(self.cfg, self.n, st.oracle_calls)
        while True:
            if self.adapt_due():  # also right after the steps that end a period, so that the
                remaining -= self.adapt()  # evaluation there reads the pass's P(x)
            if remaining <= 0:
                break
            size = min(remaining, STEP_BLOCK)
            if self.adapting and self.passes_fit:
                size = min(size, st.next_adapt - st.updates)
            indices = self.rng.integers(0, self.n, size=size)
            st.rng_state = self.rng.bit_generator.state
            remaining -= self.run(indices)

    def report(self, monitor: Monitor) -> dict[str, Any]:
        st = self.state
        sigma, tau, theta = self.rates()
        extra = {k: float(v) for k, v in self.counters.items()}
        extra |= {"data_convexity": st.adaptation.delta, "sigma": sigma, "tau": tau}
        out: dict[str, Any] = {
            "oracle_calls": st.oracle_calls,
            "updates": st.updates,
            "dual": self.dual(),
            "extra": extra | {"theta": theta},
        }
        if self.measured is not None and self.measured[0] == st.updates:
            out["primal"] = self.measured[1]
        return out
