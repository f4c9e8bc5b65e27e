"""sklearn-crfsuite's tutorial workflow with sklearn_crfsuite.CRF and with crfsdca.CRF.

CoNLL-2002 Dutch NER (``conll2002-ned``): the tutorial's ``word2features``, train on the train
split, entity (chunk) F1 on the test split (testb), c1=0, c2=0.1, max_iterations=100,
all_possible_transitions=True. The crfsdca runs change only the import (``algorithm="lbfgs"``
as in the tutorial), and then the algorithm (``"sdca"``, crfsdca's default, with ``tol``
``--sdca-tol``: its duality gap, absolute on the mean objective). crfsdca's model is dense, as
CRFsuite's with ``all_possible_states=True``, so sklearn-crfsuite is also run with that option:
the same model and objective as crfsdca's, whose predictions should agree.

Run from the repository root::

    CRFSDCA_DATA_DIR=../shared/data python benchmarks/bench_sklearn_tutorial.py [--max-train N]
"""

from __future__ import annotations

import argparse
import time

from crfsdca.metrics import chunk_f1_score, flat_accuracy
from data_loaders import load_dataset


def word2features(sent: list[tuple[str, ...]], i: int) -> dict:
    """The tutorial's features of token ``i`` (fields: word, POS)."""
    word, postag = sent[i][0], sent[i][1]
    features = {
        "bias": 1.0,
        "word.lower()": word.lower(),
        "word[-3:]": word[-3:],
        "word[-2:]": word[-2:],
        "word.isupper()": word.isupper(),
        "word.istitle()": word.istitle(),
        "word.isdigit()": word.isdigit(),
        "postag": postag,
        "postag[:2]": postag[:2],
    }
    if i > 0:
        word1, postag1 = sent[i - 1][0], sent[i - 1][1]
        features.update(
            {
                "-1:word.lower()": word1.lower(),
                "-1:word.istitle()": word1.istitle(),
                "-1:word.isupper()": word1.isupper(),
                "-1:postag": postag1,
                "-1:postag[:2]": postag1[:2],
            }
        )
    else:
        features["BOS"] = True
    if i < len(sent) - 1:
        word1, postag1 = sent[i + 1][0], sent[i + 1][1]
        features.update(
            {
                "+1:word.lower()": word1.lower(),
                "+1:word.istitle()": word1.istitle(),
                "+1:word.isupper()": word1.isupper(),
                "+1:postag": postag1,
                "+1:postag[:2]": postag1[:2],
            }
        )
    else:
        features["EOS"] = True
    return features


def sent2features(sent: list[tuple[str, ...]]) -> list[dict]:
    return [word2features(sent, i) for i in range(len(sent))]


def run(crf_class: type, X_train, y_train, X_test, y_test, **params) -> dict:
    crf = crf_class(c1=0, c2=0.1, max_iterations=100, all_possible_transitions=True, **params)
    start = time.perf_counter()
    crf.fit(X_train, y_train)
    seconds = time.perf_counter() - start
    y_pred = [list(s) for s in crf.predict(X_test)]
    return {
        "seconds": seconds,
        "f1": 100 * chunk_f1_score(y_test, y_pred),
        "accuracy": 100 * flat_accuracy(y_test, y_pred),
        "y_pred": y_pred,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-train", type=int, default=None, help="first N training sentences")
    parser.add_argument("--sdca-tol", type=float, default=1e-4, help="tol of the sdca run")
    args = parser.parse_args()

    import sklearn_crfsuite

    import crfsdca

    train, test = load_dataset("conll2002-ned", "train"), load_dataset("conll2002-ned", "test")
    if args.max_train:
        train = train.head(args.max_train)
    X_train, y_train = [sent2features(s) for s in train.tokens], train.labels
    X_test, y_test = [sent2features(s) for s in test.tokens], test.labels
    print(f"train {len(X_train)} sentences, test {len(X_test)} sentences", flush=True)
    # compile crfsdca's kernels outside the timed runs
    crfsdca.CRF(max_iterations=1).fit(X_train[:20], y_train[:20])

    runs = {
        "sklearn_crfsuite (lbfgs)": (sklearn_crfsuite.CRF, {"algorithm": "lbfgs"}),
        "sklearn_crfsuite (dense)": (
            sklearn_crfsuite.CRF,
            {"algorithm": "lbfgs", "all_possible_states": True},
        ),
        "crfsdca (lbfgs)": (crfsdca.CRF, {"algorithm": "lbfgs"}),
        "crfsdca (sdca)": (crfsdca.CRF, {"algorithm": "sdca", "tol": args.sdca_tol}),
    }
    results = {}
    for name, (cls, params) in runs.items():
        results[name] = run(cls, X_train, y_train, X_test, y_test, **params)
        r = results[name]
        print(
            f"{name:26s} fit {r['seconds']:8.1f} s  entity F1 {r['f1']:6.2f}"
            f"  token accuracy {r['accuracy']:6.2f}",
            flush=True,
        )
    base, dense = results["sklearn_crfsuite (lbfgs)"], results["sklearn_crfsuite (dense)"]
    print("relative to the tutorial's sklearn_crfsuite run (and agreement with the dense one):")
    for name, r in results.items():
        agree = flat_accuracy(dense["y_pred"], r["y_pred"])
        print(
            f"{name:26s} fit time x{r['seconds'] / base['seconds']:5.2f}"
            f"  F1 {r['f1'] - base['f1']:+.2f} points  tokens agreeing with dense"
            f" {100 * agree:6.2f}%"
        )


if __name__ == "__main__":
    main()
