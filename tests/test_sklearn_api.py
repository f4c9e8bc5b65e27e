"""crfsdca.CRF behaves as sklearn_crfsuite.CRF: fit / predict / marginals / attributes / model
selection, on a tiny seeded corpus of feature dicts; marginals and Viterbi against brute force.
"""

from __future__ import annotations

import itertools
import math
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from crfsdca import CRF, NotFittedError
from crfsdca.features.featuredicts import item_attributes
from crfsdca.metrics import flat_accuracy

NAMES = ["anna", "piet", "jan", "marie"]
CITIES = ["gent", "parijs", "lima"]
OTHER = ["de", "in", "woont", "met", "naar", "gaat", "een", "huis"]


def _corpus(n: int, seed: int) -> tuple[list, list]:
    """Sentences of words; a name (or a name after a name) is B-PER (I-PER), a city B-LOC."""
    rng = np.random.default_rng(seed)
    words = NAMES + CITIES + OTHER
    sentences, labels = [], []
    for _ in range(n):
        sent = [str(w) for w in rng.choice(words, size=int(rng.integers(1, 8)))]
        tags = []
        for t, w in enumerate(sent):
            if w in NAMES:
                tags.append("I-PER" if t and sent[t - 1] in NAMES else "B-PER")
            elif w in CITIES:
                tags.append("B-LOC")
            else:
                tags.append("O")
        sentences.append([_features(sent, t) for t in range(len(sent))])
        labels.append(tags)
    return sentences, labels


def _features(sent: list[str], t: int) -> dict:
    w = sent[t]
    f = {"bias": 1.0, "w": w, "suffix": {"2": w[-2:]}, "len": len(w) / 4, "first": t == 0}
    f["prev"] = sent[t - 1] if t else "<s>"
    if t + 1 < len(sent):
        f["next"] = [sent[t + 1]]
    return f


@pytest.fixture(scope="module")
def data():
    return _corpus(80, seed=0), _corpus(30, seed=1)


@pytest.fixture(scope="module")
def fitted(data):
    (X, y), _ = data
    return CRF(c2=0.05, max_iterations=50).fit(X, y)


def test_fit_predict_learns_the_tags(data, fitted):
    (X, y), (X_test, y_test) = data
    pred = fitted.predict(X_test)
    assert [len(p) for p in pred] == [len(s) for s in X_test]
    assert set(fitted.classes_) == {"B-PER", "I-PER", "B-LOC", "O"}
    assert fitted.classes_ == list(dict.fromkeys(t for s in y for t in s))  # first appearance
    assert flat_accuracy(y_test, pred) >= 0.95
    assert fitted.predict_single(X_test[0]) == pred[0]
    assert fitted.score(X_test, y_test) == pytest.approx(flat_accuracy(y_test, pred))


def test_item_attributes_match_python_crfsuite():
    pycrfsuite = pytest.importorskip("pycrfsuite")
    items = [
        {"w": "Gent", "n": 2.5, "up": True, "down": False, "nested": {"a": "x", "b": {"c": 3.0}}},
        {"tags": ["p", "q"], "set": {"s"}, "ünï": "cödé"},
        ["plain", "names"],
    ]
    expected = pycrfsuite.ItemSequence(items).items()
    got = [dict(item_attributes(item)) for item in items]
    assert got == expected


def test_item_attributes_refuse_bad_values():
    with pytest.raises(TypeError, match="feature 'w': expected a str, a number"):
        item_attributes({"w": None})
    with pytest.raises(TypeError, match="expected a feature dict or a list"):
        item_attributes("word")
    with pytest.raises(TypeError, match=r"X\[0\]\[1\]: feature 'w'"):
        CRF().fit([[{"w": "a"}, {"w": object()}]], [["A", "B"]])


