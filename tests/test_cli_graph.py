"""``crfsdca train --graph tree|chain`` on CoNLL-U data with dependency trees."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from crfsdca.cli import main
from crfsdca.modelfile import load_model

DATA_DIR = os.environ.get("CRFSDCA_DATA_DIR")
EWT = Path(DATA_DIR or ".", "ud_english_ewt", "en_ewt-ud-train.conllu.gz")


def conllu(path, sentences):
    """Write sentences of (form, upos, xpos, head) as CoNLL-U."""
    lines = []
    for s in sentences:
        for i, (form, upos, xpos, head) in enumerate(s, 1):
            lines.append(
                "\t".join([str(i), form, "_", upos, xpos, "_", str(head), "dep", "_", "_"])
            )
        lines.append("")
    path.write_text("\n".join(lines) + "\n")
    return path


SENTENCES = [
    [("dogs", "NOUN", "NNS", 2), ("bark", "VERB", "VBP", 0)],
    [("the", "DET", "DT", 2), ("cat", "NOUN", "NN", 3), ("sleeps", "VERB", "VBZ", 0)],
    [
        ("a", "DET", "DT", 2),
        ("dog", "NOUN", "NN", 3),
        ("runs", "VERB", "VBZ", 0),
        ("home", "NOUN", "NN", 3),
    ],
] * 4


@pytest.mark.parametrize("solver", ["sdca", "lbfgs"])
def test_train_tree_certifies_and_saves(tmp_path, solver):
    data = conllu(tmp_path / "train.conllu", SENTENCES)
    args = ["train", str(data), "--graph", "tree", "--label", "upos", "--test", str(data)]
    args += [
        "--solver",
        solver,
        "--tol",
        "1e-6",
        "--json",
        "-q",
        "--model",
        str(tmp_path / "m.npz"),
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.splitlines()[-1])
    assert out["graph"] == "tree" and out["stop_reason"] == "tol" and out["gap"] <= 1e-6
    assert out["test_token_accuracy"] == 1.0  # every training word is told apart by its form
    arrays, header = load_model(tmp_path / "m.npz")
    assert header["graph"] == "tree" and header["n_edge_types"] == 2
    assert header["training"]["gap"] == out["gap"]
    assert arrays["weights"].size == out["d"] == (header["n_attributes"] + 3) * 3 + 2 * 9


def test_graph_misuse_is_one_line(tmp_path):
    data = conllu(tmp_path / "train.conllu", SENTENCES)
    common = ["train", str(data), "--graph", "tree"]
    result = CliRunner().invoke(main, [*common, "--workers", "2"])
    assert result.exit_code == 2 and "--graph runs in one process" in result.stderr
    bad = conllu(tmp_path / "cycle.conllu", [[("a", "X", "X", 2), ("b", "X", "X", 1)]])
    result = CliRunner().invoke(main, ["train", str(bad), "--graph", "tree"])
    assert result.exit_code == 1
    assert "example 0: node 0: lies on a cycle of parents" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    result = CliRunner().invoke(main, ["train", "conll2000", "--graph", "tree"])
    assert result.exit_code == 1 and "--graph needs CoNLL-U data" in result.stderr


@pytest.mark.slow
@pytest.mark.skipif(not EWT.exists(), reason="needs CRFSDCA_DATA_DIR with ud_english_ewt")
def test_ewt_trees_train_and_score():
    args = ["train", "ewt-pos", "--graph", "tree", "--label", "upos", "--data-dir", DATA_DIR]
    args += ["--max-sequences", "300", "--epochs", "3", "--json", "-q"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.splitlines()[-1])
    assert out["n"] == 300 and out["n_test"] == 2077 and out["n_labels"] == 17
    assert np.isfinite(out["gap"]) and out["gap"] > 0 and out["test_token_accuracy"] > 0.5


@pytest.mark.parametrize("solver", ["sag-nus", "sag-nus-skip", "oeg"])
def test_train_tree_with_the_primal_and_eg_baselines(tmp_path, solver):
    """SAG-NUS, SAG-NUS* and OEG train on trees from the CLI (the first 9 sentences): the
    certified gap reaches --tol and the saved model tags every training word right."""
    data = conllu(tmp_path / "train.conllu", SENTENCES)
    args = ["train", str(data), "--graph", "tree", "--label", "upos", "--test", str(data)]
    args += ["--solver", solver, "--tol", "1e-6", "--max-sequences", "9", "--epochs", "500"]
    args += ["--json", "-q", "--model", str(tmp_path / "m.npz")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.splitlines()[-1])
    assert out["graph"] == "tree" and out["n"] == 9
    assert out["stop_reason"] == "tol" and 0 <= out["gap"] <= 1e-6
    assert out["test_token_accuracy"] == 1.0
    header = load_model(tmp_path / "m.npz")[1]
    assert header["solver"] == solver and header["training"]["gap"] == out["gap"]
