"""crfsdca.CRF.partial_fit: more sequences (and attributes) continue SDCA from its dual state."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from crfsdca import CRF
from crfsdca.features.feature_map import FeatureMap
from crfsdca.structures.dual import weights_from_dual
from crfsdca.structures.problem import Problem

WORDS = ["the", "a", "dog", "cat", "runs", "sleeps", "here", "now", "big", "small"]
TAGS = {"the": "DET", "a": "DET", "dog": "N", "cat": "N", "runs": "V", "sleeps": "V",
        "here": "ADV", "now": "ADV", "big": "ADJ", "small": "ADJ"}  # fmt: skip


def sentences(seed, n, extra_feature=False):
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        words = [WORDS[i] for i in rng.integers(0, len(WORDS), rng.integers(2, 7))]
        feats = []
        for i, w in enumerate(words):
            f = {"w": w, "suffix": w[-2:], "prev": words[i - 1] if i else "<s>"}
            if extra_feature:
                f["len"] = f"l{len(w)}"  # attributes first seen in the second batch
            feats.append(f)
        X.append(feats)
        y.append([TAGS[w] for w in words])
    return X, y


def primal_on(crf, X, y):
    """P(w) of the crfsdca model on (X, y), with the regularization it was trained with."""
    model, encoder = crf._fitted()
    data = encoder.transform(X, y)
    fm = model.feature_map_
    problem = Problem(train=data, feature_map=FeatureMap(fm.n_attributes, fm.n_labels, 0),
                      regularization=model.regularization_)  # fmt: skip
    return problem.primal(model.weights_), problem


@pytest.mark.parametrize("c2", [None, 0.5])
def test_partial_fit_reaches_the_optimum_of_all_the_data(c2):
    X1, y1 = sentences(0, 40)
    X2, y2 = sentences(1, 30, extra_feature=True)
    grown = CRF(c2=c2, tol=1e-8, max_iterations=500).fit(X1, y1).partial_fit(X2, y2)
    whole = CRF(c2=c2, tol=1e-8, max_iterations=500).fit(X1 + X2, y1 + y2)
    last = grown.training_log_[-1]
    assert last.gap <= 1e-8  # the certificate covers all 70 sentences
    assert grown.training_log_[0].oracle_calls == 0  # a new run from the grown dual state
    # which is not a fresh start: 40 of the 70 sequences keep their optimised marginals, so the
    # grown state's gap is a small part of a fresh start's on the same 70 (0.18 against 6.3)
    assert grown.training_log_[0].gap < 0.1 * whole.training_log_[0].gap
    p_grown, problem = primal_on(grown, X1 + X2, y1 + y2)
    p_whole, _ = primal_on(whole, X1 + X2, y1 + y2)
    assert p_grown == pytest.approx(last.primal, rel=1e-12)
    assert abs(p_grown - p_whole) <= 2e-8
    assert any(a.startswith("len:") for a in grown._encoder.attribute_names)
    state, train = grown._grow
    assert train.n_sequences == 70
    w_hat = weights_from_dual(problem, state.dual.log_node, state.dual.log_edge)
    np.testing.assert_allclose(state.dual.weights, w_hat, rtol=1e-9, atol=1e-12)


def test_partial_fit_keeps_w_the_dual_map_of_old_and_new_sequences():
    """After growing and a single step, w = w_hat(mu) over old and new sequences (new
    attributes got rows), and the trace starts at the grown state (no oracle call yet)."""
    X1, y1 = sentences(2, 20)
    X2, y2 = sentences(3, 10, extra_feature=True)
    crf = CRF(tol=1e-6, max_iterations=50).fit(X1, y1)
    old = crf._model.weights_.copy()
    log_node = crf._grow[0].dual.log_node.copy()  # the trained marginals of the 20
    crf.max_iterations = 1e-9  # the first chunk of one step only
    crf.partial_fit(X2, y2)
    state, train = crf._grow
    # the old sequences keep their trained marginals, but for the blocks that steps moved
    steps = crf.training_log_[-1].updates
    tokens = np.flatnonzero(np.any(state.dual.log_node[: len(log_node)] != log_node, axis=1))
    moved = np.unique(np.searchsorted(train.seq_offsets, tokens, side="right") - 1)
    assert 1 <= steps < 20 and moved.size <= steps
    _, problem = primal_on(crf, X1 + X2, y1 + y2)
    w_hat = weights_from_dual(problem, state.dual.log_node, state.dual.log_edge)
    np.testing.assert_allclose(state.dual.weights, w_hat, rtol=1e-9, atol=1e-12)
    first = crf.training_log_[0]  # the grown state, before any step
    assert first.oracle_calls == 0 and first.gap > 0
    assert crf._model.weights_.size > old.size


def test_partial_fit_misuse():
    X1, y1 = sentences(4, 10)
    fresh = CRF(max_iterations=5).partial_fit(X1, y1)  # before fit: fit
    assert fresh.training_log_ and fresh.predict(X1)
    with pytest.raises(ValueError, match=r"partial_fit cannot add labels; 'X' not in"):
        fresh.partial_fit([[{"w": "dog"}]], [["X"]])
    lbfgs = CRF(algorithm="lbfgs", max_iterations=5).fit(X1, y1)
    with pytest.raises(ValueError, match=r"partial_fit continues SDCA from its dual state"):
        lbfgs.partial_fit(X1, y1)
    again = pickle.loads(pickle.dumps(fresh))
    assert "_grow" not in again.__dict__ and again.predict(X1) == fresh.predict(X1)
    with pytest.raises(ValueError, match=r"partial_fit continues SDCA"):
        again.partial_fit(X1, y1)


def test_n_jobs_gives_the_same_model_and_restores_the_threads():
    from crfsdca.kernels.numerics.threads import get_threads, max_threads

    X, y = sentences(5, 30)
    before = get_threads()
    one = CRF(algorithm="lbfgs", max_iterations=40, n_jobs=1).fit(X, y)
    assert get_threads() == before
    every = CRF(algorithm="lbfgs", max_iterations=40, n_jobs=-1).fit(X, y)
    assert get_threads() == before and max_threads() >= 1
    np.testing.assert_allclose(every._model.weights_, one._model.weights_, rtol=1e-9, atol=1e-12)
    with pytest.raises(
        ValueError, match=r"n_jobs must be a positive int, -1 \(all cores\) or None"
    ):
        CRF(n_jobs=0).fit(X, y)
