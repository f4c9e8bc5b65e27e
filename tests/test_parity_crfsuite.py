"""Parity with CRFsuite: same attribute file, same objective, same optimum.

CRFsuite's L-BFGS minimises ``sum_i NLL_i(w) + c2 ||w||^2`` and logs that value as "Loss"; ours
is ``P(w) = (1/n) sum_i NLL_i(w) + (lambda/2) ||w||^2``, so ``c2 = n lambda / 2`` (0.5 for the
default lambda = 1/n) and ``Loss = n P(w)``. With ``feature.possible_states`` and
``feature.possible_transitions`` CRFsuite's model is dense, ``A K + K^2`` features, exactly our
feature map without bias rows.

Both trainers read the same CRFsuite attribute file: the ``crfsuite-chunking`` attributes of the
first CoNLL-2000 training sentences, written with ``write_crfsuite`` and read back with
``read_crfsuite`` + ``AttributeEncoder`` (CRFsuite gets the items read back, so attribute names
with colons reach it unescaped, as its own reader would give them).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

pycrfsuite = pytest.importorskip("pycrfsuite")

from crfsdca.features.attributes import AttributeEncoder, make_encoder  # noqa: E402
from crfsdca.features.feature_map import FeatureMap  # noqa: E402
from crfsdca.io import AttributeCorpus, read_crfsuite, write_crfsuite  # noqa: E402
from crfsdca.solvers.lbfgs import LBFGS, LBFGSConfig  # noqa: E402
from crfsdca.solvers.monitor import Monitor  # noqa: E402
from crfsdca.structures.problem import Problem  # noqa: E402

pytestmark = pytest.mark.slow

N_SEQUENCES = 1000
C2 = 0.5  # lambda = 1/n in CRFsuite's scaling


def _load_train(n: int):
    data_loaders = pytest.importorskip("data_loaders")
    if not os.environ.get("CRFSDCA_DATA_DIR"):
        pytest.skip("CRFSDCA_DATA_DIR is not set")
    try:
        data_loaders.find_data_file("conll2000", "conll2000/train.txt.gz", allow_download=False)
    except data_loaders.DatasetNotFoundError as err:
        pytest.skip(str(err))
    return data_loaders.load_dataset("conll2000", "train").head(n)


def _attribute_corpus(tokens) -> AttributeCorpus:
    """The crfsuite-chunking attributes of a token corpus as a CRFsuite attribute corpus."""
    encoder = make_encoder("crfsuite-chunking")
    data = encoder.fit_transform(tokens)
    names = np.array(encoder.attribute_names(), dtype=object)
    ids, values, offsets = data.attr_ids, data.attr_values, data.attr_offsets
    attributes = []
    for i in range(data.n_sequences):
        items = range(data.seq_offsets[i], data.seq_offsets[i + 1])
        attributes.append(
            [
                list(zip(names[ids[offsets[t] : offsets[t + 1]]].tolist(),
                         values[offsets[t] : offsets[t + 1]].tolist(), strict=True))
                for t in items
            ]
        )  # fmt: skip
    return AttributeCorpus(attributes=attributes, labels=[list(labels) for labels in tokens.labels])


@pytest.fixture(scope="module")
def crfsuite_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("parity") / "conll2000-1000.crfsuite.txt"
    write_crfsuite(path, _attribute_corpus(_load_train(N_SEQUENCES)))
    return path


def _problem(corpus: AttributeCorpus) -> tuple[AttributeEncoder, Problem]:
    encoder = AttributeEncoder()
    data = encoder.fit_transform(corpus)
    fm = FeatureMap(data.n_attributes, data.n_labels, n_bias_rows=0)
    return encoder, Problem(train=data, feature_map=fm)


def _train_crfsuite(corpus: AttributeCorpus, model: Path, **params) -> pycrfsuite.Trainer:
    trainer = pycrfsuite.Trainer(verbose=False)
    for items, labels in zip(corpus.attributes, corpus.labels, strict=True):
        trainer.append([dict(item) for item in items], labels)
    trainer.select("lbfgs")
    trainer.set_params(
        {
            "c1": 0.0,
            "c2": C2,
            "feature.possible_states": True,
            "feature.possible_transitions": True,
            **params,
        }
    )
    trainer.train(str(model))
    return trainer


def _crfsuite_weights(model: Path, encoder: AttributeEncoder, fm: FeatureMap) -> np.ndarray:
    """CRFsuite's weights (printed with 6 decimals by its dump) in our flat layout."""
    tagger = pycrfsuite.Tagger()
    tagger.open(str(model))
    dump = model.with_suffix(".dump")
    tagger.dump(str(dump))
    tagger.close()
    label = {name: k for k, name in enumerate(encoder.label_names)}
    w = fm.zeros()
    emission, transition = fm.emission(w), fm.transition(w)
    section = ""
    with open(dump, encoding="utf-8") as lines:
        for line in lines:
            text = line.strip()
            if text.endswith("= {"):
                section = text.split()[0]
            elif section in ("TRANSITIONS", "STATE_FEATURES") and text.startswith("("):
                pair, value = text.split(") ", 1)[1].rsplit(": ", 1)
                source, target = pair.rsplit(" --> ", 1)
                if section == "TRANSITIONS":
                    transition[label[source], label[target]] = float(value)
                else:
                    emission[encoder.vocabulary[source], label[target]] = float(value)
    return w


