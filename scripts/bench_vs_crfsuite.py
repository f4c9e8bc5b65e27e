"""Time to a given sub-optimality: SDCA-GAP, uniform SDCA and crfsdca L-BFGS vs CRFsuite L-BFGS.

Every solver minimises the same objective on the same features: by default CoNLL-2000 train with
the ``crfsuite-chunking`` attributes, CRFsuite's dense model (no bias rows) and lambda = 1/n, i.e.
CRFsuite's ``c2 = n lambda / 2 = 0.5`` (CRFsuite minimises sum NLL + c2 ||w||^2 = n P(w)). Run from
the repository root::

    CRFSDCA_DATA_DIR=../shared/data .venv/bin/python scripts/bench_vs_crfsuite.py --quick  # ~2 min
    CRFSDCA_DATA_DIR=../shared/data .venv/bin/python scripts/bench_vs_crfsuite.py

The full run takes about 30 minutes, plus about 25 minutes the first time to compute P* (cached
afterwards; --quick: 4 minutes the first time).

What is measured: for each solver, the wall time of optimisation and the epochs until the relative
sub-optimality (P - P*) / P* first falls to 1e-1, 1e-2, 1e-3 and 1e-4, with P* from
``crfsdca.reference.reference_optimum`` (L-BFGS to a certified gap of ``--pstar-tol``, cached on
disk).

- crfsdca solvers: ``seconds`` of the trace, which excludes the monitor's evaluation passes (exact
  primal, test error). Our solvers evaluate the exact primal once per epoch (``eval_every=1``), so
  thresholds are detected at epoch granularity: the time is that of the first epoch end at which
  the threshold holds. SDCA's initialisation (the smoothed empirical dual point and w(mu)) is timed
  separately and included. A run stops at the epoch that reaches the last threshold, or at
  ``--epochs`` / ``--time-limit``. Epoch = oracle calls / n (for L-BFGS: function evaluations).
- CRFsuite (python-crfsuite, single-threaded): P after each iteration is its logged loss / n and
  the time is the cumulative wall time of its iterations (time between the log lines that open
  them; feature generation excluded, its initial evaluation included). Its epochs are function
  evaluations (line-search trials, plus the initial one). CRFsuite cannot be stopped from Python:
  it runs until ``--epochs`` iterations or its own test (relative improvement over 10 iterations
  below ``--crfsuite-delta``).
- Threads: crfsdca uses ``--threads`` numba threads (default all). SDCA's epochs are serial; the
  L-BFGS passes and the (untimed) evaluations are parallel. CRFsuite is single-threaded.
- ``load5`` (machine load average) is reported per solver: on a shared machine, solvers run at
  different times see different loads, so compare ratios across runs with care.

Prints a table, writes one JSONL trace per solver to ``--out`` (default runs/bench_vs_crfsuite/,
git-ignored) and ends with one JSON line: per solver, seconds and epochs to each threshold and the
time ratio to CRFsuite (below 1: faster than CRFsuite).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
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
from crfsdca.features import FeatureMap
from crfsdca.kernels.batch import max_threads, set_threads
from crfsdca.monitor import Monitor
from crfsdca.problem import Problem
from crfsdca.reference import reference_optimum
from crfsdca.sequences import SequenceData
from crfsdca.solvers import SOLVERS
from crfsdca.trace import Trace, TraceRecord

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_oracle import crfsuite_items, train_crfsuite  # noqa: E402

THRESHOLDS = (1e-1, 1e-2, 1e-3, 1e-4)
QUICK_SEQUENCES = 1000
DEFAULT_TEMPLATE = {"conll2000": "crfsuite-chunking"}
#: solver name in this script -> (crfsdca solver, config options)
OURS = {
    "sdca-gap": ("sdca", {"sampling": "gap", "non_uniformity": 0.8}),
    "sdca-uniform": ("sdca", {"sampling": "uniform"}),
    "lbfgs": ("lbfgs", {}),
}
ALL_SOLVERS = ("crfsuite", *OURS)


class _Reached(Exception):
    """Raised from the monitor callback once the smallest threshold is reached."""


def rel_suboptimality(primal: float, p_star: float) -> float:
    return (primal - p_star) / abs(p_star)


def crossings(
    rel: list[float], seconds: list[float], epochs: list[float]
) -> dict[str, dict[str, float | None]]:
    """Seconds and epochs of the first point at or below each threshold (None if never)."""
    out: dict[str, dict[str, float | None]] = {"seconds": {}, "epochs": {}}
    for thr in THRESHOLDS:
        k = next((k for k, r in enumerate(rel) if r <= thr), None)
        out["seconds"][f"{thr:g}"] = None if k is None else round(seconds[k], 3)
        out["epochs"][f"{thr:g}"] = None if k is None else round(epochs[k], 3)
    return out


def restrict_to_training_support(
    train: SequenceData, test: SequenceData
) -> tuple[SequenceData, SequenceData, np.ndarray]:
    """Drop the labels and attributes that never occur in ``train``.

    CRFsuite's model only has the labels and attributes of its training data; an encoder with a
    fixed label set (OCR: a-z) keeps labels absent from a subset, which would change the objective
    (they still enter every partition function). Unused attributes do not change P but would
    change d. Returns the new train and test data and the kept attribute ids. Test tokens with a
    dropped label get label -1 (always an error).
    """
    labels, attributes = np.unique(train.labels), np.unique(train.attr_ids)
    if labels.size == train.n_labels and attributes.size == train.n_attributes:
        return train, test, attributes
    label_map = np.full(train.n_labels, -1)
    label_map[labels] = np.arange(labels.size)
    attr_map = np.full(train.n_attributes, -1)
    attr_map[attributes] = np.arange(attributes.size)

    def remap(data: SequenceData) -> SequenceData:
        ids = attr_map[data.attr_ids]
        keep = ids >= 0
        item_of_entry = np.repeat(np.arange(data.n_items), np.diff(data.attr_offsets))
        counts = np.bincount(item_of_entry[keep], minlength=data.n_items)
        return SequenceData(
            seq_offsets=data.seq_offsets,
            attr_offsets=np.concatenate([[0], np.cumsum(counts)]),
            attr_ids=ids[keep],
            attr_values=data.attr_values[keep],
            labels=np.where(data.labels >= 0, label_map[np.maximum(data.labels, 0)], -1),
            n_attributes=attributes.size,
            label_names=tuple(data.label_names[k] for k in labels),
            name=data.name,
            meta=dict(data.meta),
        )

    return remap(train), remap(test), attributes


def run_ours(name: str, problem: Problem, p_star: float, args: argparse.Namespace) -> dict:
    """One crfsdca solver up to the smallest threshold; its trace and threshold crossings."""
    solver_name, options = OURS[name]
    cls = SOLVERS[solver_name]
    config = cls.config_class(
        **options,
        max_epochs=args.epochs,
        time_limit=args.time_limit,
        eval_every=1.0,
        seed=args.seed,
    )
    solver = cls(config)

    def stop_when_reached(record: TraceRecord) -> None:
        print(
            f"  {name}: epoch {record.epoch:7.2f}  {record.seconds:8.2f} s  "
            f"rel {rel_suboptimality(record.primal, p_star):.3e}",
            file=sys.stderr,
        )
        if rel_suboptimality(record.primal, p_star) <= THRESHOLDS[-1]:
            raise _Reached

    monitor = Monitor(problem, name, config, callback=stop_when_reached)
    setup, state = 0.0, None
    if solver_name == "sdca":
        start = time.perf_counter()
        state = solver.initial_state(problem)
        setup = time.perf_counter() - start
    stop = "thresholds reached"
    with warnings.catch_warnings(), contextlib.suppress(_Reached):
        warnings.simplefilter("ignore", ConvergenceWarning)
        stop = solver.solve(problem, monitor, state).stop_reason
    del state
    gc.collect()
    trace = monitor.trace
    trace.header["setup_seconds"] = setup
    records = trace.records
    rel = [rel_suboptimality(r.primal, p_star) for r in records]
    return {
        "trace": trace,
        "setup_s": setup,
        "stop": stop,
        "final_rel": rel[-1],
        "epochs_run": records[-1].epoch,
        **crossings(rel, [setup + r.seconds for r in records], [r.epoch for r in records]),
    }


def run_crfsuite(problem: Problem, p_star: float, args: argparse.Namespace, names) -> dict:
    """CRFsuite L-BFGS on the same features; P per iteration from its logged loss."""
    data, n = problem.train, problem.n_sequences
    c2 = n * problem.regularization / 2
    items = crfsuite_items(data, names)
    labels = [[data.label_names[y] for y in data.sequence_labels(i)] for i in range(n)]
    params = {
        "max_iterations": int(args.epochs),
        "epsilon": 1e-12,
        "delta": args.crfsuite_delta,
        "period": 10,
    }
    run = train_crfsuite(items, labels, c2=c2, **params)
    del items
    if run.n_features != problem.feature_map.n_features:
        raise SystemExit(
            f"CRFsuite generated {run.n_features} features; ours {problem.feature_map.n_features}"
        )
    seconds = np.cumsum(run.wall).tolist()
    cpu = np.cumsum(run.cpu).tolist()
    epochs = np.cumsum(run.evaluations).tolist()
    primal = [loss / n for loss in run.loss]
    trace = Trace.create(
        solver="crfsuite",
        config={"c1": 0.0, "c2": c2, **params, "num_memories": 6, "linesearch": "MoreThuente"},
        regularization=problem.regularization,
        dataset=problem.name,
        n_sequences=n,
        seed=None,
        n_features=run.n_features,
        featgen_seconds=run.featgen_seconds,
        stop=run.stop,
    )
    for k in range(len(primal)):
        trace.append(
            TraceRecord(
                solver="crfsuite",
                epoch=epochs[k],
                oracle_calls=int(epochs[k]) * n,
                updates=(k + 1) * n,
                seconds=seconds[k],
                primal=primal[k],
                extra={"iteration": k + 1, "trials": run.trials[k], "cpu_seconds": cpu[k]},
            )
        )
    rel = [rel_suboptimality(p, p_star) for p in primal]
    return {
        "trace": trace,
        "setup_s": 0.0,
        "stop": run.stop,
        "final_rel": rel[-1],
        "epochs_run": epochs[-1],
        "iterations": len(primal),
        **crossings(rel, seconds, epochs),
    }


def print_table(results: dict[str, dict], p_star: float) -> None:
    cols = [f"{thr:g}" for thr in THRESHOLDS]
    head = f"{'solver':<13} {'setup s':>7}  " + "  ".join(f"{'rel<=' + c:>17}" for c in cols)
    print(head + f"  {'final rel':>9}  {'epochs':>6}  {'load5':>5}  stop")
    for name, res in results.items():
        cells = []
        for c in cols:
            s, e = res["seconds"][c], res["epochs"][c]
            cells.append(f"{'-':>17}" if s is None else f"{s:>9.1f} s ({e:>4.0f})")
        print(
            f"{name:<13} {res['setup_s']:>7.2f}  "
            + "  ".join(cells)
            + f"  {res['final_rel']:>9.2e}  {res['epochs_run']:>6.1f}  {res['load5']:>5.2f}"
            + f"  {res['stop']}"
        )
    if "crfsuite" in results:
        base = results["crfsuite"]["seconds"]
        for name, res in results.items():
            if name == "crfsuite":
                continue
            ratios = [ratio(res["seconds"][c], base[c]) for c in cols]
            cells = "  ".join(f"{'-' if r is None else f'{r:.2f}':>17}" for r in ratios)
            print(f"{name + '/crfs':<13} {'':>7}  {cells}")
    print(f"cells: seconds to reach (P - P*)/P* <= threshold (epochs); P* = {p_star:.12g}")
    print("load5: 5-minute load average of the machine at the end of the run (2 cores)")


def ratio(ours: float | None, theirs: float | None) -> float | None:
    if ours is None or theirs is None or theirs <= 0:
        return None
    return round(ours / theirs, 4)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="conll2000", help="conll2000 | conll2002-ned | ocr")
    parser.add_argument(
        "--template", default=None, help="attribute template [crfsuite-chunking for conll2000]"
    )
    parser.add_argument("--max-sequences", type=int, default=None)
    parser.add_argument("--quick", action="store_true", help="first 1,000 training sequences")
    parser.add_argument("--epochs", type=float, default=200.0, help="cap per solver")
    parser.add_argument("--time-limit", type=float, default=math.inf, help="cap per crfsdca run")
    parser.add_argument(
        "--solvers", nargs="+", default=list(ALL_SOLVERS), choices=ALL_SOLVERS, metavar="SOLVER"
    )
    parser.add_argument("--threads", type=int, default=max_threads(), help="numba threads")
    parser.add_argument("--pstar-tol", type=float, default=1e-10)
    parser.add_argument("--crfsuite-delta", type=float, default=1e-7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/bench_vs_crfsuite"))
    args = parser.parse_args()
    if args.quick and args.max_sequences is None:
        args.max_sequences = QUICK_SEQUENCES
    if args.template is None:
        args.template = DEFAULT_TEMPLATE.get(
            args.dataset, data_loaders.get_dataset(args.dataset).default_template
        )
    return args


def main() -> None:
    args = parse_args()
    set_threads(args.threads)
    encoder, train, test = data_loaders.load_encoded(
        args.dataset, template=args.template, max_sequences=args.max_sequences
    )
    names = encoder.attribute_names() if hasattr(encoder, "attribute_names") else None
    n_labels, n_attributes = train.n_labels, train.n_attributes
    train, test, kept = restrict_to_training_support(train, test)
    if (train.n_labels, train.n_attributes) != (n_labels, n_attributes):
        print(
            f"kept the {train.n_labels} of {n_labels} labels and {train.n_attributes} of"
            f" {n_attributes} attributes that occur in the training data (CRFsuite's model)"
        )
        names = None if names is None else [names[j] for j in kept]
    fm = FeatureMap(train.n_attributes, train.n_labels, n_bias_rows=0)
    problem = Problem(train=train, feature_map=fm, test=test, name=args.dataset)
    n = problem.n_sequences
    print(
        f"{args.dataset} ({args.template}, no bias rows): n={n} N={train.n_items} "
        f"K={fm.n_labels} A={fm.n_attributes} d={fm.n_features} lambda=1/n "
        f"(CRFsuite c2={n * problem.regularization / 2:g}) threads={args.threads}"
    )
    start = time.perf_counter()
    p_star, _ = reference_optimum(
        problem,
        tol=args.pstar_tol,
        dataset=args.dataset,
        template=args.template,
        max_sequences=args.max_sequences,
        n_bias_rows=0,
    )
    print(f"P* = {p_star:.12g} (certified gap <= {args.pstar_tol:g}; "
          f"{time.perf_counter() - start:.1f} s incl. cache lookup)")  # fmt: skip

    tag = f"{args.dataset}-{args.template}-{'all' if args.max_sequences is None else n}"
    out = args.out / tag
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}
    for name in args.solvers:
        print(f"running {name} ...", file=sys.stderr)
        if name == "crfsuite":
            res = run_crfsuite(problem, p_star, args, names)
        else:
            res = run_ours(name, problem, p_star, args)
        res["load5"] = round(os.getloadavg()[1], 2)  # machine load over the last 5 minutes
        res.pop("trace").to_jsonl(out / f"{name}.jsonl")
        results[name] = res
        print(f"{name}: seconds {res['seconds']} epochs {res['epochs']} stop {res['stop']}")
        gc.collect()
        if res["final_rel"] < -1e-9:
            print(f"warning: {name} went below P* by {-res['final_rel']:.2e} (relative)")

    print_table(results, p_star)
    summary: dict[str, Any] = {
        "dataset": args.dataset,
        "template": args.template,
        "n_sequences": n,
        "n_features": fm.n_features,
        "threads": args.threads,
        "p_star": p_star,
        "traces": str(out),
        "solvers": {},
    }
    for name, res in results.items():
        keys = ("seconds", "epochs", "setup_s", "final_rel", "epochs_run", "load5")
        entry = {k: res[k] for k in keys}
        if "crfsuite" in results and name != "crfsuite":
            base = results["crfsuite"]["seconds"]
            entry["ratio_vs_crfsuite"] = {c: ratio(s, base[c]) for c, s in res["seconds"].items()}
        summary["solvers"][name] = entry
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
