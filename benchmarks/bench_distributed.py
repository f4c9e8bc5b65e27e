"""Distributed SDCA (practical DisDCA) on a local Dask cluster: rounds, time and memory to a gap.

    CRFSDCA_DATA_DIR=../shared/data python benchmarks/bench_distributed.py \
        [--dataset conll2000] [--tol 1e-3] [--partitions 1 2] [--local-updates 100 1000 0]

For every number of partitions P (one worker process of one thread each, on 127.0.0.1) and
every m (``0`` = n / P, one pass over each shard per round) it trains from the same start to
the exact gap ``--tol`` and prints: rounds, epochs (oracle calls / n), seconds of rounds
(evaluations excluded), seconds per epoch, the communication share of a round (round time minus
the slowest partition's compute time), the dual state per partition and the workers' peak
resident memory. Then the per-epoch speed-up of the largest P over P = 1 at m = n / P.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import time


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load_problem(args):
    from crfsdca.distributed import DatasetShard

    return DatasetShard(
        args.dataset, 0, 1, data_dir=args.data_dir, max_sequences=args.max_sequences
    ).load()


def run(args, P: int, m_option: int) -> dict:
    import distributed

    from crfsdca.distributed import fit

    spec = load_problem(args)  # encoded once here; each worker gets its shard's arrays
    with (
        distributed.LocalCluster(
            n_workers=P,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            memory_limit=f"{args.memory_limit_gib}GiB",
        ) as cluster,
        distributed.Client(cluster, direct_to_workers=True) as client,
    ):
        client.run(lambda: os.environ.setdefault("NUMBA_NUM_THREADS", "1"))
        n_hint = args.n or 8936
        m = m_option or math.ceil(n_hint / P)
        eval_every = max(1, round(n_hint / (P * m)))  # about one evaluation per epoch
        started = time.perf_counter()
        result = fit(
            spec,
            client,
            P,
            local_updates=m,
            max_rounds=args.max_rounds,
            tol=args.tol,
            seed=args.seed,
            eval_every=eval_every,
            round_timeout=3600,
            variant=args.variant,
        )
        wall = time.perf_counter() - started
        peaks = client.run(peak_rss_mib)
    last = result.trace.records[-1]
    n = result.trace.header["n_sequences"]
    return {
        "P": P,
        "m": m,
        "n": n,
        "rounds": result.rounds,
        "epochs": last.epoch,
        "gap": last.gap,
        "stop": result.stop_reason,
        "seconds": last.seconds,
        "seconds_per_epoch": last.seconds / last.epoch,
        "communication": result.seconds_communication / max(last.seconds, 1e-12),
        "dual_mib": max(i["dual_bytes"] for i in result.info) / 2**20,
        "peak_mib": max(peaks.values()),
        "wall": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="conll2000")
    parser.add_argument("--data-dir", default=os.environ.get("CRFSDCA_DATA_DIR"))
    parser.add_argument("--max-sequences", type=int, default=None)
    parser.add_argument("--n", type=int, default=None, help="n, to size m = 0 (default 8936)")
    parser.add_argument("--tol", type=float, default=1e-3)
    parser.add_argument("--partitions", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--local-updates", type=int, nargs="+", default=[50, 100, 1000])
    parser.add_argument("--variant", default="practical", help="aggregation: practical | sparse")
    parser.add_argument("--max-rounds", type=int, default=100000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--memory-limit-gib", type=float, default=8)
    args = parser.parse_args()
    rows = [run(args, P, m) for P in args.partitions for m in args.local_updates]
    print(f"dataset {args.dataset}, tol {args.tol:g}, n = {rows[0]['n']}")
    print(
        "| P | m | rounds | epochs | gap | s (rounds) | s / epoch | communication"
        " | duals / partition | worker peak RSS |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['P']} | {r['m']} | {r['rounds']} | {r['epochs']:.1f} | {r['gap']:.2e}"
            f" ({r['stop']}) | {r['seconds']:.1f} | {r['seconds_per_epoch']:.2f}"
            f" | {100 * r['communication']:.0f}% | {r['dual_mib']:.0f} MiB"
            f" | {r['peak_mib']:.0f} MiB |"
        )
    full = {r["P"]: r for r in rows if r["m"] == math.ceil((args.n or 8936) / r["P"])}
    if 1 in full and len(full) > 1:
        top = max(full)
        speedup = full[1]["seconds_per_epoch"] / full[top]["seconds_per_epoch"]
        print(f"per-epoch speed-up of P = {top} over P = 1 at m = n / P: {speedup:.2f}x")


if __name__ == "__main__":
    main()
