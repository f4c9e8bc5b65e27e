"""Parity with sklearn-crfsuite: same feature dicts, same objective, same optimum.

sklearn_crfsuite.CRF(algorithm="lbfgs", c1=0, c2=C2, all_possible_states=True,
all_possible_transitions=True) trains CRFsuite's dense first-order CRF on
``sum_i NLL_i(w) + c2 ||w||^2``; crfsdca.CRF(c2=C2) trains the same model on the same
objective divided by n (``algorithm="lbfgs"`` is given both flags: its default is CRFsuite's
sparse model, whose parity is in ``tests/test_sklearn_sparse.py``). Both optima must give the
same objective value (CRFsuite's weights are evaluated with crfsdca's objective) and the same
predictions on held-out sentences.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from crfsdca import CRF
from crfsdca.features.feature_map import FeatureMap
from crfsdca.features.featuredicts import FeatureDictEncoder
from crfsdca.metrics import flat_accuracy
from crfsdca.structures.problem import Problem

sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")

pytestmark = pytest.mark.slow

N_TRAIN, N_TEST, C2 = 200, 300, 0.1


def _features(sent, t):
    word, pos = sent[t][0], sent[t][1]
    f = {
        "bias": 1.0,
        "word.lower()": word.lower(),
        "word[-3:]": word[-3:],
        "word.istitle()": word.istitle(),
        "word.isdigit()": word.isdigit(),
        "postag": pos,
        "len": len(word) / 10,
    }
    f["-1"] = {"pos": sent[t - 1][1]} if t else {"BOS": True}
    if t + 1 < len(sent):
        f["+1"] = {"pos": sent[t + 1][1], "word": sent[t + 1][0].lower()}
    return f


@pytest.fixture(scope="module")
def conll2000():
    data_loaders = pytest.importorskip("data_loaders")
    if not os.environ.get("CRFSDCA_DATA_DIR"):
        pytest.skip("CRFSDCA_DATA_DIR is not set")
    try:
        train = data_loaders.load_dataset("conll2000", "train")
    except data_loaders.DatasetNotFoundError as err:
        pytest.skip(str(err))
    sents = [[_features(s, t) for t in range(len(s))] for s in train.tokens[: N_TRAIN + N_TEST]]
    labels = train.labels[: N_TRAIN + N_TEST]
    return (sents[:N_TRAIN], labels[:N_TRAIN]), (sents[N_TRAIN:], labels[N_TRAIN:])


@pytest.fixture(scope="module")
def crfsuite_model(conll2000):
    (X, y), _ = conll2000
    crf = sklearn_crfsuite.CRF(
        algorithm="lbfgs",
        c1=0,
        c2=C2,
        all_possible_states=True,
        all_possible_transitions=True,
        max_iterations=5000,
        epsilon=1e-9,
        delta=1e-12,
    )
    return crf.fit(X, y)


def _objective(X, y, state, transitions) -> float:
    """crfsdca's P(w) at the weights given as sklearn-crfsuite dicts (lambda = 2 c2 / n)."""
    encoder = FeatureDictEncoder()
    data = encoder.fit_transform(X, y)
    fm = FeatureMap(data.n_attributes, data.n_labels, 0)
    attr = {name: j for j, name in enumerate(encoder.attribute_names)}
    label = {name: k for k, name in enumerate(data.label_names)}
    w = fm.zeros()
    for (a, lab), value in state.items():
        fm.emission(w)[attr[a], label[lab]] = value
    for (a, b), value in transitions.items():
        fm.transition(w)[label[a], label[b]] = value
    return Problem(train=data, feature_map=fm, regularization=2 * C2 / len(X)).primal(w)


LBFGS_DENSE = {
    "all_possible_states": True,
    "all_possible_transitions": True,
    "epsilon": 1e-9,
    "delta": 1e-12,
}


@pytest.mark.parametrize(
    ("algorithm", "tol", "options"), [("lbfgs", 1e-8, LBFGS_DENSE), ("sdca", 1e-8, {})]
)
def test_same_optimum_as_sklearn_crfsuite(conll2000, crfsuite_model, algorithm, tol, options):
    (X, y), (X_test, _) = conll2000
    ours = CRF(algorithm=algorithm, c1=0, c2=C2, tol=tol, max_iterations=2000, **options)
    ours.fit(X, y)
    theirs = crfsuite_model
    p_ours = _objective(X, y, ours.state_features_, ours.transition_features_)
    p_theirs = _objective(X, y, theirs.state_features_, theirs.transition_features_)
    # ours is certified within tol of the optimum (the duality gap or the L-BFGS gradient
    # bound), so at most tol above CRFsuite's value; CRFsuite's is within 1e-6 (relative) of ours
    assert p_ours <= p_theirs + tol
    assert p_theirs - p_ours <= 1e-6 * p_ours
    assert sorted(ours.classes_) == sorted(theirs.classes_)
    pred_ours = ours.predict(X_test)
    pred_theirs = [list(p) for p in theirs.predict(X_test)]
    assert flat_accuracy(pred_theirs, pred_ours) >= 0.995
    # the marginals agree within what the certificates justify. With g = grad P(w*) = 0,
    # P(w) - P* = (1/n) sum_i KL(p_i(w*) || p_i(w)) + lambda/2 ||w - w*||^2 (the Bregman
    # divergence of log Z_i is that KL), so on a training sentence KL_i <= n eps(w) and, by
    # Pinsker, every marginal moves by at most the total variation sqrt(n eps(w) / 2).
    # eps(ours) <= its certified gap; eps(theirs) <= p_theirs - (p_ours - gap).
    gap = ours.training_log_[-1].gap
    assert 0 <= gap <= tol
    eps_ours, eps_theirs = gap, max(p_theirs - p_ours + gap, 0.0)
    bound = np.sqrt(len(X) * eps_ours / 2) + np.sqrt(len(X) * eps_theirs / 2)
    m_ours = ours.predict_marginals(X[:50])
    m_theirs = theirs.predict_marginals(X[:50])
    diff = max(
        abs(a[k] - b[k])
        for sa, sb in zip(m_ours, m_theirs, strict=True)
        for a, b in zip(sa, sb, strict=True)
        for k in ours.classes_
    )
    assert diff <= bound  # observed: 1e-5 to 1e-4 against about 1.6e-3
    assert np.isfinite(p_ours)
