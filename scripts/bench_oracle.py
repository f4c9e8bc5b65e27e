"""Time one full-batch value+gradient pass of crfsdca against one CRFsuite L-BFGS iteration.

Both run on CoNLL-2000 train with the ``crfsuite-chunking`` attributes (those of CRFsuite's
example/chunking.py) and the dense model of CRFsuite (``feature.possible_states`` and
``feature.possible_transitions``, no bias rows): d = A K + K^2 = 335,674 x 22 + 22^2 = 7,385,312.
Run from the repository root::

    CRFSDCA_DATA_DIR=../shared/data .venv/bin/python scripts/bench_oracle.py           # ~2 min
    CRFSDCA_DATA_DIR=../shared/data .venv/bin/python scripts/bench_oracle.py --quick   # ~25 s

What is measured, all wall-clock (``time.perf_counter``) in one process:

- crfsdca: ``Oracle.value_and_gradient(w)``, the sum of the n losses and of their gradients (one
  forward-backward per sequence), per numba thread count; ``Problem.primal_and_gradient`` adds the
  regulariser (two O(d) vector operations). Half of the repeats run before CRFsuite and half
  after it, and the median is reported, so slow drift of a shared machine hits both sides.
- CRFsuite (single-threaded, python-crfsuite): ``Trainer.train`` with ``max_iterations`` =
  ``--crfsuite-iterations``; the wall time of iteration k is the time between the log lines that
  open iterations k-1 and k. Iteration 1 also holds the initial evaluation and usually a line
  search of 2 trials (3 evaluations); later iterations usually take 1 trial. One trial is one
  value+gradient evaluation of the data term plus the L2 term, and the iteration adds CRFsuite's
  L-BFGS bookkeeping (two-loop recursion over 6 pairs of d-vectors, the copy of the weights in its
  progress callback). ``crfsuite_s`` is the median over iterations k >= 2 with one trial, an
  upper bound on one CRFsuite evaluation. CRFsuite's own per-iteration figure (``clock()``, CPU
  time of the whole process) is printed as ``cpu``.
- crfsdca L-BFGS (SciPy L-BFGS-B) with ``--lbfgs-history`` pairs (default 6, CRFsuite's
  ``num_memories``): the median solver time, from the trace, of the iterations after the first
  ``history`` (all pairs stored) that took one evaluation. Its excess over
  ``primal_and_gradient`` is SciPy's L-BFGS-B bookkeeping, which grows with the history.

The comparison in the last line is per function evaluation: ``ratio = ours_s / crfsuite_s``,
with ``ours_s`` the crfsdca oracle pass at the fastest thread count (below 1: crfsdca is faster).
The last stdout line is one JSON object; earlier lines are a table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import data_loaders
from crfsdca.features.feature_map import FeatureMap
from crfsdca.features.sequences import SequenceData
from crfsdca.kernels.numerics.threads import max_threads, set_threads
from crfsdca.solvers.lbfgs import LBFGS, LBFGSConfig
from crfsdca.solvers.monitor import Monitor
from crfsdca.structures.problem import Problem

QUICK_SEQUENCES = 2000


# ----------------------------------------------------------------------------- CRFsuite side
# (also used by scripts/bench_vs_crfsuite.py)


def crfsuite_items(data: SequenceData, names: list[str] | None = None) -> list[list]:
    """One CRFsuite item sequence per sequence of ``data``.

    Attribute ``j`` is called ``names[j]`` (default: ``str(j)``; the name does not change the
    model). Items are lists of names when every value is 1, else ``{name: value}`` dicts.
    """
    table = np.array(
        names if names is not None else [str(j) for j in range(data.n_attributes)], dtype=object
    )
    binary = bool(np.all(data.attr_values == 1.0))
    ao, ids, values = data.attr_offsets, data.attr_ids, data.attr_values
    sequences = []
    for i in range(data.n_sequences):
        items = []
        for t in range(data.seq_offsets[i], data.seq_offsets[i + 1]):
            item_names = table[ids[ao[t] : ao[t + 1]]].tolist()
            if binary:
                items.append(item_names)
            else:
                items.append(dict(zip(item_names, values[ao[t] : ao[t + 1]].tolist(), strict=True)))
        sequences.append(items)
    return sequences


@dataclass
class CRFsuiteRun:
    """What one CRFsuite L-BFGS run logged, one entry per iteration."""

    n_features: int
    featgen_seconds: float
    loss: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)  # seconds of each iteration (perf_counter)
    cpu: list[float] = field(default_factory=list)  # CRFsuite's clock() seconds per iteration
    trials: list[int] = field(default_factory=list)  # line-search trials = evaluations
    stop: str = ""

    @property
    def evaluations(self) -> list[int]:
        """Evaluations per iteration: the trials, plus the initial evaluation in iteration 1."""
        return [t + (k == 0) for k, t in enumerate(self.trials)]


def train_crfsuite(
    items: list[list], labels: list[list[str]], c2: float, **params: float
) -> CRFsuiteRun:
    """Train CRFsuite's dense first-order CRF with L-BFGS (c1 = 0) and time every iteration."""
    import pycrfsuite

    class TimedTrainer(pycrfsuite.Trainer):
        def message(self, message: str) -> None:
            self.stamps.append((time.perf_counter(), message))
            super().message(message)

    trainer = TimedTrainer(verbose=False)
    trainer.stamps = []
    for xseq, yseq in zip(items, labels, strict=True):
        trainer.append(xseq, yseq)
    trainer.select("lbfgs")
    trainer.set_params(
        {
            "c1": 0.0,
            "c2": c2,
            "feature.possible_states": True,
            "feature.possible_transitions": True,
            **params,
        }
    )
    trainer.train("")  # empty name: CRFsuite skips writing the model
    log = trainer.logparser
    heads = [k for k, (_, m) in enumerate(trainer.stamps) if m.startswith("***** Iteration #")]
    starts = [trainer.stamps[heads[0] - 1][0]] + [trainer.stamps[k][0] for k in heads]
    run = CRFsuiteRun(n_features=log.featgen_num_features, featgen_seconds=log.featgen_seconds)
    run.wall = list(np.diff(starts))
    for it in log.iterations:
        run.loss.append(it["loss"])
        run.cpu.append(it["time"])
        run.trials.append(it["linesearch_trials"])
    ends = ("L-BFGS resulted", "L-BFGS terminated")
    run.stop = next((m.strip() for _, m in trainer.stamps if m.startswith(ends)), "")
    return run


