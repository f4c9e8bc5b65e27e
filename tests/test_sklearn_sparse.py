"""CRFsuite's sparse model (all_possible_states / all_possible_transitions False).

The free coordinates against CRFsuite's feature-generation rule written out by hand; the
restricted objective's gradient against finite differences and enumeration; masked L-BFGS
against an independent optimisation over the free coordinates; CRFsuite's iteration counting
and stopping tests; and parity with python-crfsuite's sparse model on real sentences.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from _reference import expected_features, features, loss, make_data
from scipy.optimize import minimize

from crfsdca import CRF
from crfsdca.features.feature_map import FeatureMap, observed_features
from crfsdca.features.featuredicts import FeatureDictEncoder, item_attributes
from crfsdca.solvers.lbfgs import LBFGS, LBFGSConfig
from crfsdca.solvers.monitor import Monitor
from crfsdca.structures.problem import Problem

LAM = 0.05


@pytest.fixture(scope="module")
def data():
    return make_data(np.random.default_rng(3), n_sequences=8, n_labels=3, n_attributes=6)


def _crfsuite_rule(data, all_states, all_transitions):
    """crf1df_generate, item by item: state features with their frequencies, bigrams."""
    A, K = data.n_attributes, len(data.label_names)
    freq: dict[tuple[int, int], float] = {}
    bigrams = set()
    for i in range(data.n_sequences):
        y = data.sequence_labels(i)
        start = int(data.seq_offsets[i])
        for t in range(len(y)):
            if t:
                bigrams.add((int(y[t - 1]), int(y[t])))
            lo, hi = data.attr_offsets[start + t], data.attr_offsets[start + t + 1]
            for a, v in zip(data.attr_ids[lo:hi], data.attr_values[lo:hi], strict=True):
                freq[(int(a), int(y[t]))] = freq.get((int(a), int(y[t])), 0.0) + float(v)
                if all_states:
                    for k in range(K):
                        freq.setdefault((int(a), k), 0.0)
    if all_transitions:
        bigrams = {(k, j) for k in range(K) for j in range(K)}
    state = sorted(a * K + k for (a, k), f in freq.items() if f >= 0.0)
    trans = sorted(A * K + k * K + j for k, j in bigrams)
    return np.array(state + trans), freq


@pytest.mark.parametrize(("all_states", "all_transitions"), [(False, False), (False, True)])
def test_free_coordinates_follow_crfsuites_rule(data, all_states, all_transitions):
    fm = FeatureMap(data.n_attributes, len(data.label_names), 0)
    free = observed_features(data, fm, all_states=all_states, all_transitions=all_transitions)
    expected, freq = _crfsuite_rule(data, all_states, all_transitions)
    np.testing.assert_array_equal(free, expected)
    assert any(f < 0 for f in freq.values())  # the minfreq filter has something to drop
    assert free.size < fm.n_features


def test_all_possible_states_frees_every_state_weight(data):
    """With all_possible_states every state weight is free (crfsdca's dense model; CRFsuite
    would still drop the pairs of negative frequency, see observed_features); with both flags
    nothing is restricted."""
    fm = FeatureMap(data.n_attributes, len(data.label_names), 0)
    assert observed_features(data, fm, all_states=True, all_transitions=True) is None
    free = observed_features(data, fm, all_states=True, all_transitions=False)
    off = fm.transition_offset
    np.testing.assert_array_equal(free[free < off], np.arange(off))
    expected, _ = _crfsuite_rule(data, False, False)
    np.testing.assert_array_equal(free[free >= off], expected[expected >= off])


def _problem(data, free=True):
    fm = FeatureMap(data.n_attributes, len(data.label_names), 0)
    mask = observed_features(data, fm, all_states=False, all_transitions=False) if free else None
    return Problem(train=data, feature_map=fm, regularization=LAM, free=mask)


def test_restricted_gradient(data):
    problem = _problem(data)
    fm, free = problem.feature_map, problem.free
    rng = np.random.default_rng(0)
    w = fm.zeros()
    w[free] = rng.normal(scale=0.5, size=free.size)
    value, grad = problem.primal_and_gradient(w)
    masked = np.setdiff1d(np.arange(fm.n_features), free)
    assert masked.size and np.all(grad[masked] == 0.0)
    # enumeration: lambda w + (1/n) sum_i (E F - F_i), on the free coordinates
    n = data.n_sequences
    brute = sum(
        expected_features(data, i, w, fm) - features(data, i, data.sequence_labels(i), fm)
        for i in range(n)
    )
    np.testing.assert_allclose(grad[free], (LAM * w + brute / n)[free], atol=1e-10)
    assert value == pytest.approx(0.5 * LAM * w @ w + loss(data, w, fm) / n, rel=1e-12)
    h = 1e-6
    for j in free[:: max(1, free.size // 12)]:
        e = fm.zeros()
        e[j] = h
        fd = (problem.primal(w + e) - problem.primal(w - e)) / (2 * h)
        assert grad[j] == pytest.approx(fd, abs=1e-7)


def _solve(problem, **options):
    config = LBFGSConfig(**options)
    return LBFGS(config).solve(problem, Monitor(problem, "lbfgs", config))


def test_masked_lbfgs_reaches_the_optimum_over_the_free_coordinates(data):
    problem = _problem(data)
    fm, free, n = problem.feature_map, problem.free, data.n_sequences
    result = _solve(problem, tol=1e-13, max_epochs=2000)
    masked = np.setdiff1d(np.arange(fm.n_features), free)
    assert np.all(result.weights[masked] == 0.0)

    def full(x):
        w = fm.zeros()
        w[free] = x
        return w

    def brute(x):  # by enumeration, no crfsdca oracle
        w = full(x)
        grad = (
            LAM * w
            + sum(
                expected_features(data, i, w, fm) - features(data, i, data.sequence_labels(i), fm)
                for i in range(n)
            )
            / n
        )
        return 0.5 * LAM * x @ x + loss(data, w, fm) / n, grad[free]

    ref = minimize(brute, np.zeros(free.size), jac=True, method="BFGS", options={"gtol": 1e-10})
    assert problem.primal(result.weights) == pytest.approx(ref.fun, abs=1e-11)
    np.testing.assert_allclose(result.weights[free], ref.x, atol=1e-5)
    # the restriction bites: the dense optimum is strictly lower
    dense = _solve(_problem(data, free=False), tol=1e-13, max_epochs=2000)
    assert _problem(data, free=False).primal(dense.weights) < ref.fun - 1e-4


def _path(problem, iterations):
    """P at iterations 0..iterations of the same deterministic L-BFGS run."""
    values = [problem.primal(problem.feature_map.zeros())]
    for k in range(1, iterations + 1):
        values.append(problem.primal(_solve(problem, tol=0.0, max_iterations=k).weights))
    return values


def test_max_iterations_counts_iterations_not_evaluations(data):
    problem = _problem(data)
    result = _solve(problem, tol=0.0, max_iterations=6)
    assert result.stop_reason == "max_iterations"
    assert result.counters["iterations"] == 6
    # one evaluation at the start and at least one per iteration
    assert result.counters["oracle_calls"] >= 7 * data.n_sequences


def test_delta_stops_as_libLBFGS(data):
    problem = _problem(data)
    result = _solve(problem, tol=0.0, delta=1e-3, period=3)
    assert result.stop_reason == "delta"
    k = result.counters["iterations"]
    values = _path(problem, k)
    assert values[k] == pytest.approx(problem.primal(result.weights), rel=1e-12)
    rate = [(values[j - 3] - values[j]) / values[j] for j in range(3, k + 1)]
    assert rate[-1] < 1e-3 and min(rate[:-1], default=1.0) >= 1e-3


def test_epsilon_stops_on_the_summed_gradient(data):
    problem = _problem(data)
    n = data.n_sequences
    result = _solve(problem, tol=0.0, epsilon=1e-3)
    assert result.stop_reason == "epsilon"

    def ratio(w):
        grad = problem.primal_and_gradient(w)[1]
        return n * np.linalg.norm(grad) / max(1.0, np.linalg.norm(w))

    assert ratio(result.weights) <= 1e-3
    k = result.counters["iterations"]
    before = _solve(problem, tol=0.0, max_iterations=k - 1).weights
    assert ratio(before) > 1e-3


# -- the estimator ---------------------------------------------------------------------------
def _tiny_corpus():
    words = ["anna", "gent", "de", "in", "woont", "piet", "lima"]
    rng = np.random.default_rng(0)
    X, y = [], []
    for _ in range(40):
        sent = [words[j] for j in rng.integers(0, len(words), rng.integers(1, 6))]
        X.append([{"w": w, "len": len(w) / 4, "cap": w[0] == "a", "b": 1.0} for w in sent])
        tags = ["PER" if w in ("anna", "piet") else "LOC" if w in ("gent", "lima") else "O"
                for w in sent]  # fmt: skip
        # a name after a name continues it: I-PER follows only B-PER or I-PER
        y.append([("I-" if t and tags[t - 1] == "PER" else "B-") + tag if tag == "PER" else tag
                  for t, tag in enumerate(tags)])  # fmt: skip
    return X, y


def test_estimator_default_lbfgs_is_crfsuites_sparse_model(tmp_path):
    X, y = _tiny_corpus()
    crf = CRF(algorithm="lbfgs", c2=0.1, model_filename=str(tmp_path / "m.npz")).fit(X, y)
    # CRFsuite's rule on the raw items: every attribute of a token, False ones included
    seen_states = {
        (name, label)
        for xs, ys in zip(X, y, strict=True)
        for item, label in zip(xs, ys, strict=True)
        for name, _ in item_attributes(item)
    }
    labels = sorted({t for ys in y for t in ys})
    seen_bigrams = {(a, b) for ys in y for a, b in zip(ys, ys[1:], strict=False)}
    assert set(crf.state_features_) <= seen_states
    assert ("cap", "LOC") in crf.state_features_  # cap is False on every LOC token
    assert set(crf.transition_features_) <= seen_bigrams
    assert len(seen_bigrams) < len(labels) ** 2  # some bigram is structurally absent
    dense = CRF(algorithm="lbfgs", c2=0.1, all_possible_states=True, all_possible_transitions=True)
    dense.fit(X, y)
    assert len(dense.state_features_) > len(crf.state_features_)
    # the saved model keeps the flags and tags as the fitted one
    again = CRF(model_filename=str(tmp_path / "m.npz"))
    assert again.predict(X) == crf.predict(X)
    assert again.state_features_ == crf.state_features_
    assert again._model.all_possible_states is False


def test_sparse_model_exports_to_crfsuite(tmp_path):
    pycrfsuite = pytest.importorskip("pycrfsuite")
    from crfsdca.estimators.crfsuite_format import crfsuite_items, export_crfsuite

    X, y = _tiny_corpus()
    crf = CRF(algorithm="lbfgs", c2=0.1).fit(X, y)
    path = tmp_path / "m.crfsuite"
    export_crfsuite(crf._model, str(path))
    tagger = pycrfsuite.Tagger()
    tagger.open(str(path))
    items = crfsuite_items(crf._model, crf._encoder.transform(X))
    assert [tagger.tag(seq) for seq in items] == crf.predict(X)
    info = tagger.info()
    assert {(a, b) for (a, b) in info.transitions} == set(crf.transition_features_)


# -- parity with python-crfsuite's sparse model ------------------------------------------------
N_TRAIN, N_TEST, C2 = 200, 300, 0.1


@pytest.fixture(scope="module")
def conll2000():
    data_loaders = pytest.importorskip("data_loaders")
    if not os.environ.get("CRFSDCA_DATA_DIR"):
        pytest.skip("CRFSDCA_DATA_DIR is not set")
    try:
        train = data_loaders.load_dataset("conll2000", "train")
    except data_loaders.DatasetNotFoundError as err:
        pytest.skip(str(err))

    def feats(s, t):
        f = {"bias": 1.0, "w": s[t][0].lower(), "pos": s[t][1], "title": s[t][0].istitle()}
        f["-1"] = {"pos": s[t - 1][1]} if t else {"BOS": True}
        return f

    sents = [[feats(s, t) for t in range(len(s))] for s in train.tokens[: N_TRAIN + N_TEST]]
    labels = train.labels[: N_TRAIN + N_TEST]
    return (sents[:N_TRAIN], labels[:N_TRAIN]), (sents[N_TRAIN:], labels[N_TRAIN:])


def _sparse_objective(X, y, state, transitions) -> float:
    """crfsdca's restricted P at weights given as sklearn-crfsuite dicts; KeyError if a weight
    lies off CRFsuite's features."""
    encoder = FeatureDictEncoder()
    data = encoder.fit_transform(X, y)
    fm = FeatureMap(data.n_attributes, data.n_labels, 0)
    free = observed_features(
        data, fm, all_states=False, all_transitions=False, dropped=encoder.dropped_
    )
    attr = {name: j for j, name in enumerate(encoder.attribute_names)}
    label = {name: k for k, name in enumerate(data.label_names)}
    w = fm.zeros()
    for (a, lab), value in state.items():
        fm.emission(w)[attr[a], label[lab]] = value
    for (a, b), value in transitions.items():
        fm.transition(w)[label[a], label[b]] = value
    off = np.setdiff1d(np.arange(fm.n_features), free)
    assert np.all(w[off] == 0.0)
    return Problem(train=data, feature_map=fm, regularization=2 * C2 / len(X), free=free).primal(w)


