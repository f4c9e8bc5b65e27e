"""A warm ``crfsdca.CRF(c2=0.1).fit`` against ``sklearn_crfsuite.CRF(c2=0.1).fit``.

The first 300 CoNLL-2000 training sentences as sklearn-crfsuite's tutorial feature dicts
(``tests/_conll_dicts.py``); one process, a warm-up fit of crfsdca first (numba's cache
loaded), then ``--rounds`` rounds each fitting both, interleaved. Prints the median fit times,
their ratio and the token accuracy of each model on the first 300 test sentences.

Run from the repository root::

    CRFSDCA_DATA_DIR=../shared/data python benchmarks/bench_warm_fit.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import sklearn_crfsuite

import crfsdca
from crfsdca.metrics import flat_accuracy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _conll_dicts import conll_dicts  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sentences", type=int, default=300)
    args = parser.parse_args()
    X, y = conll_dicts("train", args.sentences)
    X_test, y_test = conll_dicts("test", args.sentences)
    crfsdca.CRF(c2=0.1).fit(X, y)  # numba's cache loaded
    times: dict[str, list[float]] = {"sklearn-crfsuite": [], "crfsdca": []}
    models = {}
    for _ in range(args.rounds):
        for name, make in (("sklearn-crfsuite", sklearn_crfsuite.CRF), ("crfsdca", crfsdca.CRF)):
            start = time.perf_counter()
            models[name] = make(c2=0.1).fit(X, y)
            times[name].append(time.perf_counter() - start)
    base = statistics.median(times["sklearn-crfsuite"])
    print("| fit | median s | × sklearn-crfsuite | token accuracy |")
    print("|---|---|---|---|")
    for name, runs in times.items():
        acc = flat_accuracy(y_test, models[name].predict(X_test))
        median = statistics.median(runs)
        print(f"| {name} | {median:.3f} | {median / base:.2f} | {acc:.4f} |")


if __name__ == "__main__":
    main()
