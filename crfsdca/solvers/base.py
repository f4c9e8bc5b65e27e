"""The interface every solver implements: a frozen config, ``solve(problem, monitor, state)``."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np
from numpy.typing import NDArray

from crfsdca.solvers.trace import Trace


def option(default: Any, help: str, **kwargs: Any) -> Any:  # noqa: A002
    """A config field whose help text sits beside its default (the CLI is generated from it)."""
    return field(default=default, metadata={"help": help, **kwargs})


@dataclass(frozen=True, kw_only=True)
class SolverConfig:
    """Options every solver shares."""

    max_epochs: float = option(100.0, "stop after this many epochs (oracle calls / n)")
    tol: float = option(
        1e-7, "stop when the duality gap (dual methods) or the gradient test is below this"
    )
    time_limit: float = option(math.inf, "stop after this many seconds of solver time")
    eval_every: float = option(
        1.0, "evaluate primal, dual, gap and test error every this many epochs"
    )
    seed: int = option(0, "seed of the random generator")

    def __post_init__(self) -> None:
        if not self.max_epochs > 0:
            raise ValueError(f"max_epochs must be > 0; got {self.max_epochs}")
        if not self.tol >= 0:
            raise ValueError(f"tol must be >= 0; got {self.tol}")
        if not self.time_limit > 0:
            raise ValueError(f"time_limit must be > 0; got {self.time_limit}")
        if not self.eval_every > 0:
            raise ValueError(f"eval_every must be > 0; got {self.eval_every}")

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclass
class SolverResult:
    """What a run returns: final weights, the solver state (for warm starts), the trace."""

    weights: NDArray[np.float64]
    state: Any
    trace: Trace
    stop_reason: str
    counters: dict[str, float] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The returned state as reported everywhere (CLI summary, --json, model header).

        Read from the last trace record, which every stop writes for the state it returns.
        """
        return record_summary(self.trace.records[-1], self.stop_reason)


def record_summary(last: Any, stop_reason: str) -> dict[str, Any]:
    """The fields of a run's final trace record that summaries report, and the stop reason."""
    return (
        {
            "epochs": last.epoch,
            "oracle_calls": last.oracle_calls,
            "updates": last.updates,
            "seconds": last.seconds,
            "primal": last.primal,
            "dual": last.dual,
            "gap": last.gap,
            "gap_estimate": last.gap_estimate,
            "stop_reason": stop_reason,
        }
        | _nonzeros(last)
        | _step_seconds(last)
    )


def _step_seconds(last: Any) -> dict[str, float]:
    """The seconds the record's solver spent in its steps, where it counts them."""
    seconds = last.extra.get("step_seconds")
    return {} if seconds is None else {"step_seconds": float(seconds)}


def _nonzeros(last: Any) -> dict[str, int]:
    """The elastic net's non-zero weight count of the record (absent without an l1 term)."""
    count = last.extra.get("nonzero_weights")
    return {} if count is None else {"nonzero_weights": int(count)}


def check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    """ValueError naming option ``name`` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


def check_dual_start(init_epsilon: float, gibbs_score: float) -> None:
    """ValueError for the parameters of a smoothed or Gibbs dual start out of range."""
    if not 0.0 < init_epsilon <= 1.0:
        raise ValueError(f"init_epsilon must be in (0, 1]; got {init_epsilon}")
    if not np.isfinite(gibbs_score):
        raise ValueError(f"gibbs_score must be finite; got {gibbs_score}")


def refuse_l1(name: str, problem: Any) -> None:
    """ValueError for a solver without an l1 term given an elastic-net problem."""
    if getattr(problem, "l1", 0.0) > 0:
        raise ValueError(
            f"{name} has no l1 term; the elastic net (l1 > 0) is trained by sdca (Prox-SDCA)"
            " and lbfgs (OWL-QN)"
        )


def refuse_hinge(name: str, problem: Any) -> None:
    """ValueError for a solver of the log-loss only given a hinge-loss problem."""
    if getattr(problem, "loss", "log") == "hinge":
        raise ValueError(
            f"{name} has no hinge loss; the structured SVM (loss hinge) is trained by sdca"
        )


RUN_FIELDS = ("rng_state", "oracle_calls", "updates", "seconds", "counters")


@dataclass(kw_only=True)
class RunState:
    """What every stochastic solver's state shares: RNG state and counters (checkpointed)."""

    rng_state: dict[str, Any]
    oracle_calls: int = 0
    updates: int = 0
    seconds: float = 0.0
    counters: dict[str, float] | None = None

    def run_header(self) -> dict[str, Any]:
        """The JSON part of a checkpoint."""
        return {name: getattr(self, name) for name in RUN_FIELDS} | {
            "counters": self.counters or {}
        }

    @staticmethod
    def run_fields(header: dict[str, Any]) -> dict[str, Any]:
        """Constructor arguments from a checkpoint's JSON part."""
        return {name: header[name] for name in RUN_FIELDS}


class ConfiguredSolver:
    """The constructor every solver shares: its config, or the defaults of ``config_class``."""

    name: ClassVar[str]
    config_class: ClassVar[type[SolverConfig]]

    def __init__(self, config: SolverConfig | None = None) -> None:
        self.config: Any = config or self.config_class()


class Solver(Protocol):
    """Protocol shared by SDCA, SAG-NUS, OEG and L-BFGS."""

    name: ClassVar[str]
    config_class: ClassVar[type[SolverConfig]]

    def __init__(self, config: SolverConfig) -> None: ...

    def solve(self, problem: Any, monitor: Any, state: object | None = None) -> SolverResult: ...
