"""SAG-NUS, SAG-NUS* and OEG: compiled steps vs NumPy references, lazy vs dense, convergence."""

import itertools
import os
from pathlib import Path

import numpy as np
import pytest
from _reference import lbfgs_optimum
from _reference_baselines import ChainOracle, EnumerationOracle, OegReference, SagNusReference
from _reference_sdca import expected_features
from _synthetic import random_problem
from click.testing import CliRunner
from scipy.special import logsumexp

from crfsdca.cli.main import main
from crfsdca.features.feature_map import FeatureMap
from crfsdca.kernels.structures import chain_eg as oeg_kernels
from crfsdca.solvers import SOLVERS
from crfsdca.solvers.monitor import Monitor
from crfsdca.solvers.oeg import OEG, OEGConfig
from crfsdca.solvers.oeg import _Runner as OEGRunner
from crfsdca.solvers.sag_nus import SAGNUS, SAGNUSConfig, SAGNUSSkipConfig
from crfsdca.solvers.sag_nus import _Runner as SAGRunner
from crfsdca.structures.dual import gibbs_start
from crfsdca.structures.problem import Problem

BASELINES = ["sag-nus", "sag-nus-skip", "oeg"]
DATA_DIR = os.environ.get("CRFSDCA_DATA_DIR")
NO_BUDGET = 10**9

#: the compiled SAG-NUS and OEG loops compile for 25 s on a cold cache for these tests alone:
#: the slow set has them, the default set the configs' checks
compiles_the_baselines = pytest.mark.slow


def sag_runner(problem, **options):
    config = SAGNUSConfig(**options)
    return SAGRunner(problem, config, SAGNUS(config).initial_state(problem)), config


def oeg_runner(problem, **options):
    config = OEGConfig(**options)
    state = OEG(config).initial_state(problem)
    return OEGRunner(problem, config, state), config, state


SAG_VARIANTS = [
    {},
    {"skip_line_search": "doubling"},
    {"skip_line_search": "doubling", "skipped_visit": "decay"},
    {"first_visit": "half-mean", "revisit_factor": 0.9, "step_size": "lmax", "non_uniformity": 0.8},
    {"skip_line_search": "linear", "lipschitz_growth": 1.5},
]


