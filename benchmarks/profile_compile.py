"""Where numba's compilation goes in a cold run: CPU seconds per compiled function.

    CRFSDCA_DATA_DIR=../shared/data NUMBA_CACHE_DIR=$(mktemp -d) \
        python benchmarks/profile_compile.py train    # train conll2000, 200 sentences, 1 epoch
    CRFSDCA_DATA_DIR=../shared/data NUMBA_CACHE_DIR=$(mktemp -d) \
        python benchmarks/profile_compile.py fit      # first CRF(c2=0.1).fit, 300 sentences
    ... profile_compile.py train --json out.json    # every compilation, for a later comparison

Listens to numba's ``numba:compile`` events (``numba.core.event``) with the process CPU clock.
A function's compilation contains those of its njit callees (typed, lowered and finalized
first); "exclusive" is its own share (its typing and lowering, and LLVM optimizing and emitting
the module it links its callees into), "inclusive" counts the callees too (entry points only:
the functions called from Python). The cache must be empty (a fresh ``NUMBA_CACHE_DIR``), else
the kernels are loaded, not compiled.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
from pathlib import Path

from numba.core import event  # noqa: TID251 - the benchmark listens to numba's compile events

ROOT = Path(__file__).resolve().parents[1]
TRAIN = ["train", "conll2000", "--max-sequences", "200", "--epochs", "1", "-q"]


class CompileClock(event.Listener):
    """One row per compilation: function, argument types, CPU s inclusive and exclusive."""

    def __init__(self) -> None:
        self.stack: list[list] = []
        self.rows: list[dict] = []

    def on_start(self, ev) -> None:
        self.stack.append([ev.data["dispatcher"], str(ev.data["args"]), time.process_time(), 0.0])

    def on_end(self, ev) -> None:
        dispatcher, args, start, callees = self.stack.pop()
        seconds = time.process_time() - start
        if self.stack:
            self.stack[-1][3] += seconds
        func = getattr(dispatcher, "py_func", dispatcher)
        name = f"{func.__module__.removeprefix('crfsdca.kernels.')}.{func.__qualname__}"
        self.rows.append(
            {
                "name": name,
                "args": args,
                "inclusive": seconds,
                "exclusive": seconds - callees,
                "entry": not self.stack,
            }
        )


def run(what: str) -> None:
    if what == "train":
        from crfsdca.cli.main import main as cli

        try:
            cli(TRAIN)
        except SystemExit as stop:
            if stop.code:
                raise
        return
    sys.path.insert(0, str(ROOT / "tests"))
    from _conll_dicts import conll_dicts

    import crfsdca

    X, y = conll_dicts("train", 300)
    crfsdca.CRF(c2=0.1).fit(X, y)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("train", "fit"))
    parser.add_argument("--top", type=int, default=25, help="functions listed [25]")
    parser.add_argument("--json", help="write every compilation here")
    args = parser.parse_args()
    if not os.environ.get("NUMBA_CACHE_DIR"):
        print("warning: NUMBA_CACHE_DIR not set; a warm cache compiles nothing", file=sys.stderr)
    clock = CompileClock()
    event.register("numba:compile", clock)
    start = time.process_time()
    run(args.what)
    total = time.process_time() - start
    rows = clock.rows
    compiling = sum(r["inclusive"] for r in rows if r["entry"])
    print(f"process CPU {total:.2f} s, compiling {compiling:.2f} s, {len(rows)} compilations")
    by_name: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for r in rows:
        entry = by_name[r["name"]]
        entry[0] += 1
        entry[1] += r["exclusive"]
        entry[2] += r["inclusive"] if r["entry"] else 0.0
    print(f"{'function':58s} {'variants':>8s} {'exclusive':>9s} {'entry incl.':>11s}")
    for name, (n, excl, incl) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[: args.top]:
        print(f"{name:58s} {n:8d} {excl:9.2f} {f'{incl:.2f}' if incl else '':>11s}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=0))


if __name__ == "__main__":
    main()
