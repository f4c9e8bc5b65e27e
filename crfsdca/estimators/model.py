"""The CRF facade on packed data: fit / predict / score / save / load.

A :class:`SequenceCRF` trains on :class:`SequenceData` (linear chains; the CLI's and the
corpora's path) or on :class:`~crfsdca.structures.tree.TreeData` (one tree or forest per example,
one transition block per edge type); the scikit-learn-style estimator on feature dicts is
:class:`crfsdca.estimators.crf.CRF`. It owns a solver choice, the regularization, and after fitting
the weights, the feature map, the graph kind (``graph_``: ``"chain"`` or ``"tree"``) and
(optionally) the encoder that turns raw corpora into :class:`SequenceData`. A model predicts
data of the graph kind it was trained on. Model files are one ``.npz`` (weights) with a JSON
header (``crfsdca.io.modelfile``) recording ``graph`` and ``n_edge_types``: no pickle.

Junction-tree models (:mod:`crfsdca.estimators.model_junction`) train on
:class:`~crfsdca.structures.junction.JunctionData`: ``graph_ == "junction"``, ``order_`` 2 for
second-order chains (``SequenceCRF(order=2)`` turns SequenceData into them, in fit and in
predict) and None for custom junction trees; their header adds ``order`` and ``factor_arities``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from crfsdca.errors import GraphError, ModelFormatError, NotFittedError
from crfsdca.estimators import compile_ahead
from crfsdca.estimators.model_header import check_header, header_words, size_mismatch
from crfsdca.estimators.model_junction import (
    check_order,
    data_order,
    fit_data,
    graph_of,
    header_fields,
    junction_node_marginals,
    kind_name,
    model_data,
    read_header,
)
from crfsdca.evaluation import evaluate_data
from crfsdca.features.feature_map import FeatureMap, observed_features
from crfsdca.features.min_freq import SPARSE_SOLVERS, check_min_freq, frequent_features
from crfsdca.features.sequences import SequenceData
from crfsdca.io.modelfile import load_model, save_model
from crfsdca.solvers import SOLVERS, SolverResult
from crfsdca.solvers.monitor import Monitor
from crfsdca.solvers.trace import TraceRecord
from crfsdca.structures.chain import Oracle
from crfsdca.structures.junction import JunctionData, JunctionOracle, junction_problem
from crfsdca.structures.problem import Problem
from crfsdca.structures.tree import TreeData, TreeOracle, tree_problem

GRAPHS = ("chain", "tree", "junction")


def make_solver(name: str, **options: Any):
    """A solver instance from its registry name and config options."""
    if name not in SOLVERS:
        raise ValueError(f"solver must be one of {', '.join(sorted(SOLVERS))}; got {name!r}")
    cls = SOLVERS[name]
    return cls(cls.config_class(**options))


#: the solvers that train the elastic net (l1 > 0): Prox-SDCA and OWL-QN
L1_SOLVERS = ("sdca", "lbfgs")


def check_l1(l1: Any, solver: str) -> float:
    """sigma as a float: a finite number >= 0, > 0 only for the solvers of ``L1_SOLVERS``."""
    if isinstance(l1, bool) or not isinstance(l1, int | float | np.integer | np.floating):
        raise TypeError(f"l1 must be a number >= 0; got {l1!r}")
    if not (math.isfinite(l1) and l1 >= 0):
        raise ValueError(f"l1 must be a finite number >= 0; got {l1!r}")
    if l1 > 0 and solver not in L1_SOLVERS:
        raise ValueError(
            f"solver {solver!r} has no l1 term; the elastic net (l1 > 0) is trained by"
            f" {' and '.join(L1_SOLVERS)} (Prox-SDCA, OWL-QN)"
        )
    return float(l1)


#: the solvers that train the structured hinge loss (loss="hinge", the structured SVM)
HINGE_SOLVERS = ("sdca",)
LOSSES = ("log", "hinge")


def check_loss(loss: Any, solver: str) -> str:
    """``loss`` if it is ``"log"`` or ``"hinge"`` (the latter only for ``HINGE_SOLVERS``)."""
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {', '.join(LOSSES)}; got {loss!r}")
    if loss == "hinge" and solver not in HINGE_SOLVERS:
        raise ValueError(
            f"solver {solver!r} has no hinge loss; the structured SVM (loss='hinge') is trained"
            f" by {' and '.join(HINGE_SOLVERS)}"
        )
    return str(loss)


def refuse_probabilities(loss: str) -> None:
    """ValueError for marginals of a structured SVM, which has no probabilities."""
    if loss == "hinge":
        raise ValueError(
            "a structured SVM (loss='hinge') has no probabilities, hence no marginals; use"
            " predict for its labels"
        )


class SequenceCRF:
    """A linear-chain or tree-structured CRF trained by one of the registered solvers.

    Parameters
    ----------
    solver : str
        ``sdca`` (default), ``lbfgs``, ... (see ``crfsdca.solvers.SOLVERS``).
    regularization : float, optional
        lambda > 0; default 1/n.
    l1 : float
        sigma >= 0, the elastic net's l1 weight (P adds sigma ||w||_1; CRFsuite's c1 / n);
        trained by ``sdca`` (Prox-SDCA) and ``lbfgs`` (OWL-QN) only. Default 0.
    loss : str
        ``"log"`` (the CRF, default) or ``"hinge"``: the structured SVM with the Hamming loss,
        trained by ``sdca`` (``crfsdca.kernels.solvers.hinge``); it decodes like a CRF but has no
        marginals.
    n_bias_rows : int, optional
        3 (count, first, last bias rows) or 0; default: the encoder's choice, else 3.
    all_possible_states, all_possible_transitions : bool
        False gives CRFsuite's sparse model (:func:`crfsdca.features.observed_features`):
        only the (attribute, label) pairs, or label bigrams, seen in training have a weight.
        Trained by CRFsuite's algorithms only (``lbfgs``, ``l2sgd``, ``ap``, ``pa``, ``arow``).
        Default True (the dense model).
    order : int
        2 trains (and predicts) SequenceData as second-order chains; default 1. JunctionData
        trains a junction model whatever the order.
    min_freq : float
        CRFsuite's ``feature.minfreq``: drop the features (state and transition) whose
        frequency in the training data is below it (:mod:`crfsdca.features.min_freq`); default 0.
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
        order: int = 1,
        min_freq: float = 0.0,
        l1: float = 0.0,
        loss: str = "log",
        **solver_options: Any,
    ) -> None:
        self.solver = solver
        self.regularization = regularization
        self.l1 = check_l1(l1, solver)
        self.loss = check_loss(loss, solver)
        self.n_bias_rows = n_bias_rows
        self.all_possible_states = bool(all_possible_states)
        self.all_possible_transitions = bool(all_possible_transitions)
        self.order = check_order(order)
        self.min_freq = check_min_freq(min_freq)
        sparse = not (self.all_possible_states and self.all_possible_transitions)
        sparse = sparse or self.min_freq > 0
        if sparse and solver not in SPARSE_SOLVERS:
            raise ValueError(
                f"all_possible_states=False, all_possible_transitions=False or min_freq > 0"
                f" (CRFsuite's sparse model) is trained by solvers {', '.join(SPARSE_SOLVERS)}"
                f" only; got solver {solver!r}"
            )
        self.solver_options = solver_options
        make_solver(solver, **solver_options)  # validate early
        self.weights_: NDArray[np.float64] | None = None
        self.feature_map_: FeatureMap | None = None
        self.graph_: str = "chain"
        self.order_: int | None = 1
        self.label_names_: tuple[str, ...] = ()
        self.encoder: dict[str, Any] | None = None
        self.result_: SolverResult | None = None
        # the test set's scores in fit's final record (the returned weights), when fit scored it
        self.test_scores_: dict[str, Any] | None = None
        self.meta: dict[str, Any] = {}

    # -- training ----------------------------------------------------------------------------
    def fit(
        self,
        train: SequenceData | TreeData | JunctionData,
        test: SequenceData | TreeData | JunctionData | None = None,
        *,
        encoder: dict[str, Any] | None = None,
        name: str = "",
        callback: Callable[[TraceRecord], None] | None = None,
        state: object = None,
        checkpointer: Callable[[object, Any], None] | None = None,
        checkpoint_every: float | None = 1.0,
        checkpoint_seconds: float | None = None,
        records: list[dict[str, Any]] | None = None,
        dropped: tuple[NDArray[np.int64], NDArray[np.int64]] | None = None,
        score_test: str = "every",
        ahead: compile_ahead.CompileAhead | str | None = "start",
    ) -> SequenceCRF:
        """Train on ``train``; ``test`` is scored at every monitoring pass (``score_test=
        "every"``), only in the final record (``"end"``) or never (``"never"``).

        ``train`` and ``test`` are both :class:`SequenceData` (chains) or both
        :class:`~crfsdca.structures.tree.TreeData` (trees: one transition block per edge type used)
        or both :class:`~crfsdca.structures.junction.JunctionData` (one block per factor type);
        with ``order=2``, SequenceData train as second-order chains.
        ``state`` continues a run (e.g. from a checkpoint, whose trace ``records`` are put back
        first); ``checkpointer(state, trace)`` is called every ``checkpoint_every`` epochs
        and/or every ``checkpoint_seconds`` of wall time (None: not by that measure).
        ``dropped`` completes CRFsuite's sparse model (see
        :func:`crfsdca.features.observed_features`). ``ahead``: the process compiling the
        run's kernels on a cold cache (:meth:`start_compile_ahead`), started before the data were
        encoded, or None; ``"start"`` starts it here.
        """
        train, test = fit_data(train, test, self.order)
        problem = self._problem(train, test, name, dropped)
        solver = make_solver(self.solver, **self.solver_options)
        monitor = Monitor(
            problem,
            solver.name,
            solver.config,
            callback=callback,
            checkpointer=checkpointer,
            checkpoint_every=checkpoint_every,
            checkpoint_seconds=checkpoint_seconds,
            score_test=score_test,
        )
        if records:
            monitor.trace.records[:] = [TraceRecord.from_json(r) for r in records]
        if ahead == "start":
            ahead = self.start_compile_ahead(graph_of(train), data_order(train), test is not None)
        try:
            if ahead is None:
                result = solver.solve(problem, monitor, state)
            else:
                result = solver.solve(problem, monitor, state, compile_ahead=ahead)
        finally:
            if ahead is not None:
                ahead.release()
        self.adopt(problem, result, encoder=encoder)
        self.test_scores_ = monitor.final_test_scores()
        return self

    def start_compile_ahead(
        self, graph: str = "chain", order: int = 1, test: bool = True
    ) -> compile_ahead.CompileAhead | None:
        """The second process compiling this model's kernels on a cold numba cache, for a fit
        on ``graph`` data of ``order`` (None when there is none to start:
        :func:`crfsdca.estimators.compile_ahead.start`); to be passed to :meth:`fit`."""
        dtype = self.solver_options.get("dual_dtype", "float64")
        return compile_ahead.start(self.solver, graph, order, dtype, test, self.loss)

    def adopt(
        self, problem: Problem, result: SolverResult, *, encoder: dict[str, Any] | None = None
    ) -> SequenceCRF:
        """Take the weights of ``result``, trained on ``problem`` (as :meth:`fit` ends)."""
        self.weights_ = result.weights
        self.feature_map_ = problem.feature_map
        self.graph_ = graph_of(problem.train)
        self.order_ = data_order(problem.train)
        self.label_names_ = problem.train.label_names
        self.regularization_ = problem.regularization
        self.l1_ = problem.l1
        self.loss_ = problem.loss
        self.encoder = encoder
        self.result_ = result
        self.problem_ = problem
        self.test_scores_ = None
        return self

    def _problem(self, train, test, name: str, dropped=None) -> Problem:
        bias = self.n_bias_rows if self.n_bias_rows is not None else 3
        graph = graph_of(train)
        if test is not None and graph_of(test) != graph:
            raise GraphError(
                f"the training data are {graph}s but the test data {graph_of(test)}s;"
                " give both as SequenceData, both as TreeData or both as JunctionData"
            )
        dense = self.all_possible_states and self.all_possible_transitions and self.min_freq == 0
        if graph != "chain" and not dense:
            raise ValueError(
                f"{kind_name(graph, data_order(train))} train the dense model:"
                " all_possible_states and all_possible_transitions must be True, min_freq 0"
            )
        if graph == "junction":
            problem = junction_problem(
                train, n_bias_rows=bias, regularization=self.regularization, test=test, name=name
            )
            problem.l1, problem.loss = self.l1, self.loss
            return problem
        if graph == "tree":
            problem = tree_problem(
                train, n_bias_rows=bias, regularization=self.regularization, test=test, name=name
            )
            problem.l1, problem.loss = self.l1, self.loss
            return problem
        fm = FeatureMap(train.n_attributes, train.n_labels, bias)
        free = observed_features(
            train,
            fm,
            all_states=self.all_possible_states,
            all_transitions=self.all_possible_transitions,
            dropped=dropped,
        )
        if self.min_freq > 0:
            free = frequent_features(train, fm, free, self.min_freq)
        return Problem(
            train=train,
            feature_map=fm,
            regularization=self.regularization,
            test=test,
            name=name,
            free=free,
            zero_ok=self.solver == "lbfgs",
            l1=self.l1,
            loss=self.loss,
        )

    def _check_fitted(self) -> None:
        if self.weights_ is None:
            raise NotFittedError(
                "this SequenceCRF is not trained yet; call fit() or SequenceCRF.load()"
            )

    # -- prediction --------------------------------------------------------------------------
    def _oracle(self, data: SequenceData | TreeData | JunctionData):
        self._check_fitted()
        data = model_data(data, self.graph_, self.order_)
        self._check_graph(data)
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
        if self.graph_ == "junction":
            return JunctionOracle(data, fm)
        if self.graph_ == "tree":
            return TreeOracle(data, fm)
        return Oracle(data, FeatureMap(fm.n_attributes, fm.n_labels, fm.n_bias_rows))

    def _check_graph(self, data: SequenceData | TreeData | JunctionData) -> None:
        """One clear line when tree data use edge types the model has no transition block
        for (the graph kind is checked by :func:`~crfsdca.estimators.model_junction.model_data`)."""
        if graph_of(data) == "tree":
            n_types = self.feature_map_.n_edge_types
            for i, tree in enumerate(data.graphs):
                used = tree.edge_types[tree.parents >= 0]
                if used.size and used.max() >= n_types:
                    v = int(np.flatnonzero((tree.parents >= 0) & (tree.edge_types >= n_types))[0])
                    raise GraphError(
                        f"example {i}: node {v}: edge type {int(tree.edge_types[v])}, but the"
                        f" model has {n_types} edge type(s) (0 to {n_types - 1})"
                    )

    def predict(self, data: SequenceData | TreeData | JunctionData) -> NDArray[np.int64]:
        """MAP labels (N,) int64 of every token (node) of ``data`` (Viterbi on chains)."""
        return self._oracle(data).predict(self.weights_)

    def predict_marginals(
        self, data: SequenceData | TreeData | JunctionData, i: int
    ) -> NDArray[np.float64]:
        """Node marginals (T, K) of sequence (example) ``i``."""
        refuse_probabilities(getattr(self, "loss_", self.loss))
        oracle = self._oracle(data)
        if isinstance(oracle, JunctionOracle):
            return junction_node_marginals(oracle, i, self.weights_)
        _, log_node, _ = oracle.marginals(i, self.weights_)
        return np.exp(log_node)

    def node_marginals(self, data: SequenceData | TreeData | JunctionData) -> NDArray[np.float64]:
        """Node marginals (N, K) of every token (node) of ``data``, packed like its labels."""
        refuse_probabilities(getattr(self, "loss_", self.loss))
        oracle = self._oracle(data)
        if isinstance(oracle, Oracle):
            return oracle.predict_marginals(self.weights_)
        data = oracle.data
        out = np.empty((data.n_items, self.feature_map_.n_labels))
        offsets = data.seq_offsets
        for i in range(data.n_sequences):
            if isinstance(oracle, JunctionOracle):
                rows = junction_node_marginals(oracle, i, self.weights_)
            else:
                rows = np.exp(oracle.marginals(i, self.weights_)[1])
            out[offsets[i] : offsets[i + 1]] = rows
        return out

    def score(self, data: SequenceData | TreeData | JunctionData) -> dict[str, Any]:
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
            "graph": self.graph_,
            "n_edge_types": fm.n_edge_types,
            "all_possible_states": self.all_possible_states,
            "all_possible_transitions": self.all_possible_transitions,
            "labels": list(self.label_names_),
            "regularization": self.regularization_,
            "l1": getattr(self, "l1_", self.l1),
            "loss": getattr(self, "loss_", self.loss),
            "solver": self.solver,
            "solver_options": self.solver_options,
            "encoder": self.encoder,
            "meta": self.meta,
        }
        if self.graph_ == "junction":
            header.update(header_fields(self.order_, fm.factor_arities))
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
        check_header(path, header, arrays)
        try:
            model = cls(
                solver=header["solver"],
                regularization=header["regularization"],
                l1=header.get("l1", 0.0),
                loss=header.get("loss", "log"),
                n_bias_rows=header["n_bias_rows"],
                all_possible_states=header.get("all_possible_states", True),
                all_possible_transitions=header.get("all_possible_transitions", True),
                **header.get("solver_options", {}),
            )
        except (TypeError, ValueError) as err:
            raise ModelFormatError(
                f"{path}: corrupt model header: the solver options: {err}"
            ) from err
        try:
            graph, order, arities = read_header(header)
            n_types = 0 if graph == "junction" else _graph_header(header)[1]
            fm = FeatureMap(
                header["n_attributes"], header["n_labels"], header["n_bias_rows"], n_types, arities
            )
        except (KeyError, TypeError, ValueError) as err:
            raise ModelFormatError(f"{path}: corrupt model header: {header_words(err)}") from err
        model.order = order or 1
        if arrays["weights"].shape != (fm.n_features,):
            raise size_mismatch(path, arrays["weights"].size, fm.n_features)
        weights = fm.check_weights(arrays["weights"])
        labels = tuple(header["labels"])
        if not np.all(np.isfinite(weights)):
            raise ModelFormatError(f"{path}: corrupt model: the weights hold NaN or infinities")
        model.weights_, model.feature_map_, model.label_names_ = weights, fm, labels
        model.graph_, model.order_ = graph, order
        model.regularization_ = header["regularization"]
        model.l1_ = model.l1
        model.loss_ = model.loss
        model.encoder = header.get("encoder")
        model.meta = header.get("meta", {})
        return model


def _graph_header(header: dict[str, Any]) -> tuple[str, int]:
    """(graph kind, number of edge types) of a model header; chains before trees had neither."""
    graph = header.get("graph", "chain")
    n_types = header.get("n_edge_types", 1)
    if graph not in GRAPHS:
        raise ValueError(f"graph must be one of {', '.join(GRAPHS)}; got {graph!r}")
    if not isinstance(n_types, int) or isinstance(n_types, bool) or n_types < 1:
        raise ValueError(f"n_edge_types must be an integer >= 1; got {n_types!r}")
    if graph == "chain" and n_types != 1:
        raise ValueError(f"a chain model has one transition block; got n_edge_types {n_types}")
    return graph, n_types
