"""The training problem shared by every solver: data, feature map, oracle and regularization.

P(w) = (lambda/2) ||w||^2 + sigma ||w||_1 + (1/n) sum_i [log Z_i(w) - w^T F(x_i, y_i)]
(Le Priol et al. 2018, eqs. 1-2; sigma = ``l1``, the elastic net, is 0 unless set); with
``loss="hinge"`` the structured hinge loss max_y [Hamming(y, y_i) + w^T F(x_i, y)] - w^T F(x_i,
y_i) replaces the log-loss (the structured SVM, ``crfsdca.kernels.solvers.hinge``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from crfsdca.features.feature_map import FeatureMap
from crfsdca.features.sequences import SequenceData
from crfsdca.structures.chain import ChainStructure, Oracle
from crfsdca.structures.objectives import primal_value, squared_norm

LOSSES = ("log", "hinge")  # the CRF's log-loss, the structured SVM's hinge loss


@dataclass(eq=False)
class Problem:
    """An l2-regularised chain-CRF training problem.

    Parameters
    ----------
    train : SequenceData
        Training sequences; every label must be known (no ``-1``).
    feature_map : FeatureMap
        Dimensions and weight layout.
    regularization : float
        lambda > 0; ``None`` means 1/n (the paper's choice).
    test : SequenceData, optional
        Evaluated by the monitor (test error), never trained on.
    name : str
        Dataset name recorded in traces.
    free : ndarray of int64, optional
        Sorted flat indices of the weights that exist (CRFsuite's sparse model,
        :func:`crfsdca.features.observed_features`); every other weight is structurally zero
        and the gradient is restricted to these coordinates. None: every weight is free.
    l1 : float
        sigma >= 0, the weight of the l1 term (the elastic net; CRFsuite's c1 / n).
    loss : str
        ``"log"`` (the CRF) or ``"hinge"`` (the structured SVM with the Hamming loss).
    zero_ok : bool
        Accept ``regularization == 0`` (the unregularised loss; L-BFGS only, as CRFsuite with
        ``c2 = 0``: P is then not strongly convex and no duality gap certifies it).
    """

    train: SequenceData
    feature_map: FeatureMap
    regularization: float | None = None
    test: SequenceData | None = None
    name: str = ""
    meta: dict = field(default_factory=dict)
    free: NDArray[np.int64] | None = None
    zero_ok: bool = False
    l1: float = 0.0
    loss: str = "log"

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {', '.join(LOSSES)}; got {self.loss!r}")
        if self.regularization is None:
            self.regularization = 1.0 / self.train.n_sequences
        lam = float(self.regularization)
        if not np.isfinite(lam) or lam < 0 or (lam == 0 and not self.zero_ok):
            raise ValueError(f"regularization must be > 0; got {self.regularization}")
        self.regularization = lam
        l1 = float(self.l1)
        if not (np.isfinite(l1) and l1 >= 0):
            raise ValueError(f"l1 must be a finite number >= 0; got {self.l1}")
        self.l1 = l1
        fm = self.feature_map
        if self.train.n_attributes > fm.n_attributes or self.train.n_labels != fm.n_labels:
            raise ValueError(
                f"training data ({self.train.n_attributes} attributes,"
                f" {self.train.n_labels} labels) does not fit the feature map"
                f" ({fm.n_attributes}, {fm.n_labels})"
            )
        if self.train.n_items and self.train.labels.min() < 0:
            bad = int(np.flatnonzero(self.train.labels < 0)[0])
            raise ValueError(f"training token {bad} has a label unknown to the model")
        if self.free is not None:
            free = np.ascontiguousarray(self.free, np.int64)
            if free.ndim != 1 or (free.size and (free[0] < 0 or free[-1] >= fm.n_features)):
                raise ValueError(f"free indices must lie in [0, {fm.n_features})")
            if np.any(np.diff(free) <= 0):
                raise ValueError("free indices must be sorted and distinct")
            self.free = free

    @property
    def n_sequences(self) -> int:
        return self.train.n_sequences

    #: the oracle class of the problem's examples (trees and junction trees set theirs)
    oracle_class: ClassVar[type] = Oracle

    @cached_property
    def oracle(self) -> Oracle:
        return self.oracle_class(self.train, self.feature_map)

    @cached_property
    def test_oracle(self) -> Oracle | None:
        return None if self.test is None else self.oracle_class(self.test, self.feature_map)

    @cached_property
    def structure(self) -> ChainStructure:
        """What the solvers train on: blocks, runs, primitives (trees and junction trees
        override it with theirs)."""
        return ChainStructure(self)

    def primal(self, w: NDArray[np.float64]) -> float:
        """P(w), with its l1 term (no gradient: forward passes only where the oracle has them)."""
        loss_sum = self.loss_sum(w)
        value = primal_value(self.regularization, squared_norm(w), loss_sum, self.n_sequences)
        return value + self.l1_term(w)

    def loss_sum(self, w: NDArray[np.float64]) -> float:
        """sum_i loss_i(w): the log-loss (forward passes), or the hinge loss (one
        loss-augmented MAP per example)."""
        if self.loss == "hinge":
            from crfsdca.structures.hinge import hinge_sum

            return hinge_sum(self, w)
        return self.oracle.loss_sum(w)

    def l1_term(self, w: NDArray[np.float64]) -> float:
        """sigma ||w||_1 (0.0 without an l1 term)."""
        return self.l1 * float(np.abs(w).sum()) if self.l1 > 0 else 0.0

    def primal_and_gradient(self, w: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        """P(w) and the gradient of its smooth part, lambda w + (1/n) sum_i (E_nu_i F - F_i)
        (P includes sigma ||w||_1, which has no gradient: OWL-QN adds its own pseudo-gradient).

        With ``free`` set, ``w`` must be zero off the free coordinates and the gradient is the
        one of P restricted to them (zero elsewhere).
        """
        if self.loss == "hinge":
            raise ValueError("the hinge loss has no gradient; train it with the sdca solver")
        loss_sum, grad_sum = self.oracle.value_and_gradient(w)
        n, lam = self.n_sequences, self.regularization
        value = primal_value(lam, squared_norm(w), loss_sum, n) + self.l1_term(w)
        grad = grad_sum / n
        grad += lam * w
        if self.free is not None:
            restricted = np.zeros_like(grad)
            restricted[self.free] = grad[self.free]
            grad = restricted
        return value, grad