@pytest.mark.slow
def test_same_sparse_optimum_as_python_crfsuite(conll2000):
    sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")
    (X, y), (X_test, _) = conll2000
    stop = {"max_iterations": 5000, "epsilon": 1e-9, "delta": 1e-12}
    theirs = sklearn_crfsuite.CRF(algorithm="lbfgs", c1=0, c2=C2, **stop).fit(X, y)
    ours = CRF(algorithm="lbfgs", c1=0, c2=C2, tol=1e-8, **stop).fit(X, y)
    # the same features carry a weight (CRFsuite stores the non-zero ones)
    assert set(ours.state_features_) == set(theirs.state_features_)
    assert set(ours.transition_features_) == set(theirs.transition_features_)
    p_ours = _sparse_objective(X, y, ours.state_features_, ours.transition_features_)
    p_theirs = _sparse_objective(X, y, theirs.state_features_, theirs.transition_features_)
    assert abs(p_theirs - p_ours) <= 1e-6 * p_ours
    pred_theirs = [list(p) for p in theirs.predict(X_test)]
    agree = np.mean(
        [a == b for s, t in zip(ours.predict(X_test), pred_theirs, strict=True)
         for a, b in zip(s, t, strict=True)]
    )  # fmt: skip
    assert agree >= 0.995
