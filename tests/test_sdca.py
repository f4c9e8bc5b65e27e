"""SDCA: duality identities, monotone dual, compiled step vs reference, convergence."""

import numpy as np
import pytest
from _reference_sdca import reference_step
from _synthetic import random_problem

from crfsdca.kernels.solvers import sdca_epoch
from crfsdca.solvers.lbfgs import LBFGS, LBFGSConfig
from crfsdca.solvers.local import LocalSDCA
from crfsdca.solvers.monitor import Monitor
from crfsdca.solvers.sdca import SDCA, SDCAConfig
from crfsdca.structures.chain import ChainStructure
from crfsdca.structures.dual import filled, smoothed_empirical, weights_from_dual


def dual_value(problem, state):
    w = state.dual.weights
    return state.dual.entropies.sum() / problem.n_sequences - 0.5 * problem.regularization * w @ w


def runner_for(problem, **cfg):
    config = SDCAConfig(**cfg)
    state = SDCA(config).initial_state(problem)
    return LocalSDCA(problem, config, state), state


def run_indices(runner, indices, tol=-1.0):
    """Run steps on the given sequence indices (uniform law with injected uniforms)."""
    n = runner.n
    draws = np.column_stack([np.ones(len(indices)), (np.asarray(indices) + 0.5) / n])
    return sdca_epoch.run_steps(runner.kernel_args(draws, tol))


@pytest.mark.parametrize("n_bias_rows", [0, 3])
def test_gap_identity_at_init_and_after_steps(n_bias_rows):
    problem = random_problem(seed=1, n=12, max_T=5, n_bias_rows=n_bias_rows)
    runner, state = runner_for(problem, sampling="uniform", line_search_tol=1e-9)
    for _ in range(3):
        d = state.dual
        gaps = sdca_epoch.exact_gaps(runner.structure.blocks, d.log_edge, d.log_node, d.weights)
        primal = problem.primal(d.weights)
        gap = primal - dual_value(problem, state)
        assert gap == pytest.approx(gaps.mean(), rel=1e-9)
        assert gap >= 0
        recomputed = weights_from_dual(problem, d.log_node, d.log_edge)
        np.testing.assert_allclose(d.weights, recomputed, rtol=1e-10, atol=1e-12)
        run_indices(runner, np.random.default_rng(0).integers(0, problem.n_sequences, 25))


def test_dual_never_decreases():
    problem = random_problem(seed=2, n=15, max_T=5)
    runner, state = runner_for(problem, sampling="uniform", line_search_tol=1e-12)
    previous = initial = dual_value(problem, state)
    initial_gap = problem.primal(state.dual.weights) - initial
    rng = np.random.default_rng(5)
    for i in rng.integers(0, problem.n_sequences, 80):
        run_indices(runner, [i])
        current = dual_value(problem, state)
        assert current >= previous - 1e-12
        previous = current
    # and it moved: 80 steps (about 5 epochs) close most of the initial duality gap
    final_gap = problem.primal(state.dual.weights) - previous
    assert previous - initial >= 0.5 * initial_gap and final_gap <= 0.2 * initial_gap


