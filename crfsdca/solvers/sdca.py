"""SDCA for CRFs with gap sampling (Le Priol, Piche & Lacoste-Julien 2018, Alg. 2).

Each iteration draws a sequence i, calls the oracle once (nu_i at w), records the block gap
g_i = KL~(mu_i || nu_i), moves mu_i toward nu_i by the step size gamma* that maximises the dual
along that direction (safe Newton, eq. 20) and updates w = w_hat(mu) sparsely. The whole epoch
runs in one compiled kernel (``crfsdca.kernels.solvers.sdca_epoch.run_steps``); this module decides
schedules, draws the uniforms, evaluates and stops.

Stopping (Sec. 6.3): when the running gap estimate G = mean(g_i) <= tol, one exact pass (n oracle
calls, counted) computes every g_i; the run stops if the exact gap <= tol, else the estimates are
replaced by the exact values and the run continues.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from crfsdca.kernels.solvers import sdca_epoch
from crfsdca.solvers.base import SolverConfig
from crfsdca.solvers.local import LocalSDCA
from crfsdca.solvers.loop import LoopSolver
from crfsdca.solvers.sdca_config import SDCAConfig, SDCAState
from crfsdca.solvers.threads import TeamSDCA, step_threads
from crfsdca.structures.dual import DualState
from crfsdca.structures.problem import Problem

__all__ = ["SDCA", "SDCAConfig", "SDCAState", "initial_dual"]


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
    trains_hinge = True

    def runner(self, problem: Problem, state: SDCAState) -> LocalSDCA:
        """The serial runner, or a team of threads (``config.threads``, ``step_threads``)."""
        threads = step_threads(self.config.threads, problem.train.n_sequences)
        if threads > 1:
            return TeamSDCA(problem, self.config, state, threads)
        return LocalSDCA(problem, self.config, state)

    def compile_loop(self, problem: Problem) -> None:
        """The serial step loop of a log-loss run without an l1 term (Prox-SDCA's arrays, the
        hinge loss's buffers and a team of threads come with the state); its kernels of the
        dual start are left to the compile-ahead process."""
        serial = step_threads(self.config.threads, problem.train.n_sequences) == 1
        if serial and problem.l1 <= 0.0 and problem.loss == "log":
            sdca_epoch.compile_loop(problem.structure.blocks, self.config.dual_dtype)


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


def initial_dual(problem: Problem, config, dtype=np.float64) -> DualState:
    """The dual start of ``config.init`` on the problem's structure (w = w_hat(mu) exactly):
    ``smoothed`` (epsilon ``config.init_epsilon``), ``gibbs`` (``config.gibbs_score``) or
    ``uniform`` (OEG's and SPDC's: the smoothed start at epsilon = 1); the hinge loss starts
    at the gold corner (``structures.hinge.gold_corner``), or, smoothed by entropy
    (``hinge_step='smooth'``), at the smoothed start (``structures.hinge.smoothed_start``)."""
    if getattr(problem, "loss", "log") == "hinge":
        from crfsdca.structures.hinge import gold_corner, smoothed_start

        if getattr(config, "hinge_step", "fw") == "smooth":
            return smoothed_start(problem, config.init_epsilon, dtype)
        return gold_corner(problem, dtype)
    if config.init == "gibbs":
        return problem.structure.gibbs_dual(config.gibbs_score, dtype)
    epsilon = 1.0 if config.init == "uniform" else config.init_epsilon
    return problem.structure.smoothed_dual(epsilon, dtype)
