"""The CRF facade on packed data: fit / predict / score / save / load.

A :class:`SequenceCRF` trains on :class:`SequenceData` (the CLI's and the corpora's path; the
scikit-learn-style estimator on feature dicts is :class:`crfsdca.estimator.CRF`). It owns a
solver choice, the regularization, and after fitting the weights, the
feature map and (optionally) the encoder that turns raw corpora into :class:`SequenceData`.
Model files are one ``.npz`` (weights) with a JSON header (``crfsdca.modelfile``): no pickle.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from crfsdca.errors import ModelFormatError, NotFittedError
from crfsdca.evaluation import evaluate_data
from crfsdca.features import FeatureMap, observed_features
from crfsdca.modelfile import load_model, save_model
from crfsdca.monitor import Monitor
from crfsdca.oracle import Oracle
from crfsdca.problem import Problem
from crfsdca.sequences import SequenceData
from crfsdca.solvers import SOLVERS, SolverResult
from crfsdca.trace import TraceRecord


def make_solver(name: str, **options: Any):
    """A solver instance from its registry name and config options."""
    if name not in SOLVERS:
        raise ValueError(f"solver must be one of {', '.join(sorted(SOLVERS))}; got {name!r}")
    cls = SOLVERS[name]
    return cls(cls.config_class(**options))


class SequenceCRF:
    """A linear-chain CRF trained by one of the registered solvers.

    Parameters
    ----------
    solver : str
        ``sdca`` (default), ``lbfgs``, ... (see ``crfsdca.solvers.SOLVERS``).
    regularization : float, optional
        lambda > 0; default 1/n.
    n_bias_rows : int, optional
        3 (count, first, last bias rows) or 0; default: the encoder's choice, else 3.
    all_possible_states, all_possible_transitions : bool
        False gives CRFsuite's sparse model (:func:`crfsdca.features.observed_features`):
        only the (attribute, label) pairs, or label bigrams, seen in training have a weight.
        Trained by ``lbfgs`` only. Default True (the dense model).
    **solver_options
        Fields of the solver's config dataclass (e.g. ``sampling="gap"``, ``max_epochs=50``).
    """

    def __init__(
        self,
        solver: str = "sdca",
        regularization: float | None = None,
        n_bias_rows: int | None = None,
        all_possible_states: bool = True,
        all_possible_transitions: bool = True,
        **solver_options: Any,
    ) -> None:
        self.solver = solver
        self.regularization = regularization
        self.n_bias_rows = n_bias_rows
        self.all_possible_states = bool(all_possible_states)
        self.all_possible_transitions = bool(all_possible_transitions)
        if solver != "lbfgs" and not (self.all_possible_states and self.all_possible_transitions):
            raise ValueError(
                f"all_possible_states=False or all_possible_transitions=False (CRFsuite's sparse"
                f" model) is trained by solver 'lbfgs' only; got solver {solver!r}"
            )
        self.solver_options = solver_options
        make_solver(solver, **solver_options)  # validate early
        self.weights_: NDArray[np.float64] | None = None
        self.feature_map_: FeatureMap | None = None
        self.label_names_: tuple[str, ...] = ()
        self.encoder: dict[str, Any] | None = None
        self.result_: SolverResult | None = None
        self.meta: dict[str, Any] = {}

    # -- training ----------------------------------------------------------------------------
    def fit(
        self,
        train: SequenceData,
        test: SequenceData | None = None,
        *,
        encoder: dict[str, Any] | None = None,
        name: str = "",
        callback: Callable[[TraceRecord], None] | None = None,
        state: object = None,
        checkpointer: Callable[[object, Any], None] | None = None,
        checkpoint_every: float = 1.0,
        records: list[dict[str, Any]] | None = None,
        dropped: tuple[NDArray[np.int64], NDArray[np.int64]] | None = None,
    ) -> SequenceCRF:
        """Train on ``train``; ``test`` is evaluated at every monitoring pass.

        ``state`` continues a run (e.g. from a checkpoint, whose trace ``records`` are put back
        first); ``checkpointer(state, trace)`` is called every ``checkpoint_every`` epochs.
        ``dropped`` completes CRFsuite's sparse model (see
        :func:`crfsdca.features.observed_features`).
        """
        bias = self.n_bias_rows if self.n_bias_rows is not None else 3
        fm = FeatureMap(train.n_attributes, train.n_labels, bias)
        free = observed_features(
            train,
            fm,
            all_states=self.all_possible_states,
            all_transitions=self.all_possible_transitions,
            dropped=dropped,
        )
        problem = Problem(
            train=train,
            feature_map=fm,
            regularization=self.regularization,
            test=test,
            name=name,
            free=free,
        )
        solver = make_solver(self.solver, **self.solver_options)
        monitor = Monitor(
            problem,
            solver.name,
            solver.config,
            callback=callback,
            checkpointer=checkpointer,
            checkpoint_every=checkpoint_every,
        )
        if records:
            monitor.trace.records[:] = [TraceRecord.from_json(r) for r in records]
        result = solver.solve(problem, monitor, state)
        self.weights_ = result.weights
        self.feature_map_ = fm
        self.label_names_ = train.label_names
        self.regularization_ = problem.regularization
        self.encoder = encoder
        self.result_ = result
        self.problem_ = problem
        return self

    def _check_fitted(self) -> None:
        if self.weights_ is None:
            raise NotFittedError(
                "this SequenceCRF is not trained yet; call fit() or SequenceCRF.load()"
            )

    # -- prediction --------------------------------------------------------------------------
    def _oracle(self, data: SequenceData) -> Oracle:
        self._check_fitted()
        if tuple(data.label_names) != tuple(self.label_names_):
            raise ValueError(
                "data was encoded with other labels than the model's; encode it"
                " with the model's encoder"
            )
        fm = self.feature_map_
        if data.n_attributes > fm.n_attributes:
            raise ValueError(
                f"data has {data.n_attributes} attributes; the model knows {fm.n_attributes}"
            )
        return Oracle(data, FeatureMap(fm.n_attributes, fm.n_labels, fm.n_bias_rows))

    def predict(self, data: SequenceData) -> NDArray[np.int64]:
        """Viterbi labels (N,) int64 of every token of ``data``."""
        return self._oracle(data).predict(self.weights_)

    def predict_marginals(self, data: SequenceData, i: int) -> NDArray[np.float64]:
        """Node marginals (T, K) of sequence ``i``."""
        _, log_node, _ = self._oracle(data).marginals(i, self.weights_)
        return np.exp(log_node)

    def score(self, data: SequenceData) -> dict[str, Any]:
        """Token accuracy, and chunk precision / recall / F1 for chunk labels."""
        pred = self.predict(data)
        return evaluate_data(data, pred)

    # -- persistence -------------------------------------------------------------------------
    def save(self, path: str) -> None:
        """Write the model atomically as ``.npz`` + JSON header (no pickle)."""
        self._check_fitted()
        fm = self.feature_map_
        header = {
            "n_attributes": fm.n_attributes,
            "n_labels": fm.n_labels,
            "n_bias_rows": fm.n_bias_rows,
            "all_possible_states": self.all_possible_states,
            "all_possible_transitions": self.all_possible_transitions,
            "labels": list(self.label_names_),
            "regularization": self.regularization_,
            "solver": self.solver,
            "solver_options": self.solver_options,
            "encoder": self.encoder,
            "meta": self.meta,
        }
        if self.result_ is not None:
            header["training"] = {
                k: None if isinstance(v, float) and not math.isfinite(v) else v
                for k, v in self.result_.summary().items()
            }
        save_model(path, {"weights": self.weights_}, header)

    @classmethod
    def load(cls, path: str) -> SequenceCRF:
        """Read a model written by :meth:`save`."""
        arrays, header = load_model(path)
        try:
            model = cls(
                solver=header["solver"],
                regularization=header["regularization"],
                n_bias_rows=header["n_bias_rows"],
                all_possible_states=header.get("all_possible_states", True),
                all_possible_transitions=header.get("all_possible_transitions", True),
                **header.get("solver_options", {}),
            )
            fm = FeatureMap(header["n_attributes"], header["n_labels"], header["n_bias_rows"])
            weights = fm.check_weights(arrays["weights"])
            labels = tuple(header["labels"])
        except (KeyError, TypeError, ValueError) as err:
            raise ModelFormatError(f"{path}: inconsistent model header ({err})") from err
        if not np.all(np.isfinite(weights)):
            raise ModelFormatError(f"{path}: weights contain non-finite values")
        model.weights_, model.feature_map_, model.label_names_ = weights, fm, labels
        model.regularization_ = header["regularization"]
        model.encoder = header.get("encoder")
        model.meta = header.get("meta", {})
        return model

    def export_crfsuite(self, path: str) -> None:
        """Write the model in CRFsuite's binary format (:mod:`crfsdca.crfsuite_format`)."""
        from crfsdca.crfsuite_format import export_crfsuite

        export_crfsuite(self, path)
