"""A first ``crfsdca.CRF(c2=0.1).fit`` and a first ``crfsdca train`` on an empty numba cache,
against the same calls warm, with the ratios, in one run.

    CRFSDCA_DATA_DIR=../shared/data python benchmarks/bench_first_fit.py [--reps 3]

Each repetition, in new processes and a new, empty folder for numba's cache (``NUMBA_CACHE_DIR``)
and the encoded corpora (``CRFSDCA_CACHE_DIR``):

* fit: one process imports crfsdca, builds ``CRF(c2=0.1)`` (which imports numba, the kernels
  and scikit-learn: "import"), reads the first ``--sentences`` CoNLL-2000 training sentences as
  sklearn-crfsuite's tutorial feature dicts, then fits (the first fit: it compiles), waits for
  the background compilation (``crfsdca.estimators.compile_ahead``) to end, and fits
  ``--warm`` more times (warm: median). A second process on the now warm cache does the same
  ("warm process": what a later session waits for).
* train: ``crfsdca train conll2000 --max-sequences 200 --epochs 1 -q`` on the empty caches,
  then (once every process it started has ended) ``--warm`` times on the warm caches (median).

Prints one line per repetition and the medians (spread: min-max) of the first/warm ratios. The
load average before and after each repetition says how busy the machine was.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAIN = ["train", "conll2000", "--max-sequences", "200", "--epochs", "1", "-q"]

FIT = """
import json, os, sys, time
start = time.perf_counter()
sys.path.insert(0, {tests!r})
from _conll_dicts import conll_dicts
import crfsdca
crf = crfsdca.CRF(c2=0.1)
imported = time.perf_counter()
X, y = conll_dicts("train", {sentences})
read = time.perf_counter()
crf.fit(X, y)
first = time.perf_counter() - read

def children():
    folder = "/proc/self/task"
    found = []
    for task in os.listdir(folder):
        with open(os.path.join(folder, task, "children")) as fh:
            found += fh.read().split()
    return found

while children():  # the background compilation: ended before the warm fits
    time.sleep(0.05)
warm = []
for _ in range({warm}):
    t = time.perf_counter()
    crfsdca.CRF(c2=0.1).fit(X, y)
    warm.append(time.perf_counter() - t)
print(json.dumps({{"import": imported - start, "first": first, "warm": warm,
                  "process": read - start + first}}))
"""


def _env(cache: str) -> dict[str, str]:
    return dict(os.environ, NUMBA_CACHE_DIR=cache, CRFSDCA_CACHE_DIR=cache)


def fit_process(cache: str, sentences: int, warm: int) -> dict:
    code = FIT.format(tests=str(ROOT / "tests"), sentences=sentences, warm=warm)
    done = subprocess.run(
        [sys.executable, "-c", code], env=_env(cache), capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.splitlines()[-1])


def train_seconds(cache: str) -> float:
    """Wall seconds of one train command; returns once every process it started has ended
    (the compile-ahead process may outlive it)."""
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "crfsdca.cli", *TRAIN],
        env=_env(cache),
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    if process.wait() != 0:
        raise SystemExit(f"train failed (exit {process.returncode})")
    seconds = time.perf_counter() - start
    while True:
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return seconds
        time.sleep(0.05)


def repetition(args) -> dict:
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="crfsdca-first-") as cache:
        cold = fit_process(cache, args.sentences, args.warm)
        later = fit_process(cache, args.sentences, 1)
    with tempfile.TemporaryDirectory(prefix="crfsdca-first-") as cache:
        train_first = train_seconds(cache)
        train_warm = statistics.median(train_seconds(cache) for _ in range(args.warm))
    warm_fit = statistics.median(cold["warm"])
    return {
        "fit_first": cold["first"],
        "fit_warm": warm_fit,
        "fit_ratio": cold["first"] / warm_fit,
        "import": cold["import"],
        "process_cold": cold["process"],
        "process_warm": later["process"],
        "train_first": train_first,
        "train_warm": train_warm,
        "train_ratio": train_first / train_warm,
        "load": (load, os.getloadavg()[0]),
    }


def _spread(values: list[float], unit: str = "") -> str:
    return f"{statistics.median(values):.2f}{unit} ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--sentences", type=int, default=300)
    parser.add_argument("--warm", type=int, default=3, help="warm runs per repetition [3]")
    args = parser.parse_args()
    rows = []
    for rep in range(args.reps):
        row = repetition(args)
        rows.append(row)
        print(
            f"rep {rep + 1}: fit {row['fit_first']:.2f} s / {row['fit_warm']:.3f} s ="
            f" {row['fit_ratio']:.1f}x (import {row['import']:.2f} s; process to the end of"
            f" the first fit {row['process_cold']:.2f} s cold, {row['process_warm']:.2f} s warm);"
            f" train {row['train_first']:.2f} s / {row['train_warm']:.2f} s ="
            f" {row['train_ratio']:.1f}x; load {row['load'][0]:.1f} -> {row['load'][1]:.1f}",
            flush=True,
        )
    print("| measure | median (min-max) |")
    print("|---|---|")
    for key, label, unit in (
        ("fit_first", "first `CRF(c2=0.1).fit`", " s"),
        ("fit_warm", "warm fit (same process)", " s"),
        ("fit_ratio", "**first fit / warm fit**", "x"),
        ("process_cold", "process start to end of first fit, empty cache", " s"),
        ("process_warm", "the same, warm cache", " s"),
        ("train_first", "first `train` (empty caches)", " s"),
        ("train_warm", "warm `train`", " s"),
        ("train_ratio", "**first train / warm train**", "x"),
    ):
        print(f"| {label} | {_spread([r[key] for r in rows], unit)} |")


if __name__ == "__main__":
    main()
