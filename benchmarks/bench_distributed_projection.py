"""Distributed SDCA projected to P partitions: rounds by simulation, seconds per round modelled.

    CRFSDCA_DATA_DIR=../shared/data python benchmarks/bench_distributed_projection.py \\
        [--dataset conll2000] [--partitions 1 2 4 8 16] [--local-updates 50] [--tol 1e-3]

For every P, ``crfsdca.distributed.simulate`` (bit for bit what a cluster computes) counts the
rounds and epochs to the exact gap ``--tol`` and the bytes that each round's sparse updates
move (up: every partition's rows, down: their sum to every partition). Seconds per round are
then modelled, not measured: m steps at the serial seconds per step (measured here on one
epoch), plus ``--latency`` seconds, plus the bytes over ``--bandwidth`` bytes per second
through the driver. The serial reference is P = 1 with m = n (serial SDCA itself).
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np


def load(args):
    from crfsdca.distributed import DatasetShard

    return DatasetShard(
        args.dataset,
        0,
        1,
        data_dir=args.data_dir,
        max_sequences=args.max_sequences,
        label=args.label,
    ).load()


def seconds_per_step(problem, seed: int) -> float:
    """Serial SDCA steps on the whole data: seconds per step over one epoch (after warmup)."""
    from crfsdca.solvers.local import LocalSDCA
    from crfsdca.solvers.sdca import SDCA, SDCAConfig

    config = SDCAConfig(seed=seed)
    local = LocalSDCA(problem, config, SDCA(config).initial_state(problem))
    local.take_steps(100)  # warm the kernels
    n = problem.n_sequences
    start = time.perf_counter()
    local.take_steps(n)
    return (time.perf_counter() - start) / n


def simulate_counting_bytes(problem, P, m, args, variant=None):
    """(result, mean bytes per round up, mean bytes per round down)."""
    from crfsdca import distributed
    from crfsdca.distributed import driver

    sizes = []
    aggregate = driver.aggregate

    def counting(parts):
        total = aggregate(parts)
        up = sum(_bytes(p) for p in parts)
        sizes.append((up, P * _bytes(total)))
        return total

    n = problem.n_sequences
    driver.aggregate = counting
    try:
        result = distributed.simulate(
            problem,
            P,
            local_updates=m,
            max_rounds=math.ceil(args.max_epochs * n / (P * m)),
            tol=args.tol,
            seed=args.seed,
            eval_every=max(1, round(n / (P * m))),
            variant=variant or args.variant,
        )
    finally:
        driver.aggregate = aggregate
    sizes = np.array(sizes) if sizes else np.zeros((1, 2))
    return result, float(sizes[:, 0].mean()), float(sizes[:, 1].mean())


def _bytes(update) -> int:
    rows, values, tail = update
    if rows is None:
        return values.nbytes
    return rows.nbytes + values.nbytes + tail.nbytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="conll2000")
    parser.add_argument("--data-dir", default=os.environ.get("CRFSDCA_DATA_DIR"))
    parser.add_argument("--max-sequences", type=int, default=None)
    parser.add_argument("--label", default=None, help="CoNLL-U column (upos, xpos)")
    parser.add_argument("--partitions", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--local-updates", type=int, default=50)
    parser.add_argument("--variant", default="practical")
    parser.add_argument(
        "--sigma-min", type=float, default=None, help="adaptive: the smallest trial sigma'"
    )
    parser.add_argument("--tol", type=float, default=1e-3)
    parser.add_argument("--max-epochs", type=float, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--latency", type=float, default=3e-3, help="seconds per round trip")
    parser.add_argument("--bandwidth", type=float, default=5e8, help="bytes/s via the driver")
    parser.add_argument(
        "--step-seconds", type=float, default=None, help="serial seconds per step [measured]"
    )
    args = parser.parse_args()
    if args.sigma_min is not None:
        from crfsdca.solvers import adaptive

        adaptive.SIGMA_MIN = dict.fromkeys(args.partitions, args.sigma_min)
    problem = load(args)
    n = problem.n_sequences
    step = args.step_seconds or seconds_per_step(problem, args.seed)
    print(
        f"{problem.name}: n = {n}, d = {problem.feature_map.n_features}, tol {args.tol:g},"
        f" {args.variant}, serial {1e6 * step:.0f} us / step, latency {1e3 * args.latency:g} ms,"
        f" bandwidth {args.bandwidth / 1e6:g} MB/s"
    )
    serial, _, _ = simulate_counting_bytes(problem, 1, n, args, "practical")  # serial SDCA
    serial_epochs = serial.trace.records[-1].epoch
    serial_seconds = serial_epochs * n * step
    print(f"serial: {serial_epochs:.1f} epochs, {serial_seconds:.1f} s modelled")
    print(
        "| P | m | rounds | epochs | × serial epochs | kB / round (up + down)"
        " | modelled s / round | modelled s | × serial time |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for P in args.partitions:
        m = args.local_updates
        result, up, down = simulate_counting_bytes(problem, P, m, args)
        last = result.trace.records[-1]
        per_round = m * step + args.latency + (up + down) / args.bandwidth
        total = result.rounds * per_round
        mark = "" if result.stop_reason == "tol" else f" (stopped: gap {last.gap:.1e})"
        print(
            f"| {P} | {m} | {result.rounds}{mark} | {last.epoch:.1f}"
            f" | {last.epoch / serial_epochs:.2f} | {(up + down) / 1e3:.0f}"
            f" | {1e3 * per_round:.1f} ms | {total:.1f} | {total / serial_seconds:.2f} |"
        )


if __name__ == "__main__":
    main()
