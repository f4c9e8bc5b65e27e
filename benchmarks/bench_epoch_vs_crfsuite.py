r"""One SDCA epoch against one CRFsuite L-BFGS iteration, interleaved in one process.

    CRFSDCA_DATA_DIR=../shared/data python benchmarks/bench_epoch_vs_crfsuite.py [--dataset ocr]

The machines here change speed by 20-40% within minutes, so two runs made one after the other
(as in ``scripts/bench_vs_crfsuite.py``, which runs each solver to convergence in turn) can
disagree on the ratio by that much. This script alternates the two in rounds: each round runs
CRFsuite's L-BFGS for ``--crfsuite-iterations`` iterations (a fresh trainer; the wall time of
each iteration from its log, the first one, which includes the initial evaluation, left out) and
then ``--sdca-epochs`` epochs of SDCA-GAP (defaults: 80% gap sampling, model-start line search)
continuing one run from ``--warm-epochs`` warm-up epochs, so that the epochs are those of the
middle of a run and not of the smoothed initial state. Each round gives the ratio of the median
epoch to the median iteration; the script prints the rounds and the median of their ratios.

Both solve the same objective on the same features, as in ``bench_vs_crfsuite.py``: CRFsuite's
dense model (the attributes seen in training, no bias rows; ``--bias-attributes`` adds crfsdca's
bias, first and last rows as attributes, the OCR model of the issues), lambda = 1/n, one thread.
An SDCA epoch is timed as the solver runs it (drawing the indices, the compiled steps, the
sampler's rebuild), without the monitor's evaluation passes. The last line is a JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import data_loaders
from crfsdca.features.feature_map import FeatureMap
from crfsdca.kernels.numerics.threads import set_threads
from crfsdca.solvers.local import LocalSDCA
from crfsdca.solvers.sdca import SDCA, SDCAConfig
from crfsdca.structures.problem import Problem

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from bench_oracle import crfsuite_items, train_crfsuite  # noqa: E402
from bench_vs_crfsuite import restrict_to_training_support, with_bias_attributes  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ocr", help="ocr | conll2000 | conll2002-ned | ...")
    parser.add_argument("--template", default=None, help="attribute template [dataset default]")
    parser.add_argument("--bias-attributes", action=argparse.BooleanOptionalAction, default=None,
                        help="bias/first/last attributes [on for ocr]")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--crfsuite-iterations", type=int, default=6)
    parser.add_argument("--sdca-epochs", type=int, default=3)
    parser.add_argument("--warm-epochs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.template is None:
        args.template = {"conll2000": "crfsuite-chunking"}.get(
            args.dataset, data_loaders.get_dataset(args.dataset).default_template
        )
    if args.bias_attributes is None:
        args.bias_attributes = args.dataset == "ocr"
    return args


def crfsuite_iterations(items, labels, c2: float, iterations: int) -> list[float]:
    """Wall seconds of CRFsuite iterations 2..``iterations`` of a fresh L-BFGS run."""
    run = train_crfsuite(items, labels, c2=c2, max_iterations=iterations, epsilon=1e-12, delta=0.0)
    return run.wall[1:]


def sdca_epochs(runner: LocalSDCA, epochs: int) -> list[float]:
    """Wall seconds of the next ``epochs`` epochs of the run (evaluation every epoch)."""
    out = []
    for _ in range(epochs):
        start = time.perf_counter()
        runner.run_until_eval()
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    args = parse_args()
    set_threads(1)
    encoder, train, _ = data_loaders.load_encoded(args.dataset, template=args.template)
    names = encoder.attribute_names() if hasattr(encoder, "attribute_names") else None
    n_attributes = train.n_attributes
    train, _, kept = restrict_to_training_support(train, train)
    if names is not None and train.n_attributes != n_attributes:
        names = [names[j] for j in kept]
    if args.bias_attributes:
        train = with_bias_attributes(train)
        names = None if names is None else [*names, "__BIAS__", "__BOS__", "__EOS__"]
    fm = FeatureMap(train.n_attributes, train.n_labels, n_bias_rows=0)
    problem = Problem(train=train, feature_map=fm, name=args.dataset)
    n = problem.n_sequences
    c2 = n * problem.regularization / 2
    items = crfsuite_items(train, names)
    labels = [[train.label_names[y] for y in train.sequence_labels(i)] for i in range(n)]
    print(
        f"{args.dataset} ({args.template}{', bias attributes' if args.bias_attributes else ''}):"
        f" n={n} N={train.n_items} K={fm.n_labels} d={fm.n_features}, lambda=1/n, one thread"
    )

    cfg = SDCAConfig(sampling="gap", non_uniformity=0.8, eval_every=1.0, tol=0.0, seed=args.seed)
    runner = LocalSDCA(problem, cfg, SDCA(cfg).initial_state(problem))
    warm = sdca_epochs(runner, args.warm_epochs)  # includes the first compilation, if any
    print(f"SDCA warm-up: {args.warm_epochs} epochs in {sum(warm):.1f} s")

    rounds = []
    for r in range(args.rounds):
        its = crfsuite_iterations(items, labels, c2, args.crfsuite_iterations)
        eps = sdca_epochs(runner, args.sdca_epochs)
        it, ep = statistics.median(its), statistics.median(eps)
        rounds.append({"crfsuite_iteration_s": it, "sdca_epoch_s": ep, "ratio": ep / it})
        print(
            f"round {r + 1}: CRFsuite iteration {it:.3f} s (median of {len(its)}), "
            f"SDCA epoch {ep:.3f} s (median of {len(eps)}, epochs "
            f"{runner.state.oracle_calls / n - len(eps):.0f}-{runner.state.oracle_calls / n:.0f})"
            f"  ratio {ep / it:.2f}"
        )
    ratios = [x["ratio"] for x in rounds]
    summary = {
        "dataset": args.dataset,
        "n_sequences": n,
        "n_features": fm.n_features,
        "median_ratio": statistics.median(ratios),
        "min_ratio": min(ratios),
        "max_ratio": max(ratios),
        "median_crfsuite_iteration_s": statistics.median(x["crfsuite_iteration_s"] for x in rounds),
        "median_sdca_epoch_s": statistics.median(x["sdca_epoch_s"] for x in rounds),
        "rounds": rounds,
    }
    print(
        f"SDCA epoch / CRFsuite iteration: median {summary['median_ratio']:.2f} over "
        f"{len(rounds)} rounds (range {min(ratios):.2f}-{max(ratios):.2f})"
    )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
