"""``crfsdca reproduce``: figures and report from --quick, the cache, bad input, crashes."""

from __future__ import annotations

import csv
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from crfsdca.cli.main import main
from crfsdca.reproduce import FIGURES, QUICK_BUDGETS, Experiment, reproduce, trace_path
from crfsdca.reproduce.claims import SMOKE, check_claims
from crfsdca.reproduce.figures import Traces
from crfsdca.reproduce.plan import Panel, experiments_of, figure_panels, measurement_experiments
from crfsdca.solvers.trace import read_trace

DATA_DIR = os.environ.get("CRFSDCA_DATA_DIR")
needs_data = pytest.mark.skipif(
    not DATA_DIR or not Path(DATA_DIR, "ocr").exists(), reason="needs CRFSDCA_DATA_DIR"
)


def run(*args):
    return CliRunner().invoke(main, ["reproduce", *map(str, args)], catch_exceptions=False)


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """One ``crfsdca reproduce --quick`` run; its output folder and CLI result."""
    out = tmp_path_factory.mktemp("repro") / "tmp"
    result = run("--quick", "--out", out)
    return out, result


@needs_data
@pytest.mark.slow
def test_quick_run_writes_every_figure_csv_and_claim(quick):
    out, result = quick
    assert result.exit_code == 0, result.output
    for name in FIGURES:
        png, table = out / f"fig{name}.png", out / f"fig{name}.csv"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        with table.open() as fh:
            rows = list(csv.DictReader(fh))
        assert rows, f"fig{name}.csv has no data"
        assert {r["figure"] for r in rows} == {name}
    report = (out / "REPORT.md").read_text()
    claims = check_claims(Traces(out), dict(QUICK_BUDGETS), smoke=True)
    assert len(claims) >= 30
    verdicts = ("holds", "partly", "does not hold", "not judged", "measurement")
    for claim in claims:  # one table line per claim, with a verdict marked as a smoke test
        lines = [line for line in report.splitlines() if line.startswith(f"| `{claim.key}` ")]
        assert len(lines) == 2, claim.key  # at a glance, then in full
        lines = lines[1:]
        assert any(f"**{word} {SMOKE}" in lines[0] for word in verdicts), lines[0]
        printed = [line for line in result.stdout.splitlines() if f"  {claim.key}: " in line]
        assert len(printed) == 1 and SMOKE in printed[0], claim.key
    assert "| OCR | 4,004 / 4,082 | 6,251 / 6,202 |" in report  # Table 1 of the full sets


