"""The reproduction's cache is keyed by the code: a trace made by other code is never reused;
the archive of traces rebuilds a report without a run; no corpus needed here."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from crfsdca.cli.main import main
from crfsdca.reproduce import experiments, measurements, problems, provenance, runner
from crfsdca.reproduce.archive import read_archive, write_archive
from crfsdca.reproduce.experiments import Budget, Experiment
from crfsdca.solvers.trace import Trace, read_trace


@pytest.fixture
def fake_measure(monkeypatch):
    """Measurements that count their runs and need no corpus."""
    calls = []

    def measurement_trace(kind, problem, options):
        calls.append(kind)
        return Trace.create(
            solver="measure", config={}, regularization=1.0, dataset="ocr", n_sequences=1,
            seed=None, measurement={"run": len(calls)},
        )  # fmt: skip

    monkeypatch.setattr(measurements, "measurement_trace", measurement_trace)
    monkeypatch.setattr(problems, "load_problem", lambda *args: None)
    return calls


def other_code(monkeypatch, code: str) -> None:
    """Make today's code digest ``code`` (as an edit of a kernel would)."""
    key = {"code": code, "environment": provenance.environment()}
    monkeypatch.setattr(experiments, "cache_key", lambda: key)


def test_a_cached_trace_of_other_code_is_run_again(tmp_path, monkeypatch, fake_measure):
    exp = Experiment.make("ocr", "measure", Budget(5, 0.0), kind="data")
    assert runner.run_all([exp], tmp_path) == {} and fake_measure == ["data"]
    first = runner.trace_path(tmp_path, exp)
    header = read_trace(first).header
    assert header["experiment"]["code"] == provenance.code_digest()
    assert header["provenance"]["commit"] == provenance.git_commit()
    runner.run_all([exp], tmp_path)
    assert len(fake_measure) == 1  # same code: cached

    other_code(monkeypatch, "0123456789abcdef")
    assert runner.trace_path(tmp_path, exp) != first  # the key names the code
    runner.run_all([exp], tmp_path)
    assert len(fake_measure) == 2  # other code: run again, not reused
    assert read_trace(runner.trace_path(tmp_path, exp)).header["experiment"]["code"] == (
        "0123456789abcdef"
    )

    other_code(monkeypatch, "fedcba9876543210")  # a trace of other code under today's name
    shutil.copy(first, runner.trace_path(tmp_path, exp))
    assert not runner.is_cached(tmp_path, exp)
    runner.run_all([exp], tmp_path)
    assert len(fake_measure) == 3
    assert runner.is_cached(tmp_path, exp)


def test_the_code_digest_covers_the_code_that_makes_traces(tmp_path):
    """A change to a kernel, a solver or a corpus reader changes the digest; a change to the
    report's judging or drawing, or to the command line, does not."""
    pkg, loaders = tmp_path / "crfsdca", tmp_path / "data_loaders"
    files = {
        pkg / "kernels" / "primitives.py": True,
        pkg / "kernels" / "numerics" / "fastmath.py": True,
        pkg / "kernels" / "structures" / "chain.py": True,
        pkg / "kernels" / "solvers" / "sdca_epoch.py": True,
        pkg / "solvers" / "sdca.py": True,
        pkg / "reproduce" / "runner.py": True,
        loaders / "conll.py": True,
        pkg / "reproduce" / "claims_text.py": False,
        pkg / "reproduce" / "report.py": False,
        pkg / "cli" / "train.py": False,
    }
    for path in files:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")
    roots = (pkg, loaders)
    before = provenance.code_digest(roots)
    for path, covered in files.items():
        path.write_text("x = 2\n")
        assert (provenance.code_digest(roots) != before) == covered, path
        path.write_text("x = 1\n")
    assert provenance.code_digest(roots) == before
    assert provenance.git_commit(roots) == "unknown"  # not a git checkout


