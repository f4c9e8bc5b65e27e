"""One SDCA-GAP epoch per structure, side by side in one process: the cost of a structure.

    CRFSDCA_DATA_DIR=../shared/data python benchmarks/bench_structure_epochs.py [--rounds 3]

Two comparisons, each from the smoothed start with the same draws, on one numba thread, in
interleaved rounds (medians of CPU seconds; the first epoch of each compiles and is dropped):

- UD English-EWT (UPOS, ``pos`` template): the chain (word order) against the tree (gold
  dependency trees, edge types by direction), lambda = 1/n;
- the first ``--n-second`` CoNLL-2000 sentences (``conll`` template, bias rows): the
  first-order chain against the second-order chain (a junction tree of label trigrams).

Prints each epoch's median, the ratios (tree / chain, second / first order), and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np


def ewt(data_dir):
    from crfsdca.features.attributes import make_encoder
    from crfsdca.features.feature_map import FeatureMap
    from crfsdca.io.readers import read_conllu
    from crfsdca.structures.problem import Problem
    from crfsdca.structures.tree import TreeData, TreeProblem, trees_from_parents

    path = os.path.join(data_dir, "ud_english_ewt", "en_ewt-ud-train.conllu.gz")
    corpus = read_conllu(path, "upos")
    nodes = make_encoder("pos").fit_transform(corpus)
    types = [[0 if h < t else 1 for t, h in enumerate(hs)] for hs in corpus.heads]
    trees = TreeData(nodes, trees_from_parents(corpus.heads, types))
    K = nodes.n_labels
    chain = Problem(train=nodes, feature_map=FeatureMap(nodes.n_attributes, K, 3))
    tree = TreeProblem(train=trees, feature_map=FeatureMap(nodes.n_attributes, K, 3, 2))
    return {"chain": chain, "tree": tree}


def conll(n):
    import data_loaders
    from crfsdca.features.feature_map import FeatureMap
    from crfsdca.structures.junction import junction_problem, second_order_data
    from crfsdca.structures.problem import Problem

    _, train, _ = data_loaders.load_encoded("conll2000")
    train = train.subset(np.arange(min(n, train.n_sequences)))
    first = Problem(train=train, feature_map=FeatureMap(train.n_attributes, train.n_labels, 3))
    second = junction_problem(second_order_data(train), n_bias_rows=3)
    return {"first order": first, "second order": second}


def epoch(problem, seed=0):
    """CPU seconds of one SDCA-GAP epoch from the smoothed start."""
    from crfsdca.solvers.local import LocalSDCA
    from crfsdca.solvers.sdca import SDCA, SDCAConfig

    config = SDCAConfig(sampling="gap", seed=seed)
    state = SDCA(config).initial_state(problem)
    runner = LocalSDCA(problem, config, state)
    start = time.process_time()
    runner.take_steps(problem.n_sequences)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=os.environ.get("CRFSDCA_DATA_DIR"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n-second", type=int, default=1000)
    args = parser.parse_args()
    from crfsdca.kernels.numerics.threads import set_threads

    set_threads(1)
    result = {}
    for name, group in (("ewt", ewt(args.data_dir)), ("conll2000", conll(args.n_second))):
        times = {key: [] for key in group}
        for problem in group.values():
            epoch(problem)  # compile
        for r in range(args.rounds):
            order = list(group.items())
            for key, problem in order if r % 2 == 0 else order[::-1]:
                times[key].append(epoch(problem))
        med = {key: statistics.median(ts) for key, ts in times.items()}
        base, other = list(med)
        ratio = med[other] / med[base]
        print(f"{name}: " + ", ".join(f"{k} {v:.2f} s" for k, v in med.items()),
              f"-> {other} / {base} = {ratio:.2f}x")  # fmt: skip
        result[name] = {"median_s": med, "ratio": ratio, "rounds": times}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
