"""Every solver on tree-structured CRFs: SDCA, SAG-NUS, SAG-NUS*, OEG and L-BFGS reach the same
optimum; the kernels they share with the oracle against brute force; OEG's dual identities;
a chain given as trees runs the chain solvers' iterations; seeds and checkpoints."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from _reference_sdca import assert_same_sdca_steps
from scipy.special import logsumexp

from crfsdca.errors import ConvergenceWarning
from crfsdca.features.feature_map import FeatureMap
from crfsdca.features.sequences import SequenceData
from crfsdca.kernels.solvers import sdca_epoch
from crfsdca.kernels.structures import tree_scaled
from crfsdca.solvers import SOLVERS
from crfsdca.solvers.checkpoint import load_checkpoint, save_checkpoint
from crfsdca.solvers.monitor import Monitor
from crfsdca.structures.problem import Problem
from crfsdca.structures.tree import (
    TreeData,
    TreeOracle,
    tree_problem,
    tree_weights_from_dual,
    trees_from_parents,
)

# The tree and junction-tree kernels against brute force and the solvers on them: their kernels
# compile for minutes on an empty cache, so they run in the slow set (`.ci/run` runs it); the
# default set trains, saves and tags trees and second-order chains through the front door.
pytestmark = pytest.mark.slow

K, A, N_TYPES = 3, 7, 3
# a single node, stars (centre first, centre inside), forests, a chain, random recursive trees
SHAPES = [
    [-1],
    [-1, 0, 0, 0, 0],
    [2, 2, -1, 2],
    [-1, 0, -1, 2, 2],
    [-1, -1, -1],
    [-1, 0, 1, 2, 3],
    [1, -1, 1, 0, 3, 0],
    [-1, 0],
]


def nodes_of(lengths, seed, n_labels=K):
    """Nodes with random sparse attributes (some none, some repeated) and labels."""
    rng = np.random.default_rng(seed)
    N = int(sum(lengths))
    counts = rng.integers(0, 4, size=N)
    ids = rng.integers(0, A, size=int(counts.sum()))
    return SequenceData(
        seq_offsets=np.concatenate([[0], np.cumsum(lengths)]),
        attr_offsets=np.concatenate([[0], np.cumsum(counts)]),
        attr_ids=ids,
        attr_values=rng.uniform(0.2, 2.0, size=ids.size),
        labels=rng.integers(0, n_labels, size=N),
        n_attributes=A,
        label_names=tuple(f"L{k}" for k in range(n_labels)),
    )


def random_shapes(n, rng):
    """The fixed shapes, then random recursive trees (some forests) of 1..6 nodes."""
    shapes = [np.asarray(p) for p in SHAPES]
    while len(shapes) < n:
        T = int(rng.integers(1, 7))
        perm, p = rng.permutation(T), np.full(T, -1)
        for rank in range(1, T):
            p[perm[rank]] = perm[rng.integers(0, rank)]
        if T > 3 and rng.random() < 0.3:
            p[perm[T - 1]] = -1
        shapes.append(p)
    return shapes[:n]


def tree_dataset(seed=0, n=24):
    rng = np.random.default_rng(seed)
    shapes = random_shapes(n, rng)
    types = [rng.integers(0, N_TYPES, p.size) for p in shapes]
    return TreeData(nodes_of([p.size for p in shapes], seed + 1), trees_from_parents(shapes, types))


def solve(problem, name, budget_stop=False, **options):
    """Run a solver; a stop by a budget (ConvergenceWarning) fails unless ``budget_stop``."""
    cls = SOLVERS[name]
    config = cls.config_class(**options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore" if budget_stop else "error", ConvergenceWarning)
        return cls(config).solve(problem, Monitor(problem, name, config))


@pytest.fixture(scope="module")
def problem():
    train = tree_dataset()
    assert train.n_edge_types == N_TYPES
    return tree_problem(train)


@pytest.fixture(scope="module")
def optimum(problem):
    """L-BFGS optimum, certified: P(w) - P* <= ||grad P(w)||^2 / (2 lambda)."""
    result = solve(problem, "lbfgs", tol=1e-13, max_epochs=5000)
    value, grad = problem.primal_and_gradient(result.weights)
    bound = float(grad @ grad) / (2 * problem.regularization)
    assert bound <= 1e-12 * value
    return value, bound


# -- the tree kernels the solvers call, against brute force and the oracle ------------------------
def brute_potentials(parents, node_pot, edge_pot):
    """log Z, log node and log edge marginals by enumerating the K^n labellings."""
    n = parents.size
    ys = np.array(list(itertools.product(range(K), repeat=n)))
    scores = node_pot[np.arange(n), ys].sum(axis=1)
    for v in np.flatnonzero(parents >= 0):
        scores = scores + edge_pot[v, ys[:, parents[v]], ys[:, v]]
    log_z = logsumexp(scores)
    log_node, log_edge = np.full((n, K), -np.inf), np.full((n, K, K), -np.inf)
    for v in range(n):
        for k in range(K):
            log_node[v, k] = logsumexp(scores[ys[:, v] == k])
        for j, k in itertools.product(range(K), repeat=2):
            if parents[v] >= 0:
                hit = (ys[:, parents[v]] == j) & (ys[:, v] == k)
                log_edge[v, j, k] = logsumexp(scores[hit])
    return log_z, log_node - log_z, log_edge - log_z


def local_graph(tree):
    return (tree.parents, tree.order, (tree.children_start, tree.children), np.arange(tree.n_nodes))


@pytest.mark.parametrize("scale", [1.0, 1e3])
def test_potential_marginals_equal_brute_force(scale):
    """Per-node and per-edge potentials (OEG's trials): brute force, also at scale 1e3 where the
    scaled recursions underflow and the log-space ones take over; a forbidden entry stays so."""
    rng = np.random.default_rng(int(scale))
    for tree in trees_from_parents([np.asarray(p) for p in SHAPES[:6]]):
        n = tree.n_nodes
        node_pot = scale * rng.normal(size=(n, K))
        edge_pot = scale * rng.normal(size=(n, K, K))
        child = tree.parents >= 0
        forbidden = np.flatnonzero(child)[:1]  # the first edge (if any)
        edge_pot[forbidden, 0, 1] = -np.inf
        ws = (*(np.empty((n, K)) for _ in range(4)), np.empty(K))
        sws = (*(np.empty((n, K)) for _ in range(4)), np.empty(n))
        probs = (np.empty((n, K, K)), np.empty(n), np.empty((n, K)), np.empty((n, K, K)))
        probs += (np.empty(n),)
        log_node, log_edge = np.empty((n, K)), np.zeros((n, K, K))
        log_z = tree_scaled.potential_marginals(
            node_pot, edge_pot, local_graph(tree), ws, sws, probs, log_node, log_edge
        )
        ref_z, ref_node, ref_edge = brute_potentials(tree.parents, node_pot, edge_pot)
        assert log_z == pytest.approx(ref_z, rel=1e-12, abs=1e-12)
        np.testing.assert_allclose(np.exp(log_node), np.exp(ref_node), atol=1e-12)
        np.testing.assert_allclose(np.exp(log_edge[child]), np.exp(ref_edge[child]), atol=1e-12)
        assert np.all(log_edge[forbidden, 0, 1] == -np.inf)
        if scale == 1.0:  # no underflow: the logs themselves agree
            np.testing.assert_allclose(log_node, ref_node, rtol=1e-10)


@pytest.mark.parametrize("scale", [1.0, 300.0])
def test_marginal_sums_and_log_partition_equal_the_log_space_oracle(problem, scale):
    """SAG's oracle calls: node marginals and per-type edge sums equal the exact log-space
    marginals of TreeOracle (scaled path, and its fallback at scale 300)."""
    data, fm = problem.train, problem.feature_map
    oracle = TreeOracle(data, fm)
    w = scale * np.random.default_rng(5).normal(size=fm.n_features)
    log_pair = fm.transitions(w).copy()
    tables = (log_pair, np.empty_like(log_pair), np.empty(N_TYPES))
    tree_scaled.exp_tables(*tables)
    parents, types, order, start, children = data.packed
    m = data.max_length
    ws = (*(np.empty((m, K)) for _ in range(4)), np.empty(K))
    sws = (*(np.empty((m, K)) for _ in range(4)), np.empty(m))
    logs = (np.empty((m, K)), np.empty((m, K, K)), np.empty(m))
    for i in range(data.n_sequences):
        s, e = data.seq_offsets[i], data.seq_offsets[i + 1]
        log_z, log_node, log_edge = oracle.marginals(i, w)
        unary = np.array(oracle._ws[5][: e - s])  # the node scores of that call
        local = (parents[s:e], types[s:e], order[s:e], (start[s : e + 1], children))
        node, edge_sum = np.empty((e - s, K)), np.empty((N_TYPES, K, K))
        z = tree_scaled.marginal_sums(unary, tables, local, ws, sws, logs, node, edge_sum)
        assert z == pytest.approx(log_z, rel=1e-12)
        assert tree_scaled.log_partition(unary, tables, local, ws, sws) == pytest.approx(
            log_z, rel=1e-12
        )
        np.testing.assert_allclose(node, np.exp(log_node), atol=1e-12)
        ref = np.zeros((N_TYPES, K, K))
        for v in np.flatnonzero(parents[s:e] >= 0):
            ref[types[s + v]] += np.exp(log_edge[v])
        np.testing.assert_allclose(edge_sum, ref, atol=1e-12)


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
def test_every_solver_reaches_the_lbfgs_optimum(problem, optimum, name):
    """Stopped by its own certificate (SDCA, OEG: the duality gap; SAG: P - D(nu(w))), each
    solver's primal equals the certified L-BFGS optimum to 1e-6 relative (and is not below it);
    the recorded gap is a true gap: P - D with D a dual value, >= P - P*."""
    p_lbfgs, bound = optimum
    result = solve(problem, name, seed=3, **SOLVER_OPTIONS[name])
    last = result.trace.records[-1]
    assert result.stop_reason == "tol" and 0.0 <= last.gap <= 1e-9
    primal = problem.primal(result.weights)
    assert last.primal == pytest.approx(primal, rel=1e-12)
    assert abs(primal - p_lbfgs) <= 1e-6 * abs(p_lbfgs)
    assert primal >= p_lbfgs - bound - 1e-12
    assert primal - (p_lbfgs - bound) <= last.gap + 1e-12  # gap >= P(w) - P*
    duals = np.array([r.dual for r in result.trace.records])
    assert np.all(duals <= p_lbfgs + 1e-12)  # weak duality
    if name in ("sdca", "oeg"):  # dual methods: monotone dual, exact gap = mean block KL
        assert np.all(np.diff(duals) >= -1e-12)
        check_dual_identities(problem, result.state.dual, last)


def check_dual_identities(problem, dual, last):
    """w = w_hat(mu) and P(w) - D(mu) = (1/n) sum_i KL~(mu_i || nu_i(w)) (exact gaps)."""
    d, _data, _fm = dual, problem.train, problem.feature_map
    w_hat = tree_weights_from_dual(problem, d.log_node, d.log_edge)
    np.testing.assert_allclose(d.weights, w_hat, rtol=1e-9, atol=1e-12)
    gaps = sdca_epoch.exact_gaps(problem.structure.blocks, d.log_edge, d.log_node, d.weights)
    assert gaps.mean() == pytest.approx(last.gap, rel=1e-7, abs=1e-14)
    entropies = problem.structure.entropies(d.log_node, d.log_edge)
    np.testing.assert_allclose(d.entropies, entropies, rtol=1e-10, atol=1e-12)


@pytest.mark.slow  # OEG's tree step loop: about 10 s of compiling on a cold cache
@pytest.mark.parametrize("init", ["gibbs", "uniform"])
def test_oeg_starts_on_trees_keep_the_dual_identities(problem, init):
    """The Gibbs and uniform starts are consistent tree marginals with w = w_hat(mu); after a
    few epochs P - D is still the mean block KL, and the dual grew."""
    result = solve(problem, "oeg", budget_stop=True, init=init, tol=0.0, max_epochs=4, seed=1)
    assert result.stop_reason == "max_epochs"
    records = result.trace.records
    assert records[-1].dual > records[0].dual
    check_dual_identities(problem, result.state.dual, records[-1])


@pytest.mark.parametrize("epsilon", [0.1, 1.0])
@pytest.mark.parametrize("n_bias_rows", [0, 3])
def test_the_smoothed_start_in_closed_form_is_the_pass_over_its_marginals(epsilon, n_bias_rows):
    """The trees' smoothed start takes its entropies and w_hat(mu) in closed form (every edge
    carries one gold entry and K^2 - 1 others): equal to the kernels' passes over the stored
    marginals, on single nodes, stars, chains and forests, with every edge type."""
    problem = tree_problem(tree_dataset(seed=5, n=40), n_bias_rows=n_bias_rows)
    d = problem.structure.smoothed_dual(epsilon)
    entropies = problem.structure.entropies(d.log_node, d.log_edge)
    np.testing.assert_allclose(d.entropies, entropies, rtol=1e-12, atol=1e-13)
    w_hat = tree_weights_from_dual(problem, d.log_node, d.log_edge)
    np.testing.assert_allclose(d.weights, w_hat, rtol=1e-12, atol=1e-13)
    assert np.abs(d.weights).max() > 0.1


# -- chains as trees, seeds, checkpoints ---------------------------------------------------------
@pytest.mark.parametrize("n_bias_rows", [0, 3])
@pytest.mark.parametrize("name", ["sag-nus", "sag-nus-skip", "oeg"])
def test_a_chain_given_as_trees_runs_the_chain_solver(name, n_bias_rows):
    """Chains written as trees (node t's parent t - 1, one edge type; the bias rows count,
    root, leaf are then count, first, last): the tree kernels take the chain kernels' steps."""
    nodes = nodes_of([1, 4, 2, 5, 3, 5, 1, 4, 2, 3], seed=8)
    chains = trees_from_parents([np.arange(-1, T - 1) for T in nodes.lengths.tolist()])
    fm = FeatureMap(A, K, n_bias_rows)
    chain = Problem(train=nodes, feature_map=fm)
    tree = tree_problem(TreeData(nodes, chains), n_bias_rows=n_bias_rows)
    options = {"tol": 0.0, "max_epochs": 5, "seed": 4, "budget_stop": True}
    a, b = solve(chain, name, **options), solve(tree, name, **options)
    np.testing.assert_allclose(b.weights, a.weights, rtol=1e-9, atol=1e-12)
    assert b.counters == a.counters
    assert b.trace.records[-1].primal == pytest.approx(a.trace.records[-1].primal, rel=1e-12)


