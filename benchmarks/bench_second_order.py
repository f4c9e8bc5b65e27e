"""First- against second-order chains on CoNLL-2000: training time, primal, test chunk F1.

    CRFSDCA_DATA_DIR=../shared/data python benchmarks/bench_second_order.py \\
        [--max-sequences 1000] [--template conll] [--tol 1e-3] [--dual-dtype float64]

Both orders train in the same process, one after the other, on the first ``--max-sequences``
training sentences (the second-order dual holds (T - 2) K^3 + (T - 3) K^2 log-table entries
per sentence: 16.06 GiB in float64 on the whole training set), at lambda = 1/n, with SDCA and gap
sampling from the smoothed start, to the same certified duality gap ``--tol`` (or ``--epochs``),
one thread. The order 2 model is the chain's (node attributes and bias rows, K x K bigram block)
plus a K x K x K trigram block, trained as a junction tree (crfsdca.structures.junction). Solver
seconds exclude the evaluations (primal once per epoch); the test set is the whole CoNLL-2000
test split, scored once at the end with conlleval's chunk F1 (Viterbi / max-product MAP).

The same runs from the command line:

    crfsdca train conll2000 --max-sequences 1000 --sampling gap --tol 1e-3 --threads 1
    crfsdca train conll2000 --max-sequences 1000 --sampling gap --tol 1e-3 --threads 1 --order 2
"""

from __future__ import annotations

import argparse
import os
import resource
import time
import warnings

import numpy as np


def problems(args):
    """(first-order Problem, second-order JunctionProblem) of the same encoded data."""
    import data_loaders
    from crfsdca.features.feature_map import FeatureMap
    from crfsdca.structures.junction import junction_problem, second_order_data
    from crfsdca.structures.problem import Problem

    encoder, train, test = data_loaders.load_encoded(
        "conll2000", template=args.template, data_dir=args.data_dir,
        max_sequences=args.max_sequences,
    )  # fmt: skip
    bias = encoder.default_bias_rows
    first = Problem(train=train, feature_map=FeatureMap(train.n_attributes, train.n_labels, bias),
                    test=test, name="conll2000")  # fmt: skip
    second = junction_problem(second_order_data(train), n_bias_rows=bias,
                              test=second_order_data(test), name="conll2000")  # fmt: skip
    return first, second


def dual_gib(problem, dtype) -> float:
    from crfsdca.structures.dual import dual_state_bytes
    from crfsdca.structures.junction import JunctionProblem, junction_dual_bytes

    d = problem.feature_map.n_features
    if isinstance(problem, JunctionProblem):
        return junction_dual_bytes(problem.train, d, dtype) / 2**30
    data = problem.train
    return dual_state_bytes(data.n_items, data.n_sequences, data.n_labels, d, dtype) / 2**30


def run(problem, args) -> dict:
    from crfsdca.evaluation import evaluate_data
    from crfsdca.solvers.monitor import Monitor
    from crfsdca.solvers.sdca import SDCA, SDCAConfig

    config = SDCAConfig(sampling="gap", tol=args.tol, max_epochs=args.epochs, seed=args.seed,
                        dual_dtype=args.dual_dtype)  # fmt: skip
    wall = time.perf_counter()
    result = SDCA(config).solve(problem, Monitor(problem, "sdca", config, evaluate_test=False))
    wall = time.perf_counter() - wall
    last = result.trace.records[-1]
    start = time.perf_counter()
    scores = evaluate_data(problem.test, problem.test_oracle.predict(result.weights))
    return {
        "d": problem.feature_map.n_features,
        "dual GiB": dual_gib(problem, np.dtype(args.dual_dtype)),
        "epochs": last.epoch,
        "solver s": last.seconds,
        "wall s": wall,
        "s / epoch": last.seconds / max(last.epoch, 1e-12),
        "primal": last.primal,
        "gap": last.gap,
        "stop": result.stop_reason,
        "test F1": scores["f1"],
        "test acc": 100 * scores["token_accuracy"],
        "predict s": time.perf_counter() - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=os.environ.get("CRFSDCA_DATA_DIR"))
    parser.add_argument("--max-sequences", type=int, default=1000)
    parser.add_argument("--template", default="conll")
    parser.add_argument("--tol", type=float, default=1e-3)
    parser.add_argument("--epochs", type=float, default=60)
    parser.add_argument("--dual-dtype", default="float64", choices=["float64", "float32"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=5, help="sentences of the compile run")
    args = parser.parse_args()
    from crfsdca.errors import ConvergenceWarning
    from crfsdca.kernels.numerics.threads import set_threads

    set_threads(1)
    first, second = problems(args)
    train = first.train
    print(
        f"conll2000 ({args.template}), first {train.n_sequences} training sentences,"
        f" {train.n_items} tokens, K = {train.n_labels}, A = {train.n_attributes};"
        f" test {first.test.n_sequences} sentences; lambda = 1/n; SDCA gap sampling to gap"
        f" {args.tol:g} (at most {args.epochs:g} epochs), dual {args.dual_dtype}, 1 thread"
    )
    warm = argparse.Namespace(**{**vars(args), "max_sequences": args.warmup, "epochs": 1})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for problem in problems(warm):  # compile every kernel outside the timed runs
            run(problem, warm)
    rows = {}
    for order, problem in (("1", first), ("2", second)):
        rows[order] = run(problem, args)
        print(f"order {order}: {rows[order]}", flush=True)
    keys = list(rows["1"])
    print("| order | " + " | ".join(keys) + " |")
    print("|---" * (len(keys) + 1) + "|")
    for order, row in rows.items():
        cells = [f"{v:,}" if isinstance(v, int) else f"{v:.4g}" if isinstance(v, float) else v
                 for v in row.values()]  # fmt: skip
        print(f"| {order} | " + " | ".join(cells) + " |")
    r1, r2 = rows["1"], rows["2"]
    print(
        f"order 2 / order 1: solver time {r2['solver s'] / r1['solver s']:.1f}x, per epoch"
        f" {r2['s / epoch'] / r1['s / epoch']:.1f}x, F1 {r2['test F1'] - r1['test F1']:+.2f}"
    )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"peak RSS {peak:.2f} GiB")


if __name__ == "__main__":
    main()
