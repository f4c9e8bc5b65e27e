"""The dual-free SPDC (``spdc-df``, Wang & Xiao 2017, Algorithm 7 with Algorithm 4) on every
structure: its compiled steps against the algorithm written densely on full joints, its optimum
against an enumeration (chains) and certified L-BFGS optima (trees, second-order chains), its
gap identities, its rates and adaptation, the radii it sizes its steps with, and its misuse."""

from __future__ import annotations

import dataclasses
import itertools
import json
import warnings

import numpy as np
import pytest
from _reference import expected_features, features, loss
from _reference_baselines import SpdcReference
from _synthetic import random_problem
from click.testing import CliRunner
from scipy.optimize import minimize
from scipy.special import logsumexp
from test_hinge import gold_of
from test_hinge import labellings as hinge_labellings
from test_hinge import make as hinge_case
from test_tree_solvers import tree_dataset

from crfsdca import CRF
from crfsdca.cli.main import main
from crfsdca.errors import ConvergenceWarning
from crfsdca.kernels.solvers.radii import constant_labellings
from crfsdca.solvers import sdca as sdca_module
from crfsdca.solvers.monitor import Monitor
from crfsdca.solvers.spdc import SPDC, SPDCConfig
from crfsdca.solvers.spdc import _Runner as SPDCRunner
from crfsdca.solvers.spdc_rates import Adaptation, adapt, theorem4_rates
from crfsdca.structures.objectives import dual_value
from crfsdca.structures.radii import example_radii, radii
from crfsdca.structures.tree import tree_problem

#: SPDC's step loops (every structure's) compile on a cold cache for these tests alone: the
#: slow set has them, the default set the rates, the options' checks and the memory guard
compiles_spdc = pytest.mark.slow