@pytest.mark.parametrize("n_bias_rows", [0, 3])
@pytest.mark.parametrize("sampling", ["uniform", "gap"])
def test_a_chain_given_as_trees_takes_the_chain_sdca_steps(sampling, n_bias_rows):
    """The one SDCA engine on a chain written as trees: the same steps (weights, dual, Newton
    iterations) as on the chain, to rounding."""
    nodes = nodes_of([1, 4, 2, 5, 3, 5, 1, 4, 2, 3], seed=8)
    chains = trees_from_parents([np.arange(-1, T - 1) for T in nodes.lengths.tolist()])
    chain = Problem(train=nodes, feature_map=FeatureMap(A, K, n_bias_rows))
    tree = tree_problem(TreeData(nodes, chains), n_bias_rows=n_bias_rows)
    options = {"tol": 0.0, "max_epochs": 5, "seed": 4, "sampling": sampling, "budget_stop": True,
               "line_search_tol": 1e-10}  # fmt: skip
    a, b = solve(chain, "sdca", **options), solve(tree, "sdca", **options)
    assert_same_sdca_steps(a, b, chain.n_sequences)


def without_time(result):
    return [{k: v for k, v in r.to_json().items() if k != "seconds"} for r in result.trace.records]


@pytest.mark.parametrize(
    "name, options",
    [("sag-nus-skip", {}), ("oeg", {"oeg_sampling": "permutation", "init": "gibbs"})],
)
def test_a_seed_fixes_the_run(problem, name, options):
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
def test_tree_state_resumes_from_a_checkpoint(problem, tmp_path, name, options):
    """A run of 6 epochs checkpoints (npz + JSON) after epoch 3; a run resumed from that file
    continues after the saved records and ends with the same weights, counters and records as
    the uninterrupted one."""
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