def _brute_force(model: CRF, xseq: list) -> tuple[np.ndarray, tuple[str, ...]]:
    """Node marginals (T, K) and the best labelling by enumerating every labelling."""
    labels = model.classes_
    state, trans = model.state_features_, model.transition_features_
    items = [item_attributes(x) for x in xseq]
    scores = {}
    for path in itertools.product(labels, repeat=len(xseq)):
        s = sum(
            v * state.get((a, lab), 0.0)
            for item, lab in zip(items, path, strict=True)
            for a, v in item
        )
        s += sum(trans.get(pair, 0.0) for pair in zip(path[:-1], path[1:], strict=True))
        scores[path] = s
    log_z = np.logaddexp.reduce(list(scores.values()))
    marg = np.zeros((len(xseq), len(labels)))
    for path, s in scores.items():
        for t, lab in enumerate(path):
            marg[t, labels.index(lab)] += math.exp(s - log_z)
    return marg, max(scores, key=scores.get)


def test_marginals_and_viterbi_equal_brute_force(data, fitted):
    (_, _), (X_test, _) = data
    for xseq in [s for s in X_test if len(s) <= 4][:5]:
        marg, best = _brute_force(fitted, xseq)
        got = fitted.predict_marginals_single(xseq)
        assert [list(row) for row in got] == [fitted.classes_] * len(xseq)
        table = np.array([[row[k] for k in fitted.classes_] for row in got])
        np.testing.assert_allclose(table, marg, rtol=1e-9, atol=1e-12)
        assert fitted.predict_single(xseq) == list(best)


def test_marginals_sum_to_one_over_classes(data, fitted):
    (_, _), (X_test, _) = data
    marginals = fitted.predict_marginals(X_test)
    assert len(marginals) == len(X_test)
    for seq, xseq in zip(marginals, X_test, strict=True):
        assert len(seq) == len(xseq)
        for row in seq:
            assert sorted(row) == sorted(fitted.classes_)
            assert sum(row.values()) == pytest.approx(1.0, abs=1e-12)


def test_empty_sequences_predict_empty(fitted):
    assert fitted.predict([[], [{"w": "anna"}], []]) == [[], ["B-PER"], []]
    assert fitted.predict_marginals([[]]) == [[]]


def test_inspection_attributes(fitted, tmp_path):
    state, trans = fitted.state_features_, fitted.transition_features_
    assert state[("w:anna", "B-PER")] > 0 > state[("w:anna", "O")]
    assert trans[("B-PER", "I-PER")] > trans[("O", "I-PER")]
    assert set(fitted.attributes_) == {a for a, _ in state}
    assert fitted.num_attributes_ == len(fitted.attributes_)
    assert "suffix:2:na" in fitted.attributes_ and "next:de" in fitted.attributes_
    fitted.export_crfsuite(tmp_path / "m.crfsuite")  # size_ is CRFsuite's model size
    assert fitted.size_ == (tmp_path / "m.crfsuite").stat().st_size > 20 * len(state)
    log = fitted.training_log_
    assert log and all(r.solver == "sdca" for r in log)
    assert [r.oracle_calls for r in log] == sorted(r.oracle_calls for r in log)


def test_unfitted_estimator_raises_not_fitted():
    crf = CRF()
    for use in (
        lambda: crf.predict([[{"w": "a"}]]),
        lambda: crf.predict_marginals([[{"w": "a"}]]),
        lambda: crf.score([[{"w": "a"}]], [["A"]]),
        lambda: crf.export_crfsuite("never.crfsuite"),
    ):
        with pytest.raises(NotFittedError, match="not fitted yet; call fit"):
            use()
    assert issubclass(NotFittedError, ValueError) and issubclass(NotFittedError, AttributeError)
    # the fitted attributes are None before fit, as in sklearn-crfsuite
    for name in ("classes_", "size_", "tagger_", "attributes_", "num_attributes_",
                 "state_features_", "transition_features_"):  # fmt: skip
        assert getattr(crf, name) is None, name


def test_dev_set_and_verbose(data, capsys):
    (X, y), (X_dev, y_dev) = data
    crf = CRF(verbose=True, max_iterations=5, tol=0.0).fit(X, y, X_dev=X_dev, y_dev=y_dev)
    err = capsys.readouterr().err
    assert err.count("dev accuracy") == len(crf.training_log_) >= 5
    last = crf.training_log_[-1]
    assert last.test_error == pytest.approx(1.0 - crf.score(X_dev, y_dev))


