"""Benchmark scripts that once broke unnoticed still run, on tiny inputs.

A benchmark is run by hand, so nothing noticed when changes elsewhere broke three of them:
``bench_fastmath.py`` looped over ``kernels.structures`` (a rename that reached a local dict),
``bench_sdca_epoch.py`` called the block kernels with the (T, K) arguments they had traded for
a block's runs, and ``bench_ssvm.py`` passed ``time_limit=None`` to a config that now checks it
is > 0 (its active-set runs, unless ``--time-limit`` was given); each failed with a traceback.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def _run_script(name: str, *args: str) -> str:
    """The stdout of ``benchmarks/<name>.py args`` (a failure raises, with its stderr)."""
    script = ROOT / "benchmarks" / f"{name}.py"
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _benchmark(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_fastmath_times_every_function_and_its_reductions_agree():
    out = _run_script("bench_fastmath", "--n", "4096", "--n-cache", "512", "--repeat", "1")
    for label in ("fast_log (numba)", "fast_exp (numba)", "fast_log1p (numba)",
                  "fast_expm1 (numba)", "log (numpy)", "expm1 (numpy)"):  # fmt: skip
        assert re.search(rf"^  {re.escape(label)}\s+\d", out, re.M), label
    # the reduction's four ways of summing one expression give one sum, for log and for exp
    for f in ("log", "exp"):
        sums = [float(s) for s in re.findall(rf"^  \S*{f}\S* .*sum = (\S+)$", out, re.M)]
        assert len(sums) == 4, out
        np.testing.assert_allclose(sums, sums[0], rtol=1e-9)


def test_bench_sdca_epoch_times_each_block_kernel():
    per_entry = _benchmark("bench_sdca_epoch").block_kernels(T=4, K=3, repeats=2)
    assert set(per_entry) == {
        "block_gap", "line_search_evaluation", "line_search_first_evaluation",
        "predictor_evaluation", "update_reusing_logs",
    }  # fmt: skip
    assert all(np.isfinite(ns) and ns > 0.0 for ns in per_entry.values())


def test_bench_ssvm_runs_the_active_set_step_and_bcfw(tmp_path):
    out = tmp_path / "ssvm.json"
    _run_script("bench_ssvm", "--datasets", "conll2000", "--epochs", "1", "--eval-every", "1",
                "--runs", "svm active gap", "--active-epochs", "1", "--bcfw-sequences", "20",
                "--bcfw-epochs", "1", "--out", str(out))  # fmt: skip
    report = json.loads(out.read_text())
    (row,) = report["part1"]
    assert row["run"] == "svm active gap" and row["epochs"] == pytest.approx(1.0, abs=0.05)
    assert np.isfinite(row["relative_gap"]) and row["relative_gap"] > 0.0