# ----------------------------------------------------------------------------- crfsdca side


def timed(fn: Callable[[], object], repeats: int) -> tuple[list[float], list[float]]:
    """Wall and process-CPU seconds of ``repeats`` calls of ``fn``."""
    walls, cpus = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return walls, cpus


def lbfgs_iteration_seconds(problem: Problem, history: int, n_timed: int) -> list[float]:
    """Solver seconds of crfsdca L-BFGS iterations of one evaluation, all pairs stored."""
    config = LBFGSConfig(max_epochs=history + 2 * n_timed, tol=0.0, history=history)
    monitor = Monitor(problem, "lbfgs", config, evaluate_test=False)
    records = LBFGS(config).solve(problem, monitor).trace.records
    # records[0] follows the initial evaluation, records[j] iteration j
    seconds = np.diff([r.seconds for r in records])
    evaluations = np.diff([r.epoch for r in records])
    return [float(s) for j, (s, e) in enumerate(zip(seconds, evaluations, strict=True), 1)
            if j > history and round(e) == 1][:n_timed]  # fmt: skip


# ----------------------------------------------------------------------------- main


def load(n_sequences: int | None) -> tuple[SequenceData, list[str]]:
    encoder, train, _ = data_loaders.load_encoded(
        "conll2000", template="crfsuite-chunking", max_sequences=n_sequences
    )
    return train, encoder.attribute_names()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="first 2,000 sentences only")
    parser.add_argument("--max-sequences", type=int, default=None)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, max_threads()])
    parser.add_argument("--repeats", type=int, default=6, help="oracle passes per thread count")
    parser.add_argument("--crfsuite-iterations", type=int, default=8)
    parser.add_argument(
        "--lbfgs-iterations",
        type=int,
        default=None,
        help="timed crfsdca L-BFGS iterations; 0 skips them [5; 3 with --quick]",
    )
    parser.add_argument("--lbfgs-history", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.repeats < 2 or args.crfsuite_iterations < 6:
        parser.error("need --repeats >= 2 and --crfsuite-iterations >= 6 (5 timed iterations)")
    n_sequences = QUICK_SEQUENCES if args.quick else args.max_sequences
    if args.lbfgs_iterations is None:
        args.lbfgs_iterations = 3 if args.quick else 5
    threads = sorted(set(args.threads))

    data, names = load(n_sequences)
    fm = FeatureMap(data.n_attributes, data.n_labels, n_bias_rows=0)
    problem = Problem(train=data, feature_map=fm)
    n = data.n_sequences
    print(
        f"conll2000 train, crfsuite-chunking, no bias rows: n={n} N={data.n_items} "
        f"K={fm.n_labels} A={fm.n_attributes} d={fm.n_features} nnz={data.attr_ids.size}"
    )
    # a weight vector of realistic size (the cost of a pass does not depend on the values)
    w = 0.05 * np.random.default_rng(args.seed).standard_normal(fm.n_features)
    oracle = problem.oracle
    walls: dict[int, list[float]] = {t: [] for t in threads}
    cpus: dict[int, list[float]] = {t: [] for t in threads}
    full: dict[int, list[float]] = {t: [] for t in threads}

    def ours_round(repeats: int) -> None:
        for t in threads:
            set_threads(t)
            oracle.value_and_gradient(w)  # compile / warm the per-thread buffers
            wall, cpu = timed(lambda: oracle.value_and_gradient(w), repeats)
            walls[t] += wall
            cpus[t] += cpu
            full[t] += timed(lambda: problem.primal_and_gradient(w), max(1, repeats // 2))[0]

    first = (args.repeats + 1) // 2
    ours_round(first)
    items = crfsuite_items(data, names)
    labels = [[data.label_names[y] for y in data.sequence_labels(i)] for i in range(n)]
    run = train_crfsuite(
        items, labels, c2=0.5, max_iterations=args.crfsuite_iterations, epsilon=1e-12, delta=0.0
    )
    del items
    ours_round(args.repeats - first)
    if run.n_features != fm.n_features:
        raise SystemExit(f"CRFsuite generated {run.n_features} features; expected {fm.n_features}")

    med = {t: statistics.median(v) for t, v in walls.items()}
    best = min(threads, key=med.__getitem__)
    one_trial = [k for k in range(1, len(run.trials)) if run.trials[k] == 1]
    if len(one_trial) < 5:
        print(f"warning: only {len(one_trial)} CRFsuite iterations took one line-search trial")
    crfsuite_s = statistics.median(run.wall[k] for k in one_trial)
    crfsuite_cpu = statistics.median(run.cpu[k] for k in one_trial)

    lbfgs_s = float("nan")
    if args.lbfgs_iterations > 0:
        set_threads(best)
        single = lbfgs_iteration_seconds(problem, args.lbfgs_history, args.lbfgs_iterations)
        lbfgs_s = statistics.median(single) if single else float("nan")

    print(f"{'what':<48} {'threads':>7} {'median s':>9} {'min s':>7} {'cpu s':>7} {'runs':>5}")
    for t in threads:
        print(
            f"{'crfsdca oracle value_and_gradient':<48} {t:>7} {med[t]:>9.3f} "
            f"{min(walls[t]):>7.3f} {statistics.median(cpus[t]):>7.3f} {len(walls[t]):>5}"
        )
        print(
            f"{'crfsdca primal_and_gradient (+ L2 term)':<48} {t:>7} "
            f"{statistics.median(full[t]):>9.3f} {min(full[t]):>7.3f} {'':>7} {len(full[t]):>5}"
        )
    if args.lbfgs_iterations > 0:
        print(
            f"{f'crfsdca L-BFGS iteration (1 eval, m={args.lbfgs_history})':<48} {best:>7} "
            f"{lbfgs_s:>9.3f} "
            f"{'':>7} {'':>7} {len(single):>5}"
        )
    print(
        f"{'CRFsuite L-BFGS iteration (1 trial = 1 eval)':<48} {1:>7} {crfsuite_s:>9.3f} "
        f"{min(run.wall[k] for k in one_trial):>7.3f} {crfsuite_cpu:>7.3f} {len(one_trial):>5}"
    )
    print(
        "CRFsuite per iteration: trials "
        + " ".join(map(str, run.trials))
        + " | wall s "
        + " ".join(f"{s:.3f}" for s in run.wall)
        + f" | features {run.n_features} | featgen {run.featgen_seconds:.2f} s"
    )
    ratio = med[best] / crfsuite_s
    print(
        f"per evaluation: crfsdca ({best} thread{'s' * (best > 1)}) / CRFsuite = {ratio:.3f}; "
        f"1 thread: {med[threads[0]] / crfsuite_s:.3f}"
    )
    result = {
        "ours_s": round(med[best], 4),
        "crfsuite_s": round(crfsuite_s, 4),
        "ratio": round(ratio, 4),
        "threads": best,
        "ours_s_by_threads": {str(t): round(med[t], 4) for t in threads},
        "ratio_by_threads": {str(t): round(med[t] / crfsuite_s, 4) for t in threads},
        "ours_primal_and_gradient_s": round(statistics.median(full[best]), 4),
        "ours_lbfgs_iteration_s": round(lbfgs_s, 4),
        "lbfgs_history": args.lbfgs_history,
        "crfsuite_cpu_s": round(crfsuite_cpu, 4),
        "crfsuite_trials": run.trials,
        "repeats": len(walls[best]),
        "crfsuite_iterations_timed": len(one_trial),
        "n_sequences": n,
        "n_features": fm.n_features,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
