"""A scikit-learn estimator with sklearn-crfsuite's interface: ``crfsdca.CRF``.

Code written for ``sklearn_crfsuite.CRF`` runs with ``crfsdca.CRF`` after changing the import:
``fit(X, y, X_dev=None, y_dev=None)`` on lists of feature-dict sequences
(:mod:`crfsdca.features.featuredicts`), ``predict``, ``predict_marginals``, ``score`` (token
accuracy),
``classes_``, ``state_features_``, ``transition_features_``, ``attributes_``, ``size_``,
``tagger_`` (:mod:`crfsdca.estimators.fitted`), ``training_log_``, ``export_crfsuite``, and
``get_params`` / ``set_params`` / ``clone`` / pickling for model selection. The prediction
methods live in :mod:`crfsdca.estimators.predictions`, sklearn-crfsuite's parameters in
crfsdca's terms in :mod:`crfsdca.estimators.params`.

Tree-structured CRFs take the same calls with ``graphs=``: one
:class:`~crfsdca.structures.graphs.Tree` (or parent array, ``-1`` for roots) per sequence, passed to
``fit``, ``predict``, ``predict_marginals`` and ``score`` as data
(:mod:`crfsdca.estimators.graphs`).
Each edge type of the training trees gets its own transition block. With scikit-learn's metadata
routing, ``cross_validate(crf.set_fit_request(graphs=True).set_score_request(graphs=True), X, y,
params={"graphs": graphs})`` splits the trees with the sequences. ``CRF(order=2)`` trains
second-order chains (a K x K x K block on every three consecutive labels) on plain sequences.

The model is CRFsuite's first-order CRF (no bias rows). With CRFsuite's algorithms (``lbfgs``,
``l2sgd``, ``ap``, ``pa``, ``arow``) it is, by default, CRFsuite's default sparse model: a state
weight only for the (attribute, label) pairs seen in training and a transition weight only for
the label bigrams seen (``all_possible_states``, ``all_possible_transitions`` add the others,
``min_freq`` drops rare ones, as in CRFsuite). crfsdca's own solvers train the dense model
(both flags True), which is their default. CRFsuite's L2
term ``c2 ||w||^2`` added to the summed loss over n sequences is crfsdca's mean loss plus
``(lambda/2) ||w||^2`` with ``lambda = 2 c2 / n``, and its L1 term ``c1 |w|_1`` is
``sigma |w|_1`` with ``sigma = c1 / n``: both reach the same optimum.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from crfsdca.errors import NotFittedError
from crfsdca.estimators.checks import check_training_data
from crfsdca.estimators.fitted import FittedAttributes
from crfsdca.estimators.graphs import fit_graphs, fit_order
from crfsdca.estimators.model import SequenceCRF
from crfsdca.estimators.model_file import check_model_filename, load_model_file, save_model_file
from crfsdca.estimators.params import (
    PARAM_NAMES,
    fit_threads,
    l1_weight,
    log_line,
    model_flags,
    one_blas_thread,
    regularization,
    solver_name,
    solver_options,
)
from crfsdca.estimators.predictions import Predictions
from crfsdca.features.attributes import encoder_from_dict
from crfsdca.features.encoders import AttributeEncoder
from crfsdca.features.feature_map import FeatureMap
from crfsdca.features.featuredicts import FeatureDictEncoder
from crfsdca.features.min_freq import check_min_freq
from crfsdca.solvers import SOLVERS

__all__ = ["CRF", "solver_name"]

try:  # scikit-learn is optional: without it get_params / set_params are our own
    from sklearn.base import BaseEstimator as _Base
except ImportError:  # pragma: no cover - exercised where scikit-learn is absent
    _Base = object


class CRF(FittedAttributes, Predictions, _Base):
    """Linear-chain CRF with sklearn-crfsuite's interface, trained by crfsdca's solvers.

    Parameters
    ----------
    algorithm : str or None
        ``"sdca"`` (default), ``"sag-nus"``, ``"sag-nus-skip"``, ``"oeg"``, ``"spdc-df"``
        (the adaptive dual-free SPDC of Wang & Xiao 2017), ``"lbfgs"`` (None
        means ``"lbfgs"``, as in sklearn-crfsuite), or CRFsuite's other algorithms ``"l2sgd"``,
        ``"ap"``, ``"pa"``, ``"arow"`` with CRFsuite's parameters and semantics
        (:mod:`crfsdca.solvers.online`, :mod:`crfsdca.solvers.l2sgd`).
    c1 : float, optional
        CRFsuite's L1 coefficient (objective ``sum_i loss_i + c1 |w|_1 + c2 ||w||^2``),
        converted to the elastic net's ``sigma = c1 / n``; ``c1 > 0`` with ``"lbfgs"``
        (OWL-QN, as CRFsuite) or ``"sdca"`` (Prox-SDCA, certified by its duality gap).
        Default None (0: no L1 term).
    c2 : float, optional
        CRFsuite's L2 coefficient (objective ``sum_i loss_i + c2 ||w||^2``), converted to
        ``regularization = 2 * c2 / n`` for n training sequences. Default: ``1 / n``
        (crfsdca's default, i.e. ``c2 = 0.5``; sklearn-crfsuite's default is ``c2 = 1``).
        ``c2 = 0`` (no L2 term, as CRFsuite trains it) with ``"lbfgs"`` only; ``"ap"``,
        ``"pa"`` and ``"arow"`` have no L2 term (c2 only scales the objective they report).
    max_iterations : float, optional
        For ``"lbfgs"``, the maximum number of L-BFGS iterations, as CRFsuite counts them
        (an iteration's line search may evaluate several points); default: none, as CRFsuite.
        For the others, the maximum number of epochs (passes over the data); default: the
        solver's (100 for sdca).
    tol : float, optional
        Stop when the duality gap (dual solvers) or the L-BFGS gradient certificate falls
        below it. Default: 1e-4 for ``"sdca"`` (a certified gap on the mean objective; the
        ``crfsdca train`` default is 1e-7), the solver's for the others.
    sampling : str, optional
        SDCA sampling scheme (``"gap"``, ``"uniform"``, ...). Default: the solver's.
    non_uniformity : float, optional
        SDCA / SAG-NUS fraction of non-uniform draws. Default: the solver's.
    all_possible_states, all_possible_transitions : bool, optional
        As in CRFsuite: False (CRFsuite's default) gives a state weight only to the
        (attribute, label) pairs, and a transition weight only to the label bigrams, seen in
        training; every other weight is structurally 0 (:func:`crfsdca.features.observed_features`).
        True gives every pair a weight. ``None``: False with CRFsuite's algorithms, True with
        crfsdca's own solvers, which train the dense model only (False raises ValueError).
    epsilon, period, delta, num_memories : optional
        CRFsuite's stopping tests (``period``, ``delta`` also for ``"l2sgd"``; ``epsilon`` also
        for ``"ap"``, ``"pa"``, ``"arow"``: their mean loss) and L-BFGS memory. L-BFGS stops when
        ``||grad|| / max(1, ||w||) <= epsilon`` or when the objective improved by less than
        ``delta`` (relative) over ``period`` iterations. Defaults: CRFsuite's (1e-5, 10, 1e-5, 6).
    verbose : bool
        Write one line per evaluated epoch (objective, gap, dev accuracy) to stderr.
    random_state : int, optional
        Seed of the solver's sampling, in [0, 2^32); ``None`` means 0 (runs are reproducible).
        CRFsuite's algorithms shuffle with glibc's ``rand()`` seeded by it (0 and 1: the order
        of a fresh CRFsuite process).
    model_filename : str, optional
        ``fit`` saves the model there: CRFsuite's format for a name ending in ``.crfsuite``
        (as sklearn-crfsuite writes there; chain models), else crfsdca's ``.npz`` + JSON (no
        pickle). Checked before training: the file can be written, and an existing file there
        is a crfsdca or CRFsuite model (another program's file is never replaced). An unfitted
        CRF given ``model_filename`` loads it on first use, either format (as sklearn-crfsuite
        does; :mod:`crfsdca.estimators.model_file`).
    n_jobs : int, optional
        Cores of a fit: SDCA's threads stepping at once on one shared w (the certificate stays
        exact; a run on more than one thread is not reproducible bit for bit), and the
        full-batch passes (every L-BFGS evaluation; the monitor's exact objective and dev scores
        for the others); -1 for all. None: numba's thread count for the passes, and for SDCA's
        steps all of them when each thread gets at least 1000 sequences, else one.
    order : int
        1 (default): linear chains (or trees, with ``graphs``); 2: second-order chains, a
        K x K x K weight block on every three consecutive labels besides the K x K one (the
        dense model; no ``graphs``).
    min_freq : float, optional
        CRFsuite's ``feature.minfreq``: features (state and transition) whose frequency in the
        training data is below it are left out of the model (:mod:`crfsdca.features.min_freq`); with
        CRFsuite's algorithms only.
    linesearch, max_linesearch : optional
        CRFsuite's L-BFGS line search (``"MoreThuente"``, ``"Backtracking"``,
        ``"StrongBacktracking"``) and its trial limit: checked and accepted with ``"lbfgs"``,
        but a no-op: crfsdca's L-BFGS always uses SciPy's L-BFGS-B line search.
    calibration_eta, calibration_rate, calibration_samples, calibration_candidates, \
