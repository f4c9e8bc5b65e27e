"""SDCA on junction trees: the L-BFGS optimum, P - D = mean block KL, w = w_hat(mu), the memory
guard."""

from __future__ import annotations

import numpy as np
import pytest
from _synthetic import random_sequences
from test_junction_oracle import custom_data

from crfsdca.kernels.solvers import sdca_epoch
from crfsdca.solvers import sdca as sdca_module
from crfsdca.solvers.lbfgs import LBFGS, LBFGSConfig
from crfsdca.solvers.monitor import Monitor
from crfsdca.solvers.sdca import SDCA, SDCAConfig
from crfsdca.structures.junction import (
    junction_problem,
    junction_weights_from_dual,
    second_order_data,
)

# The tree and junction-tree kernels against brute force and the solvers on them: their kernels
# compile for minutes on an empty cache, so they run in the slow set (`.ci/run` runs it); the
# default set trains, saves and tags trees and second-order chains through the front door.
pytestmark = pytest.mark.slow


def problem_of(kind, seed=6, n=30):
    if kind == "second-order":
        return junction_problem(second_order_data(random_sequences(seed, n=n, max_T=6, K=3)))
    return junction_problem(custom_data(seed, n=n, max_T=6))


def exact_gaps(problem, state):
    d = state.dual
    return sdca_epoch.exact_gaps(problem.structure.blocks, d.log_edge, d.log_node, d.weights)


def dual_value(problem, state):
    d = state.dual
    return d.entropies.mean() - 0.5 * problem.regularization * float(d.weights @ d.weights)


@pytest.mark.parametrize("kind", ["second-order", "custom"])
def test_primal_minus_dual_is_the_mean_block_kl_at_the_start(kind):
    """For any consistent dual point and w = w_hat(mu): P(w) - D(mu) = mean_i KL(mu_i || nu_i)."""
    problem = problem_of(kind, n=12)
    state = SDCA(SDCAConfig(init_epsilon=0.3)).initial_state(problem)
    gaps = exact_gaps(problem, state)
    primal = problem.primal(state.dual.weights)
    assert primal - dual_value(problem, state) == pytest.approx(gaps.mean(), rel=1e-10)
    assert gaps.min() > 0


@pytest.mark.parametrize(("kind", "sampling"), [("second-order", "gap"), ("custom", "uniform")])
def test_sdca_on_junction_trees_reaches_the_lbfgs_optimum(kind, sampling):
    """The same optimum as L-BFGS (relative 1e-6), a true gap <= 1e-6, the dual never above
    the primal optimum and non-decreasing, P - D = mean exact block KL, w = w_hat(mu)."""
    problem = problem_of(kind)
    lb = LBFGSConfig(tol=1e-12, max_epochs=3000)
    p_star = problem.primal(LBFGS(lb).solve(problem, Monitor(problem, "lbfgs", lb)).weights)
    config = SDCAConfig(sampling=sampling, tol=1e-7, max_epochs=500, seed=2, line_search_tol=1e-6)
    result = SDCA(config).solve(problem, Monitor(problem, "sdca", config))
    last = result.trace.records[-1]
    assert result.stop_reason == "tol" and 0 <= last.gap <= 1e-7
    primal = problem.primal(result.weights)
    assert (primal - p_star) / abs(p_star) <= 1e-6 and primal - p_star <= last.gap + 1e-12
    duals = np.array([r.dual for r in result.trace.records])
    assert np.all(duals <= p_star + 1e-12) and np.all(np.diff(duals) >= -1e-12)
    d = result.state.dual
    gaps = exact_gaps(problem, result.state)
    assert gaps.mean() == pytest.approx(last.gap, rel=1e-8, abs=1e-14)
    assert primal - dual_value(problem, result.state) == pytest.approx(
        gaps.mean(), rel=1e-6, abs=1e-13
    )
    np.testing.assert_allclose(
        d.weights, junction_weights_from_dual(problem, d.log_edge), rtol=1e-9, atol=1e-12
    )
    entropies = problem.structure.entropies(d.log_node, d.log_edge)
    np.testing.assert_allclose(d.entropies, entropies, rtol=1e-10, atol=1e-12)


def test_the_memory_guard_refuses_before_allocating(monkeypatch):
    problem = problem_of("second-order", n=10)
    entries = problem.train.n_table_entries
    monkeypatch.setattr(sdca_module, "_available_memory", lambda: 8 * entries - 1)
    with pytest.raises(MemoryError, match=r"table entries x 8 bytes\) needs .* GiB .* float32"):
        SDCA(SDCAConfig()).initial_state(problem)
    state = SDCA(SDCAConfig(dual_dtype="float32")).initial_state(problem)  # half fits
    assert state.dual.log_edge.dtype == np.float32 and state.dual.log_edge.size == entries
    K = problem.feature_map.n_labels
    lengths = problem.train.lengths
    expected = sum(K**T if T <= 2 else (T - 2) * K**3 + (T - 3) * K**2 for T in lengths.tolist())
    assert entries == expected
    monkeypatch.setattr(sdca_module, "_available_memory", lambda: 4 * entries - 1)
    with pytest.raises(MemoryError, match=r"x 4 bytes\) needs .*; use fewer sequences") as err:
        SDCA(SDCAConfig(dual_dtype="float32")).initial_state(problem)
    assert "float32" not in str(err.value)  # already float32: not suggested again


def test_a_checkpointed_junction_state_resumes():
    """The dual state survives to_checkpoint/from_checkpoint exactly and the run continues to
    tol."""
    from crfsdca.solvers.sdca import SDCAState

    problem = problem_of("second-order", seed=8, n=15)
    short = SDCAConfig(tol=1e-7, max_epochs=3, seed=1, line_search_tol=1e-6)
    with pytest.warns(UserWarning, match="max_epochs"):
        first = SDCA(short).solve(problem, Monitor(problem, "sdca", short))
    arrays, header = first.state.to_checkpoint()
    state = SDCAState.from_checkpoint({k: np.array(v) for k, v in arrays.items()}, header)
    np.testing.assert_array_equal(state.dual.log_edge, first.state.dual.log_edge)
    config = SDCAConfig(tol=1e-7, max_epochs=300, seed=1, line_search_tol=1e-6)
    result = SDCA(config).solve(problem, Monitor(problem, "sdca", config), state)
    assert result.stop_reason == "tol" and result.trace.records[-1].gap <= 1e-7
    # it continued the restored state: its first record comes after the first run's last one
    assert result.trace.records[0].oracle_calls > first.trace.records[-1].oracle_calls
    assert result.state.oracle_calls > first.state.oracle_calls


@pytest.mark.slow  # compiles the float32 junction kernels, used only when asked for
def test_float32_junction_duals_converge():
    """float32 tables reach a true gap of 1e-5 too."""
    problem = problem_of("second-order", seed=8, n=15)
    single = SDCAConfig(tol=1e-5, max_epochs=300, seed=1, dual_dtype="float32")
    result32 = SDCA(single).solve(problem, Monitor(problem, "sdca", single))
    assert result32.state.dual.log_edge.dtype == np.float32
    assert result32.stop_reason == "tol" and 0 <= result32.trace.records[-1].gap <= 1e-5
    gaps = exact_gaps(problem, result32.state)
    assert gaps.mean() <= 1e-5
