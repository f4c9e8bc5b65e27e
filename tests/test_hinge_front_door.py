"""The structured SVM through the front door: ``crfsdca train --loss hinge``, its misuse (one
line, exit 2), the model file (records the loss, evaluates and tags), ``crfsdca.CRF(loss=)``
and the refusal of marginals."""

from __future__ import annotations

import numpy as np
import pytest
from test_cli_errors import cli, conll_text, usage_error

import crfsdca
from crfsdca.estimators.model import SequenceCRF
from crfsdca.io.modelfile import load_model


@pytest.fixture(scope="module")
def chunk(tmp_path_factory):
    root = tmp_path_factory.mktemp("hinge")
    (root / "chunk.txt").write_text(conll_text(40))
    return root


@pytest.mark.parametrize(
    "args, message",
    [
        (["--loss", "hnge"], "Invalid value for '--loss'"),
        (["--loss", "hinge", "--solver", "lbfgs"], "--solver lbfgs has no hinge loss"),
        (["--loss", "hinge", "--solver", "oeg"], "--solver oeg has no hinge loss"),
        (["--loss", "hinge", "--scheduler", "tcp://127.0.0.1:1"], "--loss hinge: a --scheduler"),
        (["--loss", "hinge", "--hinge-step", "away"], "--hinge-step must be one of pairwise, fw"),
        (
            ["--loss", "hinge", "--hinge-step", "active", "--order", "2"],
            "--hinge-step active trains chains; --order 2 takes",
        ),
        (
            ["--loss", "hinge", "--hinge-step", "smooth", "--l1", "0.1"],
            "--hinge-step smooth does not train the elastic net",
        ),
        (["--loss", "hinge", "--smooth-decay", "1.5"], "--smooth-decay must be in (0, 1)"),
        (["--loss", "hinge", "--smooth-temperature", "0"], "--smooth-temperature must be > 0"),
        (["--loss", "hinge", "--hinge-atoms", "0"], "--hinge-atoms must be >= 1"),
        # the structured SVM's own options on the log-loss: refused, not ignored
        (["--hinge-step", "active"], "--hinge-step applies to --loss hinge"),
        (["--loss", "log", "--hinge-atoms", "4"], "--hinge-atoms applies to --loss hinge"),
        (["--smooth-temperature", "2"], "--smooth-temperature applies to --loss hinge"),
    ],
)
def test_misuse_of_the_hinge_loss_is_one_usage_line(chunk, args, message):
    line = usage_error(cli("train", chunk / "chunk.txt", "--template", "conll", *args))
    assert message in line


@pytest.mark.slow  # the structured SVM's kernels: slow set (test_hinge.py)
def test_a_hinge_model_records_its_loss_evaluates_and_tags(chunk, tmp_path):
    model = tmp_path / "svm.npz"
    done = cli("train", chunk / "chunk.txt", "--template", "conll", "--loss", "hinge",
               "--tol", "1e-3", "--model", model, "--json")  # fmt: skip
    assert done.exit_code == 0, done.output
    assert '"loss": "hinge"' in done.stdout
    assert load_model(str(model))[1]["loss"] == "hinge"
    loaded = SequenceCRF.load(str(model))
    assert loaded.loss_ == "hinge"
    assert cli("evaluate", model, chunk / "chunk.txt").exit_code == 0
    tagged = cli("tag", model, "-", input="the cat\nbig dog\n")
    assert tagged.exit_code == 0 and len(tagged.stdout.strip().splitlines()) == 2


@pytest.mark.slow  # the structured SVM's kernels: slow set (test_hinge.py)
def test_crf_loss_hinge_predicts_and_refuses_marginals():
    X = [[{"w": w} for w in s.split()] for s in ["the cat", "a big dog", "the dog", "a cat"]]
    y = [["D", "N"], ["D", "A", "N"], ["D", "N"], ["D", "N"]]
    svm = crfsdca.CRF(loss="hinge", tol=1e-6).fit(X, y)
    assert svm.predict(X) == y
    with pytest.raises(ValueError, match="no probabilities"):
        svm.predict_marginals(X)
    with pytest.raises(ValueError, match="has no hinge loss"):
        crfsdca.CRF(algorithm="lbfgs", loss="hinge").fit(X, y)
    logit = crfsdca.CRF(tol=1e-6).fit(X, y)
    assert np.isclose(sum(logit.predict_marginals(X)[0][0].values()), 1.0)


@pytest.mark.slow  # the tree's hinge step loop compiles for 10-15 s on a cold cache
def test_the_custom_graph_api_trains_saves_and_decodes_a_tree_svm(tmp_path):
    """SequenceCRF(loss="hinge") on TreeData: certified, saved with its loss, decoded as the
    fitted model decodes, no marginals."""
    from test_elastic_net import tree_problem_of

    data = tree_problem_of(seed=4, n=8).train
    model = SequenceCRF(loss="hinge", hinge_step="pairwise", tol=1e-8, max_epochs=5000)
    model.fit(data)
    assert model.result_.stop_reason == "tol"
    model.save(str(tmp_path / "tree_svm.npz"))
    loaded = SequenceCRF.load(str(tmp_path / "tree_svm.npz"))
    assert loaded.loss_ == "hinge" and loaded.graph_ == "tree"
    np.testing.assert_array_equal(loaded.predict(data), model.predict(data))
    with pytest.raises(ValueError, match="no probabilities"):
        loaded.node_marginals(data)
