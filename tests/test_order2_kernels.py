"""The second-order chain's fast path (``crfsdca.kernels.structures.order2``) against the generic
junction kernels on the same blocks: log Z, clique and separator marginals, the primal direction."""

from __future__ import annotations

import numpy as np
import pytest
from _synthetic import random_sequences
from numba import njit
from test_junction_oracle import custom_data

from crfsdca.kernels import primitives as P
from crfsdca.kernels.solvers import sdca_epoch
from crfsdca.kernels.structures import order2
from crfsdca.structures.junction import (
    junction_problem,
    junctions_from_cliques,
    second_order_data,
)
from crfsdca.structures.junction_tree import is_second_order_chain, second_order_chain

# The tree and junction-tree kernels against brute force and the solvers on them: their kernels
# compile for minutes on an empty cache, so they run in the slow set (`.ci/run` runs it); the
# default set trains, saves and tags trees and second-order chains through the front door.
pytestmark = pytest.mark.slow


@njit
def _oracle_and_direction(s, w, mu, kappa, ws):
    """Per block: log Z, nu, log nu, |k u|^2 and w + u (from w = 0 plus the direction), in the
    step workspace ws."""
    bufs, _, sws = ws
    n = s.runs.start.size - 1
    R = bufs[0].size
    log_z, sq = np.empty(n), np.empty(n)
    nus, lnus = np.zeros((n, R)), np.zeros((n, R))
    moved = np.zeros((n, w.size))
    for i in range(n):
        r = s.jt[1][i + 1] - s.jt[1][i]
        log_z[i] = P.block_oracle(s, i, w, sws, bufs)
        nus[i, :r], lnus[i, :r] = bufs[1][:r], bufs[2][:r]
        bufs[0][:r] = mu[s.jt[1][i] : s.jt[1][i + 1]]
        sq[i] = P.block_direction(s, i, bufs, sws, kappa)
        P.add_block_direction(s, i, 1.0, sws, moved[i])
    return log_z, nus, lnus, sq, moved


@njit
def _fast_path_taken(s, w, ws):
    """Whether the fast path's oracle succeeds (no fallback) on every block of >= 3 nodes."""
    bufs, _, sws = ws
    for i in range(s.runs.start.size - 1):
        if s.data[0][i + 1] - s.data[0][i] >= 3:
            ok = order2.block_marginals(s, i, w, sws[5], sws[1][0], bufs[1], bufs[2])[1]
            if not ok:
                return False
    return True


@njit
def _block_oracle(s, i, w, ws):
    bufs, _, sws = ws
    return P.block_oracle(s, i, w, sws, bufs)


@njit
def _block_direction(s, i, ws):
    bufs, _, sws = ws
    return P.block_direction(s, i, bufs, sws, 1.0)


def _poison(fast):
    """NaN in ``kernels.order2``'s messages and scratch rows (``JunctionStepWorkspace.fast``),
    which the generic kernels never touch."""
    for array in (*fast[1], *fast[2]):
        array[...] = np.nan


@pytest.mark.parametrize("order2", [True, False])
def test_the_primitives_run_the_fast_path_on_second_order_chains(order2):
    """The structure primitives (what the solvers call) take the fast path on a block of >= 3
    nodes: its oracle writes the forward messages of ``kernels.order2``'s workspace and its
    direction the column sums there; with the flag off, that workspace stays untouched."""
    data = second_order_data(random_sequences(7, n=6, max_T=6, K=3))
    problem = junction_problem(data, n_bias_rows=3)
    blocks = problem.structure.blocks._replace(order2=order2)
    assert problem.structure.blocks.order2
    w = np.random.default_rng(7).standard_normal(problem.feature_map.n_features)
    i = int(np.argmax(np.diff(blocks.data[0])))  # the longest block
    assert blocks.data[0][i + 1] - blocks.data[0][i] >= 3
    ws = sdca_epoch.make_workspace(blocks)
    fast = ws[2].fast
    _poison(fast)
    assert np.isfinite(_block_oracle(blocks, i, w, ws))
    messages = fast[1][0][0]  # fin[0]: the first forward message
    assert np.all(np.isfinite(messages)) == order2 and np.all(np.isnan(messages)) != order2
    ws[0].mu[:] = 0.0
    _poison(fast)
    assert _block_direction(blocks, i, ws) > 0
    sums = fast[2][0]  # S: a clique difference's column sums
    assert np.all(np.isfinite(sums)) == order2 and np.all(np.isnan(sums)) != order2


def both(problem, w, mu):
    fast = problem.structure.blocks
    assert fast.order2
    generic = fast._replace(order2=False)
    return (
        _oracle_and_direction(b, w, mu, 0.7, sdca_epoch.make_workspace(b)) for b in (fast, generic)
    )


@pytest.mark.parametrize(("seed", "K", "scale"), [(0, 3, 1.0), (1, 4, 3.0), (2, 2, 10.0)])
def test_the_fast_path_matches_the_generic_kernels(seed, K, scale):
    data = second_order_data(random_sequences(seed, n=25, max_T=7, K=K))
    problem = junction_problem(data, n_bias_rows=3)
    rng = np.random.default_rng(seed)
    w = scale * rng.standard_normal(problem.feature_map.n_features)
    region = problem.train.packed[0][1]
    mu = rng.random(int(region[-1]))  # any dual entries: the direction is linear in nu - mu
    blocks = problem.structure.blocks
    assert _fast_path_taken(blocks, w, sdca_epoch.make_workspace(blocks))
    fast, generic = both(problem, w, mu)
    for a, b in zip(fast, generic, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12)


def test_marginals_too_small_for_scaled_space_fall_back_to_log_space():
    data = second_order_data(random_sequences(4, n=10, max_T=6, K=3))
    problem = junction_problem(data)
    w = 400.0 * np.random.default_rng(4).standard_normal(problem.feature_map.n_features)
    region = problem.train.packed[0][1]
    blocks = problem.structure.blocks
    assert not _fast_path_taken(blocks, w, sdca_epoch.make_workspace(blocks))
    fast, generic = both(problem, w, np.zeros(int(region[-1])))
    log_z, _, lnu, *_ = fast
    assert np.all(np.isfinite(log_z)) and lnu.min() < np.log(1e-280)
    for a, b in zip(fast, generic, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12)


def test_only_second_order_chains_take_the_fast_path():
    assert is_second_order_chain(second_order_chain(5))
    assert not is_second_order_chain(second_order_chain(2))
    g = second_order_chain(5)
    assert not is_second_order_chain(
        type(g)(5, g.cliques, g.clique_parents, g.factors[:-1])  # one trigram factor fewer
    )
    assert not junction_problem(custom_data(0, n=8, max_T=6)).structure.blocks.order2
    nodes = random_sequences(3, n=6, max_T=5, K=3)
    same = [second_order_chain(T) for T in nodes.lengths.tolist()]
    data = junctions_from_cliques(
        nodes, [g.cliques for g in same], [g.factors[::-1] for g in same],
        [g.clique_parents for g in same], factor_arities=(2, 3),
    )  # fmt: skip
    assert junction_problem(data).structure.blocks.order2
