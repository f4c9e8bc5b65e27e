"""sklearn-crfsuite's tutorial workflow with sklearn_crfsuite.CRF and with crfsdca.CRF.

CoNLL-2002 Dutch NER (``conll2002-ned``): the tutorial's ``word2features``, train on the train
split, entity (chunk) F1 on the test split (testb), c1=``--c1`` (the tutorial's 0.1 by default;
CRFsuite's OWL-QN, crfsdca's OWL-QN or Prox-SDCA), c2=0.1, max_iterations=100,
all_possible_transitions=True. "crfsdca, import changed only" is ``crfsdca.CRF`` with exactly
the tutorial's arguments: CRFsuite's sparse model (all_possible_states=False, the default),
L-BFGS iterations counted as CRFsuite counts them, CRFsuite's stopping defaults. The same
run with ``n_jobs=1`` uses one core, as CRFsuite does (the default uses numba's threads for the
full-batch passes). Then the dense model in both libraries (``all_possible_states=True``) and
crfsdca's SDCA on the dense model with ``tol`` ``--sdca-tol`` (its duality gap, absolute on
the mean objective).

The runs are interleaved round by round (``--rounds``); the table gives the median fit time,
the median over rounds of the ratio to the tutorial's run of the same round, entity F1, token
accuracy, the L-BFGS iterations and function evaluations, and the machine load.

Run from the repository root::

    CRFSDCA_DATA_DIR=../shared/data python benchmarks/bench_sklearn_tutorial.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
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


def run(crf_class: type, X_train, y_train, X_test, y_test, c1: float = 0.1, **params) -> dict:
    crf = crf_class(c1=c1, c2=0.1, max_iterations=100, all_possible_transitions=True, **params)
    start = time.perf_counter()
    crf.fit(X_train, y_train)
    seconds = time.perf_counter() - start
    y_pred = [list(s) for s in crf.predict(X_test)]
    return {
        "seconds": seconds,
        "f1": 100 * chunk_f1_score(y_test, y_pred),
        "accuracy": 100 * flat_accuracy(y_test, y_pred),
        "y_pred": y_pred,
        "steps": _steps(crf, len(X_train)),
        "weights": len(crf.state_features_) + len(crf.transition_features_),
    }


def _steps(crf, n: int) -> str:
    """L-BFGS iterations / function evaluations (CRFsuite: iterations), or epochs."""
    log = crf.training_log_
    if hasattr(log, "iterations"):  # sklearn-crfsuite's log parser
        return f"{len(log.iterations)} it."
    last = log[-1]
    if last.solver == "lbfgs":
        return f"{round(last.updates / n)} it. / {round(last.oracle_calls / n)} ev."
    return f"{last.epoch:.1f} ep."


def _runs(sklearn_crfsuite, crfsdca, sdca_tol: float) -> dict:
    dense = {"algorithm": "lbfgs", "all_possible_states": True}
    return {
        "sklearn_crfsuite (tutorial)": (sklearn_crfsuite.CRF, {"algorithm": "lbfgs"}),
        "crfsdca (import changed)": (crfsdca.CRF, {"algorithm": "lbfgs"}),
        "crfsdca (same, n_jobs=1)": (crfsdca.CRF, {"algorithm": "lbfgs", "n_jobs": 1}),
        "sklearn_crfsuite (dense)": (sklearn_crfsuite.CRF, dense),
        "crfsdca (dense)": (crfsdca.CRF, dense),
        "crfsdca (sdca, dense)": (crfsdca.CRF, {"algorithm": "sdca", "tol": sdca_tol}),
    }


def _load() -> str:
    return "load " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-train", type=int, default=None, help="first N training sentences")
    parser.add_argument("--sdca-tol", type=float, default=1e-4, help="tol of the sdca run")
    parser.add_argument("--c1", type=float, default=0.1, help="c1 of every run (tutorial: 0.1)")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds of all runs")
    parser.add_argument("--skip", action="append", default=[], help="leave out a run (name)")
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
    crfsdca.CRF(algorithm="lbfgs", max_iterations=1).fit(X_train[:20], y_train[:20])
    crfsdca.CRF(algorithm="lbfgs", c1=args.c1, max_iterations=1).fit(X_train[:20], y_train[:20])
    crfsdca.CRF(c1=args.c1, max_iterations=1).fit(X_train[:20], y_train[:20])

    runs = {k: v for k, v in _runs(sklearn_crfsuite, crfsdca, args.sdca_tol).items()
            if k not in args.skip}  # fmt: skip
    results: dict[str, list[dict]] = {name: [] for name in runs}
    for r in range(args.rounds):
        print(f"round {r + 1}/{args.rounds}, {_load()}", flush=True)
        for name, (cls, params) in runs.items():
            out = run(cls, X_train, y_train, X_test, y_test, c1=args.c1, **params)
            results[name].append(out)
            print(
                f"  {name:28s} fit {out['seconds']:7.1f} s  entity F1 {out['f1']:6.2f}"
                f"  {out['steps']}",
                flush=True,
            )
    print(f"end, {_load()}")
    _report(results)


def _report(results: dict[str, list[dict]]) -> None:
    base_name = "sklearn_crfsuite (tutorial)"
    base = results.get(base_name)
    print(
        "| run | fit (s), median | x tutorial | entity F1 | token acc. | iterations |"
        " non-zero weights | tokens = tutorial's |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, outs in results.items():
        seconds = statistics.median(o["seconds"] for o in outs)
        ratio = (
            statistics.median(o["seconds"] / b["seconds"] for o, b in zip(outs, base, strict=True))
            if base
            else float("nan")
        )
        first = outs[0]
        agree = flat_accuracy(base[0]["y_pred"], first["y_pred"]) if base else float("nan")
        each = ", ".join(f"{o['seconds']:.1f}" for o in outs)
        print(
            f"| {name} | {seconds:.1f} ({each})"
            f" | {ratio:.2f} | {first['f1']:.2f} | {first['accuracy']:.2f} | {first['steps']}"
            f" | {first['weights']:,} | {100 * agree:.2f}% |"
        )


if __name__ == "__main__":
    main()
