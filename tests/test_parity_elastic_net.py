"""Parity with CRFsuite on the elastic net: python-crfsuite's L-BFGS with c1 > 0 (OWL-QN),
crfsdca's certified Prox-SDCA and crfsdca's OWL-QN reach the same objective on 200 CoNLL-2000
sentences (crfsuite-chunking attributes, the dense model), with the same non-zero weights: the
same support (the weights that CRFsuite's 6-decimal dump shows non-zero) and the same number of
non-zeros (7,083 of 358,683).

CRFsuite minimises sum_i NLL_i + c1 |w|_1 + c2 |w|^2 and logs it as "Loss"; crfsdca's P is that
over n with lambda = 2 c2 / n and sigma = c1 / n.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_parity_crfsuite import _attribute_corpus, _load_train, _problem

from crfsdca.solvers.lbfgs import LBFGS, LBFGSConfig
from crfsdca.solvers.monitor import Monitor
from crfsdca.solvers.sdca import SDCA, SDCAConfig

pycrfsuite = pytest.importorskip("pycrfsuite")
pytestmark = pytest.mark.slow

N, C1, C2 = 200, 0.1, 0.1


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    corpus = _attribute_corpus(_load_train(N))
    encoder, problem = _problem(corpus)
    problem.regularization = 2 * C2 / N
    problem.l1 = C1 / N
    model = tmp_path_factory.mktemp("l1") / "conll2000-500.crfsuite"
    trainer = pycrfsuite.Trainer(verbose=False)
    for items, labels in zip(corpus.attributes, corpus.labels, strict=True):
        trainer.append([dict(item) for item in items], labels)
    trainer.select("lbfgs")
    trainer.set_params({
        "c1": C1, "c2": C2, "feature.possible_states": True,
        "feature.possible_transitions": True, "max_iterations": 5000, "epsilon": 1e-10,
        "delta": 1e-10, "period": 20,
    })  # fmt: skip
    trainer.train(str(model))
    theirs = trainer.logparser.iterations[-1]["loss"] / N
    w_crfsuite, n_stored = _crfsuite_weights(model, encoder, problem.feature_map)
    assert problem.primal(w_crfsuite) == pytest.approx(theirs, rel=1e-7)  # the same objective
    # CRFsuite stores exactly its non-zero weights (crf1de_save_model), as many as it reports
    assert n_stored == trainer.logparser.iterations[-1]["active_features"]
    return problem, theirs, w_crfsuite, n_stored


def _crfsuite_weights(model, encoder, fm):
    """CRFsuite's weights (``Tagger.info``, from its dump: 6 decimals) in crfsdca's flat
    layout, and how many its model stores (its non-zero weights only)."""
    tagger = pycrfsuite.Tagger()
    tagger.open(str(model))
    info = tagger.info()
    tagger.close()
    label = {name: k for k, name in enumerate(encoder.label_names)}
    w = fm.zeros()
    emission, transition = fm.emission(w), fm.transition(w)
    for (attribute, target), value in info.state_features.items():
        emission[encoder.vocabulary[attribute], label[target]] = value
    for (source, target), value in info.transitions.items():
        transition[label[source], label[target]] = value
    return w, len(info.state_features) + len(info.transitions)


def check_sparsity(w, w_crfsuite, n_stored):
    """The same support as CRFsuite's above its printing precision (w rounded to 6 decimals,
    as its dump prints it, non-zero exactly where CRFsuite's printed weight is), and the
    same number of non-zero weights as CRFsuite's model stores."""
    np.testing.assert_array_equal(np.round(w, 6) != 0, w_crfsuite != 0)
    assert np.count_nonzero(w) == n_stored


def test_crfsuite_owlqn_and_certified_sdca_agree(setup):
    problem, theirs, w_crfsuite, n_stored = setup
    config = SDCAConfig(tol=1e-7 * theirs, max_epochs=2000, eval_every=5)
    result = SDCA(config).solve(problem, Monitor(problem, "sdca", config, evaluate_test=False))
    last = result.trace.records[-1]
    assert result.stop_reason == "tol"
    assert abs(last.primal - theirs) <= 1e-6 * theirs
    check_sparsity(result.weights, w_crfsuite, n_stored)


def test_crfsdca_owlqn_agrees_with_crfsuite(setup):
    problem, theirs, w_crfsuite, n_stored = setup
    # OWL-QN's last non-zeros settle late: at 1e-7 two weights (7e-5, 4e-6) were still on
    # their way to 0
    config = LBFGSConfig(tol=1e-9 * theirs, max_epochs=5000)
    result = LBFGS(config).solve(problem, Monitor(problem, "lbfgs", config, evaluate_test=False))
    last = result.trace.records[-1]
    assert result.stop_reason == "tol"
    assert abs(last.primal - theirs) <= 1e-6 * theirs
    check_sparsity(result.weights, w_crfsuite, n_stored)
