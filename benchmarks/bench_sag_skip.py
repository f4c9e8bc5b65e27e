r"""SAG-NUS against SAG-NUS* under both rules for a skipped visit: sub-optimality per epoch.

    CRFSDCA_DATA_DIR=../shared/data python benchmarks/bench_sag_skip.py \
        --dataset conll2002-ned --max-sequences 2000 --epochs 100 --seeds 0 1 2

Runs, for every seed, ``sag-nus`` (a line search at every visit), ``sag-nus-skip`` with
``skipped_visit="freeze"`` (a skipped visit leaves L_i and L_max alone, the default) and
``sag-nus-skip`` with ``skipped_visit="decay"`` (a skipped visit still decays L_max, the earlier
rule), on the dataset's default attributes and feature map (bias rows included) with lambda = 1/n.
The exact primal is evaluated after every epoch of oracle calls and compared with P* from
``crfsdca.solvers.reference.reference_optimum`` (computed and cached the first time).

Prints, per run, the relative sub-optimality (P - P*) / P* every ``--every`` epochs, the epochs
of oracle calls to 1e-2 ... 1e-5, the largest rise of the sub-optimality between two evaluations
(a factor; 1 means it never rose) and the oracle calls per update; then, per solver, the mean and
the worst epochs to 1e-4 over the seeds. The last line is a JSON object with every curve.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time
import warnings

import data_loaders
from crfsdca.errors import ConvergenceWarning
from crfsdca.features.feature_map import FeatureMap
from crfsdca.kernels.numerics.threads import set_threads
from crfsdca.solvers import SOLVERS
from crfsdca.solvers.monitor import Monitor
from crfsdca.solvers.reference import reference_optimum
from crfsdca.structures.problem import Problem

THRESHOLDS = (1e-2, 1e-3, 1e-4, 1e-5)
#: label -> (solver, options)
VARIANTS = {
    "sag-nus": ("sag-nus", {}),
    "skip-freeze": ("sag-nus-skip", {"skipped_visit": "freeze"}),
    "skip-decay": ("sag-nus-skip", {"skipped_visit": "decay"}),
}


def run(problem: Problem, p_star: float, label: str, seed: int, epochs: float) -> dict:
    """One run; its per-epoch relative sub-optimality and counters."""
    name, options = VARIANTS[label]
    cls = SOLVERS[name]
    config = cls.config_class(
        **options, max_epochs=epochs, eval_every=1.0, seed=seed, certificate=False
    )
    monitor = Monitor(problem, label, config, evaluate_test=False)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        cls(config).solve(problem, monitor)
    records = monitor.trace.records
    rel = [(r.primal - p_star) / abs(p_star) for r in records]
    epoch = [r.epoch for r in records]
    rises = [b / a for a, b in itertools.pairwise(rel) if a > 0]
    last = records[-1]
    return {
        "label": label,
        "seed": seed,
        "epoch": [round(e, 3) for e in epoch],
        "rel": rel,
        "to": {
            f"{thr:g}": next(
                (round(r.epoch, 2) for r, x in zip(records, rel, strict=True) if x <= thr), None
            )
            for thr in THRESHOLDS
        },
        "worst_rise": max([1.0, *rises]),
        "calls_per_update": last.oracle_calls / max(last.updates, 1),
        "skipped": last.extra.get("skipped_line_searches", 0.0),
        "seconds": time.perf_counter() - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="conll2002-ned")
    parser.add_argument("--max-sequences", type=int, default=2000)
    parser.add_argument("--epochs", type=float, default=100.0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--every", type=int, default=5, help="print every this many epochs")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    set_threads(args.threads)

    dataset = data_loaders.get_dataset(args.dataset)
    template = dataset.default_template
    encoder, train, _ = data_loaders.load_encoded(
        args.dataset, template=template, max_sequences=args.max_sequences
    )
    fm = FeatureMap(train.n_attributes, train.n_labels, encoder.default_bias_rows)
    problem = Problem(train=train, feature_map=fm, name=args.dataset)
    p_star, _ = reference_optimum(
        problem,
        dataset=args.dataset,
        template=template,
        max_sequences=args.max_sequences,
        n_bias_rows=fm.n_bias_rows,
    )
    n = problem.n_sequences
    print(
        f"{args.dataset} ({template}): n={n} d={fm.n_features} lambda=1/n P*={p_star:.12g}"
        f" load1={os.getloadavg()[0]:.2f}"
    )
    results = []
    for seed in args.seeds:
        for label in args.variants:
            res = run(problem, p_star, label, seed, args.epochs)
            results.append(res)
            curve = " ".join(f"{r:.1e}" for r in res["rel"][args.every :: args.every])
            to = " ".join(f"{k}:{v}" for k, v in res["to"].items())
            print(
                f"{label:<12} seed {seed:>2} | {curve} | epochs to {to} | worst rise"
                f" x{res['worst_rise']:.2f} | calls/update {res['calls_per_update']:.2f}"
                f" | {res['seconds']:.0f} s",
                flush=True,
            )
    print(f"rel every {args.every} epochs of oracle calls, from epoch {args.every}")
    for label in args.variants:
        to4 = [r["to"]["0.0001"] for r in results if r["label"] == label]
        reached = [e for e in to4 if e is not None]
        mean = sum(reached) / len(reached) if reached else float("nan")
        worst = "never" if len(reached) < len(to4) else f"{max(reached):g}"
        print(
            f"{label:<12} epochs to 1e-4 over {len(to4)} seeds: mean {mean:.1f}, worst {worst}"
            f" ({len(to4) - len(reached)} not reached)"
        )
    print(json.dumps({"dataset": args.dataset, "n": n, "p_star": p_star, "runs": results}))


if __name__ == "__main__":
    main()
