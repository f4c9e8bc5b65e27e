"""Each structure's run table gives the junction-tree entropy of its blocks."""

from __future__ import annotations

import numpy as np
import pytest
from _synthetic import random_sequences
from test_tree_oracle import tree_data

from crfsdca.features.feature_map import FeatureMap
from crfsdca.kernels.primitives import BlockBuffers, BlockBuffers32
from crfsdca.kernels.solvers import line_search as K_ls
from crfsdca.kernels.solvers import sdca as K_sdca
from crfsdca.structures.chain import ChainStructure, Oracle
from crfsdca.structures.junction import (
    JunctionData,
    JunctionOracle,
    JunctionProblem,
    JunctionStructure,
    second_order_data,
)
from crfsdca.structures.junction_tree import JunctionTree
from crfsdca.structures.problem import Problem
from crfsdca.structures.tree import TreeOracle, TreeProblem, TreeStructure


def stacked(oracle, n, w):
    """Every example's log-marginals at w, packed like the dual state."""
    parts = [[a.copy() for a in oracle.marginals(i, w)[1:]] for i in range(n)]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def chain_entropies(nodes, log_node, log_edge):
    """The chain kernel's block entropies (``kernels.solvers.sdca.block_entropy``)."""
    so = nodes.seq_offsets
    return np.array([
        K_sdca.block_entropy(log_node[so[i] : so[i + 1]], log_edge[so[i] - i : so[i + 1] - i - 1])
        for i in range(nodes.n_sequences)
    ])  # fmt: skip


def test_chain_run_table_entropy_equals_the_chain_kernel():
    nodes = random_sequences(2, n=12, max_T=6, K=3, A=5)
    fm = FeatureMap(5, 3, 3)
    log_node, log_edge = stacked(Oracle(nodes, fm), 12, np.random.default_rng(0).normal(size=33))
    structure = ChainStructure(Problem(train=nodes, feature_map=fm))
    runs = structure.runs
    assert runs.coef[runs.start[0] : runs.start[1]].tolist() == [1.0]  # a single node (T = 1)
    T = int(nodes.lengths[-1])
    a, b = runs.start[11], runs.start[12]
    assert (runs.hi - runs.lo)[a:b].tolist() == [9 * (T - 1), 3, 3 * (T - 2), 3]
    assert runs.coef[a:b].tolist() == [1.0, 0.0, -1.0, 0.0]
    want = chain_entropies(nodes, log_node, log_edge)
    np.testing.assert_allclose(structure.entropies(log_node, log_edge), want, rtol=1e-12)
    assert want.min() > 0


def test_tree_run_table_entropy_equals_the_junction_tree_formula():
    """sum_edges H(mu_e) + sum_v (1 - deg v) H(mu_v), written out in NumPy."""
    data = tree_data(seed=3, n=10, max_T=6)
    fm = FeatureMap(data.n_attributes, 3, 3, 2)
    w = np.random.default_rng(1).normal(size=fm.n_features)
    log_node, log_edge = stacked(TreeOracle(data, fm), 10, w)
    parents, _, _, child_start, _ = data.packed
    degree = np.diff(child_start) + (parents >= 0)
    h_node = -(np.exp(log_node) * log_node).sum(axis=1)
    h_edge = -(np.exp(log_edge) * np.where(np.isfinite(log_edge), log_edge, 0)).sum(axis=(1, 2))
    terms = (1 - degree) * h_node + np.where(parents >= 0, h_edge, 0.0)
    want = np.add.reduceat(terms, data.seq_offsets[:-1])
    structure = TreeStructure(TreeProblem(train=data, feature_map=fm))
    np.testing.assert_allclose(structure.entropies(log_node, log_edge), want, rtol=1e-12)


def test_junction_run_table_entropy_equals_the_chain_kernel():
    """A first-order chain given as a junction tree (edge cliques, node separators), and a
    second-order chain without trigram weights, have the chain kernel's entropies."""
    nodes = random_sequences(4, n=10, max_T=6, K=3, A=5)
    graphs = tuple(
        JunctionTree(T, tuple((t, t + 1) for t in range(T - 1)) or ((0,),), None,
                     tuple(((t, t + 1), 0) for t in range(T - 1)))
        for T in nodes.lengths.tolist()
    )  # fmt: skip
    w = np.random.default_rng(5).normal(size=33)
    want = chain_entropies(nodes, *stacked(Oracle(nodes, FeatureMap(5, 3, 3)), 10, w))
    assert want.min() > 0
    second = FeatureMap(5, 3, 3, 0, (2, 3))
    cases = [(JunctionData(nodes, graphs, (2,)), FeatureMap(5, 3, 3, 0, (2,)), w),
             (second_order_data(nodes), second, np.concatenate([w, np.zeros(27)]))]  # fmt: skip
    for data, fm, weights in cases:
        oracle = JunctionOracle(data, fm)
        tables = np.concatenate([oracle.tables(i, weights)[1] for i in range(10)])
        structure = JunctionStructure(JunctionProblem(train=data, feature_map=fm))
        got = structure.entropies(np.empty((0, 3)), tables)
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-14)


