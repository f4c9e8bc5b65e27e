"""CRFsuite's ``l2sgd``: SGD on the L2-regularised log-loss with a calibrated learning rate.

As CRFsuite's ``train_l2sgd.c`` (the steps are :mod:`crfsdca.kernels.solvers.sgd`): with
lambda = ``problem.regularization`` (CRFsuite's 2 c2 / n) and the step size
eta_t = 1 / (lambda (t0 + t)) over all steps t so far,

1. **calibration** (on the first ``calibration_samples`` sequences after one shuffle): starting
   from ``calibration_eta``, one SGD epoch from zero weights per candidate eta; while the
   objective improves on that of zero weights, eta is multiplied by ``calibration_rate``, then
   divided, ``calibration_candidates`` accepted candidates each way, at most
   ``calibration_max_trials`` trials; the best eta gives t0 = 1 / (lambda eta);
2. **epochs**: shuffle, one SGD step per sequence, then CRFsuite's objective
   n P(w) (losses summed along the epoch + (lambda/2) ||w||^2 n, the trace's ``extra["loss"]``);
   stop after ``max_epochs`` or when it improved by less than ``delta`` (relative) over
   ``period`` epochs; return the weights of the epoch with the lowest such objective.

The shuffles draw from glibc's ``rand()`` seeded with ``seed``
(:mod:`crfsdca.kernels.numerics.crand`; 0 or 1: CRFsuite's order in a fresh process). Only the
model's weights move (``Problem.free``: CRFsuite's sparse model by default).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from crfsdca.kernels.numerics.crand import crfsuite_shuffle, new_state
from crfsdca.kernels.solvers.sgd import scaled_loss, sgd_epoch
from crfsdca.solvers.base import SolverConfig, SolverResult, option, refuse_hinge, refuse_l1
from crfsdca.solvers.online import chain_dims, free_mask
from crfsdca.structures.chain import Workspace

if TYPE_CHECKING:
    from crfsdca.solvers.monitor import Monitor
    from crfsdca.structures.problem import Problem

__all__ = ["L2SGD", "L2SGDConfig"]


@dataclass(frozen=True, kw_only=True)
class L2SGDConfig(SolverConfig):
    """Options of l2sgd (CRFsuite's defaults)."""

    max_epochs: float = option(1000.0, "stop after this many epochs (CRFsuite's max_iterations)")
    period: int = option(10, "epochs over which the objective must improve by delta")
    delta: float = option(1e-6, "stop when the objective improved by less than this (relative)")
    calibration_eta: float = option(0.1, "first learning rate tried by the calibration")
    calibration_rate: float = option(2.0, "factor between two calibration learning rates")
    calibration_samples: int = option(1000, "sequences the calibration trains on")
    calibration_candidates: int = option(10, "accepted learning rates tried each way")
    calibration_max_trials: int = option(20, "cap on calibration trials")

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("period", "calibration_samples", "calibration_candidates",
                     "calibration_max_trials"):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be an int >= 1; got {value!r}")
        if not self.delta >= 0:
            raise ValueError(f"delta must be >= 0; got {self.delta}")
        if not (math.isfinite(self.calibration_eta) and self.calibration_eta > 0):
            raise ValueError(f"calibration_eta must be > 0; got {self.calibration_eta}")
        if not (math.isfinite(self.calibration_rate) and self.calibration_rate > 1):
            raise ValueError(f"calibration_rate must be > 1; got {self.calibration_rate}")


class L2SGD:
    """CRFsuite's l2sgd on crfsdca's chain oracle kernels."""

    name: ClassVar[str] = "l2sgd"
    config_class: ClassVar[type[L2SGDConfig]] = L2SGDConfig

    def __init__(self, config: L2SGDConfig) -> None:
        self.config = config

    def _buffers(self, problem: Problem) -> tuple:
        T, K = max(problem.train.max_length, 1), problem.feature_map.n_labels
        ws = Workspace.allocate(T, K)
        return (ws.kernel_tuple, ws.log_node, ws.log_edge, np.zeros((K, K)))

    def _epoch(self, args, order, w, t0: float, t: float) -> tuple[float, float, float]:
        """One SGD epoch on ``order`` from w (in place); (objective n P, t after, last loss)."""
        data, free, dims, bufs, lam = args
        total, last, t, decay = sgd_epoch(data, order, w, free, dims, (lam, t0, t), bufs)
        if not math.isfinite(last):
            return last, t, last
        w *= decay
        return total + 0.5 * lam * float(w @ w) * order.size, t, last

    def _calibrate(self, args, order: np.ndarray, w: np.ndarray) -> float:
        """t0 of the best calibration learning rate (CRFsuite's ``l2sgd_calibration``)."""
        cfg, lam = self.config, args[4]
        sample = order[: min(order.size, cfg.calibration_samples)]
        w[:] = 0.0
        data, _, dims, bufs, _ = args
        init_loss = math.fsum(scaled_loss(data, int(i), w, 1.0, dims, bufs) for i in sample)
        eta = best_eta = cfg.calibration_eta
        best_loss, left, decreasing, trials = math.inf, cfg.calibration_candidates, False, 1
        while left > 0 or not decreasing:
            w[:] = 0.0
            loss = self._epoch(args, sample, w, 1.0 / (lam * eta), 0.0)[0]
            ok = math.isfinite(loss) and loss < init_loss
            left -= ok
            if math.isfinite(loss) and loss < best_loss:
                best_loss, best_eta = loss, eta
            if decreasing:
                eta /= cfg.calibration_rate
            elif ok and left > 0:
                eta *= cfg.calibration_rate
            else:
                decreasing, left = True, cfg.calibration_candidates
                eta = cfg.calibration_eta / cfg.calibration_rate
            trials += 1
            if trials >= cfg.calibration_max_trials:
                break
        self.calibration_ = {"eta": best_eta, "trials": trials, "samples": int(sample.size)}
        return 1.0 / (lam * best_eta)

    def solve(self, problem: Problem, monitor: Monitor, state: object | None = None):
        """Calibrate, then run the epochs from zero weights."""
        refuse_l1(self.name, problem)
        refuse_hinge(self.name, problem)
        if state is not None:
            raise ValueError("l2sgd starts from zero weights; it does not continue a run")
        dims = chain_dims(problem, self.name)
        cfg, n, fm = self.config, problem.n_sequences, problem.feature_map
        lam = float(problem.regularization)
        args = (problem.train.arrays(), free_mask(problem), dims, self._buffers(problem), lam)
        order = np.arange(n, dtype=np.int64)
        generator = new_state(cfg.seed)
        w = fm.zeros()
        monitor.start()
        stop = monitor.end_epoch(w, oracle_calls=0, updates=0, force=True)
        reason = monitor.stop_reason
        crfsuite_shuffle(order, generator)
        t0 = self._calibrate(args, order, w) if not stop else 1.0 / lam
        w[:] = 0.0
        best, best_w, best_calls = math.inf, w.copy(), 0
        history = np.zeros(cfg.period)
        budget = math.ceil(cfg.max_epochs * n - 1e-9)
        t, calls, epoch = 0.0, 0, 0
        try:
            while not stop:
                epoch += 1
                crfsuite_shuffle(order, generator)
                steps = min(n, budget - calls)  # a fractional max_epochs ends inside an epoch
                loss, t, last = self._epoch(args, order[:steps], w, t0, t)
                calls += steps
                if not math.isfinite(loss):
                    raise FloatingPointError(
                        f"l2sgd diverged at epoch {epoch} (loss {last}); lower"
                        " calibration_eta or raise c2"
                    )
                loss *= n / steps  # CRFsuite's n P scale (a partial last epoch)
                if loss < best:
                    best, best_w, best_calls = loss, w.copy(), calls
                old = history[(epoch - 1) % cfg.period]
                improvement = (old - loss) / loss if epoch > cfg.period else cfg.delta
                history[(epoch - 1) % cfg.period] = loss
                stop = monitor.end_epoch(w, oracle_calls=calls, updates=calls,
                                         extra={"loss": loss, "t0": t0})  # fmt: skip
                reason = monitor.stop_reason
                if improvement < cfg.delta:
                    stop, reason = True, "delta"
        except KeyboardInterrupt:
            reason = "interrupted"
        # the returned weights are the best epoch's: recorded with the steps that made them
        monitor.finish(best_w, oracle_calls=calls, updates=best_calls)
        monitor.stop_reason = reason
        return SolverResult(
            weights=best_w, state=None, trace=monitor.trace, stop_reason=reason,
            counters={"oracle_calls": calls, "updates": best_calls, "epochs": epoch, "t0": t0,
                      **getattr(self, "calibration_", {})},
        )  # fmt: skip
