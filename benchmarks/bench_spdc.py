r"""The adaptive dual-free SPDC (``spdc-df``) against SDCA-GAP, SAG-NUS and OEG at lambda = 1/n
and lambda = 0.01/n: convergence by epochs of oracle calls, and the seed's claim judged.

Wang & Xiao (ICML 2017) claim that primal-dual methods, with step sizes adapted to the strong
convexity the data give the loss (Algorithm 4), converge linearly at a rate that does not
collapse as lambda shrinks, where a dual method such as SDCA cannot use that convexity. Run from
the repository root (the machine is shared: ``nice -n 5``)::

    CRFSDCA_DATA_DIR=../shared/data nice -n 5 .venv/bin/python benchmarks/bench_spdc.py \
        --dataset ocr --epochs 300
    CRFSDCA_DATA_DIR=../shared/data nice -n 5 .venv/bin/python benchmarks/bench_spdc.py \
        --dataset conll2000 --max-sequences 2000 --epochs 300

Every solver minimises the same P (the dataset's default template, 3 bias rows) with lambda =
s / n for each ``--lambda-scales`` s, from its default start, one thread (``--threads``), until
(P - P*)/|P*| <= ``--target`` or ``--epochs`` epochs of oracle calls. P* comes from
``crfsdca.solvers.reference.reference_optimum`` (L-BFGS to a certified gap of ``--pstar-tol``,
cached). Oracle calls count every marginalisation and forward pass, SPDC's gap passes for its
adaptation included (n per adaptation); the monitor's evaluations (one exact primal per epoch,
no test set) are counted nowhere. ``spdc-df-fixed`` is Theorem 4's constants without the
adaptation (Delta = lambda n); ``spdc-df-r0.01`` the adaptive method with R^2 x 0.01 (steps
the theorem does not allow, to see what the radius costs).

The rule (printed with the verdicts): on each run, the rate is the slope of log10(P - P*)
against epochs of oracle calls, fitted by least squares on the records of the second half of
the run (by epochs) with rel > 1e-10 (at least 5). A run *converges linearly* when that slope is
negative and the fit's R^2 >= 0.95. The claim *holds on a dataset* when spdc-df converges
linearly at both lambdas and keeps at least 0.1 of its rate when lambda drops 100-fold
(retention = rate(0.01/n) / rate(1/n) >= 0.1, where lambda alone predicts 0.1 for an accelerated
method and 0.01 for a plain one); its retention is printed beside the others', and its epochs to
each threshold beside theirs.

Writes one JSONL trace per run to ``--out`` (git-ignored ``runs/``) and ends with one JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

import data_loaders
from crfsdca.errors import ConvergenceWarning
from crfsdca.features.feature_map import FeatureMap
from crfsdca.kernels.numerics.threads import set_threads
from crfsdca.solvers import SOLVERS
from crfsdca.solvers.monitor import Monitor
from crfsdca.solvers.reference import reference_optimum
from crfsdca.structures.problem import Problem

THRESHOLDS = (1e-2, 1e-4, 1e-6)
#: name in this script -> (crfsdca solver, options)
RUNS = {
    "sdca-gap": ("sdca", {"sampling": "gap", "non_uniformity": 0.8}),
    "sag-nus": ("sag-nus", {}),
    "oeg": ("oeg", {}),
    "spdc-df": ("spdc-df", {}),
    "spdc-df-fixed": ("spdc-df", {"adapt": "off"}),
    "spdc-df-r0.01": ("spdc-df", {"radius_scale": 0.01}),
}
LINEAR_R2 = 0.95
RETENTION = 0.1


class _Reached(Exception):
    """Raised from the monitor callback when the target sub-optimality is reached."""


def run(name: str, problem: Problem, p_star: float, args: argparse.Namespace) -> dict[str, Any]:
    """One solver to the target or the budget; its trace and what the tables need."""
    solver, options = RUNS[name]
    cls = SOLVERS[solver]
    config = cls.config_class(
        max_epochs=args.epochs, tol=0.0, time_limit=args.time_limit, seed=args.seed, **options
    )

    def stop(record) -> None:
        if (record.primal - p_star) / abs(p_star) <= args.target:
            raise _Reached

    monitor = Monitor(problem, name, config, callback=stop, evaluate_test=False)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with contextlib.suppress(_Reached):
            cls(config).solve(problem, monitor)
    wall = time.perf_counter() - start
    records = monitor.trace.records
    rel = [(r.primal - p_star) / abs(p_star) for r in records]
    return {
        "trace": monitor.trace,
        "epochs": [r.epoch for r in records],
        "updates": [r.updates / problem.n_sequences for r in records],
        "seconds": [r.seconds for r in records],
        "rel": rel,
        "gap": [r.gap for r in records],
        "wall": wall,
        "extra": records[-1].extra,
    }


def first_at(res: dict[str, Any], threshold: float) -> tuple[float, float, float] | None:
    """(epochs, updates / n, seconds) of the first record with rel <= threshold."""
    k = next((k for k, r in enumerate(res["rel"]) if r <= threshold), None)
    if k is None:
        return None
    return res["epochs"][k], res["updates"][k], res["seconds"][k]


def rate(res: dict[str, Any]) -> tuple[float, float, int]:
    """(decades of P - P* per epoch, R^2, points) of the fit on the second half of the run."""
    epochs, rel = np.asarray(res["epochs"]), np.asarray(res["rel"])
    keep = (epochs >= epochs[-1] / 2) & (rel > 1e-10)
    if keep.sum() < 5:
        return math.nan, math.nan, int(keep.sum())
    x, y = epochs[keep], np.log10(rel[keep])
    slope, intercept = np.polyfit(x, y, 1)
    resid = y - (slope * x + intercept)
    total = ((y - y.mean()) ** 2).sum()
    r2 = 1.0 - (resid**2).sum() / total if total > 0 else 1.0
    return -slope, r2, int(keep.sum())


def cell(value: tuple[float, float, float] | None) -> str:
    return "-" if value is None else f"{value[0]:.0f} / {value[1]:.0f} / {value[2]:.1f}"


def print_tables(results: dict[float, dict[str, dict]], args: argparse.Namespace) -> dict:
    """One table per lambda, then the rates, retentions and verdict; returns the summary."""
    summary: dict[str, Any] = {}
    for scale, runs in results.items():
        print(f"\nlambda = {scale:g}/n: epochs of oracle calls / updates / n / seconds to rel")
        head = " | ".join(f"{t:g}" for t in THRESHOLDS)
        print(f"| solver | {head} | final rel | rate (decades/100 ep.) | R^2 |")
        print("|---" * (len(THRESHOLDS) + 4) + "|")
        for name, res in runs.items():
            cells = " | ".join(cell(first_at(res, t)) for t in THRESHOLDS)
            r, r2, _ = rate(res)
            print(f"| {name} | {cells} | {res['rel'][-1]:.2e} | {100 * r:.3g} | {r2:.3f} |")
            summary.setdefault(name, {})[f"{scale:g}"] = {
                "to": {f"{t:g}": first_at(res, t) for t in THRESHOLDS},
                "final_rel": res["rel"][-1],
                "epochs_run": res["epochs"][-1],
                "rate_decades_per_epoch": r,
                "r2": r2,
                "wall_s": res["wall"],
                "extra": res["extra"],
            }
    scales = sorted(results, reverse=True)
    if len(scales) < 2:
        return summary
    big, small = scales[0], scales[-1]
    print(f"\nretention = rate(lambda = {small:g}/n) / rate(lambda = {big:g}/n)")
    for name, entry in summary.items():
        if f"{big:g}" in entry and f"{small:g}" in entry:
            a, b = entry[f"{big:g}"], entry[f"{small:g}"]
            keep = b["rate_decades_per_epoch"] / a["rate_decades_per_epoch"]
            entry["retention"] = keep
            print(f"  {name:<16} {keep:.3g}")
    spdc = summary.get("spdc-df", {})
    if "retention" in spdc:
        linear = all(
            spdc[f"{s:g}"]["rate_decades_per_epoch"] > 0 and spdc[f"{s:g}"]["r2"] >= LINEAR_R2
            for s in (big, small)
        )
        holds = linear and spdc["retention"] >= RETENTION
        print(
            f"\nrule: linear = slope < 0 and R^2 >= {LINEAR_R2} on the second half of the run"
            f" at both lambdas; the claim holds if spdc-df is linear and its retention >="
            f" {RETENTION}\nverdict on {args.dataset}: linear {linear}, retention"
            f" {spdc['retention']:.3g} -> the claim {'holds' if holds else 'does not hold'}"
        )
        summary["verdict"] = {"linear": linear, "retention": spdc["retention"], "holds": holds}
    return summary


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ocr", help="a registered dataset (ocr, conll2000)")
    parser.add_argument("--max-sequences", type=int, default=None)
    parser.add_argument("--lambda-scales", type=float, nargs="+", default=[1.0, 0.01])
    parser.add_argument("--solvers", nargs="+", default=list(RUNS), choices=list(RUNS))
    parser.add_argument("--epochs", type=float, default=300.0, help="cap per run")
    parser.add_argument("--time-limit", type=float, default=math.inf, help="cap per run (s)")
    parser.add_argument("--target", type=float, default=1e-8, help="stop at this rel")
    parser.add_argument("--threads", type=int, default=1, help="numba threads")
    parser.add_argument("--pstar-tol", type=float, default=1e-11)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/bench_spdc"))
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    set_threads(args.threads)
    _, train, _ = data_loaders.load_encoded(args.dataset, max_sequences=args.max_sequences)
    fm = FeatureMap(train.n_attributes, train.n_labels, n_bias_rows=3)
    n = train.n_sequences
    tag = f"{args.dataset}-{'all' if args.max_sequences is None else n}"
    print(f"{tag}: n={n} N={train.n_items} K={fm.n_labels} d={fm.n_features} threads"
          f" {args.threads}, load5 {os.getloadavg()[1]:.1f}")  # fmt: skip
    warm = Problem(train=train.head(min(n, 50)), feature_map=fm, name="warmup")
    for name in args.solvers:  # compile every solver's kernels before anything is timed
        solver, options = RUNS[name]
        config = SOLVERS[solver].config_class(max_epochs=1.0, tol=0.0, **options)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            SOLVERS[solver](config).solve(warm, Monitor(warm, name, config, evaluate_test=False))
    results: dict[float, dict[str, dict]] = {}
    for scale in args.lambda_scales:
        problem = Problem(train=train, feature_map=fm, regularization=scale / n, name=tag)
        start = time.perf_counter()
        p_star, _ = reference_optimum(problem, tol=args.pstar_tol, scale=scale, bench="spdc")
        print(f"lambda = {scale:g}/n: P* = {p_star:.12g} ({time.perf_counter() - start:.0f} s)")
        folder = args.out / f"{tag}-lambda{scale:g}"
        folder.mkdir(parents=True, exist_ok=True)
        results[scale] = {}
        for name in args.solvers:
            print(f"  running {name} ...", file=sys.stderr, flush=True)
            res = run(name, problem, p_star, args)
            res.pop("trace").to_jsonl(folder / f"{name}.jsonl")
            results[scale][name] = res
            print(f"  {name}: {res['epochs'][-1]:.0f} epochs, rel {res['rel'][-1]:.2e},"
                  f" {res['wall']:.0f} s, load5 {os.getloadavg()[1]:.1f}", flush=True)  # fmt: skip
    summary = print_tables(results, args)
    print(json.dumps({"dataset": tag, "n": n, "d": fm.n_features, "runs": summary}))


if __name__ == "__main__":
    main()