def test_crfsuite_loss_is_sum_nll_plus_c2_squared_norm(crfsuite_file, tmp_path):
    """CRFsuite's logged "Loss" at its weights equals n P(w), i.e. sum NLL + c2 ||w||^2."""
    corpus = read_crfsuite(crfsuite_file).head(30)
    encoder, problem = _problem(corpus)
    model = tmp_path / "tiny.crfsuite"
    trainer = _train_crfsuite(corpus, model, max_iterations=10)
    log = trainer.logparser
    assert log.featgen_num_features == problem.feature_map.n_features
    loss = log.iterations[-1]["loss"]
    w = _crfsuite_weights(model, encoder, problem.feature_map)
    nll = problem.oracle.value_and_gradient(w)[0]
    n = problem.n_sequences
    # rel=1e-6: the dump rounds each weight to 6 decimals
    assert loss == pytest.approx(nll + C2 * float(w @ w), rel=1e-6)
    assert loss == pytest.approx(n * problem.primal(w), rel=1e-6)
    assert abs(loss - (nll + 0.5 * C2 * float(w @ w))) > 1e-3 * loss  # the c2 scaling matters


def test_optimum_matches_crfsuite(crfsuite_file, tmp_path):
    """Our certified P* on 1,000 sentences equals CRFsuite's converged loss / n."""
    corpus = read_crfsuite(crfsuite_file)
    encoder, problem = _problem(corpus)
    n, fm = problem.n_sequences, problem.feature_map
    assert n == N_SEQUENCES
    model = tmp_path / "conll2000-1000.crfsuite"
    # Stops when the loss improved by less than 1e-8 (relative) over 10 iterations: about 110
    # iterations, where the loss is within ~1e-9 of P* (1e-7 after ~90, 1e-5 after ~70).
    trainer = _train_crfsuite(
        corpus, model, max_iterations=1000, epsilon=1e-10, delta=1e-8, period=10
    )
    log = trainer.logparser
    K = fm.n_labels
    assert log.featgen_num_features == fm.n_features == fm.n_attributes * K + K * K
    theirs = log.iterations[-1]["loss"] / n

    # Warm start from CRFsuite's weights: the stopping certificate, not the start, makes P* exact
    # (a cold start reaches the same P* but takes about 120 evaluations).
    w_crfsuite = _crfsuite_weights(model, encoder, fm)
    assert problem.primal(w_crfsuite) == pytest.approx(theirs, rel=1e-7)
    config = LBFGSConfig(tol=1e-10, max_epochs=300)
    monitor = Monitor(problem, "lbfgs", config, evaluate_test=False)
    result = LBFGS(config).solve(problem, monitor, state=w_crfsuite)
    last = result.trace.records[-1]
    assert result.stop_reason == "tol"
    assert last.gap <= 1e-10
    ours = last.primal

    assert ours == pytest.approx(theirs, rel=1e-5)
    # P* >= ours - gap, and CRFsuite's loss (printed with 6 decimals) cannot be below P*
    assert ours - last.gap <= theirs + 1e-6 / n
