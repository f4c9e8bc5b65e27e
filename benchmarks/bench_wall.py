"""Wall time of whole ``crfsdca train`` commands, interleaved, with the ratios to the serial run.

    CRFSDCA_DATA_DIR=../shared/data python benchmarks/bench_wall.py [--dataset conll2000] \\
        [--tol 1e-3] [--reps 2] [--runs serial workers2 threads2 serial-ck workers2-ck] \\
        [--base serial] [-- more train options]

``cores1`` and ``cores2`` are ``--threads 1`` (SDCA on one core: steps and full-batch passes)
and ``--threads 2`` (two threads stepping at once on one shared w, and the passes on two);
``--base cores1`` gives the ratios to the one-core run.

Every repetition runs each command once, in the order given, as a user would (a new process:
imports, data, numba's cache, training, test scores), so a machine shared with other jobs
slows every command of a repetition alike. Prints per run the wall seconds, the solver's
seconds, epochs, rounds and gap, the load average before and after; then the median wall time
of each command and its ratio to the median of ``--base``. A warm-up run of each command comes
first (numba's cache, the page cache) and is not counted. ``-ck`` runs add ``--checkpoint DIR``
(a fresh folder) at the default cadence.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

RUNS = {
    "serial": [],
    "cores1": ["--threads", "1"],
    "cores2": ["--threads", "2"],
    "workers2": ["--workers", "2"],
    "threads2": ["--workers", "2", "--worker-threads"],
    "serial-ck": ["--checkpoint", "{ck}"],
    "workers2-ck": ["--workers", "2", "--checkpoint", "{ck}"],
    "threads2-ck": ["--workers", "2", "--worker-threads", "--checkpoint", "{ck}"],
}


def run_once(args, name: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="crfsdca-bench-") as tmp:
        extra = [a.replace("{ck}", os.path.join(tmp, "ck")) for a in RUNS[name]]
        cmd = [sys.executable, "-m", "crfsdca.cli", "train", args.dataset, "--tol", str(args.tol),
               "--json", "-q", *args.extra, *extra]  # fmt: skip
        load = os.getloadavg()[0]
        start = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, check=True)
        wall = time.perf_counter() - start
    summary = json.loads(out.stdout.splitlines()[-1])
    steps = summary.get("step_seconds", float("nan"))
    return {"wall": wall, "steps": steps, "load": (load, os.getloadavg()[0]), **summary}


def reference(args) -> dict:
    """The L-BFGS optimum of the same objective (one thread, ``--tol`` args.reference)."""
    cmd = [sys.executable, "-m", "crfsdca.cli", "train", args.dataset, "--solver", "lbfgs",
           "--tol", str(args.reference), "--json", "-q", *args.extra]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="conll2000")
    parser.add_argument("--tol", type=float, default=1e-3)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--runs", nargs="+", default=list(RUNS), choices=list(RUNS))
    parser.add_argument("--base", default="serial", choices=list(RUNS))
    parser.add_argument("--no-warmup", action="store_true")
    parser.add_argument(
        "--reference", type=float, default=None, metavar="TOL",
        help="also train L-BFGS to this relative gap and print every run's P - P_lbfgs beside its"
        " certified gap (an independent check of the optimum)",
    )  # fmt: skip
    parser.add_argument("extra", nargs="*", help="more train options, after --")
    args = parser.parse_args()
    if not args.no_warmup:
        for name in args.runs:
            run_once(args, name)
    ref = reference(args) if args.reference else None
    if ref is not None:
        print(f"L-BFGS reference: P = {ref['primal']:.10g}, certified gap {ref['gap']:.2e}")
    walls: dict[str, list[float]] = {name: [] for name in args.runs}
    steps: dict[str, list[float]] = {name: [] for name in args.runs}
    print(
        "| rep | run | wall s | solver s | steps s | epochs | rounds | gap | P - P_lbfgs | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for rep in range(args.reps):
        for name in args.runs:
            r = run_once(args, name)
            walls[name].append(r["wall"])
            steps[name].append(r["steps"])
            above = "—" if ref is None else f"{r['primal'] - ref['primal']:.2e}"
            print(
                f"| {rep} | {name} | {r['wall']:.1f} | {r['seconds']:.1f} | {r['steps']:.1f}"
                f" | {r['epochs']:.1f} | {r.get('rounds', '—')} | {r['gap']:.2e} | {above}"
                f" | {r['load'][0]:.1f} → {r['load'][1]:.1f} |",
                flush=True,
            )
    base = statistics.median(walls[args.base]) if args.base in walls else None
    print()
    base_steps = statistics.median(steps[args.base]) if args.base in steps else None
    print(f"| run | median wall s | × {args.base} | median steps s | × {args.base} |")
    print("|---|---|---|---|---|")
    for name, values in walls.items():
        med, med_steps = statistics.median(values), statistics.median(steps[name])
        ratio = f"{med / base:.2f}" if base else "—"
        ratio_steps = f"{med_steps / base_steps:.2f}" if base_steps else "—"
        print(f"| {name} | {med:.1f} | {ratio} | {med_steps:.1f} | {ratio_steps} |")


if __name__ == "__main__":
    main()