@needs_data
@pytest.mark.slow
def test_the_archive_rebuilds_the_report_without_a_run(quick, tmp_path):
    """--from-archive: the same report, CSVs and figures from the packed traces alone, with no
    corpus to read (CRFSDCA_DATA_DIR unset, no download)."""
    out, _ = quick
    env = {"CRFSDCA_DATA_DIR": "", "CRFSDCA_CACHE_DIR": str(tmp_path / "empty")}
    result = CliRunner(env=env).invoke(
        main, ["reproduce", "--from-archive", str(out / "traces.tar.xz"), "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert "(0 traces computed" in result.stdout
    assert (tmp_path / "REPORT.md").read_text() == (out / "REPORT.md").read_text()
    for name in FIGURES:
        assert (tmp_path / f"fig{name}.csv").read_text() == (out / f"fig{name}.csv").read_text()
    assert (tmp_path / "traces.csv").read_text() == (out / "traces.csv").read_text()


@needs_data
@pytest.mark.slow
def test_traces_carry_their_inputs_and_p_star(quick):
    out, _ = quick
    traces = sorted((out / "traces").glob("*.jsonl"))
    assert len(traces) > 30
    for path in traces:
        trace = read_trace(path)
        assert trace.header["digest"] == path.stem
        assert trace.header["experiment"]["code"] == trace.header["provenance"]["code"]
        if trace.header["solver"] == "measure":
            assert trace.header["measurement"] and not trace.records
            continue
        assert trace.records, path
        if trace.header["solver"] not in ("reference", "crfsuite"):
            # the certified P* lies below every primal a solver reaches (up to the certificate)
            assert min(r.primal for r in trace.records) >= trace.header["p_star"] - 1e-9
            # timed after a warm-up run: numba compiled nothing while the clock ran
            assert trace.header["compiled_kernels"] == 0, path


@needs_data
@pytest.mark.slow
def test_second_run_computes_nothing(quick):
    out, first = quick
    stamps = {p: p.stat().st_mtime_ns for p in (out / "traces").glob("*.jsonl")}
    result = run("--quick", "--out", out)
    assert result.exit_code == 0, result.output
    assert "(0 traces computed" in result.stdout
    assert "0 to run" in result.stderr
    assert {p: p.stat().st_mtime_ns for p in (out / "traces").glob("*.jsonl")} == stamps


@needs_data
@pytest.mark.slow
def test_interrupted_run_resumes_what_is_missing(quick, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(quick[0], out)
    victims = sorted((out / "traces").glob("*.jsonl"))[:2]
    for path in victims:
        path.unlink()
    outcome = reproduce(quick=True, out=out)
    assert outcome.computed == 2 and outcome.ok
    assert all(path.exists() for path in victims)


@needs_data
@pytest.mark.slow
def test_one_failing_experiment_is_reported_and_the_others_finish(quick, tmp_path, monkeypatch):
    out = tmp_path / "copy"
    shutil.copytree(quick[0], out)
    bad = Experiment.make("ocr", "sdca", QUICK_BUDGETS["ocr"], label="bad", non_uniformity=2.0)
    removed = sorted((out / "traces").glob("*.jsonl"))[-1]
    removed.unlink()
    outcome = reproduce(quick=True, out=out, extra_experiments=[bad])
    assert list(outcome.failures) == [bad.digest]
    assert "non_uniformity must be in [0, 1]" in outcome.failures[bad.digest]
    assert removed.exists()  # the others still ran
    assert not trace_path(out, bad).exists()
    report = (out / "REPORT.md").read_text()
    assert "## Missing (failed runs)" in report and "non_uniformity=2.0" in report

    # through the CLI: a figure whose curve crashes -> exit status 1, the report marks it missing
    from crfsdca.reproduce import plan

    def broken(budgets):
        return [Panel("broken", "ocr", "updates", "subopt", (bad,))]

    monkeypatch.setitem(plan.FIGURES, "2", ("Fig. 2 (broken)", broken))
    result = run("--quick", "--out", out, "--figure", "2", "--datasets", "ocr")
    assert result.exit_code == 1
    assert "1 experiment(s) failed" in result.stderr
    assert "Missing curves: broken: bad" in (out / "REPORT.md").read_text()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ("--figure", "5"),
            "unknown figure '5'; valid figures: 2, 3, 4, 6, 7, 8, 9, time, start, oeg",
        ),
        (("--datasets", "wsj"), "unknown dataset 'wsj'; valid datasets: ocr, conll2000,"),
        (("--datasets", "ocr,nope"), "unknown dataset 'nope'"),
    ],
)
def test_unknown_names_give_one_line_and_exit_2(args, expected, tmp_path):
    result = run(*args, "--out", tmp_path / "o")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and expected in result.stderr
    assert not (tmp_path / "o").exists()


def test_missing_corpus_says_where_it_looked(tmp_path, monkeypatch):
    import data_loaders.download as download

    def offline(url, dest):
        raise OSError("offline")

    monkeypatch.setattr(download, "fetch_url", offline)
    monkeypatch.setenv("CRFSDCA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CRFSDCA_DATA_DIR", raising=False)
    result = run(
        "--quick", "--datasets", "ocr", "--data-dir", tmp_path / "empty", "--out", tmp_path
    )
    assert result.exit_code == 1
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1
    assert "not found; looked in --data-dir" in line and str(tmp_path / "empty") in line


def test_digest_depends_on_inputs_not_on_labels():
    b = QUICK_BUDGETS["ocr"]
    one = Experiment.make("ocr", "sdca", b, label="a", sampling="gap", non_uniformity=0.8)
    same = Experiment.make("ocr", "sdca", b, label="b", non_uniformity=0.8, sampling="gap")
    other = Experiment.make("ocr", "sdca", b, sampling="gap", non_uniformity=0.5)
    assert one.digest == same.digest != other.digest
    assert one.reference.digest != one.digest
    bigger = Experiment.make(
        "ocr",
        "sdca",
        QUICK_BUDGETS["conll2000"].__class__(61, 3),
        sampling="gap",
        non_uniformity=0.8,
    )
    assert bigger.digest != one.digest


@needs_data
@pytest.mark.slow
def test_jobs_2_gives_the_serial_traces(quick, tmp_path):
    out = tmp_path / "parallel"
    outcome = reproduce(["2"], ["ocr"], quick=True, jobs=2, out=out)
    budgets = {"ocr": QUICK_BUDGETS["ocr"]}
    planned = experiments_of(figure_panels("2", budgets)) + measurement_experiments(budgets)
    assert len(planned) == 10  # P*, five sampling schemes, the dataset's four measurements
    assert outcome.ok and outcome.computed == len(planned)
    for path in (out / "traces").glob("*.jsonl"):
        serial, parallel = read_trace(quick[0] / "traces" / path.name), read_trace(path)
        assert [r.primal for r in parallel.records] == [r.primal for r in serial.records]
        assert [r.oracle_calls for r in parallel.records] == [
            r.oracle_calls for r in serial.records
        ]


@needs_data
def test_cached_only_runs_nothing_and_reports_what_is_missing(tmp_path):
    out = tmp_path / "o"
    result = run("--quick", "--cached-only", "--figure", "2", "--datasets", "ocr", "--out", out)
    assert result.exit_code == 1
    assert "curve(s) missing (not run)" in result.stderr
    assert not (out / "traces").exists()
    report = (out / "REPORT.md").read_text()
    assert "Missing curves: (OCR) sampling schemes" in report
    assert "**not judged [smoke test: --quick sizes, not evidence]: run failed or not run" in report
