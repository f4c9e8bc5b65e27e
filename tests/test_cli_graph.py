"""``crfsdca train --graph tree|chain`` on CoNLL-U data with dependency trees."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from crfsdca.cli.main import main
from crfsdca.io.modelfile import load_model

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


@pytest.mark.slow  # a local Dask cluster
@pytest.mark.timeout(300)
def test_train_tree_on_two_workers_reaches_the_serial_optimum(tmp_path):
    pytest.importorskip("distributed")
    data = conllu(tmp_path / "train.conllu", SENTENCES)
    common = ["train", str(data), "--graph", "tree", "--label", "upos", "--tol", "1e-6"]
    runs = {}
    for name, extra in (("serial", []), ("dask", ["--workers", "2", "--local-updates", "4"])):
        result = CliRunner().invoke(main, [*common, *extra, "--json", "-q"])
        assert result.exit_code == 0, result.output
        runs[name] = json.loads(result.stdout.splitlines()[-1])
    serial, dask = runs["serial"], runs["dask"]
    assert (dask["partitions"], dask["graph"], dask["stop_reason"]) == (2, "tree", "tol")
    assert dask["gap"] <= 1e-6 and serial["gap"] <= 1e-6
    assert abs(dask["primal"] - serial["primal"]) <= 2e-6  # both certified within 1e-6


STOPPED = (
    r"crfsdca: stopped at --epochs 1{} before reaching --tol 1e-12 \(duality gap {}\);"
    " train longer or raise --tol"
)


@pytest.mark.parametrize(
    ("cluster", "rounds"),
    [
        ([], ""),
        (["--workers", "2", "--worker-threads", "--local-updates", "2"], r" \(3 rounds\)"),
        pytest.param(
            ["--workers", "2", "--local-updates", "2"],
            r" \(3 rounds\)",
            marks=[pytest.mark.slow, pytest.mark.timeout(300)],
        ),
    ],  # fmt: skip
    ids=["serial", "worker-threads", "processes"],
)
def test_a_tree_run_stopped_above_tol_says_so_in_the_users_flags(tmp_path, cluster, rounds):
    """Serial or distributed (threads or Dask processes), a tree run that --epochs stops above
    --tol says so on stderr in one line naming the flags (and the rounds of a distributed
    run); --quiet silences it."""
    if cluster and "--worker-threads" not in cluster:
        pytest.importorskip("distributed")
    data = conllu(tmp_path / "train.conllu", SENTENCES)
    args = ["train", str(data), "--graph", "tree", "--label", "upos", "--epochs", "1",
            "--tol", "1e-12", *cluster, "--json"]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.splitlines()[-1])
    assert out["stop_reason"] != "tol" and out["gap"] > 1e-12
    gap = re.escape(f"{out['gap']:.3g}")
    assert re.fullmatch(STOPPED.format(rounds, gap), result.stderr.strip()), result.stderr
    quiet = CliRunner().invoke(main, [*args, "-q"])
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_graph_misuse_is_one_line(tmp_path):
    data = conllu(tmp_path / "train.conllu", SENTENCES)
    common = ["train", str(data), "--graph", "tree"]
    result = CliRunner().invoke(main, [*common, "--checkpoint", str(tmp_path / "ck")])
    assert result.exit_code == 2 and "--graph runs without checkpoints" in result.stderr
    result = CliRunner().invoke(main, [*common, "--workers", "2", "--solver", "lbfgs"])
    assert result.exit_code == 2 and "--workers and --scheduler run --solver sdca" in result.stderr
    bad = conllu(tmp_path / "cycle.conllu", [[("a", "X", "X", 2), ("b", "X", "X", 1)]])
    result = CliRunner().invoke(main, ["train", str(bad), "--graph", "tree"])
    assert result.exit_code == 1
    assert result.stderr == (
        f"crfsdca: error: {bad}:1: column 7 (HEAD): word 1 lies on a cycle of heads (1 -> 2 -> 1);"
        " the heads of a sentence must form a tree; --graph tree reads the trees of HEAD\n"
    )
    assert len(result.stderr.strip().splitlines()) == 1
    result = CliRunner().invoke(main, ["train", "conll2000", "--graph", "tree"])
    assert result.exit_code == 2 and "--graph needs CoNLL-U data" in result.stderr


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


# -- evaluate and tag with tree models -------------------------------------------------------


@pytest.fixture(scope="module")
def tree_model(tmp_path_factory):
    """A tree model (upos) trained by the CLI on SENTENCES, and its data file."""
    folder = tmp_path_factory.mktemp("tree")
    data = conllu(folder / "train.conllu", SENTENCES)
    model = folder / "m.npz"
    args = ["train", str(data), "--graph", "tree", "--label", "upos", "--tol", "1e-8"]
    result = CliRunner().invoke(main, [*args, "-q", "--model", str(model)])
    assert result.exit_code == 0, result.output
    return model, data


def expected_tags(model_path, sentences):
    """Predictions of the Python API on trees built here: heads, edge types by direction."""
    from crfsdca.estimators.model import SequenceCRF
    from crfsdca.features.sources import encoder_from_model
    from crfsdca.io import TokenCorpus
    from crfsdca.structures.graphs import Tree
    from crfsdca.structures.tree import TreeData

    model = SequenceCRF.load(str(model_path))
    encoder = encoder_from_model(model.encoder)
    corpus = TokenCorpus(
        tokens=[[(form, upos, xpos) for form, upos, xpos, _ in s] for s in sentences],
        labels=[[upos for _, upos, _, _ in s] for s in sentences],
        field_names=("form", "upos", "xpos"),
    )
    trees = []
    for s in sentences:
        heads = np.array([h - 1 for *_, h in s])
        trees.append(Tree(heads, (heads > np.arange(len(s))).astype(np.int64)))
    pred = model.predict(TreeData(encoder.transform(corpus), tuple(trees)))
    names, out, k = model.label_names_, [], 0
    for s in sentences:
        out += [names[j] for j in pred[k : k + len(s)].tolist()] + [""]
        k += len(s)
    return out


def test_evaluate_and_tag_read_tree_models(tree_model, tmp_path):
    model, data = tree_model
    result = CliRunner().invoke(main, ["evaluate", str(model), str(data), "--json"])
    assert result.exit_code == 0, result.output
    scores = json.loads(result.stdout)
    assert scores["token_accuracy"] == 1.0 and scores["n_tokens"] == 36
    result = CliRunner().invoke(main, ["evaluate", str(model), str(data)])
    assert result.exit_code == 0 and result.stdout.startswith("token accuracy 100.00%")
    # new sentences: the trees of their HEAD column decide, as the Python API on those trees
    new = [
        [("cats", "NOUN", "NNS", 2), ("sleep", "VERB", "VBP", 0), ("here", "ADV", "RB", 2)],
        [("the", "DET", "DT", 2), ("dog", "NOUN", "NN", 0)],
    ]
    path = conllu(tmp_path / "new.conllu", new)
    result = CliRunner().invoke(main, ["tag", str(model), str(path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.split("\n")[:-1] == expected_tags(model, new)
    result = CliRunner().invoke(main, ["tag", str(model), "-"], input=path.read_text())
    assert result.exit_code == 0 and result.stdout.split("\n")[:-1] == expected_tags(model, new)
    result = CliRunner().invoke(main, ["tag", str(model), str(data)])
    tags = [t for t in result.stdout.split("\n") if t]
    assert tags == [upos for s in SENTENCES for _, upos, _, _ in s]


def test_tree_models_refuse_data_without_trees_in_one_line(tree_model, tmp_path):
    model, data = tree_model
    no_heads = tmp_path / "no_heads.conllu"
    no_heads.write_text(data.read_text().replace("\t2\tdep", "\t_\tdep"))
    cycle = conllu(
        tmp_path / "cycle.conllu", [SENTENCES[0], [("a", "X", "X", 2), ("b", "X", "X", 1)]]
    )
    plain = tmp_path / "plain.conll"
    plain.write_text("dogs NOUN\nbark VERB\n")
    cases = [
        (no_heads, f"{no_heads}:1: column 7 (HEAD): expected 0 (the root) or a word id from 1"),
        (cycle, f"{cycle}:4: column 7 (HEAD): word 1 lies on a cycle of heads (1 -> 2 -> 1)"),
        (plain, f"{plain}: a --format conll file, but the model {model} is a tree model"),
    ]
    for command in ("evaluate", "tag"):
        for path, message in cases:
            result = CliRunner().invoke(main, [command, str(model), str(path)])
            assert result.exit_code == 1, (command, path, result.output)
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith(f"crfsdca: error: {message}"), lines
    result = CliRunner().invoke(main, ["export", str(model), str(tmp_path / "m.crfsuite")])
    assert result.exit_code == 1 and result.stderr == (
        f"crfsdca: error: {model}: CRFsuite's format holds linear-chain models; this one has"
        " trees\n"
    )


@pytest.mark.slow
@pytest.mark.skipif(not EWT.exists(), reason="needs CRFSDCA_DATA_DIR with ud_english_ewt")
def test_ewt_tree_model_evaluates_as_trained(tmp_path):
    model = tmp_path / "ewt.npz"
    args = ["train", "ewt-pos", "--graph", "tree", "--label", "upos", "--data-dir", DATA_DIR]
    args += ["--max-sequences", "150", "--epochs", "2", "--json", "-q", "--model", str(model)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    trained = json.loads(result.stdout.splitlines()[-1])
    args = ["evaluate", str(model), "ewt-pos", "--data-dir", DATA_DIR, "--json", "-q"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    scores = json.loads(result.stdout)
    assert scores["n_tokens"] == 25094
    assert scores["token_accuracy"] == trained["test_token_accuracy"]


@pytest.mark.slow  # compiles the tree loops of SAG-NUS and OEG (25 s); chains: test_final_record
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
