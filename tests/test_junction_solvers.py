"""Every solver on junction-tree CRFs (second-order chains, custom junction trees): SDCA,
SAG-NUS, SAG-NUS*, OEG and L-BFGS reach the same optimum; the kernel SAG and OEG marginalise
with against brute force; OEG's dual identities; a first-order chain given as a junction tree
runs the chain solvers' iterations; seeds and checkpoints."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from _reference_sdca import assert_same_sdca_steps
from scipy.special import logsumexp
from test_tree_solvers import nodes_of, solve, without_time

from crfsdca.errors import ConvergenceWarning
from crfsdca.features.feature_map import FeatureMap
from crfsdca.kernels.solvers import sdca_epoch
from crfsdca.kernels.structures import junction_scaled
from crfsdca.solvers import SOLVERS
from crfsdca.solvers import sdca as sdca_module
from crfsdca.solvers.checkpoint import load_checkpoint, save_checkpoint
from crfsdca.solvers.monitor import Monitor
from crfsdca.structures.junction import (
    junction_dual_bytes,
    junction_problem,
    junction_weights_from_dual,
    junctions_from_cliques,
    make_workspace,
    second_order_data,
)
from crfsdca.structures.problem import Problem

# The tree and junction-tree kernels against brute force and the solvers on them: their kernels
# compile for minutes on an empty cache, so they run in the slow set (`.ci/run` runs it); the
# default set trains, saves and tags trees and second-order chains through the front door.
pytestmark = pytest.mark.slow

K, A = 3, 7
# cliques of up to 3 nodes joined by separators of 2 and of 1 nodes, a forest, a single node
SHAPES = [
    [(0,)],
    [(0, 1)],
    [(0, 1, 2)],
    [(0, 1, 2), (1, 2, 3)],
    [(0, 1, 2), (2, 3, 4)],
    [(0, 1, 2), (3, 4)],
    [(0, 1, 2), (1, 2, 3), (3, 4, 5)],
    [(0, 1, 2), (1, 2, 3), (2, 4, 5), (5, 6)],
]


def factors_of(cliques):
    """A pair factor (type 0) on each consecutive pair of a clique, some reversed, and a triple
    factor (type 1) on each clique of three nodes."""
    out, seen = [], set()
    for c in cliques:
        for a, b in zip(c, c[1:], strict=False):
            pair = (b, a) if (a + b) % 3 == 0 else (a, b)
            if frozenset(pair) not in seen:
                seen.add(frozenset(pair))
                out.append((pair, 0))
        if len(c) == 3:
            out.append((c, 1))
    return out


def custom_dataset(seed=0, n=24):
    rng = np.random.default_rng(seed)
    shapes = SHAPES + [SHAPES[j] for j in rng.integers(0, len(SHAPES), n - len(SHAPES))]
    lengths = [1 + max(v for c in s for v in c) for s in shapes]
    nodes = nodes_of(lengths, seed + 1)
    factors = [factors_of(s) for s in shapes]
    return junctions_from_cliques(nodes, shapes, factors, factor_arities=(2, 3))


def problem_of(kind):
    if kind == "second-order":
        rng = np.random.default_rng(3)
        lengths = [1, 2, 3, 6] + rng.integers(1, 7, size=20).tolist()
        return junction_problem(second_order_data(nodes_of(lengths, 4)))
    return junction_problem(custom_dataset())


KINDS = ["second-order", "custom"]


@pytest.fixture(scope="module", params=KINDS)
def case(request):
    """(problem, certified L-BFGS optimum, its bound on P(w) - P*)."""
    problem = problem_of(request.param)
    result = solve(problem, "lbfgs", tol=1e-13, max_epochs=5000)
    value, grad = problem.primal_and_gradient(result.weights)
    bound = float(grad @ grad) / (2 * problem.regularization)
    assert bound <= 1e-12 * value
    return problem, value, bound


# -- the kernel SAG and OEG marginalise with, against brute force ----------------------------------
def brute_force(g, phi_tables):
    """log Z and clique / separator log-marginals by enumerating the K^n labellings."""
    ys = np.array(list(itertools.product(range(K), repeat=g.n_nodes)))
    scores = sum(t[tuple(ys[:, list(c)].T)] for t, c in zip(phi_tables, g.cliques, strict=True))
    log_z = logsumexp(scores)

    def marginal(nodes):
        out = np.full((K,) * len(nodes), -np.inf)
        for idx in itertools.product(range(K), repeat=len(nodes)):
            hit = np.all(ys[:, list(nodes)] == idx, axis=1)
            out[idx] = logsumexp(scores[hit]) - log_z
        return out

    seps = [
        None if g.clique_parents[c] < 0 else marginal(g.separator(c)) for c in range(len(g.cliques))
    ]
    return log_z, [marginal(c) for c in g.cliques], seps


@pytest.mark.parametrize("scale", [1.0, 1e3])
def test_potential_marginals_equal_brute_force(scale):
    """Per-clique log potentials (SAG's and OEG's oracle calls) on every shape: log Z, clique and
    separator marginals by brute force, also at scale 1e3 where the scaled recursions underflow
    and the log-space ones take over; a forbidden entry stays forbidden."""
    data = custom_dataset(n=len(SHAPES))
    jt = data.packed[0]
    ws = (make_workspace(data, K)[0], np.empty(int(data.region_sizes.max())))
    rng = np.random.default_rng(int(scale))
    for i, g in enumerate(data.graphs):
        R = int(data.region_sizes[i])
        phi = scale * rng.normal(size=R)
        c0, tab_off = int(jt[0][i]), jt[8]
        forbidden = i % 2 == 1  # elsewhere, at scale 1, the scaled recursions run
        if forbidden:
            phi[int(tab_off[c0]) + 1] = -np.inf  # entry 1 of the first clique
        tables = [
            phi[int(tab_off[c0 + c]) : int(tab_off[c0 + c]) + K ** len(nodes)].reshape(
                (K,) * len(nodes)
            )
            for c, nodes in enumerate(g.cliques)
        ]
        out = np.empty(R)
        log_z = junction_scaled.potential_marginals(i, phi, jt, K, ws, out, True)
        assert junction_scaled.potential_marginals(
            i, phi, jt, K, ws, np.empty(R), False
        ) == pytest.approx(log_z, rel=1e-13, abs=1e-13)
        ref_z, ref_cliques, ref_seps = brute_force(g, tables)
        assert log_z == pytest.approx(ref_z, rel=1e-12, abs=1e-12)
        sep_off = jt[9]
        for c, nodes in enumerate(g.cliques):
            t0 = int(tab_off[c0 + c])
            got = out[t0 : t0 + K ** len(nodes)]
            np.testing.assert_allclose(np.exp(got), np.exp(ref_cliques[c]).ravel(), atol=1e-12)
            if ref_seps[c] is not None:
                s0 = int(sep_off[c0 + c])
                got = out[s0 : s0 + ref_seps[c].size]
                np.testing.assert_allclose(np.exp(got), np.exp(ref_seps[c]).ravel(), atol=1e-12)
        assert np.all(out[:R] <= 0.0) and (out[int(tab_off[c0]) + 1] == -np.inf) == forbidden
        if scale == 1.0:  # no underflow: the logs themselves agree
            t0 = int(tab_off[c0])
            np.testing.assert_allclose(
                out[t0 : t0 + ref_cliques[0].size], ref_cliques[0].ravel(), rtol=1e-10
            )


# -- every solver, one optimum ---------------------------------------------------------------------
SOLVER_OPTIONS = {
    "sdca": {"tol": 1e-9, "max_epochs": 500, "line_search_tol": 1e-6},
    "sag-nus": {"tol": 1e-9, "max_epochs": 1000},
    "sag-nus-skip": {"tol": 1e-9, "max_epochs": 1000},
    "oeg": {"tol": 1e-9, "max_epochs": 1000},
}


# the baselines' step loops compile for 5-8 s each on a cold cache: SDCA in the default set,
# SAG-NUS and OEG in the slow set (on chains they are in the default set)
@pytest.mark.parametrize(
    "name", [n if n == "sdca" else pytest.param(n, marks=pytest.mark.slow) for n in SOLVER_OPTIONS]
)
def test_every_solver_reaches_the_lbfgs_optimum(case, name):
    """Stopped by its own certificate (SDCA, OEG: the duality gap; SAG: P - D(nu(w))), each
    solver's primal equals the certified L-BFGS optimum to 1e-6 relative; the recorded gap is a
    true gap (>= P - P*); dual methods: monotone dual, P - D = mean exact block KL."""
    problem, p_lbfgs, bound = case
    result = solve(problem, name, seed=3, **SOLVER_OPTIONS[name])
    last = result.trace.records[-1]
    assert result.stop_reason == "tol" and 0.0 <= last.gap <= 1e-9
    primal = problem.primal(result.weights)
    assert last.primal == pytest.approx(primal, rel=1e-12)
    assert abs(primal - p_lbfgs) <= 1e-6 * abs(p_lbfgs)
    assert primal >= p_lbfgs - bound - 1e-12
    assert primal - (p_lbfgs - bound) <= last.gap + 1e-12
    duals = np.array([r.dual for r in result.trace.records])
    assert np.all(duals <= p_lbfgs + 1e-12)
    if name in ("sdca", "oeg"):
        assert np.all(np.diff(duals) >= -1e-12)
        check_dual_identities(problem, result.state.dual, last)
    if name == "oeg":
        assert result.counters["skipped_visits"] < result.counters["visits"]


def check_dual_identities(problem, dual, last):
    """w = w_hat(mu) and P(w) - D(mu) = (1/n) sum_i KL~(mu_i || nu_i(w)) (exact gaps)."""
    d, _oracle = dual, problem.oracle
    w_hat = junction_weights_from_dual(problem, d.log_edge)
    np.testing.assert_allclose(d.weights, w_hat, rtol=1e-9, atol=1e-12)
    gaps = sdca_epoch.exact_gaps(problem.structure.blocks, d.log_edge, d.log_node, d.weights)
    assert gaps.mean() == pytest.approx(last.gap, rel=1e-7, abs=1e-14)
    entropies = problem.structure.entropies(d.log_node, d.log_edge)
    np.testing.assert_allclose(d.entropies, entropies, rtol=1e-10, atol=1e-12)


@pytest.mark.slow  # OEG's junction-tree step loop: 10-13 s of compiling on a cold cache
def test_oeg_from_the_uniform_start_keeps_the_dual_identities(case):
    """From the uniform law: a few epochs grow the dual at every evaluation and keep
    w = w_hat(mu), P - D = mean block KL; the Gibbs start is refused with one clear line."""
    problem = case[0]
    result = solve(problem, "oeg", budget_stop=True, init="uniform", tol=0.0, max_epochs=4)
    assert result.stop_reason == "max_epochs"
    duals = np.array([r.dual for r in result.trace.records])
    assert np.all(np.diff(duals) > 0.0)
    check_dual_identities(problem, result.state.dual, result.trace.records[-1])
    with pytest.raises(ValueError, match="junction trees start from init='smoothed'"):
        SOLVERS["oeg"](SOLVERS["oeg"].config_class(init="gibbs")).initial_state(problem)


def test_the_oeg_memory_guard_refuses_before_allocating(monkeypatch):
    problem = problem_of("second-order")
    need = junction_dual_bytes(problem.train, problem.feature_map.n_features)
    monkeypatch.setattr(sdca_module, "_available_memory", lambda: need - 1)
    with pytest.raises(MemoryError, match=r"OEG dual state .* table entries x 8 bytes\) needs"):
        SOLVERS["oeg"]().initial_state(problem)
    monkeypatch.setattr(sdca_module, "_available_memory", lambda: need)
    state = SOLVERS["oeg"]().initial_state(problem)
    assert state.dual.log_edge.size == problem.train.n_table_entries


# -- chains as junction trees, seeds, checkpoints ------------------------------------------------
@pytest.mark.parametrize("n_bias_rows", [0, 3])
@pytest.mark.parametrize("name", ["sag-nus", "sag-nus-skip", "oeg"])
def test_a_chain_given_as_a_junction_tree_runs_the_chain_solver(name, n_bias_rows):
    """First-order chains written as junction trees (cliques (t, t+1) with a pair factor of one
    type, whose block is the chain's transition matrix): the junction kernels take the chain
    kernels' steps."""
    nodes = nodes_of([1, 4, 2, 5, 3, 5, 1, 4, 2, 3], seed=8)
    lengths = nodes.lengths.tolist()
    cliques = [[(t, t + 1) for t in range(T - 1)] or [(0,)] for T in lengths]
    factors = [[((t, t + 1), 0) for t in range(T - 1)] for T in lengths]
    data = junctions_from_cliques(nodes, cliques, factors, factor_arities=(2,))
    chain = Problem(train=nodes, feature_map=FeatureMap(A, K, n_bias_rows))
    junction = junction_problem(data, n_bias_rows=n_bias_rows)
    assert junction.feature_map.n_features == chain.feature_map.n_features
    options = {"tol": 0.0, "max_epochs": 5, "seed": 4, "budget_stop": True}
    a, b = solve(chain, name, **options), solve(junction, name, **options)
    np.testing.assert_allclose(b.weights, a.weights, rtol=1e-9, atol=1e-12)
    assert b.counters == a.counters
    assert b.trace.records[-1].primal == pytest.approx(a.trace.records[-1].primal, rel=1e-12)


@pytest.mark.parametrize("n_bias_rows", [0, 3])
@pytest.mark.parametrize("sampling", ["uniform", "gap"])
def test_a_chain_given_as_a_junction_tree_takes_the_chain_sdca_steps(sampling, n_bias_rows):
    """The one SDCA engine on first-order chains written as junction trees: the same steps
    (weights, dual, Newton iterations) as on the chain, to rounding."""
    nodes = nodes_of([1, 4, 2, 5, 3, 5, 1, 4, 2, 3], seed=8)
    lengths = nodes.lengths.tolist()
    cliques = [[(t, t + 1) for t in range(T - 1)] or [(0,)] for T in lengths]
    factors = [[((t, t + 1), 0) for t in range(T - 1)] for T in lengths]
    data = junctions_from_cliques(nodes, cliques, factors, factor_arities=(2,))
    chain = Problem(train=nodes, feature_map=FeatureMap(A, K, n_bias_rows))
    junction = junction_problem(data, n_bias_rows=n_bias_rows)
    options = {"tol": 0.0, "max_epochs": 5, "seed": 4, "sampling": sampling, "budget_stop": True,
               "line_search_tol": 1e-10}  # fmt: skip
    a, b = solve(chain, "sdca", **options), solve(junction, "sdca", **options)
    assert_same_sdca_steps(a, b, chain.n_sequences)


@pytest.mark.parametrize(
    "name, options", [("sag-nus-skip", {}), ("oeg", {"oeg_sampling": "permutation"})]
)
def test_a_seed_fixes_the_run(name, options):
    problem = problem_of("custom")
    runs = [
        solve(problem, name, budget_stop=True, tol=0.0, max_epochs=3, seed=s, **options)
        for s in (7, 7, 8)
    ]
    np.testing.assert_array_equal(runs[0].weights, runs[1].weights)
    assert without_time(runs[0]) == without_time(runs[1])
    assert not np.array_equal(runs[0].weights, runs[2].weights)


@pytest.mark.parametrize(
    "name, options", [("sag-nus-skip", {}), ("oeg", {"oeg_sampling": "permutation"})]
)
@pytest.mark.parametrize("kind", KINDS)
def test_junction_state_resumes_from_a_checkpoint(tmp_path, kind, name, options):
    """A run of 6 epochs checkpoints (npz + JSON) after epoch 3; a run resumed from that file
    continues after the saved records and ends with the same weights, counters and records as
    the uninterrupted one."""
    problem = problem_of(kind)
    cls = SOLVERS[name]
    config = cls.config_class(tol=0.0, seed=2, max_epochs=6, **options)
    saved = []

    def checkpointer(state, trace):
        saved.append(save_checkpoint(tmp_path / f"ck{len(saved)}", state, trace, {}))

    def run(state=None):
        monitor = Monitor(problem, name, config, checkpointer=checkpointer, checkpoint_every=3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return cls(config).solve(problem, monitor, state)

    whole = run()
    assert len(saved) == 2  # after epoch 3, and the final state
    arrays, header = load_checkpoint(saved[0].parent)
    assert 3 <= header["state"]["oracle_calls"] / problem.n_sequences < 6
    resumed = run(type(whole.state).from_checkpoint(arrays, header["state"]))
    np.testing.assert_array_equal(resumed.weights, whole.weights)
    assert resumed.counters == whole.counters
    # the resumed run continues after the restored records (up to epoch 3): none is run again
    restored = header["records"]
    assert restored[-1]["oracle_calls"] == header["state"]["oracle_calls"]
    assert resumed.trace.records[0].oracle_calls > header["state"]["oracle_calls"]
    n_after = len(whole.trace.records) - len(restored)
    assert n_after >= 2 and without_time(resumed) == without_time(whole)[-n_after:]