def test_dev_set_needs_both_halves(data):
    (X, y), _ = data
    with pytest.raises(ValueError, match="pass both X_dev and y_dev"):
        CRF().fit(X, y, X_dev=X)
    with pytest.raises(ValueError, match="pass both X_dev and y_dev"):
        CRF().fit(X, y, y_dev=y)


def test_mismatched_lengths(data):
    (X, y), _ = data
    with pytest.raises(ValueError, match="X has 80 sequences but its labels have 79"):
        CRF().fit(X, y[:-1])
    with pytest.raises(ValueError, match="sequence 0: 1 items but 2 labels"):
        CRF().fit([[{"w": "a"}]], [["A", "B"]])
    with pytest.raises(TypeError, match=r"y\[0\]\[0\]: labels must be str"):
        CRF().fit([[{"w": "a"}]], [[1]])


def test_algorithm_none_is_lbfgs(data):
    (X, y), _ = data
    crf = CRF(algorithm=None, c2=0.1, max_iterations=5).fit(X[:10], y[:10])
    assert {r.solver for r in crf.training_log_} == {"lbfgs"}


def test_bad_parameters(data):
    (X, y), _ = data
    with pytest.raises(ValueError, match="c1 must be a finite number >= 0; got -0.1"):
        CRF(c1=-0.1).fit(X, y)
    with pytest.raises(ValueError, match="c1=0.1: algorithm 'oeg' has no L1 term"):
        CRF(c1=0.1, algorithm="oeg").fit(X, y)
    with pytest.raises(ValueError, match="c2 must be > 0"):
        CRF(c2=0).fit(X, y)
    with pytest.raises(ValueError, match="sampling is not an option of algorithm='lbfgs'"):
        CRF(algorithm="lbfgs", sampling="gap").fit(X, y)
    with pytest.raises(ValueError, match="algorithm must be one of"):
        CRF(algorithm="newton").fit(X, y)
    with pytest.raises(ValueError, match="all_possible_states=False .* algorithm='lbfgs' only"):
        CRF(all_possible_states=False, max_iterations=1).fit(X[:5], y[:5])
    with pytest.raises(ValueError, match="all_possible_transitions=False .*'lbfgs' only"):
        CRF(algorithm="oeg", all_possible_transitions=False).fit(X[:5], y[:5])
    with pytest.raises(TypeError, match="all_possible_states must be True, False or None"):
        CRF(all_possible_states="yes").fit(X[:5], y[:5])
    with pytest.raises(ValueError, match="delta is not an option of algorithm='sdca'"):
        CRF(delta=1e-5).fit(X[:5], y[:5])


def test_c2_is_crfsuites_scale(data):
    """c2 and lambda = 2 c2 / n give the same weights; c1=0 is accepted."""
    from crfsdca.estimators.model import SequenceCRF
    from crfsdca.estimators.params import CRFSUITE_LBFGS, one_blas_thread
    from crfsdca.features.featuredicts import FeatureDictEncoder

    (X, y), _ = data
    dense = {"all_possible_states": True, "all_possible_transitions": True}
    crf = CRF(algorithm="lbfgs", c1=0, c2=0.3, **dense).fit(X, y)
    train = FeatureDictEncoder().fit_transform(X, y)
    ref = SequenceCRF(
        solver="lbfgs", regularization=0.6 / len(X), n_bias_rows=0, **dense, **CRFSUITE_LBFGS
    )
    with one_blas_thread():  # as CRF.fit: the same sums in the same order
        ref.fit(train)
    np.testing.assert_array_equal(crf._model.weights_, ref.weights_)


def test_params_are_stored_untouched():
    crf = CRF(algorithm="lbfgs", c2=0.2, max_iterations=7, random_state=3)
    params = crf.get_params()
    assert params["algorithm"] == "lbfgs" and params["c2"] == 0.2
    assert params["max_iterations"] == 7 and params["model_filename"] is None
    assert crf.set_params(c2=0.4) is crf and crf.c2 == 0.4
    assert CRF(**crf.get_params()).get_params() == crf.get_params()


