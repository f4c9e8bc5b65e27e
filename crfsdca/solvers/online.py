"""CRFsuite's online algorithms: averaged perceptron (``ap``), passive-aggressive (``pa``), AROW.

All three share one loop (CRFsuite's ``train_averaged_perceptron.c``,
``train_passive_aggressive.c``, ``train_arow.c``): before every epoch the training sequences are
shuffled as CRFsuite shuffles them (:mod:`crfsdca.kernels.numerics.crand`: glibc's ``rand()`` seeded
with
``seed``; seed 0 or 1 is the order of a fresh CRFsuite process); each sequence is tagged with the
current weights and, if any tag is wrong, the weights move along F(x, y) - F(x, y_hat)
(:mod:`crfsdca.kernels.solvers.online`). Only the weights of the model exist (``Problem.free``:
CRFsuite's sparse model by default). An epoch's ``loss`` (recorded in the trace's ``extra``)
is CRFsuite's: the summed error rates d / T (ap) or the summed costs (pa, arow); the run stops
after ``max_epochs`` epochs, or when loss / n < ``epsilon`` (<= for arow), as CRFsuite.

These algorithms do not minimise the CRF objective: the trace's ``primal`` is the regularised
log-loss of the returned weights (for reference; no gap). The returned weights are the
averaged ones for ``ap`` (and ``pa`` with ``averaging``): w - ws / c.

They (and ``l2sgd``) are the one exception to the one-engine rule (``kernels.primitives``):
their kernels read first-order chains directly. What they promise is CRFsuite's run, bit for
bit (``tests/test_crfsuite_algorithms.py``: its visiting order, its sparse model, its
floating-point order), and CRFsuite has linear chains only: on trees or junction trees there is
no CRFsuite run to reproduce, nor a CRFsuite sparse model to restrict them to, so they refuse
other structures (:func:`chain_dims`), whose solvers (sdca, sag-nus, sag-nus-skip, oeg, lbfgs)
all go through the primitives.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from crfsdca.features.sequences import SequenceData
from crfsdca.kernels.numerics.crand import crfsuite_shuffle, new_state
from crfsdca.kernels.solvers.online import ap_epoch, arow_epoch, pa_epoch
from crfsdca.solvers.base import SolverConfig, SolverResult, option, refuse_hinge, refuse_l1
from crfsdca.structures.chain import Workspace

if TYPE_CHECKING:
    from crfsdca.solvers.monitor import Monitor
    from crfsdca.structures.problem import Problem

__all__ = [
    "AP",
    "AROW",
    "PA",
    "APConfig",
    "AROWConfig",
    "PAConfig",
    "chain_dims",
    "free_mask",
    "path_buffers",
]


@dataclass(frozen=True, kw_only=True)
class APConfig(SolverConfig):
    """Options of the averaged perceptron (CRFsuite's defaults: 100 epochs, epsilon 0)."""

    epsilon: float = option(0.0, "stop when an epoch's mean loss is below this (CRFsuite's)")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.epsilon >= 0:
            raise ValueError(f"epsilon must be >= 0; got {self.epsilon}")


@dataclass(frozen=True, kw_only=True)
class PAConfig(APConfig):
    """Options of passive-aggressive training (CRFsuite's defaults)."""

    pa_type: int = option(1, "0: PA without slack, 1: PA-I, 2: PA-II (CRFsuite's type)")
    aggressiveness: float = option(1.0, "PA-I / PA-II aggressiveness C (CRFsuite's c)")
    error_sensitive: bool = option(True, "add sqrt(wrong tags) to the cost (else 1)")
    averaging: bool = option(True, "return the averaged weights, as the averaged perceptron")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.pa_type not in (0, 1, 2) or isinstance(self.pa_type, bool):
            raise ValueError(f"pa_type must be 0, 1 or 2; got {self.pa_type!r}")
        if not self.aggressiveness > 0:
            raise ValueError(f"c (aggressiveness) must be > 0; got {self.aggressiveness}")


@dataclass(frozen=True, kw_only=True)
class AROWConfig(APConfig):
    """Options of AROW (CRFsuite's defaults)."""

    variance: float = option(1.0, "initial variance of every weight")
    tradeoff: float = option(1.0, "AROW's tradeoff gamma (CRFsuite's gamma)")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.variance > 0:
            raise ValueError(f"variance must be > 0; got {self.variance}")
        if not self.tradeoff > 0:
            raise ValueError(f"gamma (tradeoff) must be > 0; got {self.tradeoff}")


def free_mask(problem: Problem) -> np.ndarray:
    """(n_features,) uint8: 1 where the model has a weight (``problem.free``; all by default)."""
    n_features = problem.feature_map.n_features
    if problem.free is None:
        return np.ones(n_features, np.uint8)
    mask = np.zeros(n_features, np.uint8)
    mask[problem.free] = 1
    return mask


def path_buffers(problem: Problem) -> tuple:
    """The ``bufs`` tuple of :mod:`crfsdca.kernels.solvers.online` for the training data."""
    data, fm = problem.train, problem.feature_map
    T, K = max(data.max_length, 1), fm.n_labels
    per_sequence = np.diff(data.attr_offsets[data.seq_offsets])
    longest = int(per_sequence.max()) if per_sequence.size else 0
    capacity = 2 * (longest + (fm.n_bias_rows + 1) * T)
    return (
        Workspace.allocate(T, K).kernel_tuple,
        np.zeros((T, K)),
        np.zeros((T, K), np.int64),
        np.zeros(T, np.int64),
        np.zeros(fm.n_features),
        np.zeros(fm.n_features, np.uint8),
        np.zeros(max(capacity, 1), np.int64),
    )


class _Online:
    """The epoch loop CRFsuite's online algorithms share; subclasses run one epoch."""

    name: ClassVar[str]
    config_class: ClassVar[type[APConfig]]
    #: CRFsuite's convergence test: loss / n < epsilon (ap, pa) or <= (arow)
    inclusive_epsilon: ClassVar[bool] = False

    def __init__(self, config: APConfig) -> None:
        self.config = config

    def _setup(self, problem: Problem) -> None:
        raise NotImplementedError

    def _epoch(self, args: tuple, order: np.ndarray) -> float:
        raise NotImplementedError

    def _weights(self) -> np.ndarray:
        raise NotImplementedError

    def solve(self, problem: Problem, monitor: Monitor, state: object | None = None) -> Any:
        """Run the epochs from zero weights (these algorithms do not continue a state)."""
        refuse_l1(self.name, problem)
        refuse_hinge(self.name, problem)
        if state is not None:
            raise ValueError(f"{self.name} starts from zero weights; it does not continue a run")
        dims = chain_dims(problem, self.name)
        n, data = problem.n_sequences, problem.train
        args = (data.arrays(), free_mask(problem), dims, path_buffers(problem))
        self._setup(problem)
        order = np.arange(n, dtype=np.int64)
        generator = new_state(self.config.seed)
        budget = math.ceil(self.config.max_epochs * n - 1e-9)
        calls, reason = 0, ""
        monitor.start()
        stop = monitor.end_epoch(self._weights(), oracle_calls=0, updates=0, force=True)
        reason = monitor.stop_reason
        try:
            while not stop:
                crfsuite_shuffle(order, generator)
                steps = min(n, budget - calls)  # a fractional max_epochs ends inside an epoch
                loss = self._epoch(args, order[:steps])
                calls += steps
                stop = monitor.end_epoch(
                    self._weights(), oracle_calls=calls, updates=calls, extra={"loss": loss}
                )
                reason = monitor.stop_reason
                mean = loss / n
                if mean < self.config.epsilon or (
                    self.inclusive_epsilon and mean <= self.config.epsilon
                ):
                    stop, reason = True, "epsilon"
        except KeyboardInterrupt:
            reason = "interrupted"
        w = self._weights()
        monitor.finish(w, oracle_calls=calls, updates=calls)
        monitor.stop_reason = reason
        return SolverResult(
            weights=w, state=None, trace=monitor.trace, stop_reason=reason,
            counters={"oracle_calls": calls, "updates": calls, "epochs": calls / max(n, 1)},
        )  # fmt: skip


def chain_dims(problem: Problem, name: str) -> tuple[int, int, int]:
    """(A, K, n_bias) of a linear-chain problem; ValueError for trees and junction trees."""
    fm = problem.feature_map
    if not isinstance(problem.train, SequenceData) or fm.n_edge_types != 1:
        raise ValueError(
            f"{name} (a CRFsuite algorithm) trains linear chains of the first order only, not trees"
            " or junction trees; sdca, sag-nus, sag-nus-skip, oeg, spdc-df and lbfgs train them"
        )
    return (fm.n_attributes, fm.n_labels, fm.n_bias_rows)


class AP(_Online):
    """Averaged perceptron (CRFsuite's ``ap``)."""

    name: ClassVar[str] = "ap"
    config_class: ClassVar[type[APConfig]] = APConfig

    def _setup(self, problem: Problem) -> None:
        self.w = problem.feature_map.zeros()
        self.ws = problem.feature_map.zeros()
        self.count = 1

    def _epoch(self, args: tuple, order: np.ndarray) -> float:
        data, free, dims, bufs = args
        loss, self.count = ap_epoch(data, order, self.w, self.ws, self.count, free, dims, bufs)
        return float(loss)

    def _weights(self) -> np.ndarray:
        return self.w - self.ws / self.count


class PA(AP):
    """Passive-aggressive training (CRFsuite's ``pa``: PA, PA-I, PA-II)."""

    name: ClassVar[str] = "pa"
    config_class: ClassVar[type[APConfig]] = PAConfig

    def _epoch(self, args: tuple, order: np.ndarray) -> float:
        data, free, dims, bufs = args
        cfg = self.config
        params = (int(cfg.pa_type), float(cfg.aggressiveness), int(bool(cfg.error_sensitive)))
        loss, self.count = pa_epoch(
            data, order, self.w, self.ws, self.count, free, dims, params, bufs
        )
        return float(loss)

    def _weights(self) -> np.ndarray:
        return self.w - self.ws / self.count if self.config.averaging else self.w.copy()


class AROW(_Online):
    """Adaptive regularisation of weight vectors (CRFsuite's ``arow``)."""

    name: ClassVar[str] = "arow"
    config_class: ClassVar[type[APConfig]] = AROWConfig
    inclusive_epsilon: ClassVar[bool] = True

    def _setup(self, problem: Problem) -> None:
        self.mean = problem.feature_map.zeros()
        self.cov = np.full(problem.feature_map.n_features, float(self.config.variance))

    def _epoch(self, args: tuple, order: np.ndarray) -> float:
        data, free, dims, bufs = args
        return float(arow_epoch(data, order, self.mean, self.cov, free, dims,
                                float(self.config.tradeoff), bufs))  # fmt: skip

    def _weights(self) -> np.ndarray:
        return self.mean.copy()