def solve(problem, budget_stop=False, **options):
    """Run spdc-df; a stop by a budget (ConvergenceWarning) fails unless ``budget_stop``."""
    config = SPDCConfig(**options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore" if budget_stop else "error", ConvergenceWarning)
        return SPDC(config).solve(problem, Monitor(problem, "spdc-df", config))


def spdc_runner(problem, **options):
    config = SPDCConfig(**options)
    state = SPDC(config).initial_state(problem)
    return SPDCRunner(problem, config, state), state


# -- the compiled steps are Algorithm 7 ------------------------------------------------------------
@compiles_spdc
@pytest.mark.parametrize("n_bias_rows", [0, 3])
@pytest.mark.parametrize(
    "init, start, rescale_below", [("smoothed", "zero", 0.0), ("uniform", "dual", 0.999)]
)
def test_compiled_steps_are_algorithm_7_on_full_joints(n_bias_rows, init, start, rescale_below):
    """The lazy primal x = w_hat + beta z, the sparse extrapolation and the Bregman dual step
    give the dense iterates of Algorithm 7 step for step, from x = 0 or x = w_hat(mu), also
    when the rates change between calls (as the adaptation changes them) and when beta is
    folded into z at every step."""
    problem = random_problem(seed=21, n=8, max_T=4, n_bias_rows=n_bias_rows, regularization=0.05)
    runner, state = spdc_runner(problem, adapt="off", init=init, primal_start=start)
    runner.rescale_below = rescale_below
    d = state.dual
    x0 = np.zeros_like(d.weights) if start == "zero" else None
    ref = SpdcReference(problem, d.log_node.copy(), d.log_edge.copy(), x0)
    np.testing.assert_allclose(runner.weights, ref.x, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(d.weights, ref.w, rtol=1e-10, atol=1e-12)
    indices = np.random.default_rng(5).integers(0, problem.n_sequences, 70)
    deltas = [1.0, 4.0, 0.25, 16.0, 1.0]
    bounds = np.cumsum([0, 1, 3, 10, 16, 40])
    for delta, (lo, hi) in zip(deltas, itertools.pairwise(bounds), strict=True):
        state.adaptation = state.adaptation._replace(delta=delta)
        rates = runner.rates()
        assert runner.run(indices[lo:hi]) == hi - lo
        for k in indices[lo:hi]:
            ref.step(k, rates)
        scale = max(1.0, np.abs(ref.x).max())
        np.testing.assert_allclose(runner.weights, ref.x, rtol=1e-9, atol=1e-11 * scale)
        np.testing.assert_allclose(d.weights, ref.w, rtol=1e-9, atol=1e-11 * scale)
    so = problem.train.seq_offsets
    for i in range(problem.n_sequences):
        node, edge = ref.marginals(i)
        np.testing.assert_allclose(np.exp(d.log_node[so[i] : so[i + 1]]), node, atol=1e-10)
        np.testing.assert_allclose(np.exp(d.log_edge[so[i] - i : so[i + 1] - i - 1]), edge,
                                   atol=1e-10)  # fmt: skip
        assert d.entropies[i] == pytest.approx(ref.entropy(ref.log_u[i]), rel=1e-9, abs=1e-12)
    assert state.oracle_calls == state.updates == bounds[-1]


# -- the optimum, on every structure ---------------------------------------------------------------
def enumeration_optimum(problem):
    """argmin P by scipy's L-BFGS on the objective and gradient by enumeration (no crfsdca
    inference); returns (P*, w*)."""
    data, fm, n = problem.train, problem.feature_map, problem.n_sequences
    lam = problem.regularization
    gold = sum(features(data, i, data.sequence_labels(i), fm) for i in range(n))

    def objective(w):
        expected = sum(expected_features(data, i, w, fm) for i in range(n))
        value = 0.5 * lam * w @ w + loss(data, w, fm) / n
        return value, lam * w + (expected - gold) / n

    res = minimize(objective, fm.zeros(), jac=True, method="L-BFGS-B",
                   options={"gtol": 1e-13, "ftol": 1e-16, "maxiter": 5000})  # fmt: skip
    grad = objective(res.x)[1]
    assert grad @ grad / (2 * lam) < 1e-13  # certified: P(w) - P* <= |grad P(w)|^2 / (2 lambda)
    return res.fun, res.x


def labelling_optimum(problem, psi):
    """argmin P by scipy's L-BFGS on the objective and gradient summed over every labelling of
    every example, with features psi(i, y) built in the tests (``test_hinge.make``: trees and
    second-order chains, no crfsdca oracle), certified by |grad P|^2 / (2 lambda)."""
    n, lam = problem.n_sequences, problem.regularization
    tables = []
    for i in range(n):
        rows = np.array([psi(i, y) for y in hinge_labellings(problem, i)])
        tables.append((rows, psi(i, gold_of(problem, i))))

    def objective(w):
        value, grad = 0.5 * lam * w @ w, lam * w
        for rows, gold in tables:
            scores = rows @ w
            log_z = logsumexp(scores)
            value += (log_z - gold @ w) / n
            grad = grad + (rows.T @ np.exp(scores - log_z) - gold) / n
        return value, grad

    res = minimize(objective, problem.feature_map.zeros(), jac=True, method="L-BFGS-B",
                   options={"gtol": 1e-13, "ftol": 1e-16, "maxiter": 5000})  # fmt: skip
    grad = objective(res.x)[1]
    assert grad @ grad / (2 * lam) < 1e-13
    return res.fun, res.x


def tiny_tree():
    data = tree_dataset(seed=4, n=12)
    return tree_problem(data)


STRUCTURES = {  # (problem, features psi(i, y) for the enumeration; None: _reference's chains)
    "chain K=2": lambda: (random_problem(seed=31, n=8, max_T=4, K=2, A=5), None),
    "chain K=3": lambda: (random_problem(seed=32, n=6, max_T=4, K=3, A=5), None),
    "tree": lambda: hinge_case("tree"),
    "second-order chain": lambda: hinge_case("second-order"),
}


@compiles_spdc
@pytest.mark.parametrize("adapt_rule", ["robust", "off"])
@pytest.mark.parametrize("kind", list(STRUCTURES))
def test_dual_free_spdc_reaches_the_brute_force_optimum(kind, adapt_rule):
    """Stopped by its own gap P(x) - D(mu) <= 1e-9, the primal iterate's objective equals the
    brute-force optimum (scipy on an enumeration of every labelling) to 1e-8; the gap is a true
    gap (>= P(x) - P*), every dual value is below P*, and the last record's dual is D(mu) of
    the state's marginals with w_hat(mu) recomputed from them."""
    problem, psi = STRUCTURES[kind]()
    p_star, w_star = (
        enumeration_optimum(problem) if psi is None else labelling_optimum(problem, psi)
    )
    result = solve(problem, adapt=adapt_rule, tol=1e-9, max_epochs=3000, eval_every=5, seed=2)
    last = result.trace.records[-1]
    assert result.stop_reason == "tol" and 0.0 <= last.gap <= 1e-9
    primal = problem.primal(result.weights)
    assert abs(primal - p_star) <= 1e-8
    assert primal - p_star <= last.gap + 1e-12
    np.testing.assert_allclose(result.weights, w_star, atol=1e-3)
    assert all(r.dual <= p_star + 1e-12 for r in result.trace.records)
    d, structure = result.state.dual, problem.structure
    w_hat = structure.weights_from_dual(d.log_node, d.log_edge)
    np.testing.assert_allclose(d.weights, w_hat, rtol=1e-8, atol=1e-10)
    entropies = structure.entropies(d.log_node, d.log_edge)
    np.testing.assert_allclose(d.entropies, entropies, rtol=1e-9, atol=1e-12)
    lam, n = problem.regularization, problem.n_sequences
    assert last.dual == pytest.approx(dual_value(lam, w_hat @ w_hat, entropies.sum(), n), abs=1e-10)


@compiles_spdc
def test_gap_passes_are_counted_and_adapt_off_measures_none():
    """Every adaptation measures the gap with n log-partitions: oracle calls = steps + n x gap
    passes, one pass at the start and one per period; without adaptation calls = steps."""
    problem = random_problem(seed=33, n=10, max_T=4)
    n = problem.n_sequences
    robust = solve(problem, budget_stop=True, tol=0.0, max_epochs=13, adapt_period=2, seed=1)
    off = solve(problem, budget_stop=True, tol=0.0, max_epochs=13, adapt="off", seed=1)
    for result in (robust, off):
        for r in result.trace.records:
            assert r.oracle_calls == r.updates + n * r.extra["gap_passes"]
    last = robust.trace.records[-1]
    assert last.extra["gap_passes"] == 1 + last.updates // (2 * n)
    assert off.trace.records[-1].extra["gap_passes"] == 0
    assert off.trace.records[-1].updates == 13 * n


@compiles_spdc
@pytest.mark.parametrize(
    "max_epochs, period, eval_every", [(11, 10, 1), (2.5, 1, 1), (12, 10, 3), (0.5, 1, 1)]
)
def test_gap_passes_never_spend_beyond_the_epoch_budget(max_epochs, period, eval_every):
    """A gap pass that would end beyond max_epochs is not taken: no record spends more oracle
    calls than the budget, the run still spends it all on steps, and every pass that fits is
    taken (one at the start if it fits, one at every period's end before the budget)."""
    problem = random_problem(seed=34, n=10, max_T=4)
    n = problem.n_sequences
    options = {"tol": 0.0, "adapt_period": period, "eval_every": eval_every, "seed": 5}
    result = solve(problem, budget_stop=True, max_epochs=max_epochs, **options)
    budget = int(np.ceil(max_epochs * n))
    assert max(r.oracle_calls for r in result.trace.records) <= budget
    last = result.trace.records[-1]
    assert last.oracle_calls == budget
    passes = last.extra["gap_passes"]
    assert last.oracle_calls == last.updates + n * passes
    expected = 0 if budget < n else 1  # the start's pass, then one per period that fits after it
    while budget >= n * (expected + 1) + expected * period * n:
        expected += 1
    assert passes == expected


# -- rates and adaptation --------------------------------------------------------------------------
def test_theorem_4_rates():
    lam, n, r2 = 0.01, 50, 9.0
    sigma, tau, theta = theorem4_rates(lam, n, r2, 0.0)
    assert sigma == pytest.approx(np.sqrt(n * lam) / 12)
    assert tau == pytest.approx(1 / (12 * np.sqrt(n * lam)))
    assert sigma * tau == pytest.approx(1 / (16 * r2))
    theta_y = (1 + (n - 1) / n * sigma / 2) / (1 + sigma / 2)
    assert theta == pytest.approx(max(1 / (1 + tau * lam), theta_y))
    sigma2, tau2, _ = theorem4_rates(lam, n, r2, 3 * n * lam)  # Delta = 3 n lambda: sigma x2
    assert (sigma2, tau2) == pytest.approx((2 * sigma, tau / 2))
    assert theorem4_rates(lam, n, r2, 1.0, extrapolate=False).theta == 1.0


def test_algorithm_4_doubles_halves_or_keeps_the_convexity_estimate():
    start = Adaptation(delta=1.0, rate=1.0, gap=float("nan"))
    state, change = adapt(start, 10.0, 0.95, 1.5)  # the first gap: a reference only
    assert (state, change) == (Adaptation(1.0, 1.0, 10.0), 0)
    state, change = adapt(state, 5.0, 0.95, 1.5)  # rate 0.5 <= 0.95 x 1: double
    assert (state, change) == (Adaptation(2.0, 0.5, 5.0), 1)
    state, change = adapt(state, 2.6, 0.95, 1.5)  # rate 0.52: within [0.475, 0.75]: keep
    assert (state, change) == (Adaptation(2.0, 0.5, 2.6), 0)
    state, change = adapt(state, 2.0, 0.95, 1.5)  # rate 0.77 >= 1.5 x 0.5: halve
    assert change == -1 and state.delta == 1.0 and state.rate == pytest.approx(2.0 / 2.6)
    assert adapt(state._replace(gap=0.0), 1e-3, 0.95, 1.5)[1] == 0  # no positive reference


@compiles_spdc
def test_the_adaptation_raises_the_estimate_while_the_gap_shrinks_faster():
    problem = random_problem(seed=34, n=10, max_T=4)
    result = solve(problem, budget_stop=True, tol=0.0, max_epochs=40, adapt_period=3, seed=0)
    deltas = [r.extra["data_convexity"] for r in result.trace.records]
    assert deltas[0] == pytest.approx(problem.regularization * problem.n_sequences)
    assert max(deltas) > deltas[0]
    last = result.trace.records[-1]
    assert last.extra["convexity_doublings"] >= 1
    sigma, tau, _ = theorem4_rates(problem.regularization, 10, 1.0, deltas[-1])
    assert last.extra["sigma"] / last.extra["tau"] == pytest.approx(sigma / tau)


# -- radii ---------------------------------------------------------------------------------------
def single_examples(problem):
    """One problem per example, with its gold labels and with the constant labelling y~."""
    data = problem.train
    nodes = getattr(data, "nodes", data)
    tilde = constant_labellings(nodes.seq_offsets, nodes.labels, problem.feature_map.n_labels)
    for i in range(problem.n_sequences):
        pair = []
        for labels in (nodes.labels, tilde):
            sub = dataclasses.replace(nodes, labels=labels).subset([i])
            train = sub
            if data is not nodes:
                train = dataclasses.replace(data, nodes=sub, graphs=data.graphs[i : i + 1])
            pair.append(dataclasses.replace(problem, train=train, test=None))
        yield pair


@compiles_spdc
@pytest.mark.parametrize("kind", list(STRUCTURES))
def test_radii_are_the_distance_to_a_constant_labelling(kind):
    """R_i from the primitives is ||F(x_i, y_i) - F(x_i, y~_i)||^2 with both feature vectors
    from the oracle's gold features of one-example problems; on chains it is the chain's own
    radius formula, bit for bit."""
    problem = STRUCTURES[kind]()[0]
    got = example_radii(problem)
    for i, (gold, other) in enumerate(single_examples(problem)):
        diff = gold.oracle.gold_features() - other.oracle.gold_features()
        assert got[i] == pytest.approx(diff @ diff, rel=1e-12)
    if kind.startswith("chain"):
        np.testing.assert_array_equal(got, radii(problem))


# -- the dual state: float32, the memory guard ----------------------------------------------------
@pytest.mark.slow  # a step loop of its own (float32 duals): 4-6 s of compiling on a cold cache
def test_float32_duals_reach_a_certified_gap():
    problem = random_problem(seed=35, n=10, max_T=4)
    result = solve(problem, dual_dtype="float32", tol=1e-5, max_epochs=2000, eval_every=5)
    assert result.state.dual.log_edge.dtype == np.float32
    assert result.stop_reason == "tol" and result.trace.records[-1].gap <= 1e-5


@compiles_spdc
def test_tree_duals_stay_float64():
    with pytest.raises(ValueError, match="tree duals are kept in float64"):
        SPDC(SPDCConfig(dual_dtype="float32")).initial_state(tiny_tree())


def test_the_memory_guard_refuses_before_allocating(monkeypatch):
    monkeypatch.setattr(sdca_module, "_available_memory", lambda: 1000)
    with pytest.raises(MemoryError, match="SPDC state needs .* use --dual-dtype float32"):
        SPDC().initial_state(random_problem(seed=36))


# -- misuse --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, message",
    [
        (["--adapt", "sometimes"], "--adapt must be one of robust, off; got 'sometimes'"),
        (["--adapt-period", "0"], "--adapt-period must be a finite number > 0; got 0.0"),
        (["--rate-low", "1.2"], "--rate-low must be in (0, 1); got 1.2"),
        (["--rate-high", "0.9"], "--rate-high must be a finite number > 1; got 0.9"),
        (["--data-convexity", "0"], "--data-convexity must be > 0 with --adapt robust"),
        (["--data-convexity", "-1", "--adapt", "off"], "--data-convexity must be a finite"),
        (["--radius", "min"], "--radius must be one of max, mean; got 'min'"),
        (["--radius-scale", "-2"], "--radius-scale must be a finite number > 0; got -2.0"),
        (["--extrapolation", "two"], "--extrapolation must be one of theorem, one"),
        (["--primal-start", "one"], "--primal-start must be one of zero, dual; got 'one'"),
        (["--dual-dtype", "float16"], "--dual-dtype must be one of float64, float32"),
        (["--l1", "0.1"], "--solver spdc-df has no l1 term"),
        (["--loss", "hinge"], "--loss hinge: --solver spdc-df has no hinge loss"),
    ],
)
def test_bad_spdc_options_exit_2_with_one_line(tmp_path, args, message):
    path = tmp_path / "train.txt"
    path.write_text("a NN B-NP\nb VB B-VP\n\n")
    result = CliRunner().invoke(main, ["train", str(path), "--solver", "spdc-df", *args])
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and message in errors[0]
    assert "Traceback" not in result.output


def test_spdc_df_refuses_a_hinge_problem():
    """The CRF front and the solver itself refuse the structured SVM: SPDC has no hinge form."""
    X, y = [[{"w": "a"}, {"w": "b"}]], [["A", "B"]]
    with pytest.raises(ValueError, match="'spdc-df' has no hinge loss"):
        CRF(algorithm="spdc-df", loss="hinge").fit(X, y)


def test_spdc_options_do_not_apply_to_other_solvers(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text("a NN B-NP\n\n")
    result = CliRunner().invoke(main, ["train", str(path), "--adapt-period", "3"])
    assert result.exit_code == 2
    assert "--adapt-period does not apply to --solver sdca" in result.output


@compiles_spdc
def test_a_seed_fixes_the_run():
    problem = random_problem(seed=37, n=10, max_T=4)
    runs = [
        solve(problem, budget_stop=True, tol=0.0, max_epochs=6, adapt_period=2, seed=s)
        for s in (7, 7, 8)
    ]
    np.testing.assert_array_equal(runs[0].weights, runs[1].weights)
    strip = [[{k: v for k, v in r.to_json().items() if k != "seconds"} for r in run.trace.records]
             for run in runs]  # fmt: skip
    assert strip[0] == strip[1]
    assert not np.array_equal(runs[0].weights, runs[2].weights)


@compiles_spdc
def test_a_resumed_run_continues_the_same_iterates():
    """A state written to a checkpoint's arrays and header and read back continues the run as
    if it had not stopped."""
    from crfsdca.solvers.spdc import SPDCState

    problem = random_problem(seed=38, n=10, max_T=4)
    options = {"tol": 0.0, "adapt_period": 2, "seed": 3, "budget_stop": True}
    whole = solve(problem, max_epochs=8, **options)
    half = solve(problem, max_epochs=4, **options)
    arrays, header = half.state.to_checkpoint()
    state = SPDCState.from_checkpoint({k: np.array(v) for k, v in arrays.items()}, header)
    config = SPDCConfig(**{k: v for k, v in options.items() if k != "budget_stop"}, max_epochs=8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        rest = SPDC(config).solve(problem, Monitor(problem, "spdc-df", config), state=state)
    np.testing.assert_array_equal(rest.weights, whole.weights)


# -- users reach it ------------------------------------------------------------------------------
@compiles_spdc
def test_users_reach_spdc_df_from_the_crf_and_the_command_line(tmp_path):
    """``CRF(algorithm="spdc-df")`` certifies its gap and predicts as SDCA's model does; the
    command line trains with it, writes its trace (P(x) - D(mu) at every record) and plots it."""
    X = [[{"w": "a"}, {"w": "b"}], [{"w": "b"}, {"w": "c"}, {"w": "a"}], [{"w": "c"}]] * 3
    y = [["A", "B"], ["B", "C", "A"], ["C"]] * 3
    crf = CRF(algorithm="spdc-df", max_iterations=3000, tol=1e-6).fit(X, y)
    last = crf.training_log_[-1]
    assert last.solver == "spdc-df" and last.gap <= 1e-6
    reference = CRF(algorithm="sdca", tol=1e-9).fit(X, y)
    assert crf.predict(X) == reference.predict(X)
    assert last.primal == pytest.approx(reference.training_log_[-1].primal, abs=1e-6)

    path, trace = tmp_path / "train.txt", tmp_path / "run.jsonl"
    path.write_text("a NN B-NP\nb VB B-VP\n\nc NN B-NP\nd VB I-NP\ne NN B-VP\n\n")
    args = ["train", str(path), "--format", "conll", "--template", "conll", "--solver", "spdc-df"]
    options = ["--tol", "1e-4", "--epochs", "3000", "--trace", str(trace), "-q"]
    result = CliRunner().invoke(main, [*args, *options])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    assert records[0]["solver"] == "spdc-df"
    assert all(r["gap"] == pytest.approx(r["primal"] - r["dual"]) for r in records[1:])
    assert records[-1]["gap"] <= 1e-4
    pytest.importorskip("matplotlib")
    figure = tmp_path / "run.png"
    result = CliRunner().invoke(main, ["plot", str(trace), "--out", str(figure)])
    assert result.exit_code == 0, result.output
    assert figure.stat().st_size > 0
