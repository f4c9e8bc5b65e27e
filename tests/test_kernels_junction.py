"""Junction-tree sum-product, max-product, entropy and KL against brute-force enumeration; a
chain and a tree given as junction trees against the chain and tree oracles."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from _synthetic import random_sequences

from crfsdca.features.feature_map import FeatureMap
from crfsdca.features.sequences import SequenceData
from crfsdca.kernels.numerics import segments
from crfsdca.structures.chain import Oracle
from crfsdca.structures.graphs import Tree
from crfsdca.structures.junction import (
    JunctionData,
    JunctionOracle,
    JunctionProblem,
    JunctionStructure,
)
from crfsdca.structures.junction_tree import JunctionTree, junction_from_tree, second_order_chain
from crfsdca.structures.tree import TreeData, TreeOracle

# The tree and junction-tree kernels against brute force and the solvers on them: their kernels
# compile for minutes on an empty cache, so they run in the slow set (`.ci/run` runs it); the
# default set trains, saves and tags trees and second-order chains through the front door.
pytestmark = pytest.mark.slow

ARITIES = (2, 3, 1)
# hand-made junction trees: cliques of 3 with separators of 2 and 1, a forest, a clique of 4,
# given clique parents rooted elsewhere than clique 0, two cliques joined by an empty separator
HAND_MADE = [
    JunctionTree(5, ((0, 1, 2), (1, 2, 3), (2, 4)), None,
                 (((0, 1), 0), ((1, 2, 3), 1), ((2, 4), 0), ((0, 1, 2), 1), ((3,), 2))),
    JunctionTree(6, ((0, 1, 2), (1, 3), (4, 5)), None,
                 (((0, 2), 0), ((1, 3), 0), ((4, 5), 0), ((0, 1, 2), 1), ((4,), 2))),
    JunctionTree(4, ((0, 1, 2, 3),), None, (((0, 1, 2), 1), ((2, 3), 0), ((3, 1), 0))),
    JunctionTree(5, ((0, 1, 2), (2, 1, 3), (2, 4)), np.array([1, -1, 1]),
                 (((2, 1), 0), ((3, 2, 1), 1), ((4, 2), 0), ((4,), 2))),
    JunctionTree(4, ((0, 1), (2, 3)), np.array([-1, 0]),  # an empty separator
                 (((0, 1), 0), ((3, 2), 0), ((2,), 2))),
]  # fmt: skip


def nodes_of(lengths, K, seed, A=5):
    """Sequences of the given lengths with random attributes and labels."""
    rng = np.random.default_rng(seed)
    N = int(sum(lengths))
    counts = rng.integers(0, 3, size=N)
    return SequenceData(
        seq_offsets=np.concatenate([[0], np.cumsum(lengths)]),
        attr_offsets=np.concatenate([[0], np.cumsum(counts)]),
        attr_ids=rng.integers(0, A, size=int(counts.sum())),
        attr_values=rng.uniform(0.2, 2.0, size=int(counts.sum())),
        labels=rng.integers(0, K, size=N),
        n_attributes=A,
        label_names=tuple(f"L{k}" for k in range(K)),
    )


def brute(data, fm, w, i):
    """(labellings, log p of each) of example i by enumeration."""
    g = data.graphs[i]
    s, n, K = int(data.seq_offsets[i]), g.n_nodes, fm.n_labels
    emission, bias = fm.emission(w), fm.bias(w)
    unary = np.zeros((n, K))
    for v in range(n):
        for q in range(data.attr_offsets[s + v], data.attr_offsets[s + v + 1]):
            unary[v] += data.attr_values[q] * emission[data.attr_ids[q]]
        if fm.n_bias_rows:
            unary[v] += bias[0] + (bias[1] if v == 0 else 0) + (bias[2] if v == n - 1 else 0)
    ys = np.array(list(itertools.product(range(K), repeat=n)))
    score = unary[np.arange(n), ys].sum(1)
    for scope, t in g.factors:
        score += fm.factor(w, t)[tuple(ys[:, v] for v in scope)]
    top = score.max()
    return ys, score - (top + np.log(np.exp(score - top).sum()))


def log_table(ys, log_p, nodes, K):
    """log-marginal table of the nodes (in that order) by enumeration."""
    out = np.full((K,) * len(nodes), -np.inf)
    for y, lp in zip(ys, log_p, strict=True):
        key = tuple(y[list(nodes)])
        out[key] = np.logaddexp(out[key], lp)
    return out


def cases():
    out = [(f"second-order T={T} K={K}", [second_order_chain(T)], K)
           for T in range(1, 7) for K in (2, 3)]  # fmt: skip
    out += [(f"hand-made {j} K={K}", [g], K) for j, g in enumerate(HAND_MADE) for K in (2, 3)]
    return out


@pytest.mark.parametrize("scale", [1.0, 30.0])
@pytest.mark.parametrize(("name", "graphs", "K"), cases(), ids=[c[0] for c in cases()])
def test_junction_kernels_equal_brute_force(name, graphs, K, scale):
    """log Z, clique and separator marginals, MAP, entropy and KL to 1e-10."""
    arities = (2, 3) if name.startswith("second") else ARITIES
    nodes = nodes_of([g.n_nodes for g in graphs], K, seed=len(name) + K)
    data = JunctionData(nodes, tuple(graphs), arities)
    fm = FeatureMap(nodes.n_attributes, K, 3, 0, arities)
    rng = np.random.default_rng(K + graphs[0].n_nodes)
    w, w2 = (scale * rng.normal(size=fm.n_features) for _ in range(2))
    oracle = JunctionOracle(data, fm)
    log_z, cliques, seps = oracle.marginals(0, w)
    ys, log_p = brute(data, fm, w, 0)
    g = graphs[0]
    _, log_p2 = brute(data, fm, w2, 0)
    p = np.exp(log_p)
    assert log_z == pytest.approx(oracle.log_partition(0, w), rel=1e-14)
    for c, nodes_c in enumerate(g.cliques):
        np.testing.assert_allclose(cliques[c], log_table(ys, log_p, nodes_c, K), rtol=1e-10,
                                   atol=1e-10)  # fmt: skip
        if seps[c] is not None:
            want = log_table(ys, log_p, g.separator(c), K)
            np.testing.assert_allclose(seps[c], want, rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(oracle.predict(w), ys[np.argmax(log_p)])
    runs = tuple(a[data.packed[2][0][0] : data.packed[2][0][1]] for a in data.packed[2][1:])
    region = oracle._ws[1][2][: data.n_table_entries].copy()
    entropy = -(p * log_p).sum()
    assert segments.entropy(region, runs) == pytest.approx(entropy, rel=1e-10, abs=1e-10)
    oracle.marginals(0, w2)
    region2 = oracle._ws[1][2][: data.n_table_entries].copy()
    kl = (p * (log_p - log_p2)).sum()
    assert segments.kl(region, region2, runs) == pytest.approx(kl, rel=1e-10, abs=1e-10)
    # the batch value is log Z minus the gold score: log p(gold) by enumeration
    gold = int(np.flatnonzero((ys == nodes.labels).all(1))[0])
    assert oracle.value_and_gradient(w)[0] == pytest.approx(-log_p[gold], rel=1e-10, abs=1e-10)


@pytest.mark.parametrize("n_bias_rows", [0, 3])
def test_a_first_order_chain_given_as_junction_trees_equals_the_chain_oracle(n_bias_rows):
    nodes = random_sequences(3, n=10, max_T=6, K=4, A=7)
    graphs = tuple(
        JunctionTree(T, tuple((t, t + 1) for t in range(T - 1)) or ((0,),), None,
                     tuple(((t, t + 1), 0) for t in range(T - 1)))
        for T in nodes.lengths.tolist()
    )  # fmt: skip
    fm_chain, fm = FeatureMap(7, 4, n_bias_rows), FeatureMap(7, 4, n_bias_rows, 0, (2,))
    assert fm.n_features == fm_chain.n_features
    w = np.random.default_rng(1).normal(size=fm.n_features)
    chain, junction = Oracle(nodes, fm_chain), JunctionOracle(JunctionData(nodes, graphs), fm)
    value, grad = chain.value_and_gradient(w)
    j_value, j_grad = junction.value_and_gradient(w)
    assert j_value == pytest.approx(value, rel=1e-12)
    np.testing.assert_allclose(j_grad, grad, rtol=1e-11, atol=1e-12)
    np.testing.assert_array_equal(junction.predict(w), chain.predict(w))
    for i in range(nodes.n_sequences):
        log_z, _, log_edge = chain.marginals(i, w)
        j_z, cliques, _ = junction.marginals(i, w)
        assert j_z == pytest.approx(log_z, rel=1e-12)
        if len(log_edge):
            np.testing.assert_allclose(np.array(cliques), log_edge, rtol=1e-12, atol=1e-12)


def test_a_tree_given_as_junction_trees_equals_the_tree_oracle():
    nodes = random_sequences(5, n=10, max_T=7, K=3, A=6)
    rng = np.random.default_rng(0)
    trees = []
    for T in nodes.lengths.tolist():
        p = np.array([-1] + [int(rng.integers(0, v)) for v in range(1, T)])
        if T > 3:
            p[T - 1] = -1  # a forest with an isolated or small second tree
        trees.append(Tree(p, rng.integers(0, 2, T)))
    fm_tree, fm = FeatureMap(6, 3, 0, 2), FeatureMap(6, 3, 0, 0, (2, 2))
    w = np.random.default_rng(2).normal(size=fm.n_features)
    tree = TreeOracle(TreeData(nodes, tuple(trees)), fm_tree)
    jdata = JunctionData(nodes, tuple(junction_from_tree(t) for t in trees), (2, 2))
    junction = JunctionOracle(jdata, fm)
    value, grad = tree.value_and_gradient(w)
    j_value, j_grad = junction.value_and_gradient(w)
    assert j_value == pytest.approx(value, rel=1e-12)
    np.testing.assert_allclose(j_grad, grad, rtol=1e-11, atol=1e-12)
    np.testing.assert_array_equal(junction.predict(w), tree.predict(w))
    for i in range(len(trees)):
        log_z, _, log_edge = tree.marginals(i, w)
        j_z, cliques, _ = junction.marginals(i, w)
        assert j_z == pytest.approx(log_z, rel=1e-12)
        for c, clique in enumerate(jdata.graphs[i].cliques):
            if len(clique) == 2:  # the edge parent(v)-v
                v = clique[1]
                np.testing.assert_allclose(cliques[c], log_edge[v], rtol=1e-12, atol=1e-12)


def random_junction_tree(rng, max_nodes=7):
    """A random junction tree: each new clique is a random subset of an earlier clique (the
    separator) plus fresh nodes; node names and clique order shuffled, node order inside the
    cliques permuted, the clique tree given or inferred; random factors of arity 1 to 3."""
    cliques, parents = [list(range(int(rng.integers(1, 4))))], [-1]
    n = len(cliques[0])
    while n < max_nodes:
        p = int(rng.integers(len(cliques)))
        sep = [v for v in cliques[p] if rng.random() < 0.6][:3]
        fresh = list(range(n, n + int(rng.integers(1, 5 - len(sep)))))
        n += len(fresh)
        cliques.append(sep + fresh)
        parents.append(p)
    names = rng.permutation(n)
    order = rng.permutation(len(cliques))
    rank = np.argsort(order)
    cl = [tuple(int(names[v]) for v in rng.permutation(cliques[c])) for c in order]
    given = np.array([rank[parents[c]] if parents[c] >= 0 else -1 for c in order])
    factors = []
    for c in cl:
        for arity, t in ((1, 2), (2, 0), (3, 1)):
            if len(c) >= arity and rng.random() < 0.8:
                factors.append((tuple(int(v) for v in rng.choice(c, arity, replace=False)), t))
    return JunctionTree(n, tuple(cl), given if rng.random() < 0.5 else None, tuple(factors))


@pytest.mark.parametrize("seed", range(12))
def test_random_junction_trees_equal_brute_force(seed):
    rng = np.random.default_rng(seed)
    g = random_junction_tree(rng)
    K = 2 + seed % 2
    nodes = nodes_of([g.n_nodes], K, seed=seed)
    data = JunctionData(nodes, (g,), ARITIES)
    fm = FeatureMap(nodes.n_attributes, K, 3, 0, ARITIES)
    w = 3 * rng.normal(size=fm.n_features)
    oracle = JunctionOracle(data, fm)
    log_z, cliques, seps = oracle.marginals(0, w)
    ys, log_p = brute(data, fm, w, 0)
    for c, nodes_c in enumerate(g.cliques):
        want = log_table(ys, log_p, nodes_c, K)
        np.testing.assert_allclose(cliques[c], want, rtol=1e-10, atol=1e-10)
        if seps[c] is not None:
            want = log_table(ys, log_p, g.separator(c), K)
            np.testing.assert_allclose(seps[c], want, rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(oracle.predict(w), ys[np.argmax(log_p)])
    structure = JunctionStructure(JunctionProblem(train=data, feature_map=fm))
    _, tables = oracle.tables(0, w)
    assert structure.entropies(np.empty((0, K)), tables)[0] == pytest.approx(
        -(np.exp(log_p) * log_p).sum(), rel=1e-10, abs=1e-10
    )
    gold = int(np.flatnonzero((ys == nodes.labels).all(1))[0])
    assert oracle.value_and_gradient(w)[0] == pytest.approx(-log_p[gold], rel=1e-10, abs=1e-10)
