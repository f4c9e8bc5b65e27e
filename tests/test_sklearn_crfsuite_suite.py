"""sklearn-crfsuite's own tests (``tests/test_crf.py``, ``tests/test_metrics.py`` and their
``conftest.py``) run against crfsdca, with only the imports changed.

Their code is not part of crfsdca and is not copied into it: the test reads it from
``SKLEARN_CRFSUITE_SRC``, copies it to a temporary folder, rewrites the imports and runs it with
pytest in a subprocess. The test itself never goes to the network. ``SKLEARN_CRFSUITE_SRC`` is

1. the sdist of sklearn-crfsuite 0.3.6 (the ``.tar.gz``), which ships the repository's tests:
   ``.ci/run`` downloads it before the slow set, checked against the sha256 pinned in
   ``.ci/sklearn-crfsuite-tests.txt``::

       pip download --no-deps --no-binary :all: --require-hashes \
           -r .ci/sklearn-crfsuite-tests.txt -d /tmp/skc
       SKLEARN_CRFSUITE_SRC=/tmp/skc/sklearn-crfsuite-0.3.6.tar.gz pytest -m slow -k own_tests

   Its tests import ``cross_val_score`` from ``sklearn.cross_validation``, which scikit-learn
   removed (the repository's own 2019 commit "Update test_crf.py" imports it from
   ``sklearn.model_selection``, as the rewrite does). Later releases (0.5) return NumPy object
   arrays from ``predict`` and test that; crfsdca returns lists of lists, as the repository's
   tests and sklearn-crfsuite's documentation say;
2. or a checkout of https://github.com/TeamHG-Memex/sklearn-crfsuite (or an unpacked sdist), or
   its bare git directory (read with ``git show HEAD:tests/...``).

Without it the test fails under CI (``CI`` set: ``.ci/run`` must have fetched the sources) and is
skipped elsewhere, saying how to get them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

FILES = ("conftest.py", "test_crf.py", "test_metrics.py")
SDIST = "sklearn-crfsuite==0.3.6"
IMPORTS = (
    (r"^from sklearn_crfsuite import (CRF|metrics)\b", r"from crfsdca import \1"),
    (r"^from sklearn\.cross_validation import ", "from sklearn.model_selection import "),
)


def _from_checkout(source: Path) -> dict[str, str] | None:
    if (source / "tests").is_dir():
        return {f: (source / "tests" / f).read_text(encoding="utf-8") for f in FILES}
    if (source / "HEAD").is_file():  # a bare git directory
        out = {}
        for f in FILES:
            shown = subprocess.run(
                ["git", f"--git-dir={source}", "show", f"HEAD:tests/{f}"],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if shown.returncode != 0:
                return None
            out[f] = shown.stdout
        return out
    return None


def _from_sdist(archive: Path) -> dict[str, str] | None:
    out = {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if len(parts) == 3 and parts[1] == "tests" and parts[2] in FILES:
                out[parts[2]] = tar.extractfile(member).read().decode("utf-8")
    return out if set(out) == set(FILES) else None


def _sources() -> tuple[dict[str, str], str]:
    given = os.environ.get("SKLEARN_CRFSUITE_SRC")
    if not given:
        message = (
            "sklearn-crfsuite's tests are not available: set SKLEARN_CRFSUITE_SRC to the"
            f" {SDIST} sdist (pip download --no-deps --no-binary :all: --require-hashes -r"
            " .ci/sklearn-crfsuite-tests.txt) or a checkout of its repository"
        )
        if os.environ.get("CI"):
            pytest.fail(message + "; .ci/run fetches the sdist")
        pytest.skip(message)
    source = Path(given)
    found = _from_sdist(source) if source.is_file() else _from_checkout(source)
    if found is None:
        pytest.fail(f"SKLEARN_CRFSUITE_SRC={given}: no tests/{FILES[1]} there")
    return found, given


def _rewrite(text: str) -> str:
    for pattern, replacement in IMPORTS:
        text = re.sub(pattern, replacement, text, flags=re.MULTILINE)
    return text


def test_sklearn_crfsuites_own_tests_pass(tmp_path):
    sources, origin = _sources()
    suite = tmp_path / "suite"
    suite.mkdir()
    for name, text in sources.items():
        rewritten = _rewrite(text)
        assert "sklearn_crfsuite" not in rewritten, f"{name}: an import left unchanged"
        # only import lines change
        changed = [(a, b) for a, b in zip(text.splitlines(), rewritten.splitlines(), strict=True)
                   if a != b]  # fmt: skip
        assert all(a.startswith("from ") and b.startswith("from ") for a, b in changed)
        (suite / name).write_text(rewritten, encoding="utf-8")
    env = dict(os.environ, NUMBA_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
         "--rootdir", str(suite), str(suite)],
        capture_output=True, text=True, cwd=suite, env=env, check=False, timeout=1800,
    )  # fmt: skip
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr
    print(f"sklearn-crfsuite's tests from {origin}: {summary}")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    passed = int(re.search(r"(\d+) passed", summary).group(1))
    assert passed >= 43 and "failed" not in summary and "error" not in summary
