"""Run the numerical stress cases of tests/test_stress.py and print RELIABILITY.md's table.

Usage (from the repository root)::

    .venv/bin/python scripts/stress_table.py [--skip-slow] > table.md

The cases, their data and their pass criteria live in ``tests/test_stress.py`` (this script only
times them and renders the outcome); the kernels are compiled by a warm-up run first, so the
times exclude numba compilation. Training runs use lambda = 1/n unless the case names another.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"


def _oracle_rows(cases, skip_slow: bool) -> list[str]:
    import test_stress as ts

    rows = []
    for case in cases:
        if case.slow and skip_slow:
            continue
        start = time.perf_counter()
        log_z_error, log_p_error, floor = ts.oracle_errors(case)
        seconds = time.perf_counter() - start
        reference = "brute force" if case.K**case.T <= 10**4 else "normalised log-space"
        verdict = "exact" if log_p_error <= floor else "**outside the floor**"
        outcome = (
            f"{verdict}: log Z rel. error {log_z_error:.1e}, log p error {log_p_error:.1e}"
            f" (floor {floor:.1e})"
        )
        rows.append(f"| oracle {case.name} | vs {reference} | {outcome} | {seconds:.2f} |")
    return rows


def _train_rows(cases, skip_slow: bool) -> list[str]:
    import test_stress as ts

    rows = []
    for case in cases:
        if case.slow and skip_slow:
            continue
        for solver in ts.SOLVERS:
            with tempfile.TemporaryDirectory() as workdir:
                result = ts.run_train_case(case, solver, Path(workdir))
            if result.outcome == "finite":
                outcome = f"finite: {result.detail}"
            else:
                outcome = f"FloatingPointError: `{result.detail}`"
            rows.append(f"| train {case.name} | {solver} | {outcome} | {result.seconds:.2f} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-slow", action="store_true", help="leave out the slow cases")
    args = parser.parse_args()
    sys.path.insert(0, str(TESTS))
    import test_stress as ts

    warnings.simplefilter("ignore", RuntimeWarning)  # overflow inside the 1e160 case
    with tempfile.TemporaryDirectory() as workdir:  # compile the kernels outside the timings
        for solver in ts.SOLVERS:
            ts.run_train_case(ts.TRAIN_CASES[0], solver, Path(workdir))
        ts.oracle_errors(ts.ORACLE_CASES[0])
    lines = [
        "| case | solver / check | outcome | seconds |",
        "|---|---|---|---|",
        *_oracle_rows(ts.ORACLE_CASES, args.skip_slow),
        *_train_rows(ts.TRAIN_CASES, args.skip_slow),
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
