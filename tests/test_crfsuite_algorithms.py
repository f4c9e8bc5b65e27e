"""CRFsuite's ``ap``, ``pa``, ``arow`` and ``l2sgd`` against python-crfsuite on the same data.

CRFsuite shuffles with the C library's ``rand()`` and never seeds it; crfsdca reproduces glibc's
generator (:mod:`crfsdca.kernels.numerics.crand`), so after ``srand(1)`` in this process
python-crfsuite visits the sequences in the order crfsdca's ``random_state=1`` does, and the two
must give the same weights (up to rounding) and the same tags. The generator itself is checked
against the C library's ``rand()``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform

import numpy as np
import pytest
from _conll_dicts import conll_dicts

from crfsdca import CRF
from crfsdca.io.crfsuite_file import read_crfsuite_model
from crfsdca.kernels.numerics.crand import crfsuite_shuffle, new_state, rand_next

pycrfsuite = pytest.importorskip("pycrfsuite")

ALGORITHMS = ("ap", "pa", "arow", "l2sgd")


def _libc():
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("the C library is not glibc")
    return ctypes.CDLL(ctypes.util.find_library("c"))


def test_rand_is_glibcs():
    libc = _libc()
    for seed in (0, 1, 12345, 2**31 + 7, 2**32 - 1):
        libc.srand(ctypes.c_uint(seed))
        expected = [libc.rand() for _ in range(2000)]
        state = new_state(seed)
        assert [rand_next(state) for _ in range(2000)] == expected


def test_shuffle_is_crfsuites_dataset_shuffle():
    libc = _libc()
    libc.srand(ctypes.c_uint(3))
    perm = list(range(17))
    for _ in range(4):  # CRFsuite's dataset_shuffle, written out
        for i in range(len(perm)):
            j = libc.rand() % len(perm)
            perm[i], perm[j] = perm[j], perm[i]
    ours, state = np.arange(17, dtype=np.int64), new_state(3)
    for _ in range(4):
        crfsuite_shuffle(ours, state)
    assert ours.tolist() == perm


WORDS = ("anna", "bob", "lives", "in", "paris", "rome", "and", "visits", "the", "old", "city")


def _tiny(n: int = 40, seed: int = 0):
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        words = [WORDS[k] for k in rng.integers(0, len(WORDS), int(rng.integers(2, 9)))]
        tags = ["PER" if w in ("anna", "bob") else "LOC" if w in ("paris", "rome", "city")
                else "O" for w in words]  # fmt: skip
        # noisy features: the algorithms make mistakes, and some tags are ambiguous
        X.append([{"w": w, "prev": words[t - 1] if t else "^", "len": len(w) / 4,
                   "coin": bool(rng.integers(0, 2))} for t, w in enumerate(words)])  # fmt: skip
        y.append(tags)
    return X, y


def _weights(crf: CRF, cm) -> tuple[np.ndarray, np.ndarray]:
    """(CRFsuite's, crfsdca's) weights over the union of the two models' features."""
    state = {(a, lab): cm.state[j, k] for j, a in enumerate(cm.attributes)
             for k, lab in enumerate(cm.labels) if cm.state[j, k] != 0}  # fmt: skip
    trans = {(p, q): cm.transition[i, k] for i, p in enumerate(cm.labels)
             for k, q in enumerate(cm.labels) if cm.transition[i, k] != 0}  # fmt: skip
    ours_s, ours_t = crf.state_features_, crf.transition_features_
    keys_s, keys_t = sorted(set(state) | set(ours_s)), sorted(set(trans) | set(ours_t))
    ref = [state.get(k, 0.0) for k in keys_s] + [trans.get(k, 0.0) for k in keys_t]
    got = [ours_s.get(k, 0.0) for k in keys_s] + [ours_t.get(k, 0.0) for k in keys_t]
    return np.array(ref), np.array(got)


def _reference(algorithm: str, params: dict, X, y, path):
    """Train python-crfsuite after srand(1) (a fresh CRFsuite process's generator)."""
    libc = _libc()
    trainer = pycrfsuite.Trainer(algorithm=algorithm, verbose=False)
    for xseq, yseq in zip(X, y, strict=True):
        trainer.append(xseq, yseq)
    trainer.set_params(params)
    libc.srand(ctypes.c_uint(1))
    trainer.train(str(path))
    tagger = pycrfsuite.Tagger()
    tagger.open(str(path))
    return read_crfsuite_model(path), tagger


#: CRFsuite parameter names -> crfsdca.CRF's
_NAMES = {"type": "pa_type", "calibration.samples": "calibration_samples",
          "calibration.eta": "calibration_eta"}  # fmt: skip
CASES = [
    ("ap", {"max_iterations": 7}),
    ("pa", {"max_iterations": 7}),
    ("pa", {"max_iterations": 6, "type": 0, "error_sensitive": False}),
    ("pa", {"max_iterations": 6, "type": 2, "c": 0.3, "averaging": False}),
    ("arow", {"max_iterations": 7}),
    ("arow", {"max_iterations": 6, "variance": 0.5, "gamma": 3.0}),
    ("l2sgd", {"max_iterations": 15, "c2": 0.5, "calibration.samples": 25}),
    ("l2sgd", {"max_iterations": 40, "c2": 2.0, "period": 3, "delta": 1e-3}),
]


