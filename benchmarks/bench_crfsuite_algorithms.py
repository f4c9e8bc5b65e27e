"""CRFsuite's ``ap``, ``pa``, ``arow`` and ``l2sgd``: python-crfsuite against ``crfsdca.CRF``.

CoNLL-2000 chunking, sklearn-crfsuite's tutorial features (``tests/_conll_dicts.py``), the
whole train split (8,936 sentences); tags compared on the whole test split. Both libraries get
the same parameters; python-crfsuite trains after ``srand(1)`` (a fresh CRFsuite process's
generator) and crfsdca with ``random_state=1``, so both visit the sequences in the same order.
The table gives the fit wall time (python-crfsuite: ``Trainer.train``, which also builds its
feature set; crfsdca: ``CRF.fit``, which includes the monitor's per-epoch exact objective pass),
the largest weight difference, the weights' correlation and the share of test tokens tagged
alike.

Run from the repository root::

    CRFSDCA_DATA_DIR=../shared/data .venv/bin/python benchmarks/bench_crfsuite_algorithms.py
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pycrfsuite

from crfsdca import CRF
from crfsdca.io.crfsuite_file import read_crfsuite_model

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from _conll_dicts import token_dicts  # noqa: E402

from data_loaders import load_dataset  # noqa: E402

PARAMS = {
    "ap": {"max_iterations": 10},
    "pa": {"max_iterations": 10},
    "arow": {"max_iterations": 10},
    "l2sgd": {"max_iterations": 30, "c2": 1.0},
}


def weights(crf: CRF, cm) -> tuple[np.ndarray, np.ndarray]:
    state = {(a, lab): cm.state[j, k] for j, a in enumerate(cm.attributes)
             for k, lab in enumerate(cm.labels) if cm.state[j, k] != 0}  # fmt: skip
    trans = {(p, q): cm.transition[i, k] for i, p in enumerate(cm.labels)
             for k, q in enumerate(cm.labels)}  # fmt: skip
    ours_s, ours_t = crf.state_features_, crf.transition_features_
    keys = sorted(set(state) | set(ours_s))
    ref = [state.get(k, 0.0) for k in keys] + [trans[k] for k in trans]
    got = [ours_s.get(k, 0.0) for k in keys] + [ours_t.get(k, 0.0) for k in trans]
    return np.array(ref), np.array(got)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithms", nargs="+", default=list(PARAMS))
    parser.add_argument("--n-train", type=int, default=None)
    args = parser.parse_args()
    train = load_dataset("conll2000", "train")
    if args.n_train:
        train = train.head(args.n_train)
    test = load_dataset("conll2000", "test")
    X, y = token_dicts(train.tokens), [list(s) for s in train.labels]
    X_test = token_dicts(test.tokens)
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    print(f"n_train {len(X)}, test tokens {sum(map(len, X_test))}")
    columns = "algorithm, parameters, python-crfsuite s, crfsdca s, max abs diff, corr, tags alike"
    print("| " + " | ".join(columns.split(", ")) + " |")
    print("|---|---|---|---|---|---|---|")
    for algorithm in args.algorithms:
        params = PARAMS[algorithm]
        with tempfile.TemporaryDirectory() as folder:
            path = str(Path(folder) / "m.crfsuite")
            trainer = pycrfsuite.Trainer(algorithm=algorithm, verbose=False)
            for xseq, yseq in zip(X, y, strict=True):
                trainer.append(xseq, yseq)
            trainer.set_params(params)
            libc.srand(ctypes.c_uint(1))
            start = time.perf_counter()
            trainer.train(path)
            theirs_s = time.perf_counter() - start
            cm = read_crfsuite_model(path)
            tagger = pycrfsuite.Tagger()
            tagger.open(path)
            theirs = [t for xseq in X_test for t in tagger.tag(xseq)]
        start = time.perf_counter()
        crf = CRF(algorithm=algorithm, random_state=1, **params).fit(X, y)
        ours_s = time.perf_counter() - start
        ours = [t for s in crf.predict(X_test) for t in s]
        ref, got = weights(crf, cm)
        alike = np.mean(np.array(ours) == np.array(theirs))
        text = ", ".join(f"{k}={v}" for k, v in params.items())
        print(f"| {algorithm} | {text} | {theirs_s:.1f} | {ours_s:.1f} |"
              f" {np.abs(ref - got).max():.1e} | {np.corrcoef(ref, got)[0, 1]:.6f} |"
              f" {100 * alike:.2f}% |")  # fmt: skip


if __name__ == "__main__":
    main()
