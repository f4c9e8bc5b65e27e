"""sklearn-crfsuite compatibility: ``tagger_``, ``size_``, ``export_crfsuite``, ``c2=0``,
``min_freq``, the accepted no-op parameters, and one clear error for each Python-API misuse.

The tagger and the exported model are checked against python-crfsuite's own Tagger on the
exported CRFsuite file (an independent implementation of Viterbi, marginals and scores).
"""

from __future__ import annotations

import math
import os
import stat

import numpy as np
import pytest
from _conll_dicts import conll_dicts

from crfsdca import CRF

pycrfsuite = pytest.importorskip("pycrfsuite")

WORDS = ["anna", "lives", "in", "paris", "bob", "visits", "rome", "and", "berlin", "de"]


def _sentences(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        T = int(rng.integers(2, 8))
        words = [WORDS[k] for k in rng.integers(0, len(WORDS), T)]
        labels = ["LOC" if w in ("paris", "rome", "berlin") else
                  "PER" if w in ("anna", "bob") else "O" for w in words]  # fmt: skip
        X.append([{"w": w, "len": len(w) / 5, "first": t == 0, "prev": words[t - 1] if t else ""}
                  for t, w in enumerate(words)])  # fmt: skip
        y.append(labels)
    return X, y


@pytest.fixture(scope="module")
def data():
    return _sentences(60)


@pytest.fixture(scope="module")
def fitted(data):
    X, y = data
    return CRF(algorithm="lbfgs", c2=0.5, max_iterations=60).fit(X, y)


@pytest.fixture(scope="module")
def theirs(fitted, tmp_path_factory):
    path = tmp_path_factory.mktemp("tagger") / "m.crfsuite"
    fitted.export_crfsuite(path)
    tagger = pycrfsuite.Tagger()
    tagger.open(str(path))
    return tagger


def test_tagger_matches_pycrfsuite_on_the_exported_model(fitted, theirs, data):
    X, _ = data
    ours = fitted.tagger_
    assert ours is fitted.tagger_  # one tagger per fitted model
    assert ours.labels() == theirs.labels()
    for xseq in X[:15] + [[{"w": "unseen", "new": 3.0}, {"w": "paris"}]]:
        assert ours.tag(xseq) == theirs.tag(xseq) == fitted.predict_single(xseq)
        theirs.set(xseq)
        ours.set(xseq)
        for t in range(len(xseq)):
            for label in ours.labels():
                assert ours.marginal(label, t) == pytest.approx(theirs.marginal(label, t), 1e-9)
        yseq = ours.tag()
        assert ours.probability(yseq) == pytest.approx(theirs.probability(yseq), 1e-9)
        other = [ours.labels()[0]] * len(xseq)
        assert ours.probability(other) == pytest.approx(theirs.probability(other), 1e-9)
    assert ours.tag([]) == theirs.tag([]) == []
    assert ours.probability([]) == 0.0 and ours.marginal("O", 0) == 0.0


def test_tagger_marginals_sum_to_one_and_probabilities_to_at_most_one(fitted, data):
    X, _ = data
    tagger = fitted.tagger_
    tagger.set(X[0])
    for t in range(len(X[0])):
        assert math.fsum(tagger.marginal(k, t) for k in tagger.labels()) == pytest.approx(1.0)
    # brute force: p(y | x) summed over every labelling of a short sequence is 1
    xseq = X[0][:3]
    tagger.set(xseq)
    labels = tagger.labels()
    total = math.fsum(tagger.probability([a, b, c]) for a in labels for b in labels for c in labels)
    assert total == pytest.approx(1.0, abs=1e-12)


def test_tagger_errors(fitted, data):
    X, _ = data
    tagger = fitted.tagger_
    tagger.set(X[0])
    with pytest.raises(ValueError, match=r"numbers of items and labels differ: \|x\| = "):
        tagger.probability(["O"])
    with pytest.raises(ValueError, match="unknown label 'NOPE'"):
        tagger.marginal("NOPE", 0)
    with pytest.raises(ValueError, match="position 99 is out of range"):
        tagger.marginal("O", 99)


def test_tagger_info_matches_pycrfsuite(fitted, theirs):
    ours, ref = fitted.tagger_.info(), theirs.info()
    assert ours.header == ref.header
    assert ours.labels == ref.labels and ours.attributes == ref.attributes
    assert ours.transitions.keys() == ref.transitions.keys()
    assert ours.state_features.keys() == ref.state_features.keys()
    for key, value in ref.state_features.items():
        assert ours.state_features[key] == pytest.approx(value, abs=6e-7)  # dump: %f
    assert ours.state_features == fitted.state_features_
    assert ours.transitions == fitted.transition_features_


def test_size_is_the_crfsuite_file_size(fitted, tmp_path):
    fitted.export_crfsuite(tmp_path / "x.crfsuite")
    assert fitted.size_ == os.path.getsize(tmp_path / "x.crfsuite")


def test_export_refuses_devices_folders_and_missing_folders(fitted, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(
        ValueError, match=f"^path: {fifo} is a device or pipe; expected a file name$"
    ):
        fitted.export_crfsuite(fifo)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    with pytest.raises(ValueError, match="is a directory"):
        fitted.export_crfsuite(tmp_path)
    with pytest.raises(ValueError, match="does not exist"):
        fitted.export_crfsuite(tmp_path / "no" / "m.crfsuite")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # no temporary left over


def test_c2_zero_trains_unregularised_lbfgs(data):
    X, y = data
    free = CRF(algorithm="lbfgs", c2=0, max_iterations=40).fit(X, y)
    tied = CRF(algorithm="lbfgs", c2=1.0, max_iterations=40).fit(X, y)
    norm = lambda crf: math.fsum(v * v for v in crf.state_features_.values())  # noqa: E731
    assert norm(free) > 2 * norm(tied)  # no L2 term: larger weights
    assert free.score(X, y) == 1.0
    with pytest.raises(ValueError, match="c2=0 .* algorithm='lbfgs' only"):
        CRF(algorithm="sdca", c2=0).fit(X, y)


def test_min_freq_is_crfsuites_feature_minfreq(data, tmp_path):
    X, y = data
    ours = CRF(algorithm="lbfgs", c2=1.0, min_freq=12, max_iterations=50).fit(X, y)
    trainer = pycrfsuite.Trainer(verbose=False)
    for xseq, yseq in zip(X, y, strict=True):
        trainer.append(xseq, yseq)
    trainer.set_params({"c1": 0, "c2": 1.0, "feature.minfreq": 12, "max_iterations": 50})
    trainer.train(str(tmp_path / "ref.crfsuite"))
    tagger = pycrfsuite.Tagger()
    tagger.open(str(tmp_path / "ref.crfsuite"))
    ref = tagger.info()
    # the same features exist (CRFsuite's dump lists the non-zero ones)
    assert set(ours.state_features_) == set(ref.state_features)
    assert set(ours.transition_features_) == set(ref.transitions)
    every = CRF(algorithm="lbfgs", c2=1.0, max_iterations=50).fit(X, y)
    assert len(ours.state_features_) < len(every.state_features_)
    with pytest.raises(ValueError, match="min_freq must be a finite number >= 0; got -1"):
        CRF(algorithm="lbfgs", min_freq=-1).fit(X, y)
    with pytest.raises(ValueError, match="min_freq > 0 .* sparse model"):
        CRF(algorithm="sdca", min_freq=2).fit(X, y)


def test_crfsuite_parameters_accepted(data):
    X, y = data
    crf = CRF(
        algorithm=None, c1=0, c2=0.5, linesearch="Backtracking", max_linesearch=10,
        keep_tempfiles=True, max_iterations=10,
    ).fit(X, y)  # fmt: skip
    assert crf.get_params()["linesearch"] == "Backtracking" and crf.keep_tempfiles
    with pytest.raises(ValueError, match="linesearch must be one of"):
        CRF(algorithm="lbfgs", linesearch="Newton").fit(X, y)
    with pytest.raises(ValueError, match="linesearch is not an option of algorithm='sdca'"):
        CRF(algorithm="sdca", linesearch="MoreThuente").fit(X, y)


# -- Python-API misuse: one clear error each ---------------------------------------------------
def test_fit_on_nothing():
    with pytest.raises(ValueError, match=r"^X and y are empty: training needs at least one"):
        CRF().fit([], [])
    with pytest.raises(ValueError, match=r"^X has 2 sequence\(s\) but no token"):
        CRF(algorithm="lbfgs", c2=1).fit([[], []], [[], []])
    with pytest.raises(ValueError, match=r"^y is None; expected a list of sequences"):
        CRF().fit([[{"w": "a"}]], None)


def test_none_label_sequence_names_its_index(data):
    X, y = data
    y = list(y)
    y[7] = None
    with pytest.raises(ValueError, match=r"^y\[7\] is None; expected a list of labels"):
        CRF().fit(X, y)
    X = list(X)
    X[3] = None
    with pytest.raises(ValueError, match=r"^X\[3\] is None; expected a list of feature dicts"):
        CRF().fit(X, data[1])
    with pytest.raises(ValueError, match=r"^y_dev\[0\] is None"):
        CRF().fit(data[0], data[1], X_dev=data[0][:1], y_dev=[None])


@pytest.mark.parametrize("algorithm", ["lbfgs", "sdca"])
def test_max_iterations_is_named(data, algorithm):
    X, y = data
    with pytest.raises(ValueError, match=r"^max_iterations must be > 0 \(or None\); got -5$"):
        CRF(algorithm=algorithm, max_iterations=-5).fit(X, y)
    with pytest.raises(TypeError, match=r"^max_iterations must be a number"):
        CRF(algorithm=algorithm, max_iterations="10").fit(X, y)


def test_random_state_message_is_sklearns(data):
    X, y = data
    expected = r"^The 'random_state' parameter of CRF must be an int in the range \[0, 4294967295\]"
    with pytest.raises(ValueError, match=expected + r" or None\. Got -1 instead\.$"):
        CRF(random_state=-1).fit(X, y)
    with pytest.raises(TypeError, match=expected + r" or None\. Got 'x' instead\.$"):
        CRF(random_state="x").fit(X, y)


def test_unwritable_model_filename_is_refused_before_training(data, tmp_path, monkeypatch):
    from crfsdca.estimators import model as model_module

    X, y = data

    def no_training(*args, **kwargs):
        raise AssertionError("trained before checking model_filename")

    monkeypatch.setattr(model_module.SequenceCRF, "fit", no_training)
    with pytest.raises(
        ValueError,
        match=r"^model_filename: cannot write /proc/x\.npz: the folder /proc does not accept",
    ):
        CRF(model_filename="/proc/x.npz").fit(X, y)
    missing = tmp_path / "nowhere" / "m.npz"
    with pytest.raises(
        ValueError, match=f"^model_filename: cannot write {missing}: the folder .* does not exist$"
    ):
        CRF(model_filename=str(missing)).fit(X, y)
    with pytest.raises(
        ValueError, match=f"^model_filename: {tmp_path} is a directory; expected a file name$"
    ):
        CRF(model_filename=str(tmp_path)).fit(X, y)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(
        ValueError, match=f"^model_filename: {fifo} is a device or pipe; expected a file name$"
    ):
        CRF(model_filename=str(fifo)).fit(X, y)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]


# -- the exported model tags the whole CoNLL-2000 test set as crfsdca does ---------------------
@pytest.mark.slow
def test_exported_model_tags_the_conll2000_test_set_as_crfsdca(tmp_path):
    X, y = conll_dicts("train")
    X_test, _ = conll_dicts("test")
    crf = CRF(algorithm="lbfgs", c2=1.0, max_iterations=100).fit(X[:3000], y[:3000])
    path = tmp_path / "conll.crfsuite"
    crf.export_crfsuite(path)
    tagger = pycrfsuite.Tagger()
    tagger.open(str(path))
    ours = crf.predict(X_test)
    theirs = [tagger.tag(xseq) for xseq in X_test]
    assert len(ours) == 2012 and sum(map(len, ours)) > 47000
    assert theirs == ours  # every token of every sentence