@pytest.mark.parametrize("n_bias_rows", [0, 3])
def test_compiled_step_matches_numpy_reference(n_bias_rows):
    problem = random_problem(seed=3, n=8, max_T=4, n_bias_rows=n_bias_rows, regularization=0.05)
    runner, state = runner_for(problem, sampling="uniform", line_search_tol=1e-13)
    d = state.dual
    so = problem.train.seq_offsets
    node = [np.exp(d.log_node[so[i] : so[i + 1]]) for i in range(problem.n_sequences)]
    edge = [np.exp(d.log_edge[so[i] - i : so[i + 1] - i - 1]) for i in range(problem.n_sequences)]
    w = d.weights.copy()
    for i in [0, 3, 7, 3, 1, 0, 5, 7, 2, 3, 6, 4]:
        gap_before = d.gap_estimates.copy()
        run_indices(runner, [i])
        node[i], edge[i], w, gap, gamma = reference_step(problem, node[i], edge[i], w, i)
        assert d.gap_estimates[i] == pytest.approx(gap, rel=1e-9, abs=1e-12)
        if gap > 1e-12:  # with delta = 0 every step size leaves mu and w unchanged
            assert d.step_sizes[i] == pytest.approx(gamma, abs=1e-9)
        np.testing.assert_array_equal(np.delete(d.gap_estimates, i), np.delete(gap_before, i))
        np.testing.assert_allclose(d.weights, w, rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(np.exp(d.log_node[so[i] : so[i + 1]]), node[i], atol=1e-10)
        np.testing.assert_allclose(
            np.exp(d.log_edge[so[i] - i : so[i + 1] - i - 1]), edge[i], atol=1e-10
        )


def test_initialisation_is_smoothed_gold_and_consistent():
    problem = random_problem(seed=4, n=6, max_T=4)
    eps = 1e-3
    state = smoothed_empirical(problem, eps)
    K = problem.feature_map.n_labels
    node = np.exp(state.log_node)
    np.testing.assert_allclose(node.sum(1), 1.0, rtol=1e-12)
    gold = problem.train.labels
    np.testing.assert_allclose(node[np.arange(gold.size), gold], eps / K + 1 - eps)
    so = problem.train.seq_offsets
    for i in range(problem.n_sequences):
        e = np.exp(state.log_edge[so[i] - i : so[i + 1] - i - 1])
        n_ = node[so[i] : so[i + 1]]
        np.testing.assert_allclose(e.sum(2), n_[:-1], rtol=1e-12)
        np.testing.assert_allclose(e.sum(1), n_[1:], rtol=1e-12)


@pytest.mark.parametrize("eps", [1e-3, 0.5, 1.0])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_smoothed_start_entropies_in_closed_form_match_the_stored_logs(eps, dtype):
    problem = random_problem(seed=7, n=12, max_T=5)
    state = smoothed_empirical(problem, eps, dtype=dtype)
    assert (problem.train.lengths == 1).any() and (problem.train.lengths > 2).any()
    summed = ChainStructure(problem).entropies(state.log_node, state.log_edge)
    np.testing.assert_allclose(state.entropies, summed, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("eps", [1e-3, 0.5, 1.0])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_smoothed_start_weights_in_closed_form_match_the_stored_logs(eps, dtype):
    """The start's w_hat(mu) takes its transition expectations in closed form (float64 logs;
    float32 ones keep the pass); they equal the pass over the stored edge logs up to rounding."""
    problem = random_problem(seed=7, n=12, max_T=5)
    state = smoothed_empirical(problem, eps, dtype=dtype)
    summed = weights_from_dual(problem, state.log_node, state.log_edge)
    np.testing.assert_allclose(state.weights, summed, rtol=1e-12, atol=1e-12 * np.abs(summed).max())


@pytest.mark.parametrize("shape", [(5, 3), (3, 1 << 20), (2 * (1 << 20) + 7,)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_filled_on_threads_is_np_full(shape, dtype, monkeypatch):
    """The dual's blocks written on several threads (one slice each) are np.full's."""
    import crfsdca.structures.dual as dual

    monkeypatch.setattr(dual, "get_threads", lambda: 3)
    out = filled(shape, -3.7, dtype)
    assert out.dtype == dtype and out.shape == shape
    np.testing.assert_array_equal(out, np.full(shape, -3.7, dtype))


def reference_optimum(problem):
    config = LBFGSConfig(tol=1e-13, max_epochs=5000)
    result = LBFGS(config).solve(problem, Monitor(problem, "lbfgs", config))
    assert result.trace.records[-1].gap <= 1e-13  # certified: P(w) - P* <= ||grad||^2 / 2 lam
    return problem.primal(result.weights)


@pytest.mark.parametrize("sampling", ["uniform", "importance", "gap", "gap-importance", "max"])
def test_every_sampling_scheme_reaches_the_lbfgs_optimum(sampling):
    problem = random_problem(seed=5, n=30, max_T=6, K=3, A=8)
    p_star = reference_optimum(problem)
    config = SDCAConfig(sampling=sampling, tol=1e-10, max_epochs=400, eval_every=5, seed=1)
    result = SDCA(config).solve(problem, Monitor(problem, "sdca", config))
    last = result.trace.records[-1]
    assert result.stop_reason == "tol"
    assert last.gap <= config.tol
    assert last.oracle_calls == result.state.oracle_calls
    assert last.primal == problem.primal(result.weights)
    assert -1e-13 <= problem.primal(result.weights) - p_star <= last.gap


@pytest.mark.slow  # the authors' line search is a step loop of its own: 5-8 s of compiling
@pytest.mark.parametrize("start", ["half", "previous"])
def test_the_authors_line_search_reaches_the_lbfgs_optimum(start):
    """--line-search-method paper (safe_newton, float64 only, no predictor): the same optimum,
    the dual still never decreases, and the counters count its evaluations (no predictor)."""
    problem = random_problem(seed=5, n=30, max_T=6, K=3, A=8)
    p_star = reference_optimum(problem)
    config = SDCAConfig(tol=1e-10, max_epochs=400, eval_every=5, seed=1,
                        line_search_method="paper", line_search_start=start)  # fmt: skip
    result = SDCA(config).solve(problem, Monitor(problem, "sdca", config))
    assert result.stop_reason == "tol"
    duals = [r.dual for r in result.trace.records]
    assert all(b >= a - 1e-12 for a, b in zip(duals, duals[1:], strict=False))
    assert -1e-13 <= problem.primal(result.weights) - p_star <= result.trace.records[-1].gap
    counters = result.counters
    assert counters["predictor_evaluations"] == 0
    assert counters["newton_iterations"] >= counters["line_searches"] > 0
    with pytest.raises(ValueError, match="line_search_method"):
        SDCAConfig(line_search_method="scipy")


@pytest.mark.slow  # compiles the float32 kernels (a minute), used only when asked for
def test_float32_dual_state_reaches_the_lbfgs_optimum():
    """--dual-dtype float32: the stored logs are rounded to float32 (the line search writes them
    into the float32 state in place), and SDCA still certifies tol = 1e-6 (float32 duals reach
    gaps of a few 1e-8, not 1e-10)."""
    problem = random_problem(seed=5, n=30, max_T=6, K=3, A=8)
    p_star = reference_optimum(problem)
    config = SDCAConfig(sampling="gap", tol=1e-6, max_epochs=300, eval_every=5, seed=1,
                        dual_dtype="float32")  # fmt: skip
    result = SDCA(config).solve(problem, Monitor(problem, "sdca", config))
    assert result.state.dual.log_edge.dtype == np.float32
    last = result.trace.records[-1]
    assert result.stop_reason == "tol"
    assert last.oracle_calls == result.state.oracle_calls
    assert 0.0 <= last.gap <= config.tol  # the stop also checks P - D, not only the mean g_i
    assert -1e-13 <= problem.primal(result.weights) - p_star <= last.gap


def test_phase_times_are_measured_parts_of_the_step_time():
    problem = random_problem(seed=4, n=30, max_T=8)
    runner, state = runner_for(problem, sampling="uniform")
    draws = np.random.default_rng(0).random((300, 2))
    done, status, stats = sdca_epoch.run_steps(runner.kernel_args(draws, -1.0))
    assert (done, status) == (300, 0)
    newton, searches, _, ls_cycles, all_cycles, oracle_cycles, gap_cycles, predictor = stats
    assert newton >= searches > 0
    assert predictor >= searches  # the single-precision predictor runs before every search
    assert 0 < ls_cycles < all_cycles
    assert oracle_cycles > 0 and gap_cycles > 0
    assert ls_cycles + oracle_cycles + gap_cycles < all_cycles  # disjoint parts of the steps
    fixed, _ = runner_for(problem, sampling="uniform", line_search=False, fixed_step=0.1)
    stats = sdca_epoch.run_steps(fixed.kernel_args(draws, -1.0))[2]
    assert stats[0] == 0 and stats[3] == 0 and stats[7] == 0 and stats[4] > 0  # no line search
    runner.run_until_eval()
    counters = runner.counters
    assert 0 < counters["line_search_seconds"] < counters["step_seconds"]
    phases = counters["oracle_seconds"] + counters["block_gap_seconds"]
    assert 0 < phases + counters["line_search_seconds"] < counters["step_seconds"]


def test_gibbs_start_is_the_authors_start():
    """init='gibbs': w_hat(mu) ~ 0, so the first primal is P(0) = (N / n) log K (the authors'
    step-0 value); init='smoothed' (the default) starts from the epsilon-mix, further away."""
    problem = random_problem(seed=6, n=20, max_T=6, K=3, A=8, n_bias_rows=0)
    data = problem.train
    p_zero = data.n_items / data.n_sequences * np.log(3)
    assert problem.primal(problem.feature_map.zeros()) == pytest.approx(p_zero, rel=1e-12)
    assert SDCAConfig().init == "smoothed"
    gibbs = SDCA(SDCAConfig(init="gibbs")).initial_state(problem).dual
    assert np.abs(gibbs.weights).max() < 1e-3  # wrong labels keep about exp(-10) or less
    assert problem.primal(gibbs.weights) == pytest.approx(p_zero, rel=1e-4)
    np.testing.assert_allclose(
        gibbs.weights, weights_from_dual(problem, gibbs.log_node, gibbs.log_edge), atol=1e-15
    )
    smoothed = SDCA(SDCAConfig()).initial_state(problem).dual
    assert np.linalg.norm(smoothed.weights) > 10 * np.linalg.norm(gibbs.weights)
    with pytest.raises(ValueError, match="init must be gibbs or smoothed"):
        SDCAConfig(init="zero")


@pytest.mark.parametrize("threads", [1, 2])
def test_the_exact_gap_pass_is_the_gap_each_step_measures_and_moves_nothing(threads):
    """sdca_epoch.exact_gaps runs the step loop's kernel without stepping: every gap equals,
    bit for bit, the one a step on that sequence measures first (in chunks on 1 or 2 threads),
    and the dual state and w are left exactly as they were."""
    from crfsdca.kernels.numerics.threads import get_threads, set_threads

    problem = random_problem(seed=4, n=11, max_T=5, n_bias_rows=3)
    runner, state = runner_for(problem, sampling="uniform")
    run_indices(runner, np.random.default_rng(1).integers(0, problem.n_sequences, 30))
    d = state.dual
    before = {k: np.copy(getattr(d, k)) for k in ("log_edge", "log_node", "weights")}
    before.update(entropies=d.entropies.copy(), step_sizes=d.step_sizes.copy())
    estimates = d.gap_estimates.copy()
    previous = get_threads()
    set_threads(threads)
    try:
        gaps = sdca_epoch.exact_gaps(runner.structure.blocks, d.log_edge, d.log_node, d.weights)
    finally:
        set_threads(previous)
    for name, value in before.items():
        np.testing.assert_array_equal(getattr(d, name), value, err_msg=name)
    np.testing.assert_array_equal(d.gap_estimates, estimates)
    for i in range(problem.n_sequences):
        step, _ = runner_for(problem, sampling="uniform")
        for name, value in before.items():
            getattr(step.state.dual, name)[...] = value
        run_indices(step, [i])
        assert step.state.dual.gap_estimates[i] == gaps[i]


def test_a_non_finite_oracle_in_the_exact_gap_pass_raises():
    problem = random_problem(seed=5, n=9, max_T=4)
    runner, state = runner_for(problem)
    fm = problem.feature_map
    state.dual.weights[fm.transition_offset :] = np.nan
    i = int(np.flatnonzero(problem.train.lengths > 1)[0])
    d = state.dual
    gaps = sdca_epoch.exact_gaps(runner.structure.blocks, d.log_edge, d.log_node, d.weights)
    assert np.isnan(gaps[i]) and np.all(np.isfinite(gaps[:i]))
    with pytest.raises(FloatingPointError, match="the exact gap pass"):
        runner.exact_pass(check=True)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_loop_compiled_before_the_dual_start_is_the_one_the_run_calls(dtype):
    """sdca_epoch.compile_loop builds, before any dual state, the argument types of the run's
    step loop (its numba specialisation) exactly."""
    from numba import typeof

    problem = random_problem(seed=6, n=7, max_T=4)
    runner, _ = runner_for(problem, dual_dtype=dtype)
    run = runner.kernel_args(np.zeros((0, 2)), -1.0)
    early = sdca_epoch.loop_args(runner.structure.blocks, dtype)
    assert [typeof(a) for a in early] == [typeof(a) for a in run]
