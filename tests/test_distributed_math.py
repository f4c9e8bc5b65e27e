"""Distributed SDCA in one process (``simulate``, bit for bit the cluster run): the aggregations
against independent optima, on every structure. Tiny problems; no Dask needed."""

from __future__ import annotations

import numpy as np
import pytest
from _reference import lbfgs_optimum
from _synthetic import random_problem
from test_tree_oracle import tree_data

from crfsdca.distributed import simulate
from crfsdca.solvers import adaptive as adaptive_rule
from crfsdca.solvers.cocoa import attribute_counts, coordinate_scale
from crfsdca.structures.tree import tree_problem


def check_run(result, p_star):
    """Every round's dual rises and stays below P*; the final gap certifies the primal."""
    duals = [r.dual for r in result.trace.records]
    assert all(b >= a - 1e-12 for a, b in zip(duals, duals[1:], strict=False)), duals
    assert max(duals) <= p_star + 1e-10
    last = result.trace.records[-1]
    assert result.stop_reason == "tol"
    assert last.dual - 1e-10 <= p_star <= last.primal + 1e-10
    assert last.primal - p_star <= last.gap + 1e-10


@pytest.mark.parametrize("variant", ["practical", "sparse", "adaptive"])
def test_three_partitions_reach_the_lbfgs_optimum_within_the_certified_gap(variant):
    problem = random_problem(seed=5, n=30, max_T=6, K=3, A=40)
    p_star = lbfgs_optimum(problem)
    result = simulate(problem, 3, local_updates=10, max_rounds=2000, tol=1e-6, seed=1,
                      variant=variant)  # fmt: skip
    check_run(result, p_star)
    assert problem.primal(result.weights) == pytest.approx(result.trace.records[-1].primal)


@pytest.mark.parametrize("variant", ["practical", "sparse", "adaptive"])
def test_trees_on_two_partitions_reach_the_serial_tree_optimum(variant):
    problem = tree_problem(tree_data(seed=4, n=16, max_T=6, K=3, A=12, n_types=2))
    p_star = lbfgs_optimum(problem)
    result = simulate(problem, 2, local_updates=8, max_rounds=2000, tol=1e-6, seed=3,
                      variant=variant, keep_partitions=True)  # fmt: skip
    check_run(result, p_star)
    total = np.add.reduce([p.committed_contribution() for p in result.partitions])
    assert np.max(np.abs(result.weights - total)) < 1e-12  # w = w_hat(mu) on trees too


def test_attribute_counts_and_the_coordinate_scale():
    counts = attribute_counts([np.array([0, 1, 1]), np.array([1, 2]), np.array([1])], 4)
    np.testing.assert_array_equal(counts, [1, 3, 1, 0])
    c = coordinate_scale(counts, 3, 2, 4 * 2 + 5)
    np.testing.assert_allclose(c[:8], np.sqrt([1, 1, 3, 3, 1, 1, 1, 1]) / np.sqrt(3))
    np.testing.assert_array_equal(c[8:], 1.0)  # bias and transitions: sigma' = P


def test_sparse_aggregation_keeps_w_the_sum_of_contributions_and_the_dual_rising():
    """Four partitions, long local rounds: the per-attribute sigma' (below P on attributes that
    few shards hold) still gives a rising dual, and w = sum_k w_hat_k(mu) exactly."""
    problem = random_problem(seed=8, n=40, max_T=6, K=3, A=8)
    sparse = simulate(problem, 4, local_updates=10, max_rounds=30, tol=0.0, variant="sparse",
                      keep_partitions=True)  # fmt: skip
    duals = [r.dual for r in sparse.trace.records]
    assert all(b >= a - 1e-12 for a, b in zip(duals, duals[1:], strict=False))
    total = np.add.reduce([p.committed_contribution() for p in sparse.partitions])
    assert np.max(np.abs(sparse.weights - total)) < 1e-12


def test_second_order_chains_on_three_partitions_reach_the_lbfgs_optimum():
    from _synthetic import random_sequences

    from crfsdca.structures.junction import junction_problem, second_order_data

    problem = junction_problem(second_order_data(random_sequences(6, n=12, max_T=5, K=3, A=10)))
    p_star = lbfgs_optimum(problem)
    result = simulate(problem, 3, local_updates=4, max_rounds=3000, tol=1e-6, seed=2,
                      keep_partitions=True)  # fmt: skip
    check_run(result, p_star)
    total = np.add.reduce([p.committed_contribution() for p in result.partitions])
    assert np.max(np.abs(result.weights - total)) < 1e-12


