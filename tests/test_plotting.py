"""Convergence plots: files for every axis pair, the drawn values, and the command's errors."""

import builtins
import math

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("matplotlib")

from crfsdca import plotting  # noqa: E402
from crfsdca.cli.main import main  # noqa: E402
from crfsdca.solvers.trace import Trace, TraceRecord  # noqa: E402

MAGIC = {".png": b"\x89PNG", ".pdf": b"%PDF", ".svg": b"<?xml"}


def make_trace(solver, primals, gaps, *, sampling=None, n=10):
    config = {"sampling": sampling} if sampling else {}
    trace = Trace.create(
        solver=solver, config=config, regularization=0.1, dataset="toy", n_sequences=n, seed=0
    )
    for k, (primal, gap) in enumerate(zip(primals, gaps, strict=True)):
        trace.append(
            TraceRecord(
                solver=solver,
                epoch=float(k),
                oracle_calls=k * n,
                updates=k * n - k,
                seconds=0.5 * k,
                primal=primal,
                dual=primal - gap if gap is not None else None,
                gap=gap,
                test_error=0.3 / (k + 1),
            )
        )
    return trace


@pytest.fixture
def traces():
    sdca = make_trace("sdca", [3.0, 2.1, 2.01, 2.001], [1.0, 0.1, 0.01, 0.001], sampling="gap")
    lbfgs = make_trace("lbfgs", [4.0, 2.5, 2.05, 2.0005], [None] * 4)
    return [sdca, lbfgs]


@pytest.fixture
def trace_files(traces, tmp_path):
    paths = []
    for trace in traces:
        path = tmp_path / f"{trace.solver}.jsonl"
        trace.to_jsonl(path)
        paths.append(path)
    return paths


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.mark.parametrize("x", list(plotting.X_AXES))
@pytest.mark.parametrize("y", plotting.Y_AXES)
def test_cli_writes_a_figure_for_every_axis_pair(trace_files, tmp_path, x, y):
    out = tmp_path / f"fig-{x}-{y}.png"
    result = run("plot", *trace_files, "--x", x, "--y", y, "--out", out)
    assert result.exit_code == 0, result.output
    assert out.read_bytes().startswith(MAGIC[".png"])
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_format_follows_the_extension(traces, tmp_path, suffix):
    out = tmp_path / f"fig{suffix}"
    plotting.plot_traces(traces, out, x="epochs", y="gap")
    assert out.read_bytes().startswith(MAGIC[suffix])


def test_suboptimality_uses_the_best_primal_minus_a_hair(traces, tmp_path):
    summary = plotting.plot_traces(traces, tmp_path / "f.png", y="suboptimality")
    p_star = 2.0005 - plotting.HAIR * 2.0005
    assert summary.p_star == pytest.approx(p_star, rel=0, abs=1e-15)
    assert summary.p_star_source.startswith("best primal")
    xs, ys = summary.lines["sdca (gap)"]
    np.testing.assert_allclose(xs, [0, 1, 2, 3])
    np.testing.assert_allclose(ys, np.array([3.0, 2.1, 2.01, 2.001]) - p_star, rtol=1e-12)
    assert set(summary.lines) == {"sdca (gap)", "lbfgs"}


def test_given_p_star_drops_points_at_or_below_it(traces, tmp_path):
    summary = plotting.plot_traces(traces, tmp_path / "f.png", y="suboptimality", p_star=2.01)
    xs, ys = summary.lines["sdca (gap)"]
    np.testing.assert_allclose(xs, [0, 1])
    np.testing.assert_allclose(ys, [0.99, 0.09], rtol=1e-12)
    assert summary.p_star_source == "given"


def test_gap_leaves_out_traces_without_a_dual(traces, tmp_path):
    summary = plotting.plot_traces(traces, tmp_path / "f.png", x="oracle-calls", y="gap")
    assert list(summary.lines) == ["sdca (gap)"]
    np.testing.assert_allclose(summary.lines["sdca (gap)"][0], [0, 10, 20, 30])
    assert summary.skipped == ["lbfgs: no finite gap values"]


def test_plot_trace_file_falls_back_to_suboptimality_without_a_gap(trace_files, tmp_path):
    summary = plotting.plot_trace_file(trace_files[1], tmp_path / "one.svg")
    assert summary.p_star is not None and math.isfinite(summary.p_star)
    assert list(summary.lines) == ["lbfgs"]


def test_bad_x_is_a_usage_error_naming_the_choices(trace_files, tmp_path):
    result = run("plot", *trace_files, "--x", "iterations", "--out", tmp_path / "f.png")
    assert result.exit_code == 2
    for name in plotting.X_AXES:
        assert name in result.output
    assert not (tmp_path / "f.png").exists()


def test_bad_extension_is_a_usage_error(trace_files, tmp_path):
    result = run("plot", *trace_files, "--out", tmp_path / "f.jpg")
    assert result.exit_code == 2
    assert ".png" in result.output and "'.jpg'" in result.output


@pytest.mark.parametrize(
    "content, expected",
    [
        ('{"type": "header", "format": "crfsdca-trace"\n', "bad.jsonl:1: invalid JSON"),
        ('{"type": "record"}\n', "bad.jsonl:1: expected a header"),
        (None, "bad.jsonl: no such file or directory"),
    ],
)
def test_bad_trace_is_one_line_exit_1(tmp_path, content, expected):
    path = tmp_path / "bad.jsonl"
    if content is not None:
        path.write_text(content)
    result = CliRunner().invoke(main, ["plot", str(path), "--out", str(tmp_path / "f.png")])
    assert result.exit_code == 1
    assert expected in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output
    assert not (tmp_path / "f.png").exists()


def test_missing_matplotlib_gives_the_install_hint(trace_files, tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    result = CliRunner().invoke(main, ["plot", *map(str, trace_files), "--out", "f.png"])
    assert result.exit_code == 1
    assert result.output.strip() == f"crfsdca: error: {plotting.INSTALL_HINT}"
    assert "pip install 'crfsdca[plot]'" in result.output
