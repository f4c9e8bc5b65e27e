"""The structured hinge loss (structured SVM) by SDCA on chains, trees and second-order chains.

Independent references: the loss-augmented MAP against the enumeration of every labelling, and
the SSVM optimum against the primal QP over all labellings solved by scipy's SLSQP (features
built here with NumPy from the data, no crfsdca kernel), with and without an l1 term; the
certified gap bounds the true sub-optimality, and P - D is the mean exact block gap.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from _reference import features as chain_features
from _synthetic import random_problem, random_sequences
from scipy.optimize import minimize
from test_elastic_net import tree_problem_of

from crfsdca.errors import ConvergenceWarning
from crfsdca.solvers import SOLVERS
from crfsdca.solvers.local import LocalSDCA
from crfsdca.solvers.monitor import Monitor
from crfsdca.solvers.sdca import SDCA, SDCAConfig
from crfsdca.structures.hinge import exact as hinge_exact
from crfsdca.structures.hinge import hinge_losses
from crfsdca.structures.junction import junction_problem, second_order_data


def tree_case():
    """The elastic-net tests' forest problem (up to 4 nodes an example), with each example's
    parent array and edge types."""
    p = tree_problem_of(seed=4, n=8)
    shapes = [np.asarray(g.parents) for g in p.train.graphs]
    types = [np.zeros(g.parents.size, np.int64) if g.edge_types is None else g.edge_types
             for g in p.train.graphs]  # fmt: skip
    return p, shapes, types


def make(kind):
    """(problem, psi(i, y) -> dense F(x_i, y), lengths): features built here, independently."""
    if kind == "chain":
        p = random_problem(seed=3, n=6, max_T=4, K=3, A=5)
        return p, lambda i, y: chain_features(p.train, i, np.asarray(y), p.feature_map)
    if kind == "chain2":
        p = random_problem(seed=7, n=6, max_T=4, K=2, A=5)
        return p, lambda i, y: chain_features(p.train, i, np.asarray(y), p.feature_map)
    if kind == "tree":
        p, shapes, types = tree_case()
        return p, lambda i, y: tree_features(p, shapes[i], types[i], i, y)
    nodes = random_sequences(5, n=6, max_T=4, K=2, A=4)
    p = junction_problem(second_order_data(nodes))
    return p, lambda i, y: junction_features(p, nodes, i, y)


def node_features(fm, data, i, y, first, last):
    """Attribute rows at each node's label and the bias rows (count, first/root, last/leaf)."""
    f = fm.zeros()
    s = int(data.seq_offsets[i])
    for v, label in enumerate(y):
        for q in range(data.attr_offsets[s + v], data.attr_offsets[s + v + 1]):
            fm.emission(f)[data.attr_ids[q], label] += data.attr_values[q]
        if fm.n_bias_rows:
            bias = fm.bias(f)
            bias[0, label] += 1.0
            bias[1, label] += float(first[v])
            bias[2, label] += float(last[v])
    return f


def tree_features(p, parents, types, i, y):
    fm, n = p.feature_map, len(y)
    leaf = [not np.any(parents == v) for v in range(n)]
    f = node_features(fm, p.train.nodes, i, y, parents < 0, leaf)
    K = fm.n_labels
    for v in np.flatnonzero(parents >= 0):  # one K x K block per edge type, after the bias rows
        f[fm.transition_offset + (int(types[v]) * K + y[parents[v]]) * K + y[v]] += 1.0
    return f


def junction_features(p, nodes, i, y):
    fm, n = p.feature_map, len(y)
    f = node_features(fm, nodes, i, y, np.arange(n) == 0, np.arange(n) == n - 1)
    for t in range(n - 1):
        fm.factor(f, 0)[y[t], y[t + 1]] += 1.0
    for t in range(n - 2):
        fm.factor(f, 1)[y[t], y[t + 1], y[t + 2]] += 1.0
    return f


def labellings(p, i):
    T = int(p.train.seq_offsets[i + 1] - p.train.seq_offsets[i])
    return [np.array(y) for y in itertools.product(range(p.feature_map.n_labels), repeat=T)]


def gold_of(p, i):
    s, e = p.train.seq_offsets[i], p.train.seq_offsets[i + 1]
    return np.asarray(p.train.labels[s:e])


def constraints(p, psi):
    """Rows (psi(y) - psi(y_i), Hamming(y, y_i)) of every labelling y of every example."""
    rows = []
    for i in range(p.n_sequences):
        gold = gold_of(p, i)
        fi = psi(i, gold)
        rows.append([(psi(i, y) - fi, float(np.sum(y != gold))) for y in labellings(p, i)])
    return rows


def brute_primal(p, rows, w, sigma=0.0):
    hinge = sum(max(loss + diff @ w for diff, loss in ex) for ex in rows)
    return 0.5 * p.regularization * w @ w + sigma * np.abs(w).sum() + hinge / p.n_sequences


