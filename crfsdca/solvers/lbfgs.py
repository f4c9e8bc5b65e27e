"""L-BFGS on the primal (SciPy), the reference optimum P* for every comparison.

Each value+gradient evaluation is one full pass (n oracle calls). At every iterate the dual point
nu(w) gives the certificate P(w) - D(nu(w)) = ||grad P(w)||^2 / (2 lambda) >= P(w) - P*
(Le Priol et al. 2018, eqs. 7-8), reported as the gap; the run stops when it is <= tol.

A problem with free coordinates (CRFsuite's sparse model, ``Problem.free``) is optimised over
those only: the L-BFGS vectors hold the free weights, every other weight stays exactly 0, and
P restricted to the free coordinates is still lambda-strongly convex, so the certificate (with
the restricted gradient) bounds P(w) - P* of the restricted problem.

With an l1 term (``problem.l1`` = sigma > 0, CRFsuite's c1 / n) the solver is OWL-QN
(:mod:`crfsdca.solvers.owlqn`, as CRFsuite with c1 > 0), counted and stopped the same way, its
pseudo-gradient in the epsilon test, and the gap is the elastic net's certificate
(:func:`~crfsdca.solvers.owlqn.elastic_gap`).

Stopping as CRFsuite's L-BFGS (libLBFGS) can, besides ``tol``, ``max_epochs`` (function
evaluations) and ``time_limit``: ``max_iterations`` counts iterations (CRFsuite's
``max_iterations``; an iteration's line search may evaluate several points), ``epsilon`` stops
when ``||grad f|| / max(1, ||w||) <= epsilon`` and ``delta`` when ``(f_{k-period} - f_k) / f_k
< delta``, for CRFsuite's summed objective f = n P. Both are off by default (0); the estimator
:class:`crfsdca.CRF` turns on CRFsuite's defaults (1e-5, 10, 1e-5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from crfsdca.solvers.base import (
    ConfiguredSolver,
    SolverConfig,
    SolverResult,
    option,
    refuse_hinge,
)
from crfsdca.solvers.blas import one_blas_thread
from crfsdca.solvers.owlqn import LineSearchFailed, elastic_gap, owlqn
from crfsdca.structures.objectives import squared_norm
from crfsdca.structures.problem import Problem

if TYPE_CHECKING:
    from crfsdca.solvers.monitor import Monitor


@dataclass(frozen=True, kw_only=True)
class LBFGSConfig(SolverConfig):
    """Options of L-BFGS."""

    max_epochs: float = option(1000.0, "stop after this many epochs (function evaluations)")
    max_iterations: float = option(
        math.inf, "stop after this many L-BFGS iterations (CRFsuite's max_iterations)"
    )
    tol: float = option(1e-9, "stop when the certified gap ||grad P||^2/(2 lambda) is below this")
    history: int = option(20, "number of correction pairs kept by L-BFGS")
    epsilon: float = option(
        0.0, "stop when ||grad (n P)|| / max(1, ||w||) <= this (CRFsuite's epsilon; 0: off)"
    )
    period: int = option(10, "iterations back for the delta test (CRFsuite's period)")
    delta: float = option(
        0.0, "stop when P improved by less than this (relative) over `period` iterations; 0: off"
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.max_iterations >= 1:
            raise ValueError(f"max_iterations must be >= 1; got {self.max_iterations}")
        if not self.epsilon >= 0 or not self.delta >= 0:
            raise ValueError(f"epsilon and delta must be >= 0; got {self.epsilon}, {self.delta}")
        if self.period < 1:
            raise ValueError(f"period must be >= 1; got {self.period}")
        if self.history < 1:
            raise ValueError(f"history must be >= 1 (correction pairs); got {self.history}")


class _Objective:
    """P and its gradient over the free coordinates, with evaluation counting and a cache of
    the last point.

    L-BFGS sees the vector ``x`` of the free weights (all weights when ``problem.free`` is
    None); :meth:`weights` puts it back in the full layout with zeros elsewhere.
    """

    def __init__(self, problem: Problem, budget: float) -> None:
        self.problem = problem
        self.budget = budget
        self.evaluations = 0
        self.free = problem.free
        self.last: tuple[np.ndarray, float, np.ndarray] | None = None

    def pack(self, w: np.ndarray) -> np.ndarray:
        return w.copy() if self.free is None else w[self.free]

    def weights(self, x: np.ndarray) -> np.ndarray:
        if self.free is None:
            return x
        w = self.problem.feature_map.zeros()
        w[self.free] = x
        return w

    def full(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        """P and its (restricted) gradient at the free weights ``x``, both in the full layout."""
        return self.problem.primal_and_gradient(self.weights(x))

    def __call__(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        if self.evaluations >= self.budget:
            raise _Stop("max_epochs")  # inside a line search: keep the last accepted iterate
        try:
            value, grad = self.full(x)
        except FloatingPointError as err:
            raise FloatingPointError(f"{err} (L-BFGS, epoch {self.evaluations})") from err
        self.evaluations += 1
        self.last = (x.copy(), value, grad)
        return value, self.pack(grad)


def _certificate(grad: np.ndarray, lam: float) -> float:
    """||grad||^2 / (2 lambda) bounds P(w) - P* (lambda-strong convexity); no bound without an
    L2 term (lambda = 0: inf)."""
    return squared_norm(grad) / (2 * lam) if lam > 0 else math.inf


class _Stop(Exception):
    pass


class _CRFsuiteTests:
    """libLBFGS's stopping tests on the summed objective f = n P (see the module docstring)."""

    def __init__(self, config: LBFGSConfig, n: int, value0: float) -> None:
        self.config = config
        self.n = n
        self.values = [value0]  # P at iterations 0, 1, ...

    def check(self, iteration: int, w: np.ndarray, value: float, grad: np.ndarray) -> None:
        cfg = self.config
        self.values.append(value)
        if cfg.epsilon > 0:
            x_norm = max(1.0, math.sqrt(squared_norm(w)))
            if self.n * math.sqrt(squared_norm(grad)) / x_norm <= cfg.epsilon:
                raise _Stop("epsilon")
        if cfg.delta > 0 and iteration >= cfg.period:
            past = self.values[iteration - cfg.period]
            if (past - value) / value < cfg.delta:
                raise _Stop("delta")
        if iteration >= cfg.max_iterations:
            raise _Stop("max_iterations")


