"""The crfsdca command line on small files: outputs, exit codes, model round trips."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from crfsdca.cli.main import main
from crfsdca.solvers.trace import read_trace

SENTENCES = [
    [("The", "DT", "B-NP"), ("cat", "NN", "I-NP"), ("sat", "VBD", "B-VP"), (".", ".", "O")],
    [("A", "DT", "B-NP"), ("dog", "NN", "I-NP"), ("ran", "VBD", "B-VP"), ("home", "NN", "B-NP")],
    [("Dogs", "NNS", "B-NP"), ("bark", "VBP", "B-VP"), (".", ".", "O")],
    [("The", "DT", "B-NP"), ("big", "JJ", "I-NP"), ("cat", "NN", "I-NP"), ("ran", "VBD", "B-VP")],
]


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "train.txt"
    text = "\n\n".join("\n".join(" ".join(tok) for tok in s) for s in SENTENCES * 3) + "\n"
    path.write_text(text)
    return path


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.mark.parametrize("solver", ["sdca", "lbfgs"])
def test_train_json_has_every_field(corpus, tmp_path, solver):
    model = tmp_path / "m.npz"
    result = run(
        "train",
        corpus,
        "--format",
        "conll",
        "--template",
        "conll",
        "--test",
        corpus,
        "--solver",
        solver,
        "--epochs",
        "30",
        "--json",
        "-q",
        "--model",
        model,
        "--trace",
        tmp_path / "t.jsonl",
        "--tol",
        "1e-8",
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.strip().splitlines()[-1])
    for key in (
        "solver",
        "dataset",
        "n",
        "n_test",
        "d",
        "lambda",
        "epochs",
        "oracle_calls",
        "updates",
        "seconds",
        "primal",
        "dual",
        "gap",
        "test_token_accuracy",
        "test_f1",
        "model",
    ):
        assert key in out
    assert out["solver"] == solver and out["n"] == 12 and out["n_test"] == 12
    assert out["lambda"] == pytest.approx(1 / 12)
    last = read_trace(tmp_path / "t.jsonl").records[-1]  # the summary is the returned state
    assert (out["epochs"], out["oracle_calls"], out["gap"]) == (
        last.epoch,
        last.oracle_calls,
        last.gap,
    )
    assert out["stop_reason"] == "tol" and -1e-12 <= out["gap"] <= 1e-8
    evaluated = run("evaluate", model, corpus, "--format", "conll", "--json")
    assert evaluated.exit_code == 0, evaluated.output  # the saved model scores what was printed
    assert json.loads(evaluated.stdout)["token_accuracy"] == out["test_token_accuracy"]


def test_model_round_trip_through_evaluate_and_tag(corpus, tmp_path):
    model = tmp_path / "m.npz"
    trained = run(
        "train",
        corpus,
        "--format",
        "conll",
        "--template",
        "conll",
        "--test",
        corpus,
        "--epochs",
        "20",
        "--json",
        "-q",
        "--model",
        model,
    )
    assert trained.exit_code == 0, trained.output
    accuracy = json.loads(trained.stdout.strip().splitlines()[-1])["test_token_accuracy"]
    evaluated = run("evaluate", model, corpus, "--format", "conll", "--json")
    assert evaluated.exit_code == 0, evaluated.output
    assert json.loads(evaluated.stdout)["token_accuracy"] == pytest.approx(accuracy)
    unlabeled = tmp_path / "raw.txt"
    unlabeled.write_text("The DT\ncat NN\n\nDogs NNS\nbark VBP\n")
    tagged = run("tag", model, unlabeled)
    assert tagged.exit_code == 0, tagged.output
    lines = tagged.stdout.splitlines()
    assert lines[0].startswith("The DT ") and lines[2] == ""
    assert all(len(line.split()) == 3 for line in lines if line)


def test_data_error_is_one_line_with_file_and_line(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("The DT B-NP\ncat NN\n")
    result = CliRunner().invoke(
        main, ["train", str(bad), "--format", "conll", "--template", "conll"]
    )
    assert result.exit_code == 1
    assert f"{bad}:2:" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_usage_errors_exit_2(corpus):
    wrong = CliRunner().invoke(
        main,
        [
            "train",
            str(corpus),
            "--format",
            "conll",
            "--template",
            "conll",
            "--solver",
            "lbfgs",
            "--sampling",
            "gap",
        ],
    )
    assert wrong.exit_code == 2 and "--sampling does not apply to --solver lbfgs" in wrong.stderr
    assert CliRunner().invoke(main, ["train", str(corpus), "--solver", "nope"]).exit_code == 2


def test_missing_file_and_model_errors(tmp_path):
    result = CliRunner().invoke(
        main, ["train", str(tmp_path / "none.txt"), "--format", "conll", "--template", "conll"]
    )
    assert result.exit_code == 1 and "no such file" in result.stderr
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a model at all")
    result = CliRunner().invoke(main, ["evaluate", str(junk), str(junk), "--format", "conll"])
    assert result.exit_code == 1 and "junk.npz" in result.stderr


def test_datasets_list_names_every_dataset():
    result = run("datasets", "list")
    assert result.exit_code == 0
    listed = {line.split()[0] for line in result.stdout.splitlines() if line.strip()}
    assert {"conll2000", "conll2002-ned", "ocr", "ewt-pos"} <= listed


def test_python_api_save_load_keeps_predictions(tmp_path):
    from _synthetic import random_sequences

    from crfsdca.estimators.model import SequenceCRF

    data = random_sequences(3, n=15, max_T=5)
    model = SequenceCRF(solver="sdca", max_epochs=20).fit(data)
    path = tmp_path / "model.npz"
    model.save(str(path))
    again = SequenceCRF.load(str(path))
    np.testing.assert_array_equal(model.predict(data), again.predict(data))
    np.testing.assert_array_equal(model.weights_, again.weights_)
