"""Checkpoints: a resumed run equals an uninterrupted one, even after SIGKILL mid-write."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from _signals import sigint
from click.testing import CliRunner

from crfsdca.cli.main import main
from crfsdca.io.modelfile import load_model
from crfsdca.solvers.checkpoint import load_checkpoint
from crfsdca.solvers.trace import read_trace

DATA_DIR = os.environ.get("CRFSDCA_DATA_DIR")
needs_data = pytest.mark.skipif(
    not DATA_DIR or not Path(DATA_DIR, "conll2000", "train.txt.gz").exists(),
    reason="needs CRFSDCA_DATA_DIR with conll2000",
)


def synthetic_conll(path, n=60, seed=0):
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(40)]
    tags = ["DT", "NN", "VB", "JJ"]
    chunks = ["B-NP", "I-NP", "B-VP", "O"]
    lines = []
    for _ in range(n):
        for _ in range(rng.integers(1, 9)):
            k = rng.integers(0, 4)
            lines.append(f"{words[rng.integers(0, 40)]} {tags[k]} {chunks[k]}")
        lines.append("")
    path.write_text("\n".join(lines) + "\n")
    return path


def invoke(*args):
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def records_without_time(trace):
    """Trace records minus the timings (``seconds`` and every ``*seconds*`` counter)."""
    out = []
    for r in trace.records:
        obj = {k: v for k, v in r.to_json().items() if k != "seconds"}
        obj["extra"] = {k: v for k, v in obj.get("extra", {}).items() if "seconds" not in k}
        out.append(obj)
    return out


@pytest.mark.parametrize("sampling", ["gap", "uniform"])
def test_resumed_run_equals_uninterrupted_run(tmp_path, sampling, monkeypatch):
    data = synthetic_conll(tmp_path / "train.txt")
    common = [
        data,
        "--format",
        "conll",
        "--template",
        "conll",
        "--seed",
        "5",
        "-q",
        "--sampling",
        sampling,
        "--tol",
        "0",
    ]
    invoke(
        "train",
        *common,
        "--epochs",
        "6",
        "--model",
        tmp_path / "a.npz",
        "--trace",
        tmp_path / "a.jsonl",
    )
    invoke("train", *common, "--epochs", "3", "--checkpoint", tmp_path / "ck")
    header = load_checkpoint(tmp_path / "ck")[1]
    assert header["state"]["oracle_calls"] == 3 * 60

    def no_fresh_start(*args, **kwargs):
        raise AssertionError("a resumed run must continue the saved state, not start afresh")

    from crfsdca.solvers import sdca

    monkeypatch.setattr(sdca.SDCA, "initial_state", no_fresh_start)
    monkeypatch.setattr(sdca, "initial_dual", no_fresh_start)
    invoke(
        "train",
        "--resume",
        tmp_path / "ck",
        "--epochs",
        "6",
        "-q",
        "--model",
        tmp_path / "b.npz",
        "--trace",
        tmp_path / "b.jsonl",
    )
    a, b = load_model(tmp_path / "a.npz")[0], load_model(tmp_path / "b.npz")[0]
    np.testing.assert_array_equal(a["weights"], b["weights"])
    # the resumed trace starts with the checkpoint's records, timings included: not re-run
    resumed = [r.to_json() for r in read_trace(tmp_path / "b.jsonl").records]
    saved = header["records"]
    assert len(saved) == 4 and resumed[: len(saved)] == saved
    assert resumed[len(saved)]["seconds"] > saved[-1]["seconds"]  # the clock continued
    assert records_without_time(read_trace(tmp_path / "a.jsonl")) == records_without_time(
        read_trace(tmp_path / "b.jsonl")
    )


def test_resume_refuses_changed_options_and_missing_checkpoint(tmp_path):
    result = CliRunner().invoke(main, ["train", "--resume", str(tmp_path / "none")])
    assert result.exit_code == 1 and "no checkpoint" in result.stderr
    data = synthetic_conll(tmp_path / "train.txt", n=10)
    ck = tmp_path / "ck"
    invoke("train", data, "--template", "conll", "--format", "conll", "--epochs", "1", "-q",
           "--checkpoint", ck)  # fmt: skip
    result = CliRunner().invoke(main, ["train", "--resume", str(ck), "--sampling", "max"])
    assert result.exit_code == 2
    assert f"--sampling: the run saved in {ck} has gap, this command max" in result.stderr
    assert "only --epochs" in result.stderr


@pytest.mark.slow
@needs_data
def test_sigkill_while_checkpointing_then_resume(tmp_path):
    """Kill the trainer while a checkpoint is being written; resume to the same final weights."""
    env = {**os.environ, "CRFSDCA_DATA_DIR": DATA_DIR}
    base = [
        sys.executable,
        "-m",
        "crfsdca.cli",
        "train",
        "conll2000",
        "--max-sequences",
        "400",
        "--seed",
        "1",
        "-q",
        "--json",
        "--tol",
        "0",
        "--eval-every",
        "1",
    ]
    ck = tmp_path / "ck"
    proc = subprocess.Popen(
        [*base, "--epochs", "6", "--checkpoint", str(ck), "--checkpoint-every", "1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    killed_mid_write = False
    deadline = time.monotonic() + 600
    while proc.poll() is None and time.monotonic() < deadline:
        names = os.listdir(ck) if ck.exists() else []
        if any(name != "checkpoint.npz" for name in names) and "checkpoint.npz" in names:
            proc.send_signal(signal.SIGKILL)  # a temporary file exists: a write is under way
            killed_mid_write = True
            break
        time.sleep(0.001)
    proc.wait()
    assert killed_mid_write, proc.stderr.read().decode()[-2000:]
    arrays, header = load_checkpoint(ck)  # the previous checkpoint is intact
    saved_calls = header["state"]["oracle_calls"]
    assert 1 <= saved_calls / 400 < 6
    trace = tmp_path / "resumed.jsonl"
    resumed = subprocess.run(
        [*base[:4], "--resume", str(ck), "--epochs", "6", "-q", "--json",
         "--model", str(tmp_path / "resumed.npz"), "--trace", str(trace)],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert json.loads(resumed.stdout.splitlines()[-1])["epochs"] == 6
    # it went on from the checkpoint: the saved records, then one per epoch after them
    records = [r.to_json() for r in read_trace(trace).records]
    saved = header["records"]
    assert records[: len(saved)] == saved and saved[-1]["oracle_calls"] == saved_calls
    assert [r["oracle_calls"] for r in records[len(saved) :]] == list(
        range(saved_calls + 400, 6 * 400 + 1, 400)
    )
    straight = subprocess.run(
        [*base, "--epochs", "6", "--model", str(tmp_path / "straight.npz")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(straight.stdout.splitlines()[-1])["epochs"] == 6
    np.testing.assert_array_equal(
        load_model(tmp_path / "resumed.npz")[0]["weights"],
        load_model(tmp_path / "straight.npz")[0]["weights"],
    )


def test_memory_guard_refuses_with_size_and_options(monkeypatch):
    from _synthetic import random_problem

    from crfsdca.solvers import sdca as sdca_module

    problem = random_problem(seed=0, n=20, max_T=6)
    monkeypatch.setattr(sdca_module, "_available_memory", lambda: 1000)
    with pytest.raises(MemoryError, match=r"needs .* GiB .*--dual-dtype float32.*distributed"):
        sdca_module.SDCA(sdca_module.SDCAConfig()).initial_state(problem)


def test_ctrl_c_writes_a_final_checkpoint_that_resumes(tmp_path):
    data = synthetic_conll(tmp_path / "train.txt", n=400)
    ck = tmp_path / "ck"
    cmd = [
        sys.executable,
        "-m",
        "crfsdca.cli",
        "train",
        str(data),
        "--format",
        "conll",
        "--template",
        "conll",
        "--epochs",
        "100000",
        "--fixed-step",
        "0.001",  # converges too slowly to stop before the interrupt
        "--tol",
        "0",
        "-q",
        "--checkpoint",
        str(ck),
        "--checkpoint-every",
        "2",
    ]
    with sigint():  # as from an interactive shell, even when pytest runs in the background
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while not (ck / "checkpoint.npz").exists():  # training runs once the first checkpoint is in
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.05)
    first = load_checkpoint(ck)[1]["state"]["oracle_calls"]
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    header = load_checkpoint(ck)[1]
    done = header["state"]["oracle_calls"]
    assert done >= first and done % 400 == 0  # the final checkpoint holds complete epochs only
    assert header["records"][-1]["oracle_calls"] == done  # its trace ends at the saved state
    assert header["state"]["counters"]["line_searches"] == 0  # --fixed-step: no line search
    trace = tmp_path / "resumed.jsonl"
    epochs = str(done // 400 + 1)
    resumed = invoke("train", "--resume", ck, "--epochs", epochs, "-q", "--json", "--trace", trace)
    out = json.loads(resumed.stdout.splitlines()[-1])
    assert out["oracle_calls"] == done + 400 and out["stop_reason"] == "max_epochs"
    records = [r.to_json() for r in read_trace(trace).records]  # went on from the saved state
    assert records[: len(header["records"])] == header["records"]
    assert len(records) == len(header["records"]) + 1


@pytest.mark.parametrize(  # the baselines' starts compile OEG's kernels: slow set
    "solver", ["sdca", *(pytest.param(s, marks=pytest.mark.slow) for s in ("sag-nus", "oeg"))]
)
def test_solver_states_round_trip_through_checkpoint_arrays(solver):
    from _synthetic import random_problem

    from crfsdca.solvers import SOLVERS

    cls = SOLVERS[solver]
    state = cls(cls.config_class()).initial_state(random_problem(seed=1, n=8))
    arrays, header = state.to_checkpoint()
    again_arrays, again_header = type(state).from_checkpoint(arrays, header).to_checkpoint()
    assert again_header == header
    assert set(again_arrays) == set(arrays)
    for name, array in arrays.items():
        np.testing.assert_array_equal(again_arrays[name], array)


def test_a_run_that_reaches_tol_writes_no_final_checkpoint():
    """Stopped by tol: its model is the result, no final checkpoint (the same run stopped by
    max_epochs first writes one: the test below)."""
    from _synthetic import random_sequences

    from crfsdca.estimators.model import SequenceCRF

    calls = []
    model = SequenceCRF(solver="sdca", seed=0, tol=1e-2, max_epochs=50)
    model.fit(
        random_sequences(2, n=12, max_T=5),
        checkpointer=lambda state, trace: calls.append(state.oracle_calls),
        checkpoint_every=None,
        checkpoint_seconds=1e9,
    )
    assert model.result_.stop_reason == "tol" and model.result_.trace.records[-1].gap <= 1e-2
    assert calls == []


@pytest.mark.parametrize(("seconds", "expected"), [(0.0, "every"), (1e9, "end")])
def test_checkpoints_follow_the_wall_clock_cadence(seconds, expected):
    """checkpoint_seconds = 0: one at every evaluation; a cadence longer than the run: only
    the final one."""
    from _synthetic import random_sequences

    from crfsdca.estimators.model import SequenceCRF

    calls = []
    model = SequenceCRF(solver="sdca", seed=0, tol=0.0, max_epochs=4)
    model.fit(
        random_sequences(2, n=12, max_T=5),
        checkpointer=lambda state, trace: calls.append(state.oracle_calls),
        checkpoint_every=None,
        checkpoint_seconds=seconds,
    )
    assert calls[-1] == 4 * 12  # the end state
    assert len(calls) == (4 if expected == "every" else 1)


def test_background_writer_saves_the_state_as_it_was_when_called(tmp_path):
    from _synthetic import random_problem

    from crfsdca.solvers.checkpoint import CheckpointWriter
    from crfsdca.solvers.monitor import Monitor
    from crfsdca.solvers.sdca import SDCA, SDCAConfig, SDCAState

    problem = random_problem(seed=1, n=8)
    config = SDCAConfig(max_epochs=1, tol=0.0)
    state = SDCA(config).solve(problem, Monitor(problem, "sdca", config)).state
    expected = {k: v.copy() for k, v in state.to_checkpoint()[0].items()}
    writer = CheckpointWriter(tmp_path / "ck", {"solver": "sdca"})
    writer(state, Monitor(problem, "sdca", config).trace)
    for array in state.to_checkpoint()[0].values():  # the solver goes on: live arrays change
        array[...] = 0
    writer.wait()
    arrays, header = load_checkpoint(tmp_path / "ck")
    assert header["state"]["oracle_calls"] == state.oracle_calls
    restored = SDCAState.from_checkpoint(arrays, header["state"]).to_checkpoint()[0]
    assert restored.keys() == expected.keys()
    for key, value in expected.items():
        np.testing.assert_array_equal(restored[key], value)


@pytest.mark.slow  # three trainer processes
@pytest.mark.timeout(600)
def test_sigkill_after_a_wall_time_checkpoint_then_resume_certifies_the_same_gap(tmp_path):
    """kill -9 a serial run once its first checkpoint by wall time (``--checkpoint-seconds``)
    is on disk; ``--resume`` goes on from it (its trace starts with the saved records) and
    stops where the uninterrupted run stops: same certified gap, same weights."""
    data = synthetic_conll(tmp_path / "train.txt", n=1500)
    base = [sys.executable, "-m", "crfsdca.cli", "train"]
    common = [str(data), "--format", "conll", "--template", "conll", "--tol", "1e-8", "-q",
              "--json", "--epochs", "400"]  # fmt: skip
    ck = tmp_path / "ck"
    proc = subprocess.Popen(
        [*base, *common, "--checkpoint", str(ck), "--checkpoint-seconds", "0.01"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 300
    while not (ck / "checkpoint.npz").exists():  # the event: the first checkpoint is committed
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.001)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL  # killed mid-run, not finished
    header = load_checkpoint(ck)[1]
    saved = header["state"]["oracle_calls"]
    assert saved > 0
    trace = tmp_path / "resumed.jsonl"
    resumed = subprocess.run(
        [*base, "--resume", str(ck), "-q", "--json", "--trace", str(trace),
         "--model", str(tmp_path / "resumed.npz")],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    straight = subprocess.run(
        [*base, *common, "--model", str(tmp_path / "straight.npz")],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    got, want = (json.loads(r.stdout.splitlines()[-1]) for r in (resumed, straight))
    assert got["stop_reason"] == want["stop_reason"] == "tol"
    assert got["gap"] == want["gap"] <= 1e-8 and got["oracle_calls"] == want["oracle_calls"]
    records = [r.to_json() for r in read_trace(trace).records]
    assert records[: len(header["records"])] == header["records"]  # went on from the checkpoint
    assert records[len(header["records"]) - 1]["oracle_calls"] == saved
    assert records[len(header["records"])]["oracle_calls"] > saved  # after it, not from 0
    np.testing.assert_array_equal(
        load_model(tmp_path / "resumed.npz")[0]["weights"],
        load_model(tmp_path / "straight.npz")[0]["weights"],
    )
