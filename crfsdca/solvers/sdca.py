"""SDCA for CRFs with gap sampling (Le Priol, Piche & Lacoste-Julien 2018, Alg. 2).

Each iteration draws a sequence i, calls the oracle once (nu_i at w), records the block gap
g_i = KL~(mu_i || nu_i), moves mu_i toward nu_i by the step size gamma* that maximises the dual
along that direction (safe Newton, eq. 20) and updates w = w_hat(mu) sparsely. The whole epoch
runs in one compiled kernel (``crfsdca.kernels.sdca_epoch.run_steps``); this module decides
schedules, draws the uniforms, evaluates and stops.

Stopping (Sec. 6.3): when the running gap estimate G = mean(g_i) <= tol, one exact pass (n oracle
calls, counted) computes every g_i; the run stops if the exact gap <= tol, else the estimates are
replaced by the exact values and the run continues.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from crfsdca.dual import DualState, dual_state_bytes, smoothed_empirical
from crfsdca.errors import ConvergenceWarning
from crfsdca.interrupts import deferred_interrupt
from crfsdca.kernels import sdca_epoch
from crfsdca.problem import Problem
from crfsdca.radii import importance_weights
from crfsdca.samplers import SCHEMES, TreeSampler, check_scheme
from crfsdca.solvers.base import RunState, SolverConfig, SolverResult, option

if TYPE_CHECKING:
    from crfsdca.monitor import Monitor


LINE_SEARCH_STARTS = ("half", "previous", "model")  # codes of sdca_epoch.line_search_start
# trace counters of the steps' wall time per phase, from the kernel's cycle counts (its stats)
PHASE_SECONDS = {"oracle_seconds": 5, "block_gap_seconds": 6, "line_search_seconds": 3}


@dataclass(frozen=True, kw_only=True)
class SDCAConfig(SolverConfig):
    """Options of SDCA."""

    sampling: str = option("gap", "sampling scheme: " + " | ".join(SCHEMES))
    non_uniformity: float = option(0.8, "fraction of draws taken from the non-uniform law")
    line_search: bool = option(True, "Newton line search on the step size (else --fixed-step)")
    line_search_tol: float = option(
        1e-3, "stop Newton when the last double-precision step is below this"
    )
    max_newton_iterations: int = option(
        100,
        "cap on Newton iterations, for the float32 predictor and the float64 check each"
        " (1 = one-step ablation, no predictor; the paper's ablation starts at 0.5:"
        " add --line-search-start half)",
    )
    line_search_start: str = option(
        "model",
        "first Newton point: model (root of a quadratic model of f' from f'(0), f'(1) and the"
        " block gap) | half (0.5) | previous (the sequence's last step size)",
    )
    fixed_step: float = option(0.0, "fixed step size in (0, 1]; > 0 turns the line search off")
    init_epsilon: float = option(1e-3, "weight of the uniform law in the smoothed initialisation")
    refresh_every: int = option(0, "recompute every gap exactly every k epochs (0 = never)")
    dual_dtype: str = option("float64", "storage of the dual log-marginals: float64 | float32")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_scheme(self.sampling)
        if not 0.0 <= self.non_uniformity <= 1.0:
            raise ValueError(f"non_uniformity must be in [0, 1]; got {self.non_uniformity}")
        if (self.fixed_step != 0.0 or not self.line_search) and not 0.0 < self.fixed_step <= 1.0:
            raise ValueError(
                f"fixed_step must be in (0, 1] (or 0 with line search); got {self.fixed_step}"
            )
        if not self.line_search_tol > 0:
            raise ValueError(f"line_search_tol must be > 0; got {self.line_search_tol}")
        if self.max_newton_iterations < 1:
            raise ValueError(
                f"max_newton_iterations must be >= 1; got {self.max_newton_iterations}"
            )
        if self.line_search_start not in LINE_SEARCH_STARTS:
            raise ValueError(
                f"line_search_start must be one of {', '.join(LINE_SEARCH_STARTS)};"
                f" got {self.line_search_start!r}"
            )
        if self.dual_dtype not in ("float64", "float32"):
            raise ValueError(f"dual_dtype must be float64 or float32; got {self.dual_dtype!r}")


@dataclass(kw_only=True)
class SDCAState(RunState):
    """Everything needed to continue a run: dual state, RNG, counters."""

    dual: DualState

    def to_checkpoint(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """(arrays, JSON header) holding this state exactly."""
        return self.dual.arrays(), self.run_header()

    @classmethod
    def from_checkpoint(cls, arrays: dict[str, np.ndarray], header: dict[str, Any]) -> SDCAState:
        dual = DualState(**{name: arrays[name] for name in DualState.__dataclass_fields__})
        return cls(dual=dual, **cls.run_fields(header))


class SDCA:
    """Stochastic dual coordinate ascent over clique marginals."""

    name: ClassVar[str] = "sdca"
    config_class: ClassVar[type[SolverConfig]] = SDCAConfig

    def __init__(self, config: SDCAConfig | None = None) -> None:
        self.config = config or SDCAConfig()

    def initial_state(self, problem: Problem) -> SDCAState:
        dtype = np.dtype(self.config.dual_dtype)
        data = problem.train
        need = dual_state_bytes(
            data.n_items, data.n_sequences, data.n_labels, problem.feature_map.n_features, dtype
        )
        _check_memory(need)
        dual = smoothed_empirical(problem, self.config.init_epsilon, dtype=dtype)
        rng = np.random.default_rng(self.config.seed)
        return SDCAState(dual=dual, rng_state=rng.bit_generator.state)

    def solve(
        self, problem: Problem, monitor: Monitor, state: SDCAState | None = None
    ) -> SolverResult:
        """Run SDCA from ``state`` (or the smoothed empirical initialisation)."""
        cfg = self.config
        state = state or self.initial_state(problem)
        runner = _Runner(problem, cfg, state)
        monitor.start(elapsed=state.seconds)
        if state.oracle_calls > 0:  # resumed: the last evaluation is already in the trace
            monitor.resume_schedule(state.oracle_calls)
            stop, reason = False, ""
        else:
            stop = monitor.end_epoch(state.dual.weights, **runner.report(), force=True)
            reason = monitor.stop_reason
        try:
            while not stop:
                with deferred_interrupt():
                    runner.run_until_eval(monitor)
                    state.seconds = monitor.seconds
                    stop = monitor.end_epoch(state.dual.weights, **runner.report())
                    reason = monitor.stop_reason
                    if runner.certified:
                        stop, reason = True, "tol"
                    state.counters = dict(runner.counters)
                    monitor.checkpoint(state, final=stop)
        except KeyboardInterrupt:
            reason = "interrupted"
        state.seconds = monitor.seconds
        state.counters = runner.counters
        if reason in ("max_epochs", "time_limit"):
            warnings.warn(
                f"SDCA stopped by {reason} above tol={cfg.tol:g}", ConvergenceWarning, stacklevel=2
            )
        return SolverResult(
            weights=state.dual.weights.copy(),
            state=state,
            trace=monitor.trace,
            stop_reason=reason,
            counters=dict(runner.counters),
        )


def _flat(a: np.ndarray) -> np.ndarray:
    """A flat view (never a copy: the kernels update the dual state in place)."""
    if not a.flags.c_contiguous:
        raise ValueError("the dual state arrays must be C-contiguous")
    return a.reshape(-1)


def _check_memory(need: int) -> None:
    """Refuse to allocate a dual state larger than the available memory."""
    available = _available_memory()
    if available is not None and need > available:
        raise MemoryError(
            f"the SDCA dual state needs {need / 2**30:.2f} GiB but only {available / 2**30:.2f} GiB"
            " is available; use --dual-dtype float32, fewer sequences (--max-sequences), or the"
            " distributed solver"
        )


def _available_memory() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class _Runner:
    """The per-run arrays handed to the epoch kernel, and the bookkeeping around it."""

    def __init__(self, problem: Problem, cfg: SDCAConfig, state: SDCAState) -> None:
        self.problem, self.cfg, self.state = problem, cfg, state
        self.rng = np.random.default_rng()
        self.rng.bit_generator.state = state.rng_state
        data, fm = problem.train, problem.feature_map
        self.n = data.n_sequences
        self.layout = sdca_epoch.sequence_layout(data)
        importance = None
        if cfg.sampling.replace("_", "-") in ("importance", "gap-importance"):
            importance = importance_weights(problem)
        self.sampler = TreeSampler(cfg.sampling, state.dual.gap_estimates, importance)
        self.dims = (fm.n_attributes, fm.n_labels, fm.n_bias_rows)
        self.workspace = sdca_epoch.make_workspace(data.max_length, fm.n_labels, self.layout)
        self.counters = dict(
            state.counters
            or {
                "newton_iterations": 0.0,
                "line_searches": 0.0,
                "line_search_failures": 0.0,
                "exact_passes": 0.0,
            }
        )
        for key in ("predictor_evaluations", "step_seconds", *PHASE_SECONDS):
            self.counters.setdefault(key, 0.0)
        self.certified = False
        self._epochs_done = state.oracle_calls / self.n

    def params(self, stop_gap: float) -> tuple:
        cfg = self.cfg
        lam_n = self.problem.regularization * self.n
        step = cfg.fixed_step if cfg.fixed_step > 0 else -1.0
        return (
            lam_n,
            1.0,
            cfg.line_search_tol,
            cfg.max_newton_iterations,
            step,
            float(cfg.non_uniformity),
            float(stop_gap),
            LINE_SEARCH_STARTS.index(cfg.line_search_start),
        )

    def run_until_eval(self, monitor: Monitor) -> bool:
        """Run steps up to the next evaluation point; returns True after an exact gap pass."""
        cfg, st = self.cfg, self.state
        steps = max(1, int(round(cfg.eval_every * self.n)))
        steps = min(steps, int(math.ceil(cfg.max_epochs * self.n)) - st.oracle_calls)
        steps = max(steps, 1)
        self.sampler.rebuild(st.dual.gap_estimates)  # fresh sums: a resumed run draws the same
        draws = self.rng.random((steps, 2))
        st.rng_state = self.rng.bit_generator.state
        start = time.perf_counter()
        done, status, stats = sdca_epoch.run_steps(self.kernel_args(draws, cfg.tol))
        elapsed = time.perf_counter() - start
        self._check_status(status)
        st.oracle_calls += done
        st.updates += done
        self.counters["newton_iterations"] += stats[0]
        self.counters["line_searches"] += stats[1]
        self.counters["line_search_failures"] += stats[2]
        self.counters["predictor_evaluations"] += stats[7]
        # wall time of the steps, split by the kernel's cycle counts (timing, not state)
        self.counters["step_seconds"] += elapsed
        if stats[4] > 0:
            for key, k in PHASE_SECONDS.items():
                self.counters[key] += elapsed * min(stats[k] / stats[4], 1.0)
        epoch = st.oracle_calls / self.n
        refresh = (
            cfg.refresh_every > 0
            and int(epoch) // cfg.refresh_every > int(self._epochs_done) // cfg.refresh_every
        )
        self._epochs_done = epoch
        if done < steps or refresh:
            with_tol = done < steps
            self.exact_pass(check=with_tol)
            return True
        return False

    def kernel_args(self, draws: np.ndarray, stop_gap: float) -> tuple:
        d = self.state.dual
        return (
            self.layout,
            (_flat(d.log_node), _flat(d.log_edge), d.entropies, d.gap_estimates, d.step_sizes),
            d.weights,
            (self.sampler.code, self.sampler.tree, self.sampler.multipliers),
            self.dims,
            self.params(stop_gap),
            draws,
            self.workspace,
        )

    def exact_pass(self, check: bool) -> None:
        """Recompute every g_i exactly (n oracle calls) and rebuild the sampler."""
        d = self.state.dual
        gaps = sdca_epoch.exact_gaps(self.layout, (d.log_node, d.log_edge), d.weights, self.dims)
        self._check_status(0 if np.all(np.isfinite(gaps)) else -1)
        d.gap_estimates[:] = gaps
        self.sampler.rebuild(gaps)
        self.state.oracle_calls += self.n
        self.counters["exact_passes"] += 1
        if check and gaps.mean() <= self.cfg.tol:
            self.certified = True

    def _check_status(self, status: int) -> None:
        if status != 0:
            epoch = self.state.oracle_calls / self.n
            where = f"sequence {status - 1}" if status > 0 else "the exact gap pass"
            raise FloatingPointError(
                f"non-finite values in SDCA at epoch {epoch:.3g}, {where}; attributes with huge"
                " values? scale dense features"
            )

    def report(self) -> dict[str, Any]:
        d, st = self.state.dual, self.state
        lam = self.problem.regularization
        wsq = float(d.weights @ d.weights)
        dual = float(d.entropies.sum()) / self.n - 0.5 * lam * wsq
        extra = {k: float(v) for k, v in self.counters.items()}
        return {
            "oracle_calls": st.oracle_calls,
            "updates": st.updates,
            "dual": dual,
            "gap_estimate": float(d.gap_estimates.mean()),
            "extra": extra,
        }