def scipy_optimum(p, rows, sigma=0.0):
    """min lambda/2 |w|^2 + sigma |w|_1 + mean xi s.t. xi_i >= Delta + w (psi(y) - psi_i), by
    SLSQP over (w+, w-, xi) with w = w+ - w- (w+, w- >= 0 when sigma > 0)."""
    d, n, lam = p.feature_map.n_features, p.n_sequences, p.regularization
    G = np.array([np.concatenate([diff, -diff]) for ex in rows for diff, _ in ex])
    h = np.array([loss for ex in rows for _, loss in ex])
    owner = np.concatenate([np.full(len(ex), i) for i, ex in enumerate(rows)])
    E = np.zeros((owner.size, n))
    E[np.arange(owner.size), owner] = 1.0

    def objective(z):
        w = z[:d] - z[d : 2 * d]
        grad_w = lam * w
        grad = np.concatenate([grad_w + sigma, -grad_w + sigma, np.full(n, 1.0 / n)])
        value = 0.5 * lam * w @ w + sigma * z[: 2 * d].sum() + z[2 * d :].sum() / n
        return value, grad

    cons = {"type": "ineq", "fun": lambda z: E @ z[2 * d :] - G @ z[: 2 * d] - h,
            "jac": lambda z: np.hstack([-G, E])}  # fmt: skip
    bounds = [(0, None)] * (2 * d) + [(None, None)] * n
    z0 = np.concatenate([np.zeros(2 * d), np.full(n, float(p.train.max_length))])
    res = minimize(objective, z0, jac=True, bounds=bounds, constraints=[cons], method="SLSQP",
                   options={"ftol": 1e-15, "maxiter": 2000})  # fmt: skip
    assert res.success, res.message
    w = res.x[:d] - res.x[d : 2 * d]
    return brute_primal(p, rows, w, sigma), w


def train(p, **options):
    defaults = {"tol": 1e-9, "max_epochs": 20000, "eval_every": 50, "hinge_step": "pairwise"}
    cfg = SDCAConfig(**(defaults | options))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        return SDCA(cfg).solve(p, Monitor(p, "sdca", cfg))


KINDS = ["chain", "chain2", "tree", "junction"]
#: the structured SVM's kernels (loss-augmented MAP, step loops) compile for 45 s on a cold cache
#: for these tests alone: the slow set has them, the default set the refusals
compiles_the_svm = pytest.mark.slow


@compiles_the_svm
@pytest.mark.parametrize("kind", KINDS)
def test_loss_augmented_map_equals_enumeration(kind):
    """Every structure's loss-augmented MAP: its value H_i and the loss of its labelling equal
    the enumeration's (the labelling is one of the argmax's, ties aside), on random weights."""
    p, psi = make(kind)
    rng = np.random.default_rng(1)
    for _ in range(3):
        w = rng.normal(size=p.feature_map.n_features)
        got = hinge_losses(p, w)
        for i in range(p.n_sequences):
            gold = gold_of(p, i)
            values = [np.sum(y != gold) + (psi(i, y) - psi(i, gold)) @ w for y in labellings(p, i)]
            assert got[i] == pytest.approx(max(values), abs=1e-10)


@compiles_the_svm
@pytest.mark.parametrize("sigma", [0.0, 0.03])
@pytest.mark.parametrize("kind", KINDS)
def test_ssvm_optimum_equals_the_scipy_qp(kind, sigma):
    """Pairwise SDCA certifies a gap of 1e-9; its objective equals the QP's optimum to 1e-6,
    its primal is the enumeration's, and the gap bounds P(w) - P*; P - D = mean block gap."""
    if sigma > 0 and kind in ("chain2", "tree"):
        pytest.skip("the l1 term runs on the chain and the second-order chain")
    p, psi = make(kind)
    p.l1 = sigma
    p.loss = "hinge"
    rows = constraints(p, psi)
    best, _ = scipy_optimum(p, rows, sigma)
    result = train(p)
    last = result.trace.records[-1]
    assert result.stop_reason == "tol" and last.gap <= 1e-9
    w = result.weights
    primal = brute_primal(p, rows, w, sigma)
    assert primal == pytest.approx(last.primal, abs=1e-10)
    assert abs(primal - best) <= 1e-6
    assert primal - best <= last.gap + 1e-9  # the certificate bounds the true sub-optimality
    assert last.dual <= best + 1e-9
    d = result.state.dual
    _, gaps = hinge_exact(p.structure.blocks, d.log_edge, d.log_node, w)
    assert gaps.mean() == pytest.approx(last.primal - last.dual, abs=1e-10)


@compiles_the_svm
def test_frank_wolfe_steps_ascend_the_dual_and_keep_the_identities():
    """The seed's closed-form (BCFW) step: the dual never decreases, the gap stays the mean
    block gap, and w stays w_hat(mu)."""
    p, _ = make("chain")
    p.loss = "hinge"
    cfg = SDCAConfig(tol=0.0, max_epochs=40, eval_every=1, hinge_step="fw", sampling="uniform")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        result = SDCA(cfg).solve(p, Monitor(p, "sdca", cfg))
    duals = [r.dual for r in result.trace.records]
    assert np.all(np.diff(duals) >= -1e-12) and duals[-1] > duals[0]
    d = result.state.dual
    _, gaps = hinge_exact(p.structure.blocks, d.log_edge, d.log_node, result.weights)
    last = result.trace.records[-1]
    assert gaps.mean() == pytest.approx(last.primal - last.dual, abs=1e-10)
    w_hat = p.structure.weights_from_dual(d.log_node, d.log_edge)
    np.testing.assert_allclose(result.weights, w_hat, atol=1e-10)


