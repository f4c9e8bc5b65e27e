"""SDCA's options and the state a run continues from: what the solver
(:mod:`crfsdca.solvers.sdca`) and its local steps (:mod:`crfsdca.solvers.local`) share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from crfsdca.solvers.base import RunState, SolverConfig, option
from crfsdca.solvers.samplers import SCHEMES, check_scheme
from crfsdca.structures.dual import DualState

LINE_SEARCH_STARTS = ("half", "previous", "model")  # codes of sdca_epoch.line_search_start
LINE_SEARCH_METHODS = ("crfsdca", "paper")  # the paper's: sdca_epoch.PaperSearch (LocalSDCA.search)
# the hinge loss's block steps: hinge.PAIRWISE, hinge.FW, hinge.SMOOTH, hinge.ACTIVE
HINGE_STEPS = ("pairwise", "fw", "smooth", "active")


#: the non-uniformity where none is given: one thread, and a team of threads
#: (``crfsdca.solvers.threads``; CoNLL-2000 to 1e-4: 20.7 epochs against 28-34 with 0.8)
NON_UNIFORMITY, TEAM_NON_UNIFORMITY = 0.8, 0.5


@dataclass(frozen=True, kw_only=True)
class SDCAConfig(SolverConfig):
    """Options of SDCA."""

    sampling: str = option("gap", "sampling scheme: " + " | ".join(SCHEMES))
    non_uniformity: float | None = option(
        None,
        "fraction of draws taken from the non-uniform law (not given: 0.8 on one thread, 0.5 on"
        " a team of threads, where concurrent steps drawn from the gap law lag near the end)",
    )
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
    line_search_method: str = option(
        "crfsdca",
        "crfsdca (a float32 predictor, then rtsafe in float64) | paper (the authors' safe"
        " Newton: float64 only, its first step tested against [0, 1], returns its last step's"
        " point; --line-search-tol 0.5 with --line-search-start half is the paper's one step)",
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
    hinge_step: str = option(
        "fw",
        "block step of the hinge loss (--loss hinge): fw (Frank-Wolfe toward the loss-augmented"
        " MAP: BCFW's and the seed's closed-form step) | pairwise (from the worst labelling of"
        " the block's support to the MAP: linear convergence, slower at first on corpora) |"
        " smooth (the CRF's step on the hinge loss smoothed by entropy at a temperature"
        " lowered as the smoothed gap falls: chains, no l1) | active (pairwise from the worst"
        " of the block's stored labellings to the MAP: Osokin et al.'s BCPFW; chains)",
    )
    hinge_atoms: int = option(
        128, "labellings stored per sequence by --hinge-step active (its active set)"
    )
    smooth_temperature: float = option(
        1.0, "first temperature of --hinge-step smooth (the entropy's weight in the loss)"
    )
    smooth_decay: float = option(
        0.5,
        "factor on the temperature of --hinge-step smooth once the smoothed gap falls below the"
        " entropy term (temperature x mean entropy), in (0, 1)",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_scheme(self.sampling)
        if self.non_uniformity is not None and not 0.0 <= self.non_uniformity <= 1.0:
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
        if self.line_search_method not in LINE_SEARCH_METHODS:
            raise ValueError(
                f"line_search_method must be one of {', '.join(LINE_SEARCH_METHODS)};"
                f" got {self.line_search_method!r}"
            )
        if self.init not in ("gibbs", "smoothed"):
            raise ValueError(f"init must be gibbs or smoothed; got {self.init!r}")
        if not np.isfinite(self.gibbs_score):
            raise ValueError(f"gibbs_score must be finite; got {self.gibbs_score}")
        if self.dual_dtype not in ("float64", "float32"):
            raise ValueError(f"dual_dtype must be float64 or float32; got {self.dual_dtype!r}")
        if not 0.0 < self.init_epsilon <= 1.0:
            raise ValueError(f"init_epsilon must be in (0, 1]; got {self.init_epsilon}")
        if self.hinge_step not in HINGE_STEPS:
            raise ValueError(
                f"hinge_step must be one of {', '.join(HINGE_STEPS)}; got {self.hinge_step!r}"
            )
        if self.hinge_atoms < 1:
            raise ValueError(f"hinge_atoms must be >= 1; got {self.hinge_atoms}")
        if not (np.isfinite(self.smooth_temperature) and self.smooth_temperature > 0.0):
            raise ValueError(f"smooth_temperature must be > 0; got {self.smooth_temperature}")
        if not 0.0 < self.smooth_decay < 1.0:
            raise ValueError(f"smooth_decay must be in (0, 1); got {self.smooth_decay}")
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