@pytest.mark.parametrize("trial", ["damped", "undone"])
def test_adaptive_rounds_take_back_what_overshot_and_keep_the_dual_rising(trial, monkeypatch):
    """Four partitions of a dense problem, long rounds: some trial rounds lower the dual. Tried
    at sigma' >= 1 they are kept at the best mix t < 1 of the round (the average, t = 1/P,
    cannot lower the dual); tried below 1 they are undone and run again at sigma' = P. Either
    way the dual rises at every round, w stays the sum of the partitions' contributions, and
    the run is deterministic, with threads too."""
    if trial == "undone":
        monkeypatch.setitem(adaptive_rule.SIGMA_MIN, 4, 0.5)
    problem = random_problem(seed=8, n=40, max_T=6, K=3, A=8)
    opts = {"local_updates": 10, "max_rounds": 40, "tol": 0.0, "eval_every": 1}
    adaptive = simulate(problem, 4, variant="adaptive", keep_partitions=True, **opts)
    last = adaptive.trace.records[-1]
    assert last.extra["rejected_rounds"] > 0
    damped = last.extra["damped_rounds"]
    assert (
        damped == last.extra["rejected_rounds"]
        if trial == "damped"
        else damped < last.extra["rejected_rounds"]
    )
    duals = [r.dual for r in adaptive.trace.records]
    assert all(b >= a - 1e-12 for a, b in zip(duals, duals[1:], strict=False)), duals
    total = np.add.reduce([p.committed_contribution() for p in adaptive.partitions])
    assert np.max(np.abs(adaptive.weights - total)) < 1e-12
    for part in adaptive.partitions:  # the mixed blocks' entropies are their logs' entropies
        d = part.local.state.dual
        recomputed = part.problem.structure.entropies(d.log_node, d.log_edge)
        np.testing.assert_allclose(d.entropies, recomputed, rtol=1e-12, atol=1e-13)
    entropies = sum(float(p.local.state.dual.entropies.sum()) for p in adaptive.partitions)
    lam, n = problem.regularization, problem.n_sequences
    w_hat = np.add.reduce([p.primal_contribution() for p in adaptive.partitions])  # of mu
    assert last.dual == pytest.approx(entropies / n - lam / 2 * float(w_hat @ w_hat), abs=1e-12)
    again = simulate(problem, 4, variant="adaptive", threads=True, **opts)
    np.testing.assert_array_equal(again.weights, adaptive.weights)
    assert [r.dual for r in again.trace.records] == duals
    practical = simulate(problem, 4, **opts)
    assert last.gap < practical.trace.records[-1].gap  # larger steps where they were safe


def test_threads_equal_the_sequential_simulation_bit_for_bit():
    problem = random_problem(seed=3, n=24, max_T=6, K=3, A=30)
    opts = {"local_updates": 7, "max_rounds": 8, "tol": 0.0, "seed": 4}
    one = simulate(problem, 3, **opts)
    threaded = simulate(problem, 3, threads=True, **opts)
    np.testing.assert_array_equal(threaded.weights, one.weights)
    assert [r.dual for r in threaded.trace.records] == [r.dual for r in one.trace.records]


def test_float32_messages_keep_w_the_committed_marginals_and_the_certificate_exact():
    """Marginal messages are rounded to float32: w is exactly (to float64 sums) w_hat of the
    committed marginals nu, which differ from the duals' mu by what the rounding kept back;
    the reported dual is the dual of mu recomputed from the dual state alone (a lower bound
    of it, within 1e-12), not the dual of w, and the reported gap is never below the true
    gap P(w) - D(mu)."""
    problem = random_problem(seed=5, n=30, max_T=6, K=4, A=10)
    run = simulate(problem, 3, local_updates=4, max_rounds=25, tol=0.0, variant="adaptive",
                   keep_partitions=True)  # fmt: skip
    parts = run.partitions
    assert all(p.ledger is not None for p in parts)  # chains ship marginal changes
    residual = np.add.reduce([p.residual_vector() for p in parts])
    assert np.max(np.abs(residual)) > 1e-10  # the rounding did keep something back
    w_hat = np.add.reduce([p.primal_contribution() for p in parts])  # w_hat(mu), duals alone
    np.testing.assert_allclose(run.weights + residual, w_hat, rtol=0, atol=1e-12)
    lam, n = problem.regularization, problem.n_sequences
    entropy = sum(float(p.local.state.dual.entropies.sum()) for p in parts)
    true_dual = entropy / n - lam / 2 * float(w_hat @ w_hat)
    last = run.trace.records[-1]
    assert last.dual <= true_dual + 1e-15
    assert last.dual == pytest.approx(true_dual, abs=1e-12)
    naive = entropy / n - lam / 2 * float(run.weights @ run.weights)  # the dual of w: wrong
    assert abs(naive - true_dual) > 100 * abs(last.dual - true_dual)
    primal = lam / 2 * float(run.weights @ run.weights) + problem.structure.loss(run.weights) / n
    assert last.primal == pytest.approx(primal, abs=1e-12)
    assert last.gap >= last.primal - true_dual - 1e-15
