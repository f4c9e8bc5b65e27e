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

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from crfsdca.solvers.base import RunState, SolverConfig, option
from crfsdca.solvers.local import LINE_SEARCH_STARTS, LocalSDCA
from crfsdca.solvers.loop import LoopSolver
from crfsdca.solvers.samplers import SCHEMES, check_scheme
from crfsdca.solvers.threads import TeamSDCA, step_threads
from crfsdca.structures.dual import (
    DualState,
)
from crfsdca.structures.problem import Problem

if TYPE_CHECKING:
    pass


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
    init: str = option(
        "smoothed",
        "dual start: smoothed (epsilon-mix of the gold and the uniform law) | gibbs (the authors'"
        " start: the marginals of exp(gibbs_score x gold labels and transitions), w ~ 0)",
    )
    gibbs_score: float = option(10.0, "score of gold labels and transitions in the gibbs start")
    init_epsilon: float = option(1e-3, "weight of the uniform law in the smoothed start")
    refresh_every: int = option(0, "recompute every gap exactly every k epochs (0 = never)")
    dual_dtype: str = option("float64", "storage of the dual log-marginals: float64 | float32")
    threads: int = option(
        0,
        "threads that step at once on one shared w (0: numba's thread count when each thread"
        " gets at least 1000 sequences, else 1; 1: serial, reproducible bit for bit)",
    )

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
        if self.init not in ("gibbs", "smoothed"):
            raise ValueError(f"init must be gibbs or smoothed; got {self.init!r}")
        if not np.isfinite(self.gibbs_score):
            raise ValueError(f"gibbs_score must be finite; got {self.gibbs_score}")
        if self.dual_dtype not in ("float64", "float32"):
            raise ValueError(f"dual_dtype must be float64 or float32; got {self.dual_dtype!r}")
        if not 0.0 < self.init_epsilon <= 1.0:
            raise ValueError(f"init_epsilon must be in (0, 1]; got {self.init_epsilon}")
        if self.refresh_every < 0:
            raise ValueError(f"refresh_every must be >= 0 (0 = never); got {self.refresh_every}")
        if isinstance(self.threads, bool) or not isinstance(self.threads, (int, np.integer)):
            raise TypeError(f"threads must be an int; got {self.threads!r}")
        if self.threads < 0:
            raise ValueError(f"threads must be >= 0 (0 = automatic); got {self.threads}")


@dataclass(kw_only=True)
class SDCAState(RunState):
    """Everything needed to continue a run: dual state, RNG, counters."""

    dual: DualState

    def to_checkpoint(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """(arrays, JSON header) holding this state exactly."""
        return self.dual.arrays(), self.run_header()

    @classmethod
    def from_checkpoint(cls, arrays: dict[str, np.ndarray], header: dict[str, Any]) -> SDCAState:
        names = [name for name in DualState.__dataclass_fields__ if name in arrays]
        dual = DualState(**{name: arrays[name] for name in names})
        return cls(dual=dual, **cls.run_fields(header))


class SDCA(LoopSolver):
    """Stochastic dual coordinate ascent over clique marginals."""

    name: ClassVar[str] = "sdca"
    config_class: ClassVar[type[SolverConfig]] = SDCAConfig
    config: SDCAConfig

    def initial_state(self, problem: Problem) -> SDCAState:
        """The start of ``config.init`` on the problem's structure, after the memory check."""
        cfg, structure = self.config, problem.structure
        dtype = np.dtype(cfg.dual_dtype)
        need, detail = structure.dual_size(dtype)
        what = f"the SDCA dual state {detail}".rstrip()
        _check_memory(need, what, _fixes(dtype))
        dual = initial_dual(problem, cfg, dtype)
        rng = np.random.default_rng(cfg.seed)
        return SDCAState(dual=dual, rng_state=rng.bit_generator.state)

    trains_l1 = True

    def runner(self, problem: Problem, state: SDCAState) -> LocalSDCA:
        """The serial runner, or a team of threads (``config.threads``, ``step_threads``)."""
        threads = step_threads(self.config.threads, problem.train.n_sequences)
        if threads > 1:
            return TeamSDCA(problem, self.config, state, threads)
        return LocalSDCA(problem, self.config, state)


def _fixes(dtype: np.dtype) -> str:
    """What shrinks a dual state: float32 log-marginals (unless they are already), fewer
    sequences, the distributed solver (every structure: a worker holds its shard's duals)."""
    options = ["--dual-dtype float32 (half the size)"] if dtype.itemsize > 4 else []
    options.append("fewer sequences (--max-sequences)")
    options.append("the distributed solver (--workers, --scheduler)")
    head = ", ".join(options[:-1])
    return "use " + (f"{head} or {options[-1]}" if head else options[-1])


def _check_memory(need: int, what: str, fixes: str) -> None:
    """Refuse to allocate a dual state larger than the available memory."""
    available = _available_memory()
    if available is not None and need > available:
        raise MemoryError(
            f"{what} needs {need / 2**30:.2f} GiB but only {available / 2**30:.2f} GiB"
            f" is available; {fixes}"
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


def initial_dual(problem: Problem, config: SDCAConfig, dtype=np.float64) -> DualState:
    """The dual start of ``config.init`` on the problem's structure (w = w_hat(mu) exactly)."""
    if config.init == "gibbs":
        return problem.structure.gibbs_dual(config.gibbs_score, dtype)
    return problem.structure.smoothed_dual(config.init_epsilon, dtype)
