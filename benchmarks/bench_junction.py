"""Junction-tree oracle against the chain oracle on CoNLL-2000 sentences.

    CRFSDCA_DATA_DIR=../shared/data python benchmarks/bench_junction.py [--sentences 300]

Three oracles compute the batch value and gradient of the first ``--sentences`` training
sentences (K = 22, all labels of the full training set) at the same random weights, on one
thread, in interleaved rounds: the chain (scaled forward-backward), the same first-order chain
given as junction trees (edge cliques, node separators; the generic log-space junction kernels)
and the second-order chain (cliques of three labels, K^3 tables). Prints the medians, the
ratios to the chain and the throughput in clique-table entries per second.
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
    parser.add_argument("--sentences", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    import data_loaders
    from crfsdca.features.feature_map import FeatureMap
    from crfsdca.kernels.numerics.threads import set_threads
    from crfsdca.structures.chain import Oracle
    from crfsdca.structures.junction import JunctionData, JunctionOracle, second_order_data
    from crfsdca.structures.junction_tree import JunctionTree

    set_threads(1)
    _, train, _ = data_loaders.load_encoded("conll2000", data_dir=args.data_dir)
    nodes = train.subset(np.arange(args.sentences))
    A, K = nodes.n_attributes, nodes.n_labels
    first = JunctionData(
        nodes,
        tuple(
            JunctionTree(
                T,
                tuple((t, t + 1) for t in range(T - 1)) or ((0,),),
                None,
                tuple(((t, t + 1), 0) for t in range(T - 1)),
            )
            for T in nodes.lengths.tolist()
        ),  # fmt: skip
        (2,),
    )
    second = second_order_data(nodes)
    fm2 = FeatureMap(A, K, 3, 0, (2, 3))
    w2 = 0.1 * np.random.default_rng(0).normal(size=fm2.n_features)
    w1 = w2[: fm2.factor_offset(1)]
    oracles = {
        "chain": (Oracle(nodes, FeatureMap(A, K, 3)), w1),
        "chain as junction": (JunctionOracle(first, FeatureMap(A, K, 3, 0, (2,))), w1),
        "second order": (JunctionOracle(second, fm2), w2),
    }
    entries = {"chain": (nodes.n_items - nodes.n_sequences) * K * K}
    entries["chain as junction"] = first.n_table_entries
    entries["second order"] = second.n_table_entries
    for oracle, w in oracles.values():
        oracle.value_and_gradient(w)  # compile
    times: dict[str, list[float]] = {name: [] for name in oracles}
    for _ in range(args.rounds):
        for name, (oracle, w) in oracles.items():
            start = time.perf_counter()
            oracle.value_and_gradient(w)
            times[name].append(time.perf_counter() - start)
    print(f"CoNLL-2000 train, first {nodes.n_sequences} sentences, {nodes.n_items} tokens, K = {K}")
    base = statistics.median(times["chain"])
    for name, ts in times.items():
        med = statistics.median(ts)
        print(
            f"  {name:17s}: median {med:.3f} s ({med / base:6.1f}x the chain),"
            f" {entries[name] / med / 1e6:.1f} M table entries per second"
        )


if __name__ == "__main__":
    main()
