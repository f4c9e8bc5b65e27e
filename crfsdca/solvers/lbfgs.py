"""L-BFGS on the primal (SciPy), the reference optimum P* for every comparison.

Each value+gradient evaluation is one full pass (n oracle calls). At every iterate the dual point
nu(w) gives the certificate P(w) - D(nu(w)) = ||grad P(w)||^2 / (2 lambda) >= P(w) - P*
(Le Priol et al. 2018, eqs. 7-8), reported as the gap; the run stops when it is <= tol.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from scipy.optimize import minimize

from crfsdca.problem import Problem
from crfsdca.solvers.base import SolverConfig, SolverResult, option

if TYPE_CHECKING:
    from crfsdca.monitor import Monitor


@dataclass(frozen=True, kw_only=True)
class LBFGSConfig(SolverConfig):
    """Options of L-BFGS."""

    max_epochs: float = option(1000.0, "stop after this many epochs (function evaluations)")
    tol: float = option(1e-9, "stop when the certified gap ||grad P||^2/(2 lambda) is below this")
    history: int = option(20, "number of correction pairs kept by L-BFGS")


class _Objective:
    """P(w) and its gradient with evaluation counting and a cache of the last point."""

    def __init__(self, problem: Problem, budget: float) -> None:
        self.problem = problem
        self.budget = budget
        self.evaluations = 0
        self.last: tuple[np.ndarray, float, np.ndarray] | None = None

    def __call__(self, w: np.ndarray) -> tuple[float, np.ndarray]:
        if self.evaluations >= self.budget:
            raise _Stop("max_epochs")  # inside a line search: keep the last accepted iterate
        try:
            value, grad = self.problem.primal_and_gradient(w)
        except FloatingPointError as err:
            raise FloatingPointError(f"{err} (L-BFGS, epoch {self.evaluations})") from err
        self.evaluations += 1
        self.last = (w.copy(), value, grad)
        return value, grad


class _Stop(Exception):
    pass


class LBFGS:
    """Limited-memory BFGS on the primal objective."""

    name: ClassVar[str] = "lbfgs"
    config_class: ClassVar[type[SolverConfig]] = LBFGSConfig

    def __init__(self, config: LBFGSConfig | None = None) -> None:
        self.config = config or LBFGSConfig()

    def solve(
        self, problem: Problem, monitor: Monitor, state: object | None = None
    ) -> SolverResult:
        """Minimise P from ``state`` (initial weights) or from zero."""
        w0 = problem.feature_map.zeros() if state is None else np.array(state, dtype=np.float64)
        objective = _Objective(problem, budget=math.ceil(self.config.max_epochs - 1e-9))
        n, lam = problem.n_sequences, problem.regularization
        iterations = 0
        accepted = [w0]

        def report(w: np.ndarray) -> None:
            nonlocal iterations
            iterations += 1
            accepted[0] = w.copy()
            x, value, grad = objective.last
            if not np.array_equal(x, w):
                value, grad = problem.primal_and_gradient(w)
            certificate = float(grad @ grad) / (2 * lam)
            stop = monitor.end_epoch(
                w,
                oracle_calls=objective.evaluations * n,
                updates=iterations * n,
                primal=value,
                dual=value - certificate,
                extra={"grad_norm": float(np.sqrt(grad @ grad))},
            )
            if stop:
                raise _Stop

        monitor.start()
        value, grad = objective(w0)
        monitor.end_epoch(
            w0,
            oracle_calls=objective.evaluations * n,
            updates=0,
            primal=value,
            dual=value - float(grad @ grad) / (2 * lam),
            force=True,
        )
        w = w0
        reason = "converged"
        try:
            result = minimize(
                objective,
                w0,
                jac=True,
                method="L-BFGS-B",
                callback=report,
                options={
                    "maxiter": 10**9,
                    "maxfun": 10**9,
                    "maxcor": self.config.history,
                    "ftol": 0.0,
                    "gtol": 0.0,
                },
            )
            w = result.x
            reason = "line_search" if not result.success else "converged"
        except _Stop as stop:
            w = accepted[0]
            reason = monitor.stop_reason or str(stop)
        except KeyboardInterrupt:
            w = accepted[0]
            reason = "interrupted"
        counters = {
            "oracle_calls": objective.evaluations * n,
            "updates": iterations * n,
            "iterations": iterations,
        }
        if not monitor.is_recorded(counters["oracle_calls"], counters["updates"]):
            with monitor.paused():  # the returned iterate, with every evaluation spent
                value, grad = problem.primal_and_gradient(w)
            monitor.finish(
                w,
                oracle_calls=counters["oracle_calls"],
                updates=counters["updates"],
                primal=value,
                dual=value - float(grad @ grad) / (2 * lam),
                extra={"grad_norm": float(np.sqrt(grad @ grad))},
            )
        monitor.stop_reason = reason
        return SolverResult(
            weights=w, state=w.copy(), trace=monitor.trace, stop_reason=reason, counters=counters
        )
