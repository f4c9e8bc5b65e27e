"""Cost of one SDCA epoch and of its block kernels (process CPU time, medians).

    CRFSDCA_DATA_DIR=../shared/data python benchmarks/bench_sdca_epoch.py [--dataset conll2000]

Times, on the same initial dual state (with 512-bit vectors on AVX-512 hosts unless
``CRFSDCA_VECTOR_WIDTH=256``, see ``crfsdca.kernels.numerics.vector_width``): epochs of the compiled
SDCA loop with the line search (starting at 0.5 and at the previous step size) and with a fixed
step, with the shares of the epoch spent in the oracle, the block gap and the line search (cycle
counters inside the kernel); one full-batch oracle pass; and, per block entry, the block-gap,
line-search and update kernels on a synthetic block of T = 24, K = 22. CPU time
(``time.process_time``) is reported because the machines are shared; the kernels are serial, so
CPU time is their cost. The last line is a JSON object.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import time

import numpy as np

import data_loaders
from crfsdca.features.feature_map import FeatureMap
from crfsdca.kernels.primitives import BlockBuffers, BlockBuffers32, block_runs
from crfsdca.kernels.solvers import line_search as K_ls
from crfsdca.kernels.solvers import sdca as kernels
from crfsdca.kernels.solvers import sdca_epoch
from crfsdca.kernels.structures.chain_blocks import chain_run_table
from crfsdca.solvers.local import LocalSDCA
from crfsdca.solvers.sdca import SDCA, SDCAConfig
from crfsdca.structures.problem import Problem


def cpu(fn, repeats: int = 1) -> float:
    start = time.process_time()
    for _ in range(repeats):
        fn()
    return (time.process_time() - start) / repeats


PHASES = {"oracle": 5, "block_gap": 6, "line_search": 3}  # their cycle counters in the stats


def epochs(
    problem: Problem, base, config: SDCAConfig, n_epochs: int
) -> tuple[list, list, list, dict]:
    """CPU seconds, double- and single-precision (predictor) Newton evaluations per step and, per
    phase, its share of the epoch's cycles (oracle, block gap, line search, and the rest: primal
    direction, update, sampling)."""
    state = copy.deepcopy(base)
    runner = LocalSDCA(problem, config, state)
    n = problem.n_sequences
    times, evaluations, predictor = [], [], []
    shares: dict[str, list] = {name: [] for name in [*PHASES, "rest"]}
    for _ in range(n_epochs):
        draws = runner.rng.random((n, 2))
        start = time.process_time()
        _, _, stats = sdca_epoch.run_steps(runner.kernel_args(draws, -1.0))
        times.append(time.process_time() - start)
        evaluations.append(float(stats[0]) / n)
        predictor.append(float(stats[7]) / n)
        total = float(stats[4]) if stats[4] > 0 else 1.0
        for name, k in PHASES.items():
            shares[name].append(float(stats[k]) / total)
        shares["rest"].append(1.0 - sum(float(stats[k]) for k in PHASES.values()) / total)
    return times, evaluations, predictor, shares


def block_kernels(T: int = 24, K: int = 22, repeats: int = 2000) -> dict[str, float]:
    """ns per block entry of the step's block kernels on one synthetic chain block (T, K), read
    through its runs as the step reads it (edges, then nodes)."""
    rng = np.random.default_rng(0)
    E = (T - 1) * K * K
    size = E + T * K
    runs = block_runs.py_func(chain_run_table(np.array([0, T]), K), 0)
    bufs = BlockBuffers(*(rng.random(size) for _ in range(4)))
    b32 = BlockBuffers32(*(np.empty(size, np.float32) for _ in range(3)))
    log_mu, log_nu = np.log(rng.random(size)), np.log(rng.random(size))
    mu_arrays = (log_mu[:E].copy(), log_mu[E:].copy())  # the dual state's (log_edge, log_node)
    calls = {
        "block_gap": lambda: kernels.block_gap(mu_arrays, log_nu, runs, bufs, b32),
        "line_search_evaluation": lambda: K_ls.line_derivatives(0.3, bufs, runs, 1.0),
        # the usual double-precision evaluation: f' only (f'' comes from the predictor)
        "line_search_first_evaluation": lambda: K_ls.line_slope(0.3, bufs, runs, 1.0),
        "predictor_evaluation": lambda: K_ls.line_derivatives32(0.3, b32, runs, 1.0),
        "update_reusing_logs": lambda: kernels.update_block(0.3, mu_arrays, runs, bufs, True, 0.0),
    }
    for fn in calls.values():
        fn()  # compile
    return {name: cpu(fn, repeats) / size * 1e9 for name, fn in calls.items()}


def vector_bits() -> int:
    """512 when crfsdca.kernels.numerics.vector_width turned LLVM's 256-bit preference off, else
    256."""
    features = os.environ.get("NUMBA_CPU_FEATURES", "")
    return 512 if features.endswith("-prefer-256-bit") else 256


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="conll2000")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    _, train, _ = data_loaders.load_encoded(args.dataset)
    fm = FeatureMap(train.n_attributes, train.n_labels, 3)
    problem = Problem(train=train, feature_map=fm, name=args.dataset)
    base = SDCA(SDCAConfig()).initial_state(problem)
    epochs(problem, base, SDCAConfig(sampling="uniform"), 1)  # compile
    result: dict[str, object] = {
        "dataset": args.dataset,
        "n": problem.n_sequences,
        "vector_bits": vector_bits(),
    }
    print(f"{args.dataset}: n = {problem.n_sequences}, {vector_bits()}-bit vectors")
    for label, config in {
        "line_search_model": SDCAConfig(sampling="uniform"),  # the default first point
        "line_search_previous": SDCAConfig(sampling="uniform", line_search_start="previous"),
        "line_search_half": SDCAConfig(sampling="uniform", line_search_start="half"),
        "fixed_step_0.05": SDCAConfig(sampling="uniform", fixed_step=0.05),
    }.items():
        times, evaluations, predictor, shares = epochs(problem, base, config, args.epochs)
        result[label] = {
            "cpu_s": times,
            "evaluations_per_step": evaluations,
            "predictor_evaluations_per_step": predictor,
            "line_search_share": shares["line_search"],
            "shares": shares,
        }
        print(
            f"{label:24s} epoch CPU s {np.round(times, 2)}  evaluations/step "
            f"{np.round(evaluations, 2)} (+ {np.round(predictor, 2)} float32)  "
            f"line-search share {np.round(shares['line_search'], 3)}"
        )
        print(
            f"{'':24s} median shares: "
            + ", ".join(f"{k} {np.median(v):.1%}" for k, v in shares.items())
        )
    problem.oracle.value_and_gradient(base.dual.weights)
    batch = [cpu(lambda: problem.oracle.value_and_gradient(base.dual.weights)) for _ in range(3)]
    result["batch_value_and_gradient_cpu_s"] = float(np.median(batch))
    print(f"full-batch value+gradient (all threads) CPU s {np.median(batch):.2f}")
    per_entry = block_kernels()
    result["ns_per_block_entry"] = per_entry
    for name, ns in per_entry.items():
        print(f"{name:24s} {ns:.2f} ns per block entry")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