@pytest.mark.parametrize(("algorithm", "params"), CASES)
def test_same_weights_as_pycrfsuite_on_tiny_data(algorithm, params, tmp_path):
    X, y = _tiny()
    cm, tagger = _reference(algorithm, params, X, y, tmp_path / "ref.crfsuite")
    options = {_NAMES.get(k, k): v for k, v in params.items()}
    ours = CRF(algorithm=algorithm, random_state=1, **options).fit(X, y)
    ref, got = _weights(ours, cm)
    assert np.abs(ref).max() > 0.1  # trained
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-10)
    X_new, _ = _tiny(30, seed=9)
    assert ours.predict(X_new) == [tagger.tag(xseq) for xseq in X_new]


def _train_error(crf: CRF, X, y) -> float:
    return 1.0 - crf.score(X, y)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_training_reduces_error_and_is_reproducible(algorithm):
    X, y = _tiny(60, seed=4)
    majority = 1.0 - max(sum(t == lab for s in y for t in s) for lab in ("O", "PER", "LOC")) / sum(
        map(len, y)
    )
    one = CRF(algorithm=algorithm, max_iterations=1, random_state=5).fit(X, y)
    many = CRF(algorithm=algorithm, max_iterations=30, random_state=5).fit(X, y)
    again = CRF(algorithm=algorithm, max_iterations=30, random_state=5).fit(X, y)
    assert _train_error(many, X, y) < 0.5 * majority
    assert _train_error(many, X, y) <= _train_error(one, X, y)
    assert many.state_features_ == again.state_features_  # same seed, same run
    other = CRF(algorithm=algorithm, max_iterations=30, random_state=6).fit(X, y)
    assert other.state_features_ != many.state_features_  # the seed sets the order


def test_arow_stops_when_an_epoch_makes_no_mistake():
    X, y = _tiny(30, seed=2)
    X = [[{"w": item["w"]} for item in xseq] for xseq in X]  # separable: the word is the tag
    crf = CRF(algorithm="arow", max_iterations=100).fit(X, y)
    log = crf.training_log_
    assert log[-1].epoch < 100 and log[-1].extra["loss"] == 0.0
    assert crf.score(X, y) == 1.0


def test_l2sgd_stops_on_delta_and_returns_the_best_epoch():
    X, y = _tiny(30, seed=3)
    crf = CRF(algorithm="l2sgd", c2=1.0, period=2, delta=1e-2, max_iterations=500).fit(X, y)
    log = crf.training_log_
    assert log[-1].epoch < 500
    losses = [r.extra["loss"] for r in log if "loss" in r.extra]
    assert len(losses) >= 3 and min(losses) == pytest.approx(losses[-1], rel=0.05)


def test_crfsuite_options_are_checked_and_named():
    X, y = _tiny(5)
    with pytest.raises(ValueError, match="pa_type must be 0, 1 or 2; got 3"):
        CRF(algorithm="pa", pa_type=3).fit(X, y)
    with pytest.raises(ValueError, match=r"c \(aggressiveness\) must be > 0; got 0"):
        CRF(algorithm="pa", c=0).fit(X, y)
    with pytest.raises(ValueError, match=r"gamma \(tradeoff\) must be > 0"):
        CRF(algorithm="arow", gamma=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="calibration_rate must be > 1"):
        CRF(algorithm="l2sgd", calibration_rate=0.5).fit(X, y)
    with pytest.raises(ValueError, match="variance is not an option of algorithm='pa'"):
        CRF(algorithm="pa", variance=2.0).fit(X, y)
    with pytest.raises(ValueError, match="c2 must be > 0"):
        CRF(algorithm="l2sgd", c2=0).fit(X, y)


# -- CoNLL-2000 ---------------------------------------------------------------------------------
CONLL = {
    "ap": {"max_iterations": 10},
    "pa": {"max_iterations": 10},
    "arow": {"max_iterations": 10},
    "l2sgd": {"max_iterations": 30, "c2": 1.0},
}


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_parity_with_pycrfsuite_on_conll2000(algorithm, tmp_path):
    X, y = conll_dicts("train", 1000)
    X_test, _ = conll_dicts("test", 500)
    params = CONLL[algorithm]
    cm, tagger = _reference(algorithm, params, X, y, tmp_path / "ref.crfsuite")
    ours = CRF(algorithm=algorithm, random_state=1, **params).fit(X, y)
    ref, got = _weights(ours, cm)
    assert np.corrcoef(ref, got)[0, 1] >= 0.99
    np.testing.assert_allclose(got, ref, rtol=1e-7, atol=1e-9)  # the same run, up to rounding
    ours_tags = [t for s in ours.predict(X_test) for t in s]
    their_tags = [t for s in X_test for t in tagger.tag(s)]
    assert len(ours_tags) > 10000
    agreement = np.mean(np.array(ours_tags) == np.array(their_tags))
    assert agreement >= 0.99


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_trees_and_second_order_are_refused(algorithm):
    X, y = _tiny(6)
    graphs = [[-1] + list(range(len(xseq) - 1)) for xseq in X]
    with pytest.raises(ValueError, match=f"{algorithm} .* trains linear chains"):
        CRF(algorithm=algorithm).fit(X, y, graphs=graphs)
    with pytest.raises(ValueError, match=f"{algorithm} .* trains linear chains"):
        CRF(algorithm=algorithm, order=2).fit(X, y)
