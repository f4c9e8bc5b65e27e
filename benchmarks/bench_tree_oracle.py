"""Tree oracle against the chain oracle on the same EWT sentences: node x K^2 per second.

    CRFSDCA_DATA_DIR=../shared/data python benchmarks/bench_tree_oracle.py [--label upos]

Both oracles compute the batch value and gradient (log Z, marginals, expected features) of the
UD English-EWT training sentences at the same random weights, on one thread, in interleaved
rounds; the tree uses the gold dependency trees (HEAD column), edge types by direction (head
left or right of the word), the chain the word order. Prints the medians and the ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=os.environ.get("CRFSDCA_DATA_DIR"))
    parser.add_argument("--label", default="upos", choices=["upos", "xpos"])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from crfsdca.features.attributes import make_encoder
    from crfsdca.features.feature_map import FeatureMap
    from crfsdca.io.readers import read_conllu
    from crfsdca.kernels.numerics.threads import set_threads
    from crfsdca.structures.chain import Oracle
    from crfsdca.structures.tree import TreeData, TreeOracle, trees_from_parents

    set_threads(1)
    path = os.path.join(args.data_dir, "ud_english_ewt", "en_ewt-ud-train.conllu.gz")
    corpus = read_conllu(path, args.label)
    nodes = make_encoder("pos").fit_transform(corpus)
    types = [[0 if h < t else 1 for t, h in enumerate(hs)] for hs in corpus.heads]
    trees = TreeData(nodes, trees_from_parents(corpus.heads, types))
    K = nodes.n_labels
    chain_fm = FeatureMap(nodes.n_attributes, K, 3)
    tree_fm = FeatureMap(nodes.n_attributes, K, 3, 2)
    rng = np.random.default_rng(0)
    w_chain = 0.1 * rng.normal(size=chain_fm.n_features)
    w_tree = np.concatenate([w_chain, w_chain[-K * K :]])  # both edge types: the chain's block
    chain, tree = Oracle(nodes, chain_fm), TreeOracle(trees, tree_fm)
    chain.value_and_gradient(w_chain), tree.value_and_gradient(w_tree)  # compile
    times = {"chain": [], "tree": []}
    for _ in range(args.rounds):
        for name, oracle, w in (("chain", chain, w_chain), ("tree", tree, w_tree)):
            start = time.perf_counter()
            oracle.value_and_gradient(w)
            times[name].append(time.perf_counter() - start)
    work = nodes.n_items * K * K
    print(
        f"EWT train ({args.label}): {nodes.n_sequences} sentences, {nodes.n_items} nodes, K = {K}"
    )
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"  {name:5s}: median {med:.3f} s, {work / med / 1e6:.1f} M node.K^2 per second")
    ratio = statistics.median(times["tree"]) / statistics.median(times["chain"])
    print(f"  tree / chain time: {ratio:.2f}x (rounds: {args.rounds}, one thread)")


if __name__ == "__main__":
    main()
