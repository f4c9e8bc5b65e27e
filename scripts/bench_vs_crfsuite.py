r"""Time to a given sub-optimality: every crfsdca solver side by side, and CRFsuite L-BFGS.

Solvers (``--solvers``, default all): ``crfsuite`` (CRFsuite L-BFGS), ``sdca-gap`` (SDCA, gap
sampling 80% of the time), ``sdca-uniform``, ``sag-nus`` (SAG with non-uniform sampling and a
Lipschitz line search at every iteration), ``sag-nus-skip`` (SAG-NUS*, the same with line-search
skipping), ``oeg`` (online exponentiated gradient, started from SDCA's smoothed dual point) and
``lbfgs`` (crfsdca's L-BFGS), each with its default options (``baselines.md`` §8).

Every solver minimises the same objective on the same features: by default CoNLL-2000 train with
the ``crfsuite-chunking`` attributes, CRFsuite's dense model (no bias rows) and lambda = 1/n, i.e.
CRFsuite's ``c2 = n lambda / 2 = 0.5`` (CRFsuite minimises sum NLL + c2 ||w||^2 = n P(w)). Run from
the repository root::

    CRFSDCA_DATA_DIR=../shared/data .venv/bin/python scripts/bench_vs_crfsuite.py --quick  # ~4 min
    CRFSDCA_DATA_DIR=../shared/data .venv/bin/python scripts/bench_vs_crfsuite.py

The full run took about 30 minutes before SAG-NUS, SAG-NUS* and OEG were added (with them: not
yet measured; on --quick they add about 1.5 minutes), plus about 25 minutes the first time to
compute P* (cached afterwards; --quick: 4 minutes the first time).

What is measured: for each solver, the wall time of optimisation, the epochs, the oracle calls and
the parameter updates until the relative sub-optimality (P - P*) / P* first falls to 1e-1, 1e-2,
1e-3 and 1e-4, with P* from ``crfsdca.solvers.reference.reference_optimum`` (L-BFGS to a certified
gap of
``--pstar-tol``, cached on disk). Oracle calls and updates are the counters of the trace records
(``baselines.md`` §0): an oracle call is one marginalisation or one forward pass on one sequence,
an update one change of w. SDCA makes one oracle call per update (its line search needs none);
SAG-NUS one plus one per line-search trial; SAG-NUS* fewer, as it skips line searches; OEG one per
trial learning rate, and a visit whose trials all fail makes no update. L-BFGS: n oracle calls per
function evaluation, one update per iteration counted as n (one pass), as for CRFsuite below.

- crfsdca solvers: ``seconds`` of the trace, which excludes the monitor's evaluation passes (exact
  primal, test error). Our solvers evaluate the exact primal once per epoch (``eval_every=1``), so
  thresholds are detected at epoch granularity: the time is that of the first epoch end at which
  the threshold holds. For the dual methods the duality gap (P - D)/D of each evaluation is also
  reported: the time at which it *certifies* each threshold without knowing P*. SDCA runs go on
  until their gap certifies the last threshold. The initial state (SDCA's and OEG's smoothed
  empirical dual point and w(mu); SAG's empty memory) is timed separately (``setup s``) and
  included. A run stops at the epoch that reaches the last threshold, or at ``--epochs`` /
  ``--time-limit``. Epoch = oracle calls / n (for L-BFGS: function evaluations). SAG-NUS and
  SAG-NUS* also report the dual D(nu(w)) of the oracle marginals at each evaluation (untimed).
- CRFsuite (python-crfsuite, single-threaded): P after each iteration is its logged loss / n and
  the time is the cumulative wall time of its iterations (time between the log lines that open
  them; feature generation excluded, its initial evaluation included). Its epochs are function
  evaluations (line-search trials, plus the initial one); its oracle calls are n per evaluation
  and its updates n per iteration (synthesised from its log). CRFsuite cannot be stopped from
  Python: it runs until ``--epochs`` iterations or its own test (relative improvement over 10
  iterations below ``--crfsuite-delta``).
- Threads: crfsdca uses ``--threads`` numba threads (default all). SDCA's epochs are serial; the
  L-BFGS passes and the (untimed) evaluations are parallel. CRFsuite is single-threaded.
- ``load5`` (machine load average) is reported per solver: on a shared machine, solvers run at
  different times see different loads, so compare ratios across runs with care.

Prints two tables, seconds (epochs) to each threshold with the time ratios to CRFsuite, then per
solver and threshold the epochs, oracle calls, updates, oracle calls per update and seconds;
writes one JSONL trace per solver to ``--out`` (default runs/bench_vs_crfsuite/, git-ignored) and
ends with one JSON line: per solver, seconds, epochs, oracle calls and updates to each threshold
(null if never reached), the totals of the run and the time ratio to CRFsuite (below 1: faster
than CRFsuite). The crfsdca solvers alone, side by side, on the first 2,000 NER sequences::

    CRFSDCA_DATA_DIR=../shared/data .venv/bin/python scripts/bench_vs_crfsuite.py \
        --dataset conll2002-ned --max-sequences 2000 --solvers sdca-gap sag-nus sag-nus-skip oeg
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
from crfsdca.features.feature_map import FeatureMap
from crfsdca.features.sequences import SequenceData
from crfsdca.kernels.numerics.threads import max_threads, set_threads
from crfsdca.solvers import SOLVERS
from crfsdca.solvers.monitor import Monitor
from crfsdca.solvers.reference import reference_optimum
from crfsdca.solvers.trace import Trace, TraceRecord
from crfsdca.structures.problem import Problem

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_oracle import crfsuite_items, train_crfsuite  # noqa: E402

THRESHOLDS = (1e-1, 1e-2, 1e-3, 1e-4)
QUICK_SEQUENCES = 1000
DEFAULT_TEMPLATE = {"conll2000": "crfsuite-chunking"}
#: solver name in this script -> (crfsdca solver, config options)
OURS = {
    "sdca-gap": ("sdca", {"sampling": "gap", "non_uniformity": 0.8}),
    "sdca-uniform": ("sdca", {"sampling": "uniform"}),
    "sag-nus": ("sag-nus", {}),
    "sag-nus-skip": ("sag-nus-skip", {}),
    "oeg": ("oeg", {}),
    "lbfgs": ("lbfgs", {}),
}
#: what is recorded at each threshold: trace fields (``seconds`` includes the setup time)
MEASURES = ("seconds", "epochs", "oracle_calls", "updates")
ALL_SOLVERS = ("crfsuite", *OURS)


class _Reached(Exception):
    """Raised from the monitor callback once the smallest threshold is reached."""


def rel_suboptimality(primal: float, p_star: float) -> float:
    return (primal - p_star) / abs(p_star)


def crossings(
    rel: list[float], records: list[TraceRecord], setup: float = 0.0
) -> dict[str, dict[str, float | int | None]]:
    """Seconds (plus ``setup``), epochs, oracle calls and updates of the first record at or below
    each threshold (None if never)."""
    out: dict[str, dict[str, float | int | None]] = {key: {} for key in MEASURES}
    for thr in THRESHOLDS:
        k = next((k for k, r in enumerate(rel) if r <= thr), None)
        rec = None if k is None else records[k]
        c = f"{thr:g}"
        out["seconds"][c] = None if rec is None else round(setup + rec.seconds, 3)
        out["epochs"][c] = None if rec is None else round(rec.epoch, 3)
        out["oracle_calls"][c] = None if rec is None else rec.oracle_calls
        out["updates"][c] = None if rec is None else rec.updates
    return out


def run_totals(records: list[TraceRecord], setup: float = 0.0) -> dict[str, float | int]:
    """Seconds (plus ``setup``), epochs, oracle calls and updates at the last record of a run."""
    last = records[-1]
    return {
        "seconds_run": round(setup + last.seconds, 3),
        "epochs_run": last.epoch,
        "oracle_calls_run": last.oracle_calls,
        "updates_run": last.updates,
    }


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


def with_bias_attributes(data: SequenceData) -> SequenceData:
    """Append three attributes of value 1: on every item, on the first and on the last item.

    They play the part of crfsdca's three bias rows (count, first, last) in a model CRFsuite can
    express, so ``--bias-attributes`` compares both tools on the default OCR model.
    """
    A, N, so = data.n_attributes, data.n_items, data.seq_offsets
    first = np.zeros(N, dtype=np.int64)
    first[so[:-1]] = 1
    last = np.zeros(N, dtype=np.int64)
    last[so[1:] - 1] = 1
    old = np.diff(data.attr_offsets)
    offsets = np.concatenate([[0], np.cumsum(old + 1 + first + last)])
    ids = np.empty(offsets[-1], dtype=np.int64)
    values = np.ones(offsets[-1])
    item = np.repeat(np.arange(N), old)
    dest = offsets[item] + np.arange(data.attr_ids.size) - data.attr_offsets[item]
    ids[dest], values[dest] = data.attr_ids, data.attr_values
    slot = offsets[:-1] + old
    ids[slot] = A
    ids[(slot + 1)[first == 1]] = A + 1
    ids[(slot + 1 + first)[last == 1]] = A + 2
    return SequenceData(
        seq_offsets=so,
        attr_offsets=offsets,
        attr_ids=ids,
        attr_values=values,
        labels=data.labels,
        n_attributes=A + 3,
        label_names=data.label_names,
        name=data.name,
        meta=dict(data.meta),
    )


def per_epoch_seconds(records: list[TraceRecord]) -> float | None:
    """Median solver seconds per epoch between consecutive evaluations one epoch apart."""
    steps = [
        (b.seconds - a.seconds) / (b.epoch - a.epoch)
        for a, b in zip(records, records[1:], strict=False)
        if 0.99 <= b.epoch - a.epoch <= 1.01
    ]
    return float(np.median(steps)) if steps else None


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
    solver, n = cls(config), problem.n_sequences

    def stop_when_reached(record: TraceRecord) -> None:
        print(
            f"  {name}: epoch {record.epoch:7.2f}  updates/n {record.updates / n:7.2f}  "
            f"{record.seconds:8.2f} s  rel {rel_suboptimality(record.primal, p_star):.3e}",
            file=sys.stderr,
        )
        if rel_suboptimality(record.primal, p_star) > THRESHOLDS[-1]:
            return
        # SDCA runs on until its duality gap also certifies the last threshold
        if solver_name != "sdca" or record.dual is None or not record.dual > 0:
            raise _Reached
        if (record.primal - record.dual) / record.dual <= THRESHOLDS[-1]:
            raise _Reached

    monitor = Monitor(problem, name, config, callback=stop_when_reached)
    setup, state = 0.0, None
    if hasattr(solver, "initial_state"):  # every solver but L-BFGS (which starts at w = 0)
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
    # certificate: the duality gap (P - D)/|D| of the evaluation, known without P*
    cert = [
        math.inf if r.dual is None or not r.dual > 0 else (r.primal - r.dual) / r.dual
        for r in records
    ]
    certified = crossings(cert, records, setup)
    return {
        "trace": trace,
        "setup_s": setup,
        "stop": stop,
        "final_rel": rel[-1],
        "epoch_s": per_epoch_seconds(records),
        "certified_seconds": certified["seconds"],
        **run_totals(records, setup),
        **crossings(rel, records, setup),
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
        "iterations": len(primal),
        "epoch_s": float(np.median(run.wall)),  # one L-BFGS iteration
        "evaluation_s": float(np.median(np.asarray(run.wall) / np.asarray(run.evaluations))),
        **run_totals(trace.records),
        **crossings(rel, trace.records),
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


def print_counters(results: dict[str, dict], n: int) -> None:
    """Per solver and threshold: epochs, oracle calls, updates (also / n), calls per update, s."""
    print(
        f"\n{'solver':<13} {'rel<=':>6}  {'epochs':>7}  {'oracle calls':>12}  {'updates':>10}"
        f"  {'updates/n':>9}  {'calls/upd':>9}  {'seconds':>8}"
    )
    for name, res in results.items():
        rows = [(f"{thr:g}", {key: res[key][f"{thr:g}"] for key in MEASURES}) for thr in THRESHOLDS]
        rows.append(("run", {key: res.get(f"{key}_run") for key in MEASURES}))
        for label, cell in rows:
            if cell["epochs"] is None:
                print(f"{name:<13} {label:>6}  {'-':>7}  {'-':>12}  {'-':>10}  {'-':>9}  {'-':>9}")
                continue
            calls, updates = cell["oracle_calls"], cell["updates"]
            per_update = f"{calls / updates:9.3f}" if updates else f"{'-':>9}"
            print(
                f"{name:<13} {label:>6}  {cell['epochs']:>7.2f}  {calls:>12,d}  {updates:>10,d}"
                f"  {updates / n:>9.2f}  {per_update}  {cell['seconds']:>8.2f}"
            )
    print(
        "rows: first evaluation at or below each threshold, then the end of the run (run);"
        " epochs = oracle calls / n (CRFsuite: function evaluations); calls/upd = oracle calls"
        " per parameter update"
    )


def ratio(ours: float | None, theirs: float | None) -> float | None:
    if ours is None or theirs is None or theirs <= 0:
        return None
    return round(ours / theirs, 4)


def print_certificates(results: dict[str, dict]) -> None:
    """Seconds until the duality gap (P - D)/D of an evaluation certifies each threshold."""
    rows = {k: r["certified_seconds"] for k, r in results.items() if "certified_seconds" in r}
    if not any(v is not None for r in rows.values() for v in r.values()):
        return
    print("\nseconds until (P - D)/D <= threshold (a certificate that needs no P*)")
    for name, cells in rows.items():
        text = "  ".join(f"{'-' if v is None else f'{v:.1f} s':>10}" for v in cells.values())
        print(f"{name:<13} {text}")


def print_epoch_costs(results: dict[str, dict]) -> None:
    """Median seconds per epoch (per iteration for CRFsuite) and the ratio to CRFsuite's."""
    base = results.get("crfsuite", {}).get("epoch_s")
    print("\nmedian seconds per epoch (crfsuite: per L-BFGS iteration; same run)")
    for name, res in results.items():
        cost = res.get("epoch_s")
        if cost is None:
            continue
        rel = "" if base is None or name == "crfsuite" else f"  {cost / base:.2f}x crfsuite"
        extra = f"  ({res['evaluation_s']:.3f} s per evaluation)" if "evaluation_s" in res else ""
        print(f"{name:<13} {cost:8.3f} s{rel}{extra}")


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
    parser.add_argument(
        "--bias-attributes",
        action="store_true",
        help="add bias, first and last attributes (crfsdca's bias rows, as CRFsuite attributes)",
    )
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
    if args.bias_attributes:
        train, test = with_bias_attributes(train), with_bias_attributes(test)
        names = None if names is None else [*names, "__BIAS__", "__BOS__", "__EOS__"]
    fm = FeatureMap(train.n_attributes, train.n_labels, n_bias_rows=0)
    problem = Problem(train=train, feature_map=fm, test=test, name=args.dataset)
    n = problem.n_sequences
    print(
        f"{args.dataset} ({args.template}, no bias rows"
        f"{', bias/first/last attributes' if args.bias_attributes else ''}): "
        f"n={n} N={train.n_items} "
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
        **({"bias_attributes": True} if args.bias_attributes else {}),  # keeps older cache keys
    )
    print(f"P* = {p_star:.12g} (certified gap <= {args.pstar_tol:g}; "
          f"{time.perf_counter() - start:.1f} s incl. cache lookup)")  # fmt: skip

    tag = f"{args.dataset}-{args.template}-{'all' if args.max_sequences is None else n}"
    tag += "-bias" if args.bias_attributes else ""
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
    print_counters(results, n)
    print_certificates(results)
    print_epoch_costs(results)
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
        keys = (
            *MEASURES,
            "setup_s",
            "final_rel",
            "seconds_run",
            "epochs_run",
            "oracle_calls_run",
            "updates_run",
            "epoch_s",
            "load5",
        )
        entry = {k: res[k] for k in keys}
        if "certified_seconds" in res:
            entry["certified_seconds"] = res["certified_seconds"]
        if "crfsuite" in results and name != "crfsuite":
            base = results["crfsuite"]["seconds"]
            entry["ratio_vs_crfsuite"] = {c: ratio(s, base[c]) for c, s in res["seconds"].items()}
        summary["solvers"][name] = entry
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