calibration_max_trials : optional
        CRFsuite's ``l2sgd`` learning-rate calibration.
    pa_type, c, error_sensitive, averaging : optional
        CRFsuite's ``pa`` options; ``variance``, ``gamma``: ``arow``'s.
    keep_tempfiles : bool
        Accepted for sklearn-crfsuite's interface; a no-op (crfsdca trains in memory and writes
        no temporary model files).
    loss : str
        ``"log"`` (the CRF, default) or ``"hinge"``: the structured SVM with the Hamming loss
        (Shalev-Shwartz & Zhang's Prox-SDCA for structured output; ``algorithm="sdca"`` only).
        It predicts labels like a CRF but has no marginals.

    Attributes
    ----------
    classes_ : list of str
        Labels, in order of first appearance in ``y``.
    graph_, n_edge_types_ : str, int
        ``"tree"`` (fitted with ``graphs``), ``"junction"`` (``order=2``) or ``"chain"``; the
        number of transition blocks (0 for ``order=2``: its blocks are factors).
    state_features_ : dict
        ``{(attribute, label): weight}`` for every non-zero emission weight.
    transition_features_ : dict
        ``{(label_from, label_to): weight}`` for every non-zero transition weight.
    attributes_ : list of str
        Attributes with at least one non-zero state weight; ``num_attributes_`` counts them.
    size_ : int
        Bytes of the model as a CRFsuite model file (:meth:`export_crfsuite`), as
        sklearn-crfsuite reports it (bytes of the weights for tree and second-order models).
    tagger_ : Tagger
        python-crfsuite's Tagger methods (``labels``, ``tag``, ``set``, ``marginal``,
        ``probability``, ``info``) on this model (:mod:`crfsdca.estimators.crfsuite_tagger`).

    Before ``fit``, ``classes_``, ``size_``, ``tagger_``, ``attributes_``, ``num_attributes_``,
    ``state_features_`` and ``transition_features_`` are None, as in sklearn-crfsuite.
    training_log_ : list of TraceRecord
        The training trace: epoch, seconds, primal, dual, gap, dev error per evaluation.
    """

    def __init__(
        self,
        algorithm: str = "sdca",
        c1: float | None = None,
        c2: float | None = None,
        max_iterations: float | None = None,
        tol: float | None = None,
        sampling: str | None = None,
        non_uniformity: float | None = None,
        all_possible_states: bool | None = None,
        all_possible_transitions: bool | None = None,
        epsilon: float | None = None,
        period: int | None = None,
        delta: float | None = None,
        num_memories: int | None = None,
        verbose: bool = False,
        random_state: int | None = None,
        model_filename: str | None = None,
        n_jobs: int | None = None,
        order: int = 1,
        min_freq: float | None = None,
        linesearch: str | None = None,
        max_linesearch: int | None = None,
        calibration_eta: float | None = None,
        calibration_rate: float | None = None,
        calibration_samples: int | None = None,
        calibration_candidates: int | None = None,
        calibration_max_trials: int | None = None,
        pa_type: int | None = None,
        c: float | None = None,
        error_sensitive: bool | None = None,
        averaging: bool | None = None,
        variance: float | None = None,
        gamma: float | None = None,
        keep_tempfiles: bool = False,
        loss: str = "log",
    ) -> None:
        self.algorithm = algorithm
        self.c1 = c1
        self.c2 = c2
        self.max_iterations = max_iterations
        self.tol = tol
        self.sampling = sampling
        self.non_uniformity = non_uniformity
        self.all_possible_states = all_possible_states
        self.all_possible_transitions = all_possible_transitions
        self.epsilon = epsilon
        self.period = period
        self.delta = delta
        self.num_memories = num_memories
        self.verbose = verbose
        self.random_state = random_state
        self.model_filename = model_filename
        self.n_jobs = n_jobs
        self.order = order
        self.min_freq = min_freq
        self.linesearch = linesearch
        self.max_linesearch = max_linesearch
        self.calibration_eta = calibration_eta
        self.calibration_rate = calibration_rate
        self.calibration_samples = calibration_samples
        self.calibration_candidates = calibration_candidates
        self.calibration_max_trials = calibration_max_trials
        self.pa_type = pa_type
        self.c = c
        self.error_sensitive = error_sensitive
        self.averaging = averaging
        self.variance = variance
        self.gamma = gamma
        self.keep_tempfiles = keep_tempfiles
        self.loss = loss

    # -- parameters (scikit-learn's protocol when scikit-learn is absent) ---------------------
    if _Base is object:  # pragma: no cover - exercised where scikit-learn is absent

        def get_params(self, deep: bool = True) -> dict[str, Any]:
            """Constructor arguments, by name."""
            return {name: getattr(self, name) for name in PARAM_NAMES}

        def set_params(self, **params: Any) -> CRF:
            """Set constructor arguments; unknown names raise ValueError."""
            for name, value in params.items():
                if name not in PARAM_NAMES:
                    raise ValueError(f"invalid parameter {name!r} for CRF; valid: {PARAM_NAMES}")
                setattr(self, name, value)
            return self

    # -- training ----------------------------------------------------------------------------
    def _solver_options(self) -> dict[str, Any]:
        return solver_options(self)

    def _regularization(self, n_sequences: int) -> float | None:
        zero_ok = solver_name(self.algorithm) == "lbfgs"
        return regularization(self.c1, self.c2, n_sequences, zero_ok=zero_ok)

    def _model_flags(self, dense: str | None = None) -> dict[str, bool]:
        return model_flags(self, dense)

    def fit(
        self,
        X: Sequence[Sequence[Any]],
        y: Sequence[Sequence[str]],
        X_dev: Sequence[Sequence[Any]] | None = None,
        y_dev: Sequence[Sequence[str]] | None = None,
        graphs: Sequence[Any] | None = None,
        graphs_dev: Sequence[Any] | None = None,
    ) -> CRF:
        """Train on feature-dict sequences ``X`` with label sequences ``y``.

        ``X_dev``, ``y_dev`` (both or neither) are evaluated at every monitoring pass; their
        token error is in ``training_log_``. ``graphs`` (and ``graphs_dev`` for the dev set)
        make a tree-structured CRF (the dense model, every algorithm): one Tree or parent array
        per sequence; the model then predicts only sequences given with trees.
        """
        if (X_dev is None) != (y_dev is None):
            raise ValueError("pass both X_dev and y_dev to use a dev set, or neither")
        X, y = check_training_data(X, y, "X", "y")
        if X_dev is not None:
            X_dev, y_dev = check_training_data(X_dev, y_dev, "X_dev", "y_dev")
        order = fit_order(self.order, graphs)
        kind = "tree-structured" if graphs is not None else "second-order" if order == 2 else None
        flags = self._model_flags(kind)
        options = self._solver_options()
        solver = solver_name(self.algorithm)
        lam = self._regularization(len(X))  # checks c1, c2 before any work
        sigma = l1_weight(self.c1, len(X), solver)
        min_freq = check_min_freq(self.min_freq)
        if self.model_filename is not None:
            check_model_filename(self.model_filename, kind)
        model = SequenceCRF(
            solver=solver,
            regularization=lam,
            l1=sigma,
            loss=self.loss,
            n_bias_rows=0,
            order=order,
            min_freq=min_freq,
            **flags,
            **options,
        )
        # on a cold numba cache a second process starts compiling while the data are encoded
        graph = "chain" if graphs is None else "tree"
        ahead = model.start_compile_ahead(graph, order, test=X_dev is not None)
        try:
            encoder = FeatureDictEncoder()
            train = encoder.fit_transform(X, y)
            dev = None if X_dev is None else encoder.transform(X_dev, y_dev, "X_dev")
            train, dev = fit_graphs(train, dev, graphs, graphs_dev)
            callback = log_line if self.verbose else None
            with one_blas_thread(), fit_threads(self.n_jobs):
                model.fit(train, dev, encoder=encoder.encoder.to_dict(), name="X",
                          callback=callback, dropped=encoder.dropped_, ahead=ahead)  # fmt: skip
        finally:
            if ahead is not None:
                ahead.release()
        self._finish(model, encoder, train)
        return self

    def _finish(self, model: SequenceCRF, encoder: FeatureDictEncoder, train) -> None:
        self.training_log_ = list(model.result_.trace.records)
        # SDCA's dual state and the packed training data stay in memory for partial_fit (not
        # pickled, not saved); what predicts is arrays and dicts
        growable = model.solver == "sdca" and model.graph_ == "chain"
        self._grow = (model.result_.state, train) if growable else None
        model.result_ = None
        model.problem_ = None
        self._model = model
        self._encoder = encoder
        self._size = None
        self._tagger = None
        if self.model_filename is not None:
            save_model_file(model, self.model_filename, encoder.attribute_names)

    def partial_fit(self, X: Sequence[Sequence[Any]], y: Sequence[Sequence[str]]) -> CRF:
        """Add the sequences ``(X, y)`` to a fitted model and continue SDCA from its dual state.

        The new sequences start from SDCA's dual start (as in fit), attributes first seen
        here get zero weights, w stays w_hat(mu), and the duality gap of the continued run
        certifies the objective over every sequence seen so far. Labels must be known already.
        Before any fit this is ``fit(X, y)``.
        """
        if getattr(self, "_model", None) is None and self.model_filename is None:
            return self.fit(X, y)
        from crfsdca.features.featuredicts import to_attribute_corpus
        from crfsdca.solvers.incremental import concatenate, grow_state, with_attributes

        model, encoder = self._fitted()
        if getattr(model, "loss_", "log") != "log":
            raise ValueError("partial_fit continues CRF (log-loss) models; fit the SVM again")
        if model.graph_ != "chain":
            kind = "tree" if model.graph_ == "tree" else "second-order"
            raise ValueError(
                f"partial_fit continues chain models; fit a {kind} CRF on all the data"
            )
        if getattr(self, "_grow", None) is None:
            raise ValueError(
                "partial_fit continues SDCA from its dual state, kept in memory after fit with"
                " algorithm='sdca' (not pickled, not saved); fit this CRF first"
            )
        state, old_train = self._grow
        corpus = to_attribute_corpus(X, y)
        known = set(encoder.label_names)
        unknown = sorted({t for seq in corpus.labels for t in seq} - known)
        if unknown:
            raise ValueError(
                f"partial_fit cannot add labels; {', '.join(map(repr, unknown))} not in"
                f" {sorted(known)} (fit on data with every label)"
            )
        vocabulary = encoder.encoder.vocabulary
        for item in (i for seq in corpus.attributes for i in seq):
            for name, _ in item:
                vocabulary.setdefault(name, len(vocabulary))
        new_data = encoder.encoder.transform(corpus)
        old_fm = model.feature_map_
        new_fm = FeatureMap(len(vocabulary), old_fm.n_labels, old_fm.n_bias_rows)
        train = concatenate(with_attributes(old_train, new_fm.n_attributes), new_data)
        lam_n = model.regularization_ * old_train.n_sequences
        options = self._solver_options()
        config = SOLVERS["sdca"].config_class(**options)
        grown = grow_state(state, old_fm, new_fm, new_data, lam_n, config)
        sigma = l1_weight(self.c1, train.n_sequences, "sdca")  # sigma n = c1 stays
        again = SequenceCRF(
            solver="sdca",
            regularization=lam_n / train.n_sequences,
            l1=sigma,
            n_bias_rows=0,
            **options,
        )
        callback = log_line if self.verbose else None
        with one_blas_thread(), fit_threads(self.n_jobs):
            again.fit(train, None, encoder=encoder.encoder.to_dict(), name="X",
                      callback=callback, state=grown)  # fmt: skip
        self._finish(again, encoder, train)
        return self

    def __getstate__(self) -> dict[str, Any]:
        """Pickles hold what predicts, not partial_fit's dual state and training data."""
        parent = getattr(super(), "__getstate__", None)
        state = dict(parent() if parent is not None else self.__dict__)
        state.pop("_grow", None)
        state.pop("_tagger", None)
        return state

    # -- fitted state ------------------------------------------------------------------------
    def __sklearn_is_fitted__(self) -> bool:
        """Trained, or given a ``model_filename`` that exists (loaded on first use)."""
        if getattr(self, "_model", None) is not None:
            return True
        return self.model_filename is not None and os.path.exists(self.model_filename)

    def _fitted(self) -> tuple[SequenceCRF, FeatureDictEncoder]:
        if getattr(self, "_model", None) is None:
            if self.model_filename is None:
                raise NotFittedError(
                    "this CRF is not fitted yet; call fit() first or give model_filename"
                )
            self._load(self.model_filename)
        return self._model, self._encoder

    def _load(self, path: str) -> None:
        model = load_model_file(path)
        if model.feature_map_.n_bias_rows != 0 or not model.encoder:
            raise ValueError(f"{path}: not a model of feature dicts (trained by crfsdca.CRF)")
        encoder = encoder_from_dict(model.encoder)
        if not isinstance(encoder, AttributeEncoder):
            raise ValueError(
                f"{path}: model encodes {model.encoder.get('kind')!r} data, not feature dicts"
            )
        self._model, self._encoder = model, FeatureDictEncoder(encoder)
        self._size = self._tagger = None
        self.training_log_ = []