@compiles_the_baselines
@pytest.mark.parametrize("n_bias_rows", [0, 3])
@pytest.mark.parametrize("variant", range(len(SAG_VARIANTS)))
def test_compiled_sag_matches_numpy_reference(n_bias_rows, variant):
    problem = random_problem(seed=11, n=8, max_T=4, n_bias_rows=n_bias_rows, regularization=0.05)
    runner, config = sag_runner(problem, **SAG_VARIANTS[variant])
    ref = SagNusReference(problem, EnumerationOracle(problem), config)
    draws = np.random.default_rng(variant).random((60, 3))
    bounds = np.cumsum([0, 1, 2, 5, 12, 40])
    for lo, hi in itertools.pairwise(bounds):
        _, _, chosen = runner.run(draws[lo:hi], NO_BUDGET)
        assert chosen.tolist() == [ref.step(u) for u in draws[lo:hi]]
        mem = runner.state.memory
        np.testing.assert_allclose(mem.weights, ref.w, rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(mem.grad_sum, ref.d, rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(mem.lipschitz, ref.L, rtol=1e-12)
        assert mem.lipschitz_max[0] == pytest.approx(ref.l_max, rel=1e-12)
        np.testing.assert_array_equal(mem.covered, ref.covered)
        np.testing.assert_array_equal(mem.skips, ref.skips)
        assert runner.state.oracle_calls == ref.oracle_calls
    if config.skip_line_search != "never":  # the draws do exercise the skipping rule
        assert runner.counters["skipped_line_searches"] > 0
    data, fm, so = problem.train, problem.feature_map, problem.train.seq_offsets
    for i in np.flatnonzero(ref.covered):  # the marginal memory reproduces every stored gradient
        node, edge = mem.node_marginals[so[i] : so[i + 1]], mem.edge_sums[i][None]
        stored = expected_features(data, fm, i, node, edge) - ref.oracle.gold[i]
        np.testing.assert_allclose(stored, ref.y[i], rtol=1e-9, atol=1e-11)


@compiles_the_baselines
@pytest.mark.parametrize("rescale_below", [0.0, 0.9])
def test_lazy_updates_give_the_dense_iterates(rescale_below):
    problem = random_problem(seed=12, n=25, max_T=5, K=3, A=40, regularization=0.02)
    runner, config = sag_runner(problem)
    runner.rescale_below = rescale_below  # 0.9: c is folded into z every few steps
    ref = SagNusReference(problem, ChainOracle(problem), config)
    draws = np.random.default_rng(3).random((300, 3))
    for chunk in (draws[:250], draws[250:]):  # a long lazy stretch, then a second call
        _, _, chosen = runner.run(chunk, NO_BUDGET)
        assert chosen.tolist() == [ref.step(u) for u in chunk]
    scale = np.abs(ref.w).max()
    np.testing.assert_allclose(runner.state.memory.weights, ref.w, rtol=1e-10, atol=1e-10 * scale)
    np.testing.assert_allclose(runner.state.memory.grad_sum, ref.d, rtol=1e-10, atol=1e-10)


@compiles_the_baselines
def test_sag_budget_counts_every_line_search_call():
    problem = random_problem(seed=14, n=10, max_T=4)
    runner, _ = sag_runner(problem)
    done, calls, _ = runner.run(np.random.default_rng(0).random((50, 3)), 17)
    assert 17 <= calls < 17 + 2 + 50
    assert runner.state.updates == done and runner.state.oracle_calls == calls
    assert calls == done + runner.counters["line_search_trials"]


OEG_VARIANTS = [
    {},
    {"init": "gibbs", "learning_rate": 1.0, "learning_rate_growth": 2.0},
    {"init": "uniform", "max_halvings": 3},
]


@compiles_the_baselines
@pytest.mark.parametrize("n_bias_rows", [0, 3])
@pytest.mark.parametrize("variant", range(len(OEG_VARIANTS)))
def test_compiled_oeg_matches_numpy_reference(n_bias_rows, variant):
    problem = random_problem(seed=13, n=8, max_T=4, n_bias_rows=n_bias_rows, regularization=0.05)
    runner, config, state = oeg_runner(problem, **OEG_VARIANTS[variant])
    d = state.dual
    ref = OegReference(problem, d.log_node.copy(), d.log_edge.copy(), config)
    np.testing.assert_allclose(d.weights, ref.w, rtol=1e-10, atol=1e-11)
    indices = np.random.default_rng(variant).integers(0, problem.n_sequences, 40)
    so = problem.train.seq_offsets
    accepted = 0
    for lo, hi in itertools.pairwise([0, 1, 2, 3, 6, 12, 20, 40]):
        runner.run(indices[lo:hi], NO_BUDGET)
        accepted += sum(ref.step(i) for i in indices[lo:hi])
        np.testing.assert_allclose(d.weights, ref.w, rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(state.learning_rates, ref.rates, rtol=1e-15)
        assert state.oracle_calls == ref.oracle_calls
        assert state.updates == accepted
        for i in set(indices[:hi].tolist()):
            node, edge = ref.marginals(i)
            np.testing.assert_allclose(np.exp(d.log_node[so[i] : so[i + 1]]), node, atol=1e-10)
            log_edge = d.log_edge[so[i] - i : so[i + 1] - i - 1]
            np.testing.assert_allclose(np.exp(log_edge), edge, atol=1e-10)
            assert d.entropies[i] == pytest.approx(ref.entropy(ref.log_u[i]), abs=1e-10)
    assert runner.counters["visits"] == indices.size


@compiles_the_baselines
@pytest.mark.parametrize("scale", [1.0, 1e3])
@pytest.mark.parametrize("T", [1, 2, 4])
def test_pairwise_marginals_match_enumeration(scale, T):
    K = 3
    rng = np.random.default_rng(T)
    psi, psi0 = scale * rng.normal(size=(T - 1, K, K)), scale * rng.normal(size=K)
    if T > 1:
        psi[-1, :, 2] = -np.inf  # label 2 forbidden at the last position
    ws = oeg_kernels.make_workspace(T, (0, K, 0), 1).pairwise
    log_node, log_edge = np.empty((T, K)), np.empty((max(T - 1, 1), K, K))
    log_z = oeg_kernels.pairwise_marginals(psi, psi0, ws, log_node, log_edge)
    ys = list(itertools.product(range(K), repeat=T))
    scores = np.array([psi0[y[0]] + sum(psi[t, y[t], y[t + 1]] for t in range(T - 1)) for y in ys])
    assert log_z == pytest.approx(logsumexp(scores), rel=1e-10)
    p = np.exp(scores - logsumexp(scores))
    node = np.zeros((T, K))
    edge = np.zeros((max(T - 1, 1), K, K))
    for y, py in zip(ys, p, strict=True):
        node[np.arange(T), list(y)] += py
        for t in range(T - 1):
            edge[t, y[t], y[t + 1]] += py
    np.testing.assert_allclose(np.exp(log_node), node, atol=1e-10)
    np.testing.assert_allclose(np.exp(log_edge[: T - 1]), edge[: T - 1], atol=1e-10)


@compiles_the_baselines
def test_gibbs_start_is_the_gold_gibbs_distribution():
    problem = random_problem(seed=15, n=6, max_T=4)
    dual = gibbs_start(problem, 2.0)
    data, K, so = problem.train, problem.feature_map.n_labels, problem.train.seq_offsets
    for i in range(problem.n_sequences):
        gold = data.labels[so[i] : so[i + 1]]
        T = gold.size
        ys = list(itertools.product(range(K), repeat=T))
        hits = [sum(y[t] == gold[t] for t in range(T)) for y in ys]
        hits = [
            h + sum(y[t : t + 2] == tuple(gold[t : t + 2]) for t in range(T - 1))
            for h, y in zip(hits, ys, strict=True)
        ]
        p = np.exp(2.0 * np.array(hits) - logsumexp(2.0 * np.array(hits)))
        node = np.zeros((T, K))
        for y, py in zip(ys, p, strict=True):
            node[np.arange(T), list(y)] += py
        np.testing.assert_allclose(np.exp(dual.log_node[so[i] : so[i + 1]]), node, atol=1e-12)


def check_trace(result, p_star):
    records = result.trace.records
    for field in ("oracle_calls", "updates", "seconds"):
        assert np.all(np.diff([getattr(r, field) for r in records]) >= 0), field
    duals = np.array([r.dual for r in records])
    assert np.all(np.isfinite(duals))
    assert np.all(duals <= p_star + 1e-10)  # every reported dual value is a true lower bound


@compiles_the_baselines
@pytest.mark.parametrize("name", BASELINES)
def test_baseline_reaches_the_lbfgs_optimum(name):
    problem = random_problem(seed=5, n=30, max_T=6, K=3, A=8)
    p_star = lbfgs_optimum(problem)
    cls = SOLVERS[name]
    config = cls.config_class(tol=1e-10, max_epochs=400, eval_every=5, seed=1)
    result = cls(config).solve(problem, Monitor(problem, name, config))
    assert (problem.primal(result.weights) - p_star) / abs(p_star) <= 1e-6
    assert result.stop_reason == "tol"
    check_trace(result, p_star)


def test_configs_check_their_values():
    with pytest.raises(ValueError, match="skip_line_search"):
        SAGNUSConfig(skip_line_search="sometimes")
    with pytest.raises(ValueError, match="skipped_visit"):
        SAGNUSSkipConfig(skipped_visit="halve")
    with pytest.raises(ValueError, match="revisit_factor"):
        SAGNUSConfig(revisit_factor=0.0)
    with pytest.raises(ValueError, match="lipschitz_growth"):
        SAGNUSConfig(lipschitz_growth=1.0)
    with pytest.raises(ValueError, match="learning_rate"):
        OEGConfig(learning_rate=1.5)
    with pytest.raises(ValueError, match="init must be"):
        OEGConfig(init="random")
    assert SAGNUSSkipConfig().skip_line_search == "doubling"
    assert SAGNUSSkipConfig().skipped_visit == "freeze"
    assert SAGNUSConfig().skip_line_search == "never"


@pytest.fixture
def corpus(tmp_path):
    sentences = ["The DT B-NP\ncat NN I-NP\nsat VBD B-VP\n. . O", "Dogs NNS B-NP\nbark VBP B-VP"]
    path = tmp_path / "train.txt"
    path.write_text("\n\n".join(sentences * 3) + "\n")
    return path


@compiles_the_baselines
def test_cli_offers_the_baselines_and_rejects_foreign_options(corpus):
    runner = CliRunner()
    text = runner.invoke(main, ["train", "--help"]).output
    for word in ("sag-nus-skip", "oeg", "--line-search-threshold", "--max-halvings"):
        assert word in text
    common = ["train", str(corpus), "--format", "conll", "--template", "conll", "-q", "--json"]
    result = runner.invoke(main, [*common, "--solver", "oeg", "--line-search-threshold", "1e-3"])
    assert result.exit_code == 2 and "does not apply" in result.output
    for name in BASELINES:
        result = runner.invoke(main, [*common, "--solver", name, "--epochs", "3"])
        assert result.exit_code == 0, result.output


@pytest.mark.slow
@pytest.mark.skipif(not DATA_DIR or not Path(DATA_DIR).is_dir(), reason="no CRFSDCA_DATA_DIR")
@pytest.mark.parametrize("name", BASELINES)
def test_baselines_reach_the_optimum_on_conll2000_head(name, tmp_path, monkeypatch):
    import data_loaders
    from crfsdca.solvers.reference import reference_optimum

    encoder, train, _ = data_loaders.load_encoded("conll2000", data_dir=DATA_DIR, max_sequences=200)
    fm = FeatureMap(train.n_attributes, train.n_labels, encoder.default_bias_rows)
    problem = Problem(train=train, feature_map=fm, name="conll2000-head200")
    monkeypatch.setenv("CRFSDCA_CACHE_DIR", str(tmp_path))  # computed here, not read from disk
    p_star, _ = reference_optimum(problem, template="conll", max_sequences=200)
    cls = SOLVERS[name]
    config = cls.config_class(tol=1e-7 * abs(p_star), max_epochs=600, eval_every=5)
    result = cls(config).solve(problem, Monitor(problem, name, config, evaluate_test=False))
    assert (problem.primal(result.weights) - p_star) / abs(p_star) <= 1e-6
    check_trace(result, p_star)