def test_archives_are_deterministic_and_checked(tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    for k in range(3):
        (traces / f"{k:016x}.jsonl").write_text(f'{{"type": "header", "k": {k}}}\n')
    paths = sorted(traces.glob("*.jsonl"))
    manifest = {"quick": True, "budgets": {"ocr": Budget(60, 3.0).__dict__}, "runtime": []}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one = write_archive(tmp_path / "a", paths, manifest)
    two = write_archive(tmp_path / "b", paths, manifest)
    assert one.read_bytes() == two.read_bytes()  # same traces, same bytes
    back = read_archive(two, tmp_path / "out")
    assert back == manifest
    for path in paths:
        assert (tmp_path / "out" / "archive" / "traces" / path.name).read_bytes() == (
            path.read_bytes()
        )
    bad = tmp_path / "bad.tar.xz"
    bad.write_bytes(b"not an archive")
    with pytest.raises(ValueError, match="bad.tar.xz: not a reproduction archive"):
        read_archive(bad, tmp_path / "out2")


def test_from_archive_refuses_quick_and_a_missing_file(tmp_path):
    run = CliRunner().invoke
    result = run(
        main, ["reproduce", "--from-archive", "x.tar.xz", "--quick", "--out", str(tmp_path)]
    )
    assert result.exit_code == 2 and "--from-archive takes the budgets" in result.stderr
    missing = tmp_path / "none.tar.xz"
    result = run(main, ["reproduce", "--from-archive", str(missing), "--out", str(tmp_path / "o")])
    assert result.exit_code == 1
    assert len(result.stderr.splitlines()) == 1 and "none.tar.xz" in result.stderr


class _Clocks:
    """A wall clock and a CPU clock moved by hand (the monitor reads both)."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0

    def perf_counter(self) -> float:
        return self.wall

    def process_time(self) -> float:
        return self.cpu


def test_cpu_time_of_a_stopped_process_excludes_the_stop(monkeypatch):
    """A process stopped for minutes (SIGSTOP on a shared machine) loses wall time, not CPU
    time: the records' cpu_seconds count the solver's CPU time alone, paused with the wall
    clock during evaluations; without cpu_clock no record carries it."""
    from _synthetic import random_problem

    from crfsdca.solvers import SOLVERS
    from crfsdca.solvers import monitor as monitor_module

    problem = random_problem(seed=1, n=4)
    config = SOLVERS["sdca"].config_class()
    clocks = _Clocks()
    monkeypatch.setattr(monitor_module, "time", clocks)
    w = np.zeros(problem.feature_map.n_features)
    mon = monitor_module.Monitor(problem, "sdca", config, cpu_clock=True, evaluate_test=False)
    mon.start()
    clocks.wall, clocks.cpu = 180.0, 1.5  # 1.5 s of work, then stopped for minutes
    mon.end_epoch(w, oracle_calls=4, updates=4, force=True)
    with mon.paused():  # an evaluation: on neither clock
        clocks.wall, clocks.cpu = 200.0, 21.5
    clocks.wall, clocks.cpu = 201.0, 22.5
    mon.finish(w, oracle_calls=8, updates=8)
    first, last = mon.trace.records
    assert (first.seconds, first.extra["cpu_seconds"]) == (180.0, 1.5)
    assert (last.seconds, last.extra["cpu_seconds"]) == (181.0, 2.5)

    plain = monitor_module.Monitor(problem, "sdca", config, evaluate_test=False)
    plain.start()
    plain.end_epoch(w, oracle_calls=4, updates=4, force=True)
    assert "cpu_seconds" not in plain.trace.records[-1].extra


def test_the_runners_traces_carry_cpu_time(tmp_path, monkeypatch):
    """Every record of a reproduction run has the CPU time, never more than a little above the
    solver's wall time (single-threaded runs), and non-decreasing; the time axis reads it."""
    from _synthetic import random_problem

    from crfsdca.reproduce.figures import x_values

    problem = random_problem(seed=2, n=12, n_bias_rows=0, regularization=0.1)
    exp = Experiment.make("ocr", "sdca", Budget(12, 3.0), sampling="uniform")
    trace = runner._run(exp, problem, -np.inf)
    cpu = x_values(trace, "cpu_seconds")
    wall = x_values(trace, "seconds")
    assert len(cpu) == len(trace.records) >= 3 and np.all(np.isfinite(cpu))
    assert np.all(np.diff(cpu) >= 0) and np.all(cpu <= wall + 0.05)


def test_subsets_shrink_the_training_sets_and_the_report_says_so(tmp_path):
    from crfsdca.reproduce.experiments import FULL_BUDGETS
    from crfsdca.reproduce.notes import _reduced
    from crfsdca.reproduce.pipeline import budgets_for

    full = budgets_for(("ocr", "ewt-pos"), quick=False)
    assert full == {d: FULL_BUDGETS[d] for d in ("ocr", "ewt-pos")} and _reduced(full) == "`"
    half = budgets_for(("ocr", "ewt-pos"), quick=False, subsets=0.5)
    assert half["ocr"].max_sequences == FULL_BUDGETS["ocr"].max_sequences // 2
    assert half["ocr"].max_epochs == FULL_BUDGETS["ocr"].max_epochs
    text = _reduced(half)
    assert text.startswith(" --subsets 0.5`. **Reduced run**")
    assert "OCR 1,500 instead of 3,000" in text
    run = CliRunner().invoke
    result = run(main, ["reproduce", "--quick", "--subsets", "0.5", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "--subsets scales a full run" in result.stderr
    result = run(main, ["reproduce", "--subsets", "0", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "--subsets" in result.stderr