def block_buffers(structure, i, log_node, log_edge):
    """Example i's flat block (``kernels.primitives.BlockRuns`` layout) from arrays stored like
    the dual state, and its runs."""
    from crfsdca.kernels.primitives import BlockRuns

    t = structure.runs
    a, b = t.start[i], t.start[i + 1]
    runs = BlockRuns(t.lo[a:b], t.hi[a:b], t.coef[a:b], t.dst[a:b], t.off[a:b])
    arrays = (np.ascontiguousarray(log_edge).reshape(-1), np.ascontiguousarray(log_node).ravel())
    block = np.zeros(int(runs.hi.max()))
    for lo, hi, dst, off in zip(runs.lo, runs.hi, runs.dst, runs.off, strict=True):
        block[lo:hi] = arrays[dst][off : off + hi - lo]
    return block, runs, arrays


def kl_tilde(log_p, log_q, runs):
    """sum_r coef_r KL(run r of p || run r of q), in NumPy."""
    total = 0.0
    for lo, hi, c in zip(runs.lo, runs.hi, runs.coef, strict=True):
        p = np.exp(log_p[lo:hi])
        keep = p > 0
        total += c * float(np.sum(p[keep] * (log_p[lo:hi][keep] - log_q[lo:hi][keep])))
    return total


def structures_with_two_points():
    """(structure, log mu, log nu) of a forest and of second-order chains: the oracle's
    marginals at two random weight vectors, stored like the dual state."""
    rng = np.random.default_rng(11)
    data = tree_data(seed=3, n=6, max_T=6)
    fm = FeatureMap(data.n_attributes, 3, 3, 2)
    tree = TreeStructure(TreeProblem(train=data, feature_map=fm))
    oracle = TreeOracle(data, fm)
    mu, nu = (stacked(oracle, 6, rng.normal(size=fm.n_features)) for _ in range(2))
    yield tree, mu, nu
    nodes = random_sequences(4, n=6, max_T=6, K=3, A=5)
    fm = FeatureMap(5, 3, 3, 0, (2, 3))
    junction = JunctionStructure(JunctionProblem(train=second_order_data(nodes), feature_map=fm))
    oracle = JunctionOracle(junction.problem.train, fm)
    tables = [
        np.concatenate([oracle.tables(i, w)[1] for i in range(6)])
        for w in (rng.normal(size=fm.n_features) for _ in range(2))
    ]
    empty = np.empty((0, 3))
    yield junction, (empty, tables[0]), (empty, tables[1])


def test_the_line_search_on_tree_and_junction_blocks_finds_the_root_of_the_reference():
    """On tree and junction blocks, the kernels' f'(gamma) is minus the derivative of
    gamma -> KL~(mu^gamma || nu) + gamma^2 cb / 2 (finite differences of a NumPy KL over the
    runs), and the line search returns the root that a bracketing root finder (brentq) finds
    on that reference."""
    from scipy.optimize import brentq

    for structure, (mu_n, mu_e), (nu_n, nu_e) in structures_with_two_points():
        for i in range(structure.problem.n_sequences):
            log_mu, runs, _ = block_buffers(structure, i, mu_n, mu_e)
            log_nu, _, _ = block_buffers(structure, i, nu_n, nu_e)
            size = log_mu.size
            bufs = BlockBuffers(np.exp(log_mu), np.exp(log_nu), log_nu.copy(), np.empty(size))
            b32 = BlockBuffers32(*(np.empty(size, np.float32) for _ in range(3)))
            arrays = tuple(np.ascontiguousarray(a).reshape(-1) for a in (mu_e, mu_n))
            gap, fp0, _ = K_sdca.block_gap_given_nu(arrays, runs, bufs, b32)
            assert gap == pytest.approx(kl_tilde(log_mu, log_nu, runs), rel=1e-10, abs=1e-12)
            cb = 0.7

            def phi(g, log_mu=log_mu, log_nu=log_nu, runs=runs, cb=cb):
                mix = np.log((1 - g) * np.exp(log_mu) + g * np.exp(log_nu))
                return kl_tilde(mix, log_nu, runs) + 0.5 * cb * g * g

            for g in (0.1, 0.4, 0.8):
                h = 1e-6
                want = -(phi(g + h) - phi(g - h)) / (2 * h)
                got = K_ls.line_derivatives(g, bufs, runs, cb)[0]
                assert got == pytest.approx(want, rel=1e-5, abs=1e-8)
            if fp0 <= 0:
                continue

            def fprime(g, bufs=bufs, runs=runs, cb=cb):
                return K_ls.line_derivatives(g, bufs, runs, cb)[0]

            root = brentq(lambda g: -(phi(g + 1e-7) - phi(g - 1e-7)) / 2e-7, 1e-6, 1 - 1e-6)
            gamma = K_ls.line_search(bufs, b32, runs, cb, fp0, 0.5, 1e-10, 100)[0]
            assert gamma == pytest.approx(root, abs=1e-5)
            # rtsafe stops on a step below 1e-10: the root lies within 2e-10 of gamma
            assert fprime(max(gamma - 1e-9, 0.0)) >= 0.0 >= fprime(min(gamma + 1e-9, 1.0))
