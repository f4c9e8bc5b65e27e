"""Same-process A/B of the chain's SDCA epoch and oracle between two revisions of crfsdca.

    CRFSDCA_DATA_DIR=../shared/data python benchmarks/ab_chain.py --baseline REV [--rounds 5]

The baseline revision is checked out with ``git worktree`` into a temporary folder; both
packages (``crfsdca`` and ``data_loaders``) are imported into this one process under their own
module tables, which are swapped into ``sys.modules`` around every call. Each round times, for
the baseline and then for the working tree (order alternating between rounds): one SDCA-GAP epoch
of the compiled loop (``sdca_epoch.run_steps``) from the same initial dual state with the same
draws, and three full-batch ``Oracle.value_and_gradient`` passes (their median), in process CPU
time, on ``--threads`` numba threads (1 by default: the CPU time of a parallel pass also counts
the threads' waiting, which made it the noisier figure). It prints the medians, the ratio
new / old of each, and the largest difference of the iterates (weights after the epochs, value
and gradient), which must be 0 up to rounding (the acceptance bound is 1e-12).
The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PACKAGES = ("crfsdca", "data_loaders")
MODULES = (
    "data_loaders",
    "crfsdca.features.feature_map",
    "crfsdca.structures.problem",
    "crfsdca.kernels.solvers.sdca_epoch",
    "crfsdca.solvers.local",
    "crfsdca.solvers.sdca",
)
#: where a module lived before crfsdca/ was grouped into packages, for baselines older than that
FORMERLY = {
    "crfsdca.features.feature_map": "crfsdca.features",
    "crfsdca.structures.problem": "crfsdca.problem",
}


def _import(name: str, root: Path):
    if name in FORMERLY and not (root / (name.replace(".", "/") + ".py")).exists():
        return importlib.import_module(FORMERLY[name])
    return importlib.import_module(name)


def _ours(name: str) -> bool:
    return name.split(".")[0] in PACKAGES


class Version:
    """One revision's modules, importable side by side with another's."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for name in [n for n in sys.modules if _ours(n)]:
            del sys.modules[name]
        sys.path.insert(0, str(root))
        try:
            self.mod = {name: _import(name, root) for name in MODULES}
        finally:
            sys.path.remove(str(root))
        self.table = {n: m for n, m in sys.modules.items() if _ours(n)}
        assert Path(self.mod["crfsdca.structures.problem"].__file__).is_relative_to(root)

    @contextlib.contextmanager
    def active(self):
        for name in [n for n in sys.modules if _ours(n)]:
            del sys.modules[name]
        sys.modules.update(self.table)
        yield self.mod


class Bench:
    """The problem, the initial state and the timed calls of one version."""

    def __init__(self, version: Version, dataset: str, max_sequences: int | None) -> None:
        self.version = version
        with version.active() as m:
            _, train, _ = m["data_loaders"].load_encoded(dataset)
            if max_sequences:
                train = train.subset(np.arange(min(max_sequences, train.n_sequences)))
            fm = m["crfsdca.features.feature_map"].FeatureMap(train.n_attributes, train.n_labels, 3)
            self.problem = m["crfsdca.structures.problem"].Problem(train=train, feature_map=fm)
            sdca = m["crfsdca.solvers.sdca"]
            self.config = sdca.SDCAConfig(sampling="gap")
            self.base = sdca.SDCA(self.config).initial_state(self.problem)

    def epoch(self, draws: np.ndarray) -> tuple[float, np.ndarray]:
        with self.version.active() as m:
            state = copy.deepcopy(self.base)
            runner = m["crfsdca.solvers.local"].LocalSDCA(self.problem, self.config, state)
            args = runner.kernel_args(draws, -1.0)
            start = time.process_time()
            m["crfsdca.kernels.solvers.sdca_epoch"].run_steps(args)
            return time.process_time() - start, np.array(runner.weights, copy=True)

    def oracle(self, repeats: int = 3) -> tuple[float, float, np.ndarray]:
        """Median CPU time of ``repeats`` full-batch passes, and the last pass's results."""
        with self.version.active():
            w = self.base.dual.weights
            times = []
            for _ in range(repeats):
                start = time.process_time()
                value, grad = self.problem.oracle.value_and_gradient(w)
                times.append(time.process_time() - start)
            return float(np.median(times)), value, grad


def checkout(rev: str, where: Path) -> Path:
    subprocess.run(["git", "worktree", "add", "--detach", str(where), rev], check=True)
    return where


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="git revision to compare against")
    parser.add_argument("--dataset", default="conll2000")
    parser.add_argument("--max-sequences", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads", type=int, default=1, help="numba threads of the oracle pass (default 1)"
    )
    args = parser.parse_args()
    import numba  # noqa: TID251 - the benchmark pins the kernels' thread count

    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    repo = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        old_root = checkout(args.baseline, Path(tmp) / "baseline")
        try:
            old = Bench(Version(old_root), args.dataset, args.max_sequences)
            new = Bench(Version(repo), args.dataset, args.max_sequences)
            result = compare(old, new, args.rounds, args.seed)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old_root)], check=True)
    n = old.problem.n_sequences
    result.update(baseline=args.baseline, dataset=args.dataset, n=n, threads=args.threads)
    print(json.dumps(result))


def compare(old: Bench, new: Bench, rounds: int, seed: int) -> dict:
    n = old.problem.n_sequences
    draws = np.random.default_rng(seed).random((n, 2))
    for bench in (old, new):  # compile
        bench.epoch(draws)
        bench.oracle()
    times: dict[str, dict[str, list[float]]] = {
        k: {"old": [], "new": []} for k in ("epoch", "oracle")
    }
    diff = {"weights": 0.0, "value": 0.0, "gradient": 0.0}
    for r in range(rounds):
        order = (("old", old), ("new", new)) if r % 2 == 0 else (("new", new), ("old", old))
        out = {}
        for tag, bench in order:
            t_epoch, w = bench.epoch(draws)
            t_oracle, value, grad = bench.oracle()
            times["epoch"][tag].append(t_epoch)
            times["oracle"][tag].append(t_oracle)
            out[tag] = (w, value, grad)
        (w0, v0, g0), (w1, v1, g1) = out["old"], out["new"]
        scale = max(1.0, float(np.max(np.abs(w0))))
        diff["weights"] = max(diff["weights"], float(np.max(np.abs(w1 - w0))) / scale)
        diff["value"] = max(diff["value"], abs(v1 - v0) / max(1.0, abs(v0)))
        diff["gradient"] = max(diff["gradient"], float(np.max(np.abs(g1 - g0))))
    result: dict = {"max_relative_difference": diff}
    for kind, sides in times.items():
        med = {tag: float(np.median(v)) for tag, v in sides.items()}
        ratio = med["new"] / med["old"]
        result[kind] = {"old_s": sides["old"], "new_s": sides["new"], "ratio": ratio}
        print(
            f"{kind:7s} median CPU s old {med['old']:.3f}  new {med['new']:.3f}"
            f"  new/old {ratio:.3f}"
        )
    print("max difference of iterates:", ", ".join(f"{k} {v:.1e}" for k, v in diff.items()))
    return result


if __name__ == "__main__":
    sys.exit(main())
