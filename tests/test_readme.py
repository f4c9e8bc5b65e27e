"""The README's Python examples run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def python_block(after_heading: str) -> str:
    text = README.read_text()
    section = text[text.index(after_heading) :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_tree_example_runs_and_certifies_its_gap(tmp_path):
    code = python_block("### Tree-structured CRFs")
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert "ConvergenceWarning" not in done.stderr  # stopped by tol
    lines = done.stdout.splitlines()
    gap = float(lines[0].split()[2].rstrip(","))
    assert lines[0].startswith("certified gap") and gap <= 1e-8
    assert lines[1] == "[['NOUN', 'VERB'], ['DET', 'NOUN', 'VERB']]"
    assert lines[-1] == "True"  # the saved model's marginals are the fitted model's


def test_second_order_and_junction_example_runs(tmp_path):
    code = python_block("#### Second-order chains and junction trees")
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=600
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    second, first = map(float, lines[0].split())
    assert second == 1.0 and first <= 0.75
    assert lines[1] == "True"  # the saved model's marginals are the fitted model's
    assert lines[2] == "[0, 1, 0, 1, 1, 0, 1, 0] (8, 2)"
    assert (tmp_path / "order2.npz").exists() and (tmp_path / "skip.npz").exists()
