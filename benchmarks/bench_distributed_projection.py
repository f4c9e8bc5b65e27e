"""Distributed SDCA projected to P partitions: rounds by simulation, seconds per round modelled.

    CRFSDCA_DATA_DIR=../shared/data python benchmarks/bench_distributed_projection.py \\
        [--dataset conll2000] [--partitions 1 2 4 8 16] [--local-updates 50] [--tol 1e-3]

For every P, ``crfsdca.distributed.simulate`` (bit for bit what a cluster computes) counts the
rounds and epochs to the exact gap ``--tol`` and the bytes that each round's messages move
(up: every partition's message; down: every partition receives the others'), and times how
long a partition takes to apply a round's messages to its replica of w (per sequence applied:
every partition applies all P messages, P m sequences a round). Seconds per round are then
modelled, not measured: m steps at the serial seconds per step (measured here on one epoch),
plus P m sequences applied at the measured seconds per sequence, plus ``--latency`` seconds
per round trip, plus the bytes (up and down) over ``--bandwidth`` bytes per second through
the driver. The serial reference is P = 1 with m = n (serial SDCA itself). ``--calibrate``
first measures an actor round trip and the loopback bandwidth of a 2-worker local Dask
cluster on this machine.
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
    """(result, mean bytes per round up, mean bytes per round down, seconds per sequence
    applied): up, every partition's message to the driver; down, every partition receives the
    others' messages; the last, a partition's time to apply marginal messages to its replica
    of w (None: none applied)."""
    from crfsdca import distributed
    from crfsdca.distributed.partition import PartitionSolver
    from crfsdca.solvers.marginal_update import message_bytes

    sent = []
    applied = [0.0, 0]  # seconds, sequences
    original = {name: getattr(PartitionSolver, name) for name in ("local_round", "redo")}
    settle = PartitionSolver._settle

    def timed_settle(self, pending):
        if pending is None or self.ledger is None:
            return settle(self, pending)
        start = time.perf_counter()
        out = settle(self, pending)
        applied[0] += time.perf_counter() - start
        own = self._message
        applied[1] += sum(len(own[0] if x is None else x[0]) for x in pending["messages"])
        return out

    def counting(name):
        def call(self, *a, **k):
            out = original[name](self, *a, **k)
            if out[0] != "rejected":
                sent.append(message_bytes(out[0]))
            return out

        return call

    n = problem.n_sequences
    for name in original:
        setattr(PartitionSolver, name, counting(name))
    PartitionSolver._settle = timed_settle
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
        for name, f in original.items():
            setattr(PartitionSolver, name, f)
        PartitionSolver._settle = settle
    up = sum(sent) / max(result.rounds, 1)
    apply = applied[0] / applied[1] if applied[1] else None
    return result, up, (P - 1) * up, apply


def calibrate(sizes=(0, 1 << 20, 8 << 20), reps=30):
    """(seconds per actor round trip, bytes per second) of a 2-worker LocalCluster on this
    machine: the median time of an actor call that echoes nothing back, for arguments of
    ``sizes`` bytes; the bandwidth is fitted from the largest size."""
    import statistics

    import distributed

    from crfsdca.distributed.handles import RemoteHandle

    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster, direct_to_workers=True) as client,
    ):  # fmt: skip
        workers = sorted(client.scheduler_info()["workers"])
        futures = [client.submit(_Echo, actor=True, workers=[a], pure=False) for a in workers]
        handles = [RemoteHandle(f.result(), k, 60) for k, f in enumerate(futures)]
        times = {}
        for size in sizes:
            payload = np.zeros(size // 8)
            for h in handles:
                h.call("size", payload)  # warm
            samples = []
            for _ in range(reps):
                start = time.perf_counter()
                for s in [h.send("size", payload) for h in handles]:
                    s.result()
                samples.append(time.perf_counter() - start)
            times[size] = statistics.median(samples)
        client.cancel(futures)
    rtt = times[sizes[0]]
    bandwidth = 2 * sizes[-1] / max(times[sizes[-1]] - rtt, 1e-9)  # both partitions' bytes
    return rtt, bandwidth, times


class _Echo:
    def size(self, payload) -> int:
        return int(payload.nbytes)


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
    parser.add_argument(
        "--apply-seconds",
        type=float,
        default=None,
        help="seconds to apply one sequence's message to a replica [measured in each run]",
    )
    parser.add_argument(
        "--calibrate", action="store_true", help="measure a local cluster's round trip first"
    )
    args = parser.parse_args()
    if args.calibrate:
        rtt, bandwidth, times = calibrate()
        print(
            f"local 2-worker cluster: round trip {1e3 * rtt:.2f} ms, loopback"
            f" {bandwidth / 1e6:.0f} MB/s ("
            + ", ".join(f"{k / 2**20:g} MiB: {1e3 * v:.2f} ms" for k, v in times.items())
            + ")"
        )
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
    serial, _, _, _ = simulate_counting_bytes(problem, 1, n, args, "practical")  # serial SDCA
    serial_epochs = serial.trace.records[-1].epoch
    serial_seconds = serial_epochs * n * step
    print(f"serial: {serial_epochs:.1f} epochs, {serial_seconds:.1f} s modelled")
    print(
        "| P | m | rounds | epochs | × serial epochs | kB / round (up + down)"
        " | apply µs / sequence | modelled s / round | modelled s | × serial time |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for P in args.partitions:
        m = args.local_updates
        result, up, down, apply = simulate_counting_bytes(problem, P, m, args)
        apply = args.apply_seconds if args.apply_seconds is not None else apply or 0.0
        last = result.trace.records[-1]
        per_round = m * step + P * m * apply + args.latency + (up + down) / args.bandwidth
        total = result.rounds * per_round
        mark = "" if result.stop_reason == "tol" else f" (stopped: gap {last.gap:.1e})"
        print(
            f"| {P} | {m} | {result.rounds}{mark} | {last.epoch:.1f}"
            f" | {last.epoch / serial_epochs:.2f} | {(up + down) / 1e3:.0f} | {1e6 * apply:.0f}"
            f" | {1e3 * per_round:.1f} ms | {total:.1f} | {total / serial_seconds:.2f} |"
        )


if __name__ == "__main__":
    main()