def test_pickle_round_trip(data, fitted):
    (_, _), (X_test, _) = data
    again = pickle.loads(pickle.dumps(fitted))
    assert again.predict(X_test) == fitted.predict(X_test)
    assert again.predict_marginals(X_test) == fitted.predict_marginals(X_test)
    assert again.state_features_ == fitted.state_features_
    unfitted = pickle.loads(pickle.dumps(CRF(c2=0.7)))
    assert unfitted.c2 == 0.7


def test_model_filename_saves_and_loads(data, tmp_path):
    (X, y), (X_test, _) = data
    path = tmp_path / "ner.crfsdca.npz"
    trained = CRF(max_iterations=20, model_filename=str(path)).fit(X, y)
    with np.load(path, allow_pickle=False) as npz:
        assert "weights" in npz.files
    loaded = CRF(model_filename=str(path))
    assert loaded.__sklearn_is_fitted__() and trained.__sklearn_is_fitted__()
    assert not CRF(model_filename=str(tmp_path / "absent.npz")).__sklearn_is_fitted__()
    assert loaded.predict(X_test) == trained.predict(X_test)
    assert loaded.classes_ == trained.classes_
    assert loaded.transition_features_ == trained.transition_features_


def test_model_filename_refuses_other_models(data, tmp_path):
    from crfsdca.estimators.model import SequenceCRF
    from crfsdca.features.sequences import SequenceData

    path = tmp_path / "dense.npz"
    data = SequenceData([0, 2], [0, 1, 2], [0, 1], [1.0, 1.0], [0, 1], 2, ("A", "B"))
    SequenceCRF(max_epochs=2).fit(data).save(str(path))
    with pytest.raises(ValueError, match="not a model of feature dicts"):
        CRF(model_filename=str(path)).predict([[{"w": "a"}]])


def test_clone_grid_search_and_cross_validation(data):
    sklearn = pytest.importorskip("sklearn")
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV, cross_val_score

    from crfsdca.metrics import flat_f1_score

    (X, y), _ = data
    crf = CRF(c2=0.1, max_iterations=20)
    copy = clone(crf)
    assert copy is not crf and copy.get_params() == crf.get_params()
    scores = cross_val_score(crf, X, y, cv=3, n_jobs=2)
    assert scores.shape == (3,) and np.all(scores >= 0.9)
    scorer = sklearn.metrics.make_scorer(flat_f1_score, average="weighted")
    search = GridSearchCV(crf, {"c2": [0.01, 1.0]}, cv=2, scoring=scorer).fit(X, y)
    assert search.best_params_["c2"] in (0.01, 1.0)
    assert search.best_estimator_.predict(X[:2]) == search.predict(X[:2])


def _run_python(code: str) -> str:
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_core_and_cli_do_not_import_sklearn():
    code = "import sys, crfsdca, crfsdca.cli.main, crfsdca.metrics; print('sklearn' in sys.modules)"
    assert _run_python(code).strip() == "False"


def test_estimator_works_without_sklearn():
    code = """
import pickle, sys
sys.modules["sklearn"] = None  # as if scikit-learn were not installed
from crfsdca import CRF
from crfsdca import metrics
X, y = [[{"w": "a"}, {"w": "b"}]] * 3, [["A", "B"]] * 3
crf = CRF(c2=0.1, max_iterations=5)
assert crf.get_params()["c2"] == 0.1 and crf.set_params(c2=0.2) is crf and crf.c2 == 0.2
try:
    crf.set_params(alpha=1.0)
except ValueError as err:
    assert "invalid parameter 'alpha'" in str(err)
else:
    raise AssertionError("set_params accepted an unknown name")
crf = pickle.loads(pickle.dumps(crf.fit(X, y)))
print(crf.predict(X)[0], crf.score(X, y), metrics.sequence_accuracy_score(y, crf.predict(X)))
try:
    metrics.flat_f1_score(y, y)
except ImportError as err:
    print(err)
"""
    out = _run_python(code).splitlines()
    assert out[0] == "['A', 'B'] 1.0 1.0"
    assert "pip install crfsdca[sklearn]" in out[1]
