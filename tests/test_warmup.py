"""Ahead-of-time compilation: crfsdca warmup and the compile-ahead process of a first fit
(numba's cache folder itself: tests/test_kernel_cache.py)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from crfsdca.cli.main import main
from crfsdca.estimators.model import SequenceCRF
from crfsdca.warmup import WARMUP_SENTENCES, warm_up

ROOT = Path(__file__).resolve().parents[1]


def _cold_env(cache: Path, **extra: str) -> dict[str, str]:
    """This environment with numba's cache in ``cache`` and the checkout importable."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), **extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def _corpus(tmp_path: Path) -> Path:
    corpus = tmp_path / "train.txt"
    corpus.write_text("\n\n".join("\n".join(" ".join(t) for t in s) for s in WARMUP_SENTENCES))
    return corpus


def _specialisations(env: dict[str, str], corpus: Path, *args: str) -> dict[str, int]:
    """Compilations per kernel of ``crfsdca train CORPUS ARGS`` (conll format and template)."""
    run = subprocess.run(
        [sys.executable, "-c", COUNT_SPECIALISATIONS, "train", str(corpus), "--format", "conll"]
        + ["--template", "conll", "-q", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stderr.split("SPECIALISATIONS", 1)[1])


def test_warm_up_runs_the_requested_solvers_in_order():
    calls = []
    seconds = warm_up(["lbfgs", "sdca", "lbfgs"], progress=lambda n, s: calls.append(n))
    assert list(seconds) == ["lbfgs", "sdca"] == calls
    assert all(s >= 0 for s in seconds.values())


def test_warm_up_unknown_solver():
    with pytest.raises(ValueError, match="unknown solver 'newton'; known: .*sdca"):
        warm_up(["newton"])


def test_warmup_command_rejects_unknown_solver():
    result = CliRunner().invoke(main, ["warmup", "--solver", "newton"])
    assert result.exit_code == 2
    assert "sdca" in result.output


COUNT_COMPILES = """
import sys
from numba.core import event
compiled = []
class Count(event.Listener):
    def on_start(self, ev):
        compiled.append(ev.data["dispatcher"].py_func.__qualname__)
    def on_end(self, ev):
        pass
event.register("numba:compile", Count())
import crfsdca.kernels
from crfsdca.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit as stop:
    print("COMPILED", len(compiled), sorted(set(compiled))[:5], file=sys.stderr)
    raise
"""


@pytest.mark.slow
def test_train_after_warmup_compiles_nothing(tmp_path):
    """With a fresh cache, `crfsdca warmup --solver sdca` leaves nothing for train to compile."""
    corpus = tmp_path / "train.txt"
    sentences = [s + (("again", "RB", "B-ADVP"),) for s in WARMUP_SENTENCES] * 4
    corpus.write_text("\n\n".join("\n".join(" ".join(t) for t in s) for s in sentences) + "\n")
    env = _cold_env(tmp_path / "cache")
    warm = subprocess.run(
        [sys.executable, "-m", "crfsdca.cli", "warmup", "--solver", "sdca"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert warm.returncode == 0, warm.stderr
    assert "compiled kernels for sdca" in warm.stdout
    train = subprocess.run(
        [sys.executable, "-c", COUNT_COMPILES, "train", str(corpus), "--format", "conll"]
        + ["--template", "conll", "--test", str(corpus), "--epochs", "3", "-q"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert train.returncode == 0, train.stderr
    assert "COMPILED 0 " in train.stderr, train.stderr
    threaded = subprocess.run(  # SDCA on two threads (--threads 2 asks for them on any data)
        [sys.executable, "-c", COUNT_COMPILES, "train", str(corpus), "--format", "conll"]
        + ["--template", "conll", "--epochs", "3", "--threads", "2", "-q", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert threaded.returncode == 0, threaded.stderr
    assert "COMPILED 0 " in threaded.stderr, threaded.stderr


COUNT_SPECIALISATIONS = """
import collections, json, sys
from numba.core import event
seen = collections.Counter()
class Count(event.Listener):
    def on_start(self, ev):
        f = ev.data["dispatcher"].py_func
        name = f.__qualname__.removesuffix("__callee")  # crfsdca.kernels.jit: called by a kernel
        seen[f"{f.__module__.rsplit('.', 1)[-1]}.{name}"] += 1
    def on_end(self, ev):
        pass
event.register("numba:compile", Count())
import crfsdca.kernels
from crfsdca.cli.main import main
try:
    main(sys.argv[1:])
finally:
    print("SPECIALISATIONS", json.dumps(seen), file=sys.stderr)
"""


@pytest.fixture(scope="module")
def first_trains(tmp_path_factory):
    """The compilations per kernel and the weights of a first train (empty cache) with the
    compile-ahead process ("1") and without it ("0"): two epochs on the warm-up sentences,
    scoring them as a test set, with an exact gap pass after the first epoch."""
    tmp_path = tmp_path_factory.mktemp("first_trains")
    corpus = _corpus(tmp_path)
    counts, weights = {}, {}
    for ahead in ("1", "0"):
        env = _cold_env(tmp_path / f"cache{ahead}", CRFSDCA_COMPILE_AHEAD=ahead)
        model = tmp_path / f"model{ahead}.npz"
        counts[ahead] = _specialisations(
            env, corpus, "--test", str(corpus), "--epochs", "2", "--refresh-every", "1",
            "--model", str(model),
        )  # fmt: skip
        weights[ahead] = SequenceCRF.load(model).weights_
    return counts, weights


@pytest.mark.slow
def test_the_sdca_loop_compiles_one_line_search(first_trains):
    """On an empty cache an SDCA run compiles each line-search kernel and the block gap once (in
    place or not is decided at run time; the block gap fills the float32 copies also where they
    go unused), and the f' loop twice (with and without f''); its exact gap pass runs the
    loop's kernel, which is compiled once."""
    counts = first_trains[0]["0"]  # the run that compiles everything itself
    line_search = ["line_search", "rtsafe", "line_derivatives", "line_slope", "predict_step"]
    once = [f"line_search.{name}" for name in line_search]
    once += ["sdca._update_range", "sdca.block_gap_given_nu", "sdca._mu_segment"]
    once += ["sdca_epoch._search", "sdca_epoch._run_steps"]
    assert {name: counts.get(name) for name in once} == dict.fromkeys(once, 1)
    assert counts["line_search._line_segment"] == 2
    assert counts["trees.update"] == 1


@pytest.mark.slow
def test_a_first_train_compiles_its_evaluation_kernels_in_a_second_process(first_trains):
    """On an empty cache the exact primal and the test set's Viterbi come from the
    compile-ahead process (crfsdca.estimators.compile_ahead): the train compiles its solver
    loop (which runs the exact gap pass too) but neither, and writes the model of a train that
    compiles all itself."""
    counts, weights = first_trains
    evaluation = ["chain_batch._chunk_loss", "chain_batch._chunk_predict"]
    assert all(counts["0"].get(name) == 1 for name in evaluation), counts["0"]
    assert not any(counts["1"].get(name) for name in evaluation), counts["1"]
    assert counts["1"]["sdca_epoch._run_steps"] == 1
    np.testing.assert_array_equal(weights["1"], weights["0"])


CACHED_EVALUATION = """
from crfsdca.estimators.compile_ahead import _cached
from crfsdca.kernels.structures import chain_batch
kernels = (chain_batch._chunk_loss, chain_batch._chunk_predict)
print(" ".join(str(_cached(k)) for k in kernels))
"""


@pytest.mark.slow
def test_the_second_process_is_ready_once_the_run_s_evaluation_kernels_are_cached(tmp_path):
    """The compile-ahead process writes its ready line (where the fit goes on) once the exact
    primal is in the cache, and the test set's Viterbi too when the run scores one; without a
    test set it compiles the Viterbi afterwards, for the fitted model's first predict."""
    from crfsdca.estimators.compile_ahead import READY

    for mode, at_ready in (("no-test", "True"), ("test", "True True")):
        env = _cold_env(tmp_path / mode, CRFSDCA_COMPILE_AHEAD="0")
        ahead = subprocess.Popen(
            [sys.executable, "-m", "crfsdca.estimators.compile_worker", "float64", mode],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            assert ahead.stdout.readline() == READY
            assert _cached_evaluation(env)[: len(at_ready.split())] == at_ready.split()
        finally:
            assert ahead.wait(timeout=1800) == 0
            ahead.stdout.close()
        assert _cached_evaluation(env) == ["True"] * 2


def _cached_evaluation(env: dict[str, str]) -> list[str]:
    """Whether the cache holds the exact primal and the Viterbi."""
    check = subprocess.run(
        [sys.executable, "-c", CACHED_EVALUATION], env=env, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr
    return check.stdout.split()


def test_the_ready_line_is_found_after_other_output():
    """Other lines before the ready line (anything the process may print) are skipped, and
    nothing after it is read."""
    from crfsdca.estimators.compile_ahead import read_until_ready

    stream = io.BytesIO(b"other output\nready\nlater\n")
    assert read_until_ready(stream) and stream.read() == b"later\n"
    assert not read_until_ready(io.BytesIO(b"other output\n"))


def test_waiting_for_the_second_process_ends_at_its_ready_line_or_its_end():
    """CompileAhead.wait returns at the ready line while the process goes on (and is reaped
    once it ends), or at the end of a process that never wrote it."""
    from crfsdca.estimators.compile_ahead import CompileAhead

    code = "import sys; print('ready', flush=True); sys.stdin.read()"
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    CompileAhead(child).wait()
    assert child.poll() is None  # still reading its stdin
    child.stdin.close()
    assert child.wait(timeout=60) == 0
    failed = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"], stdout=subprocess.PIPE)
    CompileAhead(failed).wait()
    assert failed.wait(timeout=60) == 3


def test_compile_ahead_is_told_whether_the_fit_scores_a_test_set(monkeypatch):
    """start passes "test" or "no-test" to the second process."""
    from crfsdca.estimators import compile_ahead

    commands = []

    def record(command, **kwargs):
        commands.append(command)
        return object()

    monkeypatch.setenv(compile_ahead.ENV, "1")
    monkeypatch.setattr(compile_ahead, "_cached", lambda dispatcher: False)
    monkeypatch.setattr(compile_ahead.subprocess, "Popen", record)
    compile_ahead.start("sdca", "chain", 1, "float64", test=False)
    compile_ahead.start("sdca", "chain", 1, "float32")
    assert [c[-2:] for c in commands] == [["float64", "no-test"], ["float32", "test"]]


@pytest.mark.slow
def test_the_loop_parts_compiled_ahead_are_the_ones_the_loop_loads(tmp_path):
    """compile_worker.compile_loop_parts compiles the line search, the block update, the block
    gap and the primal direction for the argument types the SDCA loop calls them with: a train
    after it, on the same cache, loads them (compiles none) and still compiles the rest of its
    loop."""
    env = _cold_env(tmp_path / "cache", CRFSDCA_COMPILE_AHEAD="0")
    parts = "from crfsdca.estimators import compile_worker as c; "
    parts += "c.compile_loop_parts('float64')"
    ahead = subprocess.run(
        [sys.executable, "-c", parts], env=env, capture_output=True, text=True, timeout=1800
    )
    assert ahead.returncode == 0, ahead.stderr
    counts = _specialisations(env, _corpus(tmp_path), "--epochs", "2")
    loaded = ["sdca_epoch._search", "line_search.line_search", "line_search.rtsafe"]
    loaded += ["line_search._line_segment", "sdca._update_range", "sdca._update_computing"]
    loaded += ["sdca.block_gap_given_nu", "direction.primal_direction"]
    loaded += ["direction.add_direction", "direction._edge_difference_sum"]
    assert not any(counts.get(name) for name in loaded), counts
    # the structure primitives are never read from the cache: compiled here, on their callees
    assert counts["chain_blocks._block_direction"] == 1, counts
    assert counts["sdca_epoch._run_steps"] == 1 and counts["chain_blocks._block_oracle"] == 1


def test_compile_ahead_starts_no_process_where_it_has_nothing_to_do(monkeypatch):
    """Only a chain SDCA fit of the log-loss has a second process compile its evaluation
    kernels (the hinge loss has other ones), and never with CRFSDCA_COMPILE_AHEAD=0 (on a cold
    cache, where a chain SDCA fit starts one)."""
    from crfsdca.estimators import compile_ahead

    commands = []
    monkeypatch.setenv(compile_ahead.ENV, "1")  # the suite's own setting is 0 (conftest.py)
    monkeypatch.setattr(compile_ahead, "_cached", lambda dispatcher: False)
    monkeypatch.setattr(compile_ahead.subprocess, "Popen", lambda c, **kw: commands.append(c))
    assert compile_ahead.start("lbfgs", "chain", 1) is None
    assert compile_ahead.start("sdca", "tree", 1) is None
    assert compile_ahead.start("sdca", "junction", 2) is None
    assert compile_ahead.start("sdca", "chain", 1, loss="hinge") is None
    assert commands == []
    monkeypatch.setenv(compile_ahead.ENV, "0")
    assert compile_ahead.start("sdca", "chain", 1) is None
    assert commands == []
    monkeypatch.setenv(compile_ahead.ENV, "1")
    assert compile_ahead.start("sdca", "chain", 1) is not None and len(commands) == 1


def test_compile_ahead_that_cannot_start_a_process_leaves_the_fit_to_compile(monkeypatch):
    """No second process to be had (OSError from Popen): None, and the fit compiles alone."""
    from crfsdca.estimators import compile_ahead

    def refuse(*args, **kwargs):
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setenv(compile_ahead.ENV, "1")
    monkeypatch.setattr(compile_ahead, "_cached", lambda dispatcher: False)
    monkeypatch.setattr(compile_ahead.subprocess, "Popen", refuse)
    assert compile_ahead.start("sdca", "chain", 1) is None


@pytest.mark.slow
def test_a_loop_compiled_after_the_second_process_is_the_loop_compiled_alone(tmp_path):
    """The compile-ahead process may finish before a run's loop reaches the code they share
    (a race on a cold cache): the run's weights are still bit for bit those of a run that
    compiled everything itself. It failed (primal 1.73826102 against 1.73826103 after 4
    epochs on 1,000 CoNLL-2000 sentences) while structure primitives were read from numba's
    cache (``crfsdca.kernels.primitives.implements``)."""
    data = os.environ.get("CRFSDCA_DATA_DIR")
    if not data:
        pytest.skip("CRFSDCA_DATA_DIR is not set")
    weights = {}
    for first in ("compile-ahead", "nothing"):
        env = _cold_env(tmp_path / first, CRFSDCA_COMPILE_AHEAD="0")
        if first == "compile-ahead":  # run to its end before the training starts
            ahead = subprocess.run(
                [sys.executable, "-m", "crfsdca.estimators.compile_worker", "float64"],
                env=env, capture_output=True, text=True, timeout=1800,
            )  # fmt: skip
            assert ahead.returncode == 0, ahead.stderr
        model = tmp_path / f"{first}.npz"
        train = subprocess.run(
            [sys.executable, "-m", "crfsdca.cli", "train", "conll2000", "--data-dir", data]
            + ["--max-sequences", "1000", "--epochs", "4", "-q", "--model", str(model)],
            env=env, capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        assert train.returncode == 0, train.stderr
        weights[first] = SequenceCRF.load(model).weights_
    np.testing.assert_array_equal(weights["compile-ahead"], weights["nothing"])


class _StartRecorder:
    """compile_ahead.start replaced: records when it is called and starts a process that only
    writes its ready line."""

    def __init__(self, events: list[str]) -> None:
        self.events, self.started = events, []

    def __call__(self, *args, **kwargs):
        from crfsdca.estimators.compile_ahead import CompileAhead

        self.events.append("start")
        code = "import os\ntry:\n    os.write(1, b'ready\\n')\nexcept BrokenPipeError:\n    pass"
        child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
        self.started.append(CompileAhead(child))
        return self.started[-1]


@pytest.mark.filterwarnings("ignore::crfsdca.errors.ConvergenceWarning")
def test_a_fit_starts_compiling_before_it_encodes_and_lets_the_process_go(monkeypatch):
    """CRF.fit starts the compile-ahead process before it encodes the feature dicts (which run
    while the process starts), waits for it in the fit, and lets it go (stdout closed, reaped
    by a thread) whether the fit ends or fails while encoding."""
    from crfsdca import CRF
    from crfsdca.estimators import compile_ahead
    from crfsdca.features.featuredicts import FeatureDictEncoder

    events: list[str] = []
    start = _StartRecorder(events)
    monkeypatch.setattr(compile_ahead, "start", start)
    encode = FeatureDictEncoder.fit_transform

    def recorded(self, *args, **kwargs):
        events.append("encode")
        return encode(self, *args, **kwargs)

    monkeypatch.setattr(FeatureDictEncoder, "fit_transform", recorded)
    X, y = [[{"w": "a"}, {"w": "b"}], [{"w": "b"}]], [["A", "B"], ["B"]]
    CRF(max_iterations=2).fit(X, y)
    monkeypatch.setattr(FeatureDictEncoder, "fit_transform", _refuse)
    with pytest.raises(RuntimeError, match="refused"):
        CRF().fit(X, y)
    assert events == ["start", "encode", "start"]
    for ahead in start.started:
        assert ahead.process.stdout.closed
        assert ahead.process.wait(timeout=60) == 0


def _refuse(*args, **kwargs):
    raise RuntimeError("refused")


def test_train_starts_compiling_before_it_reads_its_data(monkeypatch, tmp_path):
    """crfsdca train starts the compile-ahead process before it reads and encodes the data, and
    lets it go when reading fails."""
    from crfsdca.cli import inputs
    from crfsdca.estimators import compile_ahead

    events: list[str] = []
    start = _StartRecorder(events)
    monkeypatch.setattr(compile_ahead, "start", start)

    def load(run, quiet):
        events.append("read")
        raise OSError(2, "No such file or directory", run["dataset"])

    monkeypatch.setattr(inputs, "load_run_inputs", load)
    result = CliRunner().invoke(main, ["train", str(_corpus(tmp_path)), "--format", "conll"])
    assert result.exit_code == 1, result.output
    assert events == ["start", "read"]
    assert start.started[0].process.stdout.closed
    assert start.started[0].process.wait(timeout=60) == 0