class LBFGS(ConfiguredSolver):
    """Limited-memory BFGS on the primal objective."""

    name: ClassVar[str] = "lbfgs"
    config_class: ClassVar[type[SolverConfig]] = LBFGSConfig
    config: LBFGSConfig

    def _optimize(self, objective, report, x0, sigma):
        """(x, stop reason) of OWL-QN (``sigma`` > 0) or SciPy's L-BFGS-B from ``x0``; both end
        by raising ``_Stop`` from ``report`` once the monitor stops them."""
        if sigma > 0:
            owlqn(
                objective,
                x0,
                sigma,
                history=self.config.history,
                callback=lambda x, fx, g, pg: report(x, pg),
            )
            raise _Stop("converged")  # a zero pseudo-gradient at the start
        from scipy.optimize import minimize  # imported by solve

        result = minimize(
            objective,
            x0,
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
        return result.x, "line_search" if not result.success else "converged"

    def solve(
        self, problem: Problem, monitor: Monitor, state: object | None = None
    ) -> SolverResult:
        """Minimise P from ``state`` (initial weights, projected on the free coordinates) or
        from zero, with BLAS on one thread (``crfsdca.solvers.blas``: L-BFGS-B's calls)."""
        if problem.l1 == 0:  # SciPy's BLAS loaded first: the limit holds for loaded libraries
            import scipy.optimize  # noqa: F401 - 0.5 s of import, for L-BFGS-B only
        with one_blas_thread():
            return self._solve(problem, monitor, state)

    def _solve(self, problem: Problem, monitor: Monitor, state: object | None) -> SolverResult:
        refuse_hinge(self.name, problem)
        max_epochs = self.config.max_epochs
        budget = math.ceil(max_epochs - 1e-9) if math.isfinite(max_epochs) else math.inf
        objective = _Objective(problem, budget=budget)
        w0 = problem.feature_map.zeros() if state is None else np.array(state, dtype=np.float64)
        x0 = objective.pack(w0)
        w0 = objective.weights(x0)
        n, lam, sigma = problem.n_sequences, problem.regularization, problem.l1
        iterations = 0

        def certificate(w: np.ndarray, grad: np.ndarray) -> float:
            return _certificate(grad, lam) if sigma == 0 else elastic_gap(w, grad, lam, sigma)

        accepted = [x0]

        monitor.start()
        objective(x0)
        _, value, grad = objective.last  # grad in the full layout
        tests = _CRFsuiteTests(self.config, n, value)
        monitor.end_epoch(
            w0,
            oracle_calls=objective.evaluations * n,
            updates=0,
            primal=value,
            dual=value - certificate(w0, grad),
            force=True,
        )

        def report(x: np.ndarray, pg: np.ndarray | None = None) -> None:
            nonlocal iterations
            iterations += 1
            accepted[0] = x.copy()
            last_x, value, grad = objective.last
            if not np.array_equal(last_x, x):
                value, grad = objective.full(x)
            w = objective.weights(x)
            slope = grad if pg is None else pg  # OWL-QN: the pseudo-gradient
            stop = monitor.end_epoch(
                w,
                oracle_calls=objective.evaluations * n,
                updates=iterations * n,
                primal=value,
                dual=value - certificate(w, grad),
                extra={"grad_norm": math.sqrt(squared_norm(slope))},
            )
            if stop:
                raise _Stop
            tests.check(iterations, w, value, slope)

        try:
            x, reason = self._optimize(objective, report, x0, sigma)
        except _Stop as stop:
            x = accepted[0]
            reason = monitor.stop_reason or str(stop)
        except LineSearchFailed:
            x = accepted[0]
            reason = "line_search"
        except KeyboardInterrupt:
            x = accepted[0]
            reason = "interrupted"
        w = objective.weights(x)
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
                dual=value - certificate(w, grad),
                extra={"grad_norm": math.sqrt(squared_norm(grad))},
            )
        monitor.stop_reason = reason
        return SolverResult(
            weights=w, state=w.copy(), trace=monitor.trace, stop_reason=reason, counters=counters
        )
