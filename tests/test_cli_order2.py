"""``crfsdca train DATASET --order 2``: second-order chains from the command line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from crfsdca.cli.main import main
from crfsdca.io.modelfile import load_model

DATA_DIR = os.environ.get("CRFSDCA_DATA_DIR")
CONLL2000 = Path(DATA_DIR or ".", "conll2000")


def chunk_file(path, n=30, seed=0):
    """A small CoNLL chunking file (word, POS, chunk tag per line)."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(30)]
    tags = ["DT", "NN", "VB", "JJ"]
    chunks = ["B-NP", "I-NP", "B-VP", "O"]
    lines = []
    for _ in range(n):
        for _ in range(rng.integers(1, 8)):
            k = rng.integers(0, 4)
            lines.append(f"{words[rng.integers(0, 30)]} {tags[k]} {chunks[k]}")
        lines.append("")
    path.write_text("\n".join(lines) + "\n")
    return path


def period_file(path, copies=20):
    """Sequences of one repeated word labelled A A B B A A B B: every label is fixed by the two
    before it, which a first-order chain with position-free scores cannot express."""
    sentence = [f"x X {y}" for y in "AABBAABB"]
    path.write_text("".join("\n".join(sentence) + "\n\n" for _ in range(copies)))
    return path


def train_json(*args):
    result = CliRunner().invoke(main, ["train", *map(str, args), "--json", "-q"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.splitlines()[-1])


def test_order2_trains_scores_and_saves_order(tmp_path):
    """SDCA certifies the gap, the printed F1 and primal are those of the saved weights, the
    model header records order 2 and the K^2 and K^3 blocks, and L-BFGS finds the same primal."""
    from crfsdca.cli.junction import second_order_problem
    from crfsdca.evaluation import evaluate_data
    from crfsdca.features.sources import load_inputs

    data = chunk_file(tmp_path / "train.txt")
    common = [data, "--template", "conll", "--test", data, "--order", "2"]
    out = train_json(*common, "--tol", "1e-6", "--model", tmp_path / "m.npz")
    assert out["order"] == 2 and out["stop_reason"] == "tol" and out["gap"] <= 1e-6
    arrays, header = load_model(tmp_path / "m.npz")
    assert header["order"] == 2 and header["factor_arities"] == [2, 3]
    K, A = header["n_labels"], header["n_attributes"]
    assert K == 4 and header["n_bias_rows"] == 3 and header["n_edge_types"] == 0
    assert arrays["weights"].size == out["d"] == (A + 3) * K + K**2 + K**3
    run = {"bias": None, "regularization": None}
    inputs = load_inputs(str(data), fmt=None, template="conll", test=str(data), data_dir=None,
                         max_sequences=None)  # fmt: skip
    problem = second_order_problem(inputs, run)
    w = arrays["weights"]
    assert problem.primal(w) == pytest.approx(out["primal"], rel=1e-12)
    scores = evaluate_data(problem.test, problem.test_oracle.predict(w))
    assert out["test_f1"] == pytest.approx(scores["f1"]) and out["test_f1"] > 50
    lbfgs = train_json(*common, "--solver", "lbfgs", "--tol", "1e-9")
    assert lbfgs["order"] == 2 and abs(lbfgs["primal"] - out["primal"]) <= 1e-6


@pytest.mark.slow  # the baselines' junction-tree step loops compile for 5-8 s each on a cold cache
@pytest.mark.parametrize("solver", ["sag-nus", "sag-nus-skip", "oeg"])
def test_order2_trains_with_the_baselines_to_the_same_optimum(tmp_path, solver):
    data = chunk_file(tmp_path / "train.txt", n=12)
    common = [data, "--template", "conll", "--order", "2", "--epochs", "400"]
    lbfgs = train_json(*common, "--solver", "lbfgs", "--tol", "1e-9")
    out = train_json(*common, "--solver", solver, "--tol", "1e-8")
    assert out["order"] == 2 and out["stop_reason"] == "tol" and out["gap"] <= 1e-8
    assert out["primal"] == pytest.approx(lbfgs["primal"], rel=1e-6)


def test_order2_fits_what_order1_cannot(tmp_path):
    """Token accuracy (no chunk tags) on a period-4 labelling: 100% only with label trigrams."""
    data = period_file(tmp_path / "period.txt")
    common = [data, "--template", "conll", "--test", data, "--tol", "1e-4"]
    first, second = train_json(*common), train_json(*common, "--order", "2")
    assert first["test_f1"] is None and second["test_f1"] is None
    assert second["test_token_accuracy"] == 1.0
    assert first["test_token_accuracy"] <= 0.75
    assert second["primal"] < first["primal"]


def test_order2_progress_summary_and_plot(tmp_path):
    data = chunk_file(tmp_path / "train.txt", n=12)
    plot = tmp_path / "gap.png"
    args = ["train", str(data), "--template", "conll", "--test", str(data), "--order", "2"]
    result = CliRunner().invoke(main, [*args, "--epochs", "2", "--tol", "0", "--plot", str(plot)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("sdca on train.txt: n=12,") and "test F1" in lines[-1]
    assert result.stderr.startswith("crfsdca: stopped at --epochs 2 before reaching --tol 0 (")
    assert len(result.stderr.splitlines()) == 1
    assert plot.stat().st_size > 0
    quiet = CliRunner().invoke(main, [*args, "--epochs", "2", "--tol", "0", "-q"])
    assert quiet.exit_code == 0 and quiet.stderr == ""
    threads = ["--workers", "2", "--worker-threads", "--local-updates", "3"]  # 1/2 epoch a round
    result = CliRunner().invoke(main, [*args, "--epochs", "2", "--tol", "0", *threads])
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith(
        "crfsdca: stopped at --epochs 2 (4 rounds) before reaching --tol 0 (duality gap"
    )


@pytest.mark.slow  # a local Dask cluster
@pytest.mark.timeout(300)
def test_order2_on_two_workers_reaches_the_serial_optimum(tmp_path):
    """``--order 2 --workers 2`` trains second-order chains by DisDCA: both runs certify a gap
    of 1e-6, so their primals agree within it; the saved model is a second-order one and
    scores as printed."""
    pytest.importorskip("distributed")
    data = chunk_file(tmp_path / "train.txt", n=16)
    common = [data, "--template", "conll", "--test", data, "--order", "2", "--tol", "1e-6"]
    serial = train_json(*common)
    dask = train_json(*common, "--workers", "2", "--local-updates", "4",
                      "--model", tmp_path / "m.npz")  # fmt: skip
    assert (dask["order"], dask["partitions"], dask["stop_reason"]) == (2, 2, "tol")
    assert dask["gap"] <= 1e-6 and serial["gap"] <= 1e-6
    assert abs(dask["primal"] - serial["primal"]) <= 2e-6
    arrays, header = load_model(tmp_path / "m.npz")
    assert header["order"] == 2 and header["factor_arities"] == [2, 3]
    assert arrays["weights"].size == dask["d"] == serial["d"]
    from crfsdca.cli.junction import second_order_problem
    from crfsdca.evaluation import evaluate_data
    from crfsdca.features.sources import load_inputs

    inputs = load_inputs(str(data), fmt=None, template="conll", test=str(data), data_dir=None,
                         max_sequences=None)  # fmt: skip
    problem = second_order_problem(inputs, {"bias": None, "regularization": None})
    w = arrays["weights"]
    assert problem.primal(w) == pytest.approx(dask["primal"], rel=1e-12)
    scores = evaluate_data(problem.test, problem.test_oracle.predict(w))
    assert dask["test_f1"] == pytest.approx(scores["f1"]) and dask["test_f1"] > 50


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--graph", "tree"], "--order 2 trains second-order chains of DATASET's sequences"),
        (["--checkpoint", "ck"], "--order 2 runs without checkpoints"),
        (["--workers", "2", "--solver", "lbfgs"], "--workers and --scheduler run --solver sdca"),
        (["--init", "gibbs"], "--order 2 takes --init smoothed (or uniform for oeg); got gibbs"),
        (["--sampling", "importance"], "--order 2 takes --sampling uniform, gap or max; got"),
        (["--fixed-step", "0.5"], "--order 2 runs SDCA with its line search; drop --fixed-step"),
    ],
)
def test_order2_usage_errors_before_reading_data(tmp_path, extra, message):
    missing = tmp_path / "missing.txt"  # read only after the options are checked
    result = CliRunner().invoke(main, ["train", str(missing), "--order", "2", *extra])
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert len([ln for ln in result.stderr.splitlines() if ln.startswith("Error")]) == 1


def test_order_out_of_range_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(main, ["train", str(tmp_path / "x.txt"), "--order", "3"])
    assert result.exit_code == 2 and "--order" in result.stderr


def expected_dual_gib(lengths, K, d, itemsize=8):
    """Σ_i [(T_i - 2) K^3 + (T_i - 3) K^2] table entries (one K^T table below T = 3), plus the
    per-sequence arrays and w, in GiB."""
    entries = sum((T - 2) * K**3 + (T - 3) * K**2 if T >= 3 else K**T for T in lengths)
    return (itemsize * entries + 8 * (3 * len(lengths) + d)) / 2**30


def refuse(monkeypatch, args, available):
    """Run train with ``available`` bytes of memory; fail if the dual is ever allocated."""
    from crfsdca.solvers import sdca as sdca_module
    from crfsdca.structures.junction import JunctionStructure

    def allocate(*_args, **_kwargs):
        raise AssertionError("the dual state was allocated before the memory check")

    monkeypatch.setattr(sdca_module, "_available_memory", lambda: available)
    monkeypatch.setattr(JunctionStructure, "smoothed_dual", allocate)
    return CliRunner().invoke(main, ["train", *map(str, args)])


def test_memory_guard_refuses_small_data_with_size_and_fixes(tmp_path, monkeypatch):
    data = period_file(tmp_path / "period.txt", copies=3)
    result = refuse(monkeypatch, [data, "--template", "conll", "--order", "2"], 1000)
    assert result.exit_code == 1, result.output
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1 and line.startswith("crfsdca: error: the SDCA dual state")
    assert "but only 0.00 GiB is available" in line
    assert "--dual-dtype float32" in line and "--max-sequences" in line
    assert "the distributed solver (--workers" in line  # second-order chains train on Dask too


@pytest.mark.slow
@pytest.mark.skipif(not CONLL2000.exists(), reason="needs CRFSDCA_DATA_DIR with conll2000")
def test_full_conll2000_order2_sdca_refuses_before_allocating(monkeypatch):
    """2.15e9 table entries: 16.06 GiB in float64, 8.04 GiB in float32; refused with 4 GiB."""
    import data_loaders

    corpus = data_loaders.load_dataset("conll2000", "train", data_dir=DATA_DIR)
    lengths = [len(labels) for labels in corpus.labels]
    K = len({y for labels in corpus.labels for y in labels})
    assert K == 22 and len(lengths) == 8936
    args = ["conll2000", "--data-dir", DATA_DIR, "--order", "2", "--solver", "sdca"]
    for dtype, itemsize in (("float64", 8), ("float32", 4)):
        result = refuse(monkeypatch, [*args, "--dual-dtype", dtype], 4 * 2**30)
        assert result.exit_code == 1, result.output
        line = result.stderr.strip()
        assert len(line.splitlines()) == 1
        gib = float(line.split(" needs ")[1].split(" GiB")[0])
        assert "only 4.00 GiB is available" in line and "--max-sequences" in line
        assert ("--dual-dtype float32" in line) == (dtype == "float64")  # not when already
        # w (d ~ 1.6e6 weights, 12 MiB) adds < 0.02 GiB; the message rounds to 0.01
        low = expected_dual_gib(lengths, K, 0, itemsize)
        assert low - 0.005 <= gib <= low + 0.02
    assert 16.0 < expected_dual_gib(lengths, K, 0) < 16.1


# -- evaluate and tag with second-order models ----------------------------------------------


def python_labels(model_path, data_path):
    """Labels the Python API predicts for a CoNLL file with a model file."""
    from crfsdca.estimators.model import SequenceCRF
    from crfsdca.features.sources import encoder_from_model, read_corpus

    model = SequenceCRF.load(str(model_path))
    assert (model.graph_, model.order_) == ("junction", 2)
    data = encoder_from_model(model.encoder).transform(read_corpus(str(data_path), "conll"))
    return [model.label_names_[k] for k in model.predict(data).tolist()], model, data


def test_evaluate_and_tag_read_order2_models(tmp_path):
    """evaluate gives the test scores of training (conlleval F1 included) and the Python API's;
    tag appends the labels the Python API predicts."""
    data = chunk_file(tmp_path / "train.txt", n=20)
    model = tmp_path / "m.npz"
    args = [data, "--template", "conll", "--test", data, "--order", "2", "--tol", "1e-6"]
    out = train_json(*args, "--model", model)
    result = CliRunner().invoke(main, ["evaluate", str(model), str(data), "--json"])
    assert result.exit_code == 0, result.output
    scores = json.loads(result.stdout)
    assert scores["token_accuracy"] == pytest.approx(out["test_token_accuracy"], abs=1e-12)
    assert scores["f1"] == pytest.approx(out["test_f1"], abs=1e-12) and scores["f1"] > 50
    labels, loaded, encoded = python_labels(model, data)
    assert scores["f1"] == pytest.approx(loaded.score(encoded)["f1"], abs=1e-12)
    result = CliRunner().invoke(main, ["evaluate", str(model), str(data)])
    assert result.exit_code == 0 and result.stdout.startswith("token accuracy")
    assert "FB1" in result.stdout or "F1" in result.stdout
    lines = data.read_text().splitlines()
    bare = tmp_path / "bare.txt"
    bare.write_text("".join((" ".join(ln.split()[:2]) + "\n") if ln else "\n" for ln in lines))
    result = CliRunner().invoke(main, ["tag", str(model), str(bare)])
    assert result.exit_code == 0, result.output
    tagged = [ln for ln in result.stdout.splitlines() if ln]
    assert [ln.split()[-1] for ln in tagged] == labels
    assert [ln.rsplit(" ", 1)[0] for ln in tagged] == [
        ln for ln in bare.read_text().split("\n") if ln
    ]


def test_evaluate_and_tag_refuse_custom_junction_models(tmp_path):
    """A junction model with its own cliques cannot be given its trees on the command line."""
    from crfsdca.estimators.model import SequenceCRF
    from crfsdca.features.attributes import make_encoder
    from crfsdca.features.sources import read_corpus
    from crfsdca.structures.junction import junctions_from_cliques

    data = chunk_file(tmp_path / "train.txt", n=6)
    encoder = make_encoder("conll")
    nodes = encoder.fit_transform(read_corpus(str(data), "conll"))
    lengths = nodes.lengths.tolist()
    junctions = junctions_from_cliques(
        nodes,
        cliques=[
            [tuple(range(T))] if T <= 2 else [(0, 1, 2)] + [(t, t + 1) for t in range(2, T - 1)]
            for T in lengths
        ],  # fmt: skip
        factors=[[((t, t + 1), 0) for t in range(T - 1)] for T in lengths],
        factor_arities=(2,),
    )
    model = SequenceCRF(solver="lbfgs", max_epochs=3).fit(junctions, encoder=encoder.to_dict())
    assert (model.graph_, model.order_) == ("junction", None)
    model.save(str(tmp_path / "custom.npz"))
    for command in ("evaluate", "tag"):
        result = CliRunner().invoke(main, [command, str(tmp_path / "custom.npz"), str(data)])
        assert result.exit_code == 1, result.output
        message = result.stderr.strip()
        assert len(message.splitlines()) == 1 and "Traceback" not in result.output
        assert "a custom junction-tree model; the command line cannot give its cliques" in message


def test_export_refuses_order2_models(tmp_path):
    data = chunk_file(tmp_path / "train.txt", n=6)
    train_json(data, "--template", "conll", "--order", "2", "--epochs", "2", "--model",
               tmp_path / "m.npz")  # fmt: skip
    result = CliRunner().invoke(main, ["export", str(tmp_path / "m.npz"), str(tmp_path / "m.crf")])
    assert result.exit_code == 1 and not (tmp_path / "m.crf").exists()
    assert result.stderr == (
        f"crfsdca: error: {tmp_path}/m.npz: CRFsuite's format holds linear-chain models; this one"
        " has junction trees (e.g. --order 2)\n"
    )