@pytest.mark.parametrize("name", ["lbfgs", "sag-nus", "oeg", "ap"])
def test_solvers_without_the_hinge_loss_refuse_it(name):
    p, _ = make("chain")
    p.loss = "hinge"
    cls = SOLVERS[name]
    with pytest.raises(ValueError, match="no hinge loss"):
        cls(cls.config_class()).solve(p, Monitor(p, name, cls.config_class()))


def test_a_misspelt_loss_is_refused():
    p = random_problem(seed=0, n=3)
    with pytest.raises(ValueError, match="loss must be one of log, hinge"):
        type(p)(train=p.train, feature_map=p.feature_map, loss="hnge")


# the chain's steps with a state of their own: the active set of labellings (Osokin et al.'s
# BCPFW) and the entropy smoothing at an annealed temperature (certified on the hinge gap)
@compiles_the_svm
@pytest.mark.parametrize(
    "step, tol, sigma", [("active", 1e-9, 0.0), ("active", 1e-9, 0.03), ("smooth", 1e-6, 0.0)]
)
@pytest.mark.parametrize("kind", ["chain", "chain2"])
def test_chain_steps_reach_the_scipy_qp(kind, step, tol, sigma):
    """The active-set and the smoothed steps certify their gap; their objective equals the
    QP's optimum to 1e-6, the gap bounds P(w) - P*, P - D is the mean exact block gap of the
    dual state and w = w_hat(mu)."""
    p, psi = make(kind)
    p.l1 = sigma
    p.loss = "hinge"
    rows = constraints(p, psi)
    best, _ = scipy_optimum(p, rows, sigma)
    # the temperature is lowered at most once an evaluation: every 100 epochs for the smoothing
    result = train(p, hinge_step=step, tol=tol, eval_every=100 if step == "smooth" else 10)
    last = result.trace.records[-1]
    assert result.stop_reason == "tol" and last.gap <= tol
    w = result.weights
    primal = brute_primal(p, rows, w, sigma)
    assert primal == pytest.approx(last.primal, abs=1e-10)
    assert abs(primal - best) <= 1e-6
    assert primal - best <= last.gap + 1e-9
    assert last.dual <= best + 1e-9
    d = result.state.dual
    _, gaps = hinge_exact(p.structure.blocks, d.log_edge, d.log_node, w)
    assert gaps.mean() == pytest.approx(last.primal - last.dual, abs=1e-10)
    if sigma == 0.0:
        w_hat = p.structure.weights_from_dual(d.log_node, d.log_edge)
        np.testing.assert_allclose(w, w_hat, atol=1e-10)


@compiles_the_svm
@pytest.mark.parametrize("atoms", [2, 128])
def test_the_active_set_holds_the_dual_state(atoms):
    """Every block's stored labellings and weights account for its marginals: mu_i minus the
    weighted atoms' corners is >= 0 on every node and edge, and sums on each to the untracked
    rest 1 - sum(alpha) (0 while the cap was never reached: two atoms a block reach it)."""
    p, _ = make("chain")
    p.loss = "hinge"
    cfg = SDCAConfig(hinge_step="active", hinge_atoms=atoms, sampling="gap")
    runner = LocalSDCA(p, cfg, SDCA(cfg).initial_state(p))
    runner.take_steps(300)
    stored, alpha, count = runner.atoms
    d, data = runner.state.dual, p.train
    rest = 1.0 - alpha.sum(axis=1)
    assert np.all(alpha[np.arange(alpha.shape[1]) < count[:, None]] > 0.0)
    assert np.all(alpha[np.arange(alpha.shape[1]) >= count[:, None]] == 0.0)
    assert rest.min() >= -1e-12
    assert (rest.max() > 1e-9) == (atoms == 2)
    K = p.feature_map.n_labels
    node = np.exp(d.log_node)
    edge = np.exp(d.log_edge)
    for i in range(p.n_sequences):
        t0, t1 = data.seq_offsets[i], data.seq_offsets[i + 1]
        e0 = t0 - i  # the chain's edges: T - 1 a sequence
        r_node = node[t0:t1].copy()
        r_edge = edge[e0 : e0 + t1 - t0 - 1].copy()
        for s in range(count[i]):
            y = stored[s, t0:t1]
            r_node[np.arange(t1 - t0), y] -= alpha[i, s]
            r_edge[np.arange(t1 - t0 - 1), y[:-1], y[1:]] -= alpha[i, s]
        assert r_node.min() >= -1e-10 and np.all(r_edge >= -1e-10)
        np.testing.assert_allclose(r_node.sum(axis=1), rest[i], atol=1e-10)
        edge_sums = r_edge.reshape(-1, K * K).sum(axis=1)
        np.testing.assert_allclose(edge_sums, np.full(edge_sums.size, rest[i]), atol=1e-10)
