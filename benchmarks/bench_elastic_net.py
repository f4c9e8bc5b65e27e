"""Elastic net on full CoNLL-2000: certified Prox-SDCA (SDCA-GAP) against CRFsuite's OWL-QN.

The ``crfsuite-chunking`` attributes of the CoNLL-2000 training set, CRFsuite's dense model
(``feature.possible_states`` and ``possible_transitions``, no bias rows) in both libraries,
CRFsuite's c1 = c2 = 0.1 (crfsdca: sigma = c1 / n, lambda = 2 c2 / n). P* comes from a
reference SDCA run to a certified gap ``--pstar-tol`` (not timed). Then, round by round (both
in the same round, one after the other, one thread each):

- crfsdca: ``SDCA`` with gap sampling and ``tol`` = ``--target``, i.e. until its duality gap
  P - D, checked by an exact pass, is <= the target: wall time of ``solve`` (its per-epoch
  evaluations and exact passes included), and the primal sub-optimality P - P* it returns;
- CRFsuite: python-crfsuite's ``lbfgs`` with ``c1`` (OWL-QN, CRFsuite's backtracking line
  search), ``--crfsuite-iterations`` iterations; the wall time (``on_iteration``) from the call
  to ``train`` (feature generation included) to the first iteration whose loss / n - P* is <=
  the target.

The table gives each round's times, the medians, the ratio crfsdca / CRFsuite per round and its
median, and the machine's load average before and after each run.

    CRFSDCA_DATA_DIR=../shared/data NUMBA_NUM_THREADS=1 python benchmarks/bench_elastic_net.py
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from crfsdca.errors import ConvergenceWarning
from crfsdca.features.attributes import make_encoder
from crfsdca.features.feature_map import FeatureMap
from crfsdca.solvers.monitor import Monitor
from crfsdca.solvers.sdca import SDCA, SDCAConfig
from crfsdca.structures.problem import Problem
from data_loaders import load_dataset


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def build(n_max: int | None, c1: float, c2: float):
    """The Problem and, for CRFsuite, the items (attribute dicts) and labels."""
    tokens = load_dataset("conll2000", "train")
    if n_max:
        tokens = tokens.head(n_max)
    encoder = make_encoder("crfsuite-chunking")
    data = encoder.fit_transform(tokens)
    names = np.array(encoder.attribute_names(), dtype=object)
    items = []
    for i in range(data.n_sequences):
        seq = []
        for t in range(data.seq_offsets[i], data.seq_offsets[i + 1]):
            a, b = data.attr_offsets[t], data.attr_offsets[t + 1]
            seq.append(dict(zip(names[data.attr_ids[a:b]].tolist(),
                                data.attr_values[a:b].tolist(), strict=True)))  # fmt: skip
        items.append(seq)
    n = data.n_sequences
    fm = FeatureMap(data.n_attributes, data.n_labels, n_bias_rows=0)
    problem = Problem(train=data, feature_map=fm, regularization=2 * c2 / n, l1=c1 / n)
    labels = [list(x) for x in tokens.labels]
    return problem, items, labels


def run_sdca(problem: Problem, tol: float, seed: int = 0, max_epochs: float = 300):
    config = SDCAConfig(tol=tol, sampling="gap", max_epochs=max_epochs, seed=seed)
    monitor = Monitor(problem, "sdca", config, evaluate_test=False)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        result = SDCA(config).solve(problem, monitor)
    return time.perf_counter() - start, result


def run_crfsuite(items, labels, c1: float, c2: float, iterations: int):
    import pycrfsuite

    class Timed(pycrfsuite.Trainer):
        """Records (wall time, loss, active features) at each iteration, prints nothing."""

        def on_iteration(self, log, info):
            self.points.append((time.perf_counter(), info["loss"], info.get("active_features")))

        def on_start(self, log):
            pass

        on_featgen_progress = on_featgen_end = on_prepared = on_optimization_end = on_end = (
            lambda self, *args: None
        )

    trainer = Timed(verbose=True)  # the log parser reports iterations only when verbose
    trainer.points = []
    for x, y in zip(items, labels, strict=True):
        trainer.append(x, y)
    trainer.select("lbfgs")
    trainer.set_params({
        "c1": c1, "c2": c2, "feature.possible_states": True,
        "feature.possible_transitions": True, "max_iterations": iterations, "epsilon": 1e-12,
        "delta": 0.0,
    })  # fmt: skip
    model = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench_elastic_net_{os.getpid()}.crfsuite"
    start = time.perf_counter()
    trainer.train(str(model))
    model.unlink(missing_ok=True)
    return [(t - start, loss, active) for t, loss, active in trainer.points]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-sequences", type=int, default=None)
    parser.add_argument("--c1", type=float, default=0.1)
    parser.add_argument("--c2", type=float, default=0.1)
    parser.add_argument("--target", type=float, default=1e-3, help="certified gap / P - P*")
    parser.add_argument("--pstar-tol", type=float, default=1e-6)
    parser.add_argument("--pstar-file", type=Path, default=None, help="cache of the P* run")
    parser.add_argument("--crfsuite-iterations", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    problem, items, labels = build(args.max_sequences, args.c1, args.c2)
    n = problem.n_sequences
    print(f"n={n} d={problem.feature_map.n_features} lambda={problem.regularization:.4g}"
          f" sigma={problem.l1:.4g} load {_load()}", flush=True)  # fmt: skip
    cached = None
    if args.pstar_file and args.pstar_file.exists():
        cached = json.loads(args.pstar_file.read_text())
    if cached and cached.get("n") == n and cached.get("c1") == args.c1:
        p_star, p_gap = cached["p_star"], cached["gap"]
    else:
        seconds, ref = run_sdca(problem, args.pstar_tol, max_epochs=2000)
        last = ref.trace.records[-1]
        p_star, p_gap = last.primal, last.gap
        print(f"P* run: {seconds:.1f} s, {last.epoch:.1f} epochs, P {p_star:.10f} gap"
              f" {p_gap:.2e} ({ref.stop_reason}), {last.extra.get('nonzero_weights')} non-zero",
              flush=True)  # fmt: skip
        if args.pstar_file:
            args.pstar_file.parent.mkdir(parents=True, exist_ok=True)
            args.pstar_file.write_text(json.dumps({"n": n, "c1": args.c1, "c2": args.c2,
                                                   "p_star": p_star, "gap": p_gap}))  # fmt: skip
    print(f"P* = {p_star:.10f} (certified within {p_gap:.1e})", flush=True)

    rows = []
    for r in range(args.rounds):
        load0 = _load()
        t_sdca, res = run_sdca(problem, args.target, seed=r)
        last = res.trace.records[-1]
        load1 = _load()
        points = run_crfsuite(items, labels, args.c1, args.c2, args.crfsuite_iterations)
        load2 = _load()
        reached = [(t, k + 1, loss / n - p_star, active)
                   for k, (t, loss, active) in enumerate(points)
                   if loss / n - p_star <= args.target]  # fmt: skip
        t_crf = reached[0][0] if reached else float("nan")
        t_last, loss_last, _ = points[-1]
        print(f"CRFsuite: {len(points)} iterations in {t_last:.1f} s, last P - P*"
              f" {loss_last / n - p_star:.3e}", flush=True)  # fmt: skip
        row = {
            "round": r + 1,
            "sdca_s": t_sdca, "sdca_epochs": last.epoch, "sdca_gap": last.gap,
            "sdca_subopt": last.primal - p_star, "sdca_nonzero": last.extra["nonzero_weights"],
            "crfsuite_s": t_crf, "crfsuite_iter": reached[0][1] if reached else None,
            "crfsuite_subopt": reached[0][2] if reached else points[-1][1] / n - p_star,
            "crfsuite_active": reached[0][3] if reached else None,
            "ratio": t_sdca / t_crf, "load": [load0, load1, load2],
            "crfsuite_last": [len(points), t_last, loss_last / n - p_star],
            "crfsuite_curve": [(round(t, 2), loss / n - p_star) for t, loss, _ in points[::10]],
        }  # fmt: skip
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print(
        "| round | SDCA-GAP s (epochs) | its gap, P − P* | non-zero | CRFsuite OWL-QN s"
        " (iterations) | its P − P* | active features | SDCA / CRFsuite | load (1 min) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for x in rows:
        print(f"| {x['round']} | {x['sdca_s']:.1f} ({x['sdca_epochs']:.0f}) |"
              f" {x['sdca_gap']:.2e}, {x['sdca_subopt']:.2e} | {x['sdca_nonzero']:,} |"
              f" {x['crfsuite_s']:.1f} ({x['crfsuite_iter']}) | {x['crfsuite_subopt']:.2e} |"
              f" {x['crfsuite_active']} | {x['ratio']:.3f} |"
              f" {' → '.join(x['load'])} |")  # fmt: skip
    med = statistics.median
    print(f"| median | {med(x['sdca_s'] for x in rows):.1f} | | |"
          f" {med(x['crfsuite_s'] for x in rows):.1f} | | | {med(x['ratio'] for x in rows):.3f} |"
          " |")  # fmt: skip
    sys.stdout.flush()


if __name__ == "__main__":
    main()
