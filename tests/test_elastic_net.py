"""The elastic net by Prox-SDCA (``crfsdca.kernels.solvers.prox``): the certified optimum against an
independent bound-constrained minimisation, the gap decomposition, monotone dual ascent, the
soft-thresholding map, the exact line search across kinks, sigma -> 0, checkpoints, inputs."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from _reference import loss as brute_chain_loss
from _synthetic import random_problem, random_sequences
from scipy.optimize import brentq, minimize, minimize_scalar
from scipy.special import logsumexp

from crfsdca.errors import ConvergenceWarning
from crfsdca.kernels.primitives import BlockBuffers, BlockBuffers32, BlockRuns
from crfsdca.kernels.solvers import line_search as K_ls
from crfsdca.kernels.solvers import prox, sdca_epoch
from crfsdca.solvers.checkpoint import load_checkpoint, save_checkpoint
from crfsdca.solvers.local import LocalSDCA
from crfsdca.solvers.monitor import Monitor
from crfsdca.solvers.sdca import SDCA, SDCAConfig, SDCAState
from crfsdca.structures.junction import junction_problem, second_order_data
from crfsdca.structures.tree import TreeData, tree_problem, trees_from_parents

SIGMA = 0.02


def tree_problem_of(seed=4, n=10):
    rng = np.random.default_rng(seed)
    shapes = [np.array(p) for p in ([-1], [-1, 0, 0, 0], [2, 2, -1, 2], [-1, 0, 1, 2], [-1, 0])]
    while len(shapes) < n:
        T = int(rng.integers(1, 5))
        shapes.append(np.array([-1] + [int(rng.integers(0, t)) for t in range(1, T)]))
    nodes = random_sequences(seed, n=n, max_T=1, K=3)  # only for the attribute layout
    lengths = [p.size for p in shapes]
    counts = rng.integers(0, 3, size=sum(lengths))
    ids = rng.integers(0, 6, size=int(counts.sum()))
    nodes = type(nodes)(
        seq_offsets=np.concatenate([[0], np.cumsum(lengths)]),
        attr_offsets=np.concatenate([[0], np.cumsum(counts)]),
        attr_ids=ids,
        attr_values=rng.uniform(0.2, 2.0, size=ids.size),
        labels=rng.integers(0, 3, size=sum(lengths)),
        n_attributes=6,
        label_names=("L0", "L1", "L2"),
    )
    types = [rng.integers(0, 2, p.size) for p in shapes]
    return tree_problem(TreeData(nodes, trees_from_parents(shapes, types)))


def make(kind, sigma=SIGMA):
    if kind == "chain":
        problem = random_problem(seed=3, n=10, max_T=4, K=3, A=6)
    elif kind == "tree":
        problem = tree_problem_of()
    else:
        problem = junction_problem(second_order_data(random_sequences(5, n=8, max_T=4, K=3)))
    problem.l1 = sigma
    return problem


def solve(problem, **options):
    config = SDCAConfig(**{"tol": 1e-12, "max_epochs": 3000, "line_search_tol": 1e-9, **options})
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        return SDCA(config).solve(problem, Monitor(problem, "sdca", config))


def reference_optimum(problem):
    """min P by SciPy's L-BFGS-B on w = w+ - w-, w+- >= 0 (smooth in (w+, w-))."""
    d, sigma = problem.feature_map.n_features, problem.l1

    def f(z):
        w = z[:d] - z[d:]
        value, grad = problem.primal_and_gradient(w)  # value includes sigma |w|_1
        value += sigma * (z.sum() - np.abs(w).sum())
        return value, np.concatenate([grad + sigma, -grad + sigma])

    res = minimize(
        f, np.zeros(2 * d), jac=True, method="L-BFGS-B", bounds=[(0.0, None)] * (2 * d),
        options={"ftol": 1e-16, "gtol": 1e-13, "maxiter": 50000, "maxcor": 30},
    )  # fmt: skip
    return res.x[:d] - res.x[d:], float(res.fun)


def brute_primal(problem, w, kind):
    """P(w) by enumerating every labelling (chains and second-order chains)."""
    data, fm = problem.train, problem.feature_map
    if kind == "second-order":
        total = 0.0
        for i in range(data.n_sequences):
            total += _junction_loss(data, fm, w, i)
    else:
        total = brute_chain_loss(data, w, fm)
    lam = problem.regularization
    return total / data.n_sequences + 0.5 * lam * w @ w + problem.l1 * np.abs(w).sum()


def _junction_loss(data, fm, w, i):
    g = data.graphs[i]
    s, n, K = int(data.seq_offsets[i]), g.n_nodes, fm.n_labels
    emission, bias = fm.emission(w), fm.bias(w)
    unary = np.zeros((n, K))
    for v in range(n):
        for q in range(data.attr_offsets[s + v], data.attr_offsets[s + v + 1]):
            unary[v] += data.attr_values[q] * emission[data.attr_ids[q]]
        if fm.n_bias_rows:
            unary[v] += bias[0] + (bias[1] if v == 0 else 0) + (bias[2] if v == n - 1 else 0)
    ys = np.array(list(itertools.product(range(K), repeat=n)))
    score = unary[np.arange(n), ys].sum(1)
    for scope, t in g.factors:
        score += fm.factor(w, t)[tuple(ys[:, v] for v in scope)]
    gold = data.labels[s : s + n]
    return float(logsumexp(score) - score[np.all(ys == gold, axis=1)][0])


# Prox-SDCA's step loop compiles for 8-15 s per structure on a cold cache: the default set keeps
# the chain, the slow set has the tree and the second-order chain
@pytest.mark.parametrize(
    "kind", ["chain", *(pytest.param(k, marks=pytest.mark.slow) for k in ("tree", "second-order"))]
)
def test_certified_optimum_equals_the_bound_constrained_minimum(kind):
    """Prox-SDCA's certified optimum (gap <= 1e-12) has the objective of an independent
    L-BFGS-B minimisation over w = w+ - w- to 1e-8 relative and the same zero coordinates;
    on chains and second-order chains P is also checked by enumerating every labelling."""
    problem = make(kind)
    result = solve(problem)
    last = result.trace.records[-1]
    assert result.stop_reason == "tol" and 0 <= last.gap <= 1e-12
    w = result.weights
    w_ref, p_ref = reference_optimum(problem)
    primal = problem.primal(w)
    assert abs(primal - p_ref) <= 1e-8 * abs(p_ref)
    assert primal <= p_ref + 1e-12  # certified: no lower objective exists below the gap
    zero, zero_ref = w == 0.0, np.abs(w_ref) <= 1e-7
    assert 0 < zero.sum() < w.size  # the l1 term zeroes some weights, not all
    np.testing.assert_array_equal(zero, zero_ref)
    assert last.extra["nonzero_weights"] == np.count_nonzero(w)
    if kind != "tree":
        assert brute_primal(problem, w, kind) == pytest.approx(primal, rel=1e-12)


@pytest.mark.parametrize(
    "kind", ["chain", *(pytest.param(k, marks=pytest.mark.slow) for k in ("tree", "second-order"))]
)
def test_gap_decomposition_and_the_dual_average(kind):
    """After a few epochs: v = w_hat(mu), w = S_tau(v), D = H/n - lambda/2 |w|^2 and
    P(w) - D(mu) = the mean exact block KL, as the trace records it."""
    problem = make(kind)
    config = SDCAConfig(tol=0.0, max_epochs=3, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        result = SDCA(config).solve(problem, Monitor(problem, "sdca", config))
    d, structure = result.state.dual, problem.structure
    v = structure.weights_from_dual(d.log_node, d.log_edge)
    np.testing.assert_allclose(d.dual_average, v, rtol=1e-10, atol=1e-13)
    tau = problem.l1 / problem.regularization
    np.testing.assert_array_equal(d.weights, prox.soft_threshold(d.dual_average, tau))
    h = structure.entropies(d.log_node, d.log_edge).sum()
    dual = h / problem.n_sequences - 0.5 * problem.regularization * d.weights @ d.weights
    gaps = sdca_epoch.exact_gaps(structure.blocks, d.log_edge, d.log_node, d.weights)
    last = result.trace.records[-1]
    assert last.dual == pytest.approx(dual, rel=1e-12)
    assert problem.primal(d.weights) - dual == pytest.approx(gaps.mean(), rel=1e-7, abs=1e-14)
    assert last.gap == pytest.approx(gaps.mean(), rel=1e-7, abs=1e-14)


# the second-order chain's elastic-net loop compiles for 18 s: in the slow set
@pytest.mark.parametrize("kind", ["chain", pytest.param("second-order", marks=pytest.mark.slow)])
def test_the_dual_never_decreases(kind):
    """D(mu) after every single step is >= the one before (the line search maximises the
    exact dual along the block, kinks included)."""
    problem = make(kind, sigma=0.05)
    cfg = SDCAConfig(tol=0.0, seed=3, line_search_tol=1e-8)
    runner = LocalSDCA(problem, cfg, SDCA(cfg).initial_state(problem))
    duals = [runner.report()["dual"]]
    for _ in range(12 * problem.n_sequences):
        runner.take_steps(1)
        duals.append(runner.report()["dual"])
    duals = np.array(duals)
    assert np.all(np.diff(duals) >= -1e-13 * np.abs(duals[1:]))
    assert duals[-1] > duals[0]


def test_soft_threshold_is_the_argmax_of_the_conjugate():
    """w(v) = argmax_w <w, v> - (|w|^2/2 + tau |w|_1), coordinate by coordinate, and g*(v) =
    |S_tau(v)|^2 / 2 is that maximum."""
    rng = np.random.default_rng(0)
    tau = 0.3
    v = np.concatenate([rng.normal(0, 1, 40), [tau, -tau, 0.0, tau + 1e-9, -tau - 1e-9]])
    w = prox.soft_threshold(v, tau)
    for j, vj in enumerate(v):
        res = minimize_scalar(
            lambda x, vj=vj: -(x * vj - 0.5 * x * x - tau * abs(x)),
            bounds=(-5, 5), method="bounded", options={"xatol": 1e-12},
        )  # fmt: skip
        assert w[j] == pytest.approx(res.x, abs=1e-6)
        assert 0.5 * w[j] ** 2 == pytest.approx(-res.fun, abs=1e-11)
        assert w[j] == prox.soft(vj, tau)
        # the optimality condition of the argmax: v - w in tau d|w|
        if w[j] != 0.0:
            assert vj - w[j] == pytest.approx(tau * np.sign(w[j]), abs=1e-15)
        else:
            assert abs(vj) <= tau


def _block(seed, K=4, T=3):
    """One chain block's mu, nu (edge cliques, coefficient 1, then interior nodes, -1)."""
    rng = np.random.default_rng(seed)
    edges = [rng.dirichlet(np.ones(K * K)) for _ in range(T - 1)]
    edges_nu = [rng.dirichlet(np.ones(K * K)) for _ in range(T - 1)]
    mu = np.concatenate(edges)
    nu = np.concatenate(edges_nu)
    return mu, nu


@pytest.mark.parametrize("seed", range(6))
def test_line_search_equals_a_root_finder_on_the_piecewise_dual(seed):
    """rtsafe on f'(s) = sum delta (log nu - log mu^s) - c sum_j a_j (S(v_j + s a_j) - w_j)
    (kinks where v_j + s a_j crosses +-tau) finds brentq's root on the same function."""
    rng = np.random.default_rng(100 + seed)
    mu, nu = _block(seed)
    size = mu.size
    bufs = BlockBuffers(mu.copy(), nu.copy(), np.log(nu), np.empty(size))
    b32 = BlockBuffers32(
        mu.astype(np.float32), nu.astype(np.float32), np.log(nu).astype(np.float32)
    )
    runs = BlockRuns(np.array([0]), np.array([size]), np.array([1.0]), np.array([0]), np.array([0]))
    m, tau, c = 30, 0.4, float(rng.uniform(0.5, 20))
    a = rng.normal(0, 0.6, m)
    vv = rng.normal(0, 0.6, m)
    vv[:5] = tau * np.sign(vv[:5])  # on a kink at s = 0
    ww = prox.soft_threshold(vv, tau)
    pw = (a, vv, ww, m, tau, c)
    delta = nu - mu
    fp0 = float(delta @ (np.log(nu) - np.log(mu)))

    def fprime(s):
        mix = (1 - s) * mu + s * nu
        quad = c * a @ (prox.soft_threshold(vv + s * a, tau) - ww)
        return delta @ (np.log(nu) - np.log(mix)) - quad

    q1 = max(c * float(a @ (prox.soft_threshold(vv + a, tau) - ww)), 0.0)
    gamma = K_ls.line_search(bufs, b32, runs, q1, fp0, 0.5, 1e-12, 100, None, pw)[0]
    if fprime(1.0) >= 0:
        assert gamma == 1.0
    else:
        root = brentq(fprime, 0.0, 1.0, xtol=1e-15)
        assert gamma == pytest.approx(root, abs=1e-10)
    # the same search without kinks (tau = 0) is plain SDCA's, cb = c |a|^2
    plain = K_ls.line_search(bufs, b32, runs, c * a @ a, fp0, 0.5, 1e-12, 100)[0]
    zero = K_ls.line_search(
        bufs, b32, runs, c * a @ a, fp0, 0.5, 1e-12, 100, None, (a, vv, vv, m, 0.0, c)
    )[0]
    assert zero == pytest.approx(plain, abs=1e-11)


def test_a_vanishing_l1_term_follows_plain_sdca():
    """With tau -> 0 Prox-SDCA takes plain SDCA's steps: the same draws give the same
    weights to rounding after two epochs."""
    problem = make("chain", sigma=1e-300)
    cfg = SDCAConfig(tol=0.0, seed=5)
    runner = LocalSDCA(problem, cfg, SDCA(cfg).initial_state(problem))
    assert runner.prox is not None
    plain_problem = make("chain", sigma=0.0)
    plain = LocalSDCA(plain_problem, cfg, SDCA(cfg).initial_state(plain_problem))
    assert plain.prox is None
    runner.take_steps(2 * problem.n_sequences)
    plain.take_steps(2 * problem.n_sequences)
    np.testing.assert_allclose(runner.weights, plain.weights, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize(
    ("sampling", "dtype"),
    [("importance", "float64"), pytest.param("uniform", "float32", marks=pytest.mark.slow)],
)
def test_samplings_and_float32_duals_reach_the_certified_optimum(sampling, dtype):
    """Another sampling scheme and float32 duals reach the optimum of gap sampling (float32
    logs hold mu to ~6e-8 relative, so their certificate holds to about that)."""
    problem = make("chain")
    best = solve(problem).trace.records[-1].primal
    result = solve(problem, sampling=sampling, dual_dtype=dtype, tol=1e-9)
    assert result.trace.records[-1].gap <= 1e-9
    slack = 1e-12 if dtype == "float64" else 1e-7
    assert 0 <= result.trace.records[-1].primal - best <= 1e-9 + slack


def test_an_l1_state_resumes_from_a_checkpoint(tmp_path):
    """The dual-average vector is checkpointed: a resumed run ends with the weights of the
    uninterrupted one."""
    problem = make("chain")
    config = SDCAConfig(tol=0.0, seed=2, max_epochs=6)
    saved = []

    def checkpointer(state, trace):
        saved.append(save_checkpoint(tmp_path / f"ck{len(saved)}", state, trace, {}))

    def run(state=None):
        monitor = Monitor(problem, "sdca", config, checkpointer=checkpointer, checkpoint_every=3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return SDCA(config).solve(problem, monitor, state)

    whole = run()
    arrays, header = load_checkpoint(saved[0].parent)
    assert "dual_average" in arrays
    resumed = run(SDCAState.from_checkpoint(arrays, header["state"]))
    # continued after the saved state (3 epochs), not run again from the start
    saved_calls = header["state"]["oracle_calls"]
    assert saved_calls == 3 * problem.n_sequences
    assert resumed.trace.records[0].oracle_calls > saved_calls
    assert resumed.state.oracle_calls == whole.state.oracle_calls == 6 * problem.n_sequences
    np.testing.assert_array_equal(resumed.weights, whole.weights)
    np.testing.assert_array_equal(resumed.state.dual.dual_average, whole.state.dual.dual_average)


@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf")])
def test_a_bad_l1_weight_is_refused(bad):
    with pytest.raises(ValueError, match="l1 must be a finite number >= 0"):
        random_problem(seed=0).__class__(
            train=random_sequences(0), feature_map=make("chain").feature_map, l1=bad
        )


# -- crfsdca.CRF(c1=...) -------------------------------------------------------------------------
def _sentences(seed, n):
    from test_partial_fit import sentences

    return sentences(seed, n)


@pytest.mark.parametrize("algorithm", ["sdca", "lbfgs"])
def test_crf_c1_trains_the_elastic_net_with_sparse_state_features(algorithm):
    """CRF(c1, c2) minimises sum loss + c1 |w|_1 + c2 |w|^2: sigma = c1 / n, lambda = 2 c2 / n;
    the certificate holds, state_features_ lists only the non-zero weights, and c1 = 0 keeps
    more of them."""
    from crfsdca import CRF

    X, y = _sentences(0, 40)
    options = {"all_possible_transitions": True, "all_possible_states": True}
    if algorithm == "lbfgs":
        options |= {"epsilon": 0.0, "delta": 0.0, "tol": 1e-9}
    else:
        options |= {"tol": 1e-9}
    crf = CRF(algorithm=algorithm, c1=0.5, c2=0.1, max_iterations=2000, **options).fit(X, y)
    model, _ = crf._fitted()
    assert model.regularization_ == pytest.approx(0.2 / 40)
    assert model.l1_ == pytest.approx(0.5 / 40)
    last = crf.training_log_[-1]
    assert 0 <= last.gap <= 1e-9
    w = model.weights_
    assert last.extra["nonzero_weights"] == np.count_nonzero(w)
    emission = model.feature_map_.emission(w)
    assert len(crf.state_features_) == np.count_nonzero(emission) < emission.size
    assert all(v != 0.0 for v in crf.state_features_.values())
    dense = CRF(algorithm=algorithm, c1=0.0, c2=0.1, max_iterations=2000, **options).fit(X, y)
    assert len(dense.state_features_) > len(crf.state_features_)


def test_sdca_and_owlqn_reach_the_same_elastic_net_optimum():
    """The same objective from Prox-SDCA and OWL-QN (both certified to 1e-10)."""
    from crfsdca import CRF

    X, y = _sentences(2, 30)
    kw = {"c1": 0.3, "c2": 0.2, "max_iterations": 3000, "all_possible_transitions": True}
    sdca_crf = CRF(algorithm="sdca", tol=1e-10, **kw).fit(X, y)
    owl = CRF(algorithm="lbfgs", tol=1e-10, epsilon=0.0, delta=0.0, all_possible_states=True,
              **kw).fit(X, y)  # fmt: skip
    a, b = sdca_crf.training_log_[-1], owl.training_log_[-1]
    assert a.gap <= 1e-10 and b.gap <= 1e-10
    assert a.primal == pytest.approx(b.primal, abs=2e-10)
    wa, wb = sdca_crf._fitted()[0].weights_, owl._fitted()[0].weights_
    np.testing.assert_array_equal(wa == 0, np.abs(wb) <= 1e-9)


def test_partial_fit_continues_the_elastic_net():
    """partial_fit keeps the dual-average vector: the grown run is certified on all the data
    and reaches the optimum of a fit on all of it."""
    from crfsdca import CRF

    X1, y1 = _sentences(0, 30)
    X2, y2 = _sentences(1, 20)
    kw = {"algorithm": "sdca", "c1": 0.4, "c2": 0.2, "tol": 1e-9, "max_iterations": 2000}
    grown = CRF(**kw).fit(X1, y1).partial_fit(X2, y2)
    whole = CRF(**kw).fit(X1 + X2, y1 + y2)
    a, b = grown.training_log_[-1], whole.training_log_[-1]
    assert a.gap <= 1e-9 and a.primal == pytest.approx(b.primal, abs=2e-9)
    # continued, not refitted: the grown state's gap (30 of 50 sequences optimised, 0.16) is a
    # small part of a fresh start's (6.6)
    assert grown.training_log_[0].gap < 0.1 * whole.training_log_[0].gap
    assert grown._fitted()[0].l1_ == pytest.approx(0.4 / 50)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"c1": -0.1}, "c1 must be a finite number >= 0"),
        ({"c1": float("nan")}, "c1 must be a finite number >= 0"),
        ({"c1": 0.1, "algorithm": "oeg"}, "trained by algorithm='lbfgs'"),
        ({"c1": 0.1, "algorithm": "sag-nus"}, "trained by algorithm='lbfgs'"),
        ({"c1": 0.1, "algorithm": "l2sgd"}, "trained by algorithm='lbfgs'"),
    ],
)
def test_crf_refuses_a_bad_c1_in_one_line(kw, message):
    from crfsdca import CRF

    X, y = _sentences(0, 5)
    with pytest.raises(ValueError, match=message) as err:
        CRF(**kw).fit(X, y)
    assert "\n" not in str(err.value)


# -- the command line ----------------------------------------------------------------------------
def _cli(*args):
    from click.testing import CliRunner

    from crfsdca.cli.main import main

    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--l1", "-0.5"], "Invalid value for '--l1': expected a finite number >= 0, got -0.5"),
        (["--l1", "nan"], "Invalid value for '--l1': expected a finite number >= 0, got nan"),
        (["--l1", "0.1", "--solver", "oeg"], "--l1: --solver oeg has no l1 term"),
        (["--l1", "0.1", "--solver", "sag-nus"], "trained by --solver sdca and --solver lbfgs"),
        (["--l1", "0.1", "--workers", "2"], "does not train the elastic net yet"),
    ],
)
def test_the_cli_refuses_a_bad_l1_as_a_usage_error(args, message):
    result = _cli("train", "conll2000", *args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.stderr
    error = next(line for line in result.stderr.splitlines() if line.startswith("Error:"))
    assert message in error


def test_the_cli_trains_with_l1_and_records_it(tmp_path):
    """--l1 trains the elastic net: sigma and the non-zero count in --json, the model file
    (whose weights have that many non-zeros) and the trace."""
    import json

    from test_cli_errors import conll_text

    from crfsdca.io.modelfile import load_model

    (tmp_path / "chunk.txt").write_text(conll_text(30))
    model, trace = tmp_path / "m.npz", tmp_path / "t.jsonl"
    result = _cli("train", tmp_path / "chunk.txt", "--format", "conll", "--template", "conll",
                  "--l1", "0.01", "--tol", "1e-8", "--json", "--model", model,
                  "--trace", trace)  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["l1"] == 0.01 and summary["stop_reason"] == "tol"
    arrays, header = load_model(model)
    assert header["l1"] == 0.01
    nonzero = int(np.count_nonzero(arrays["weights"]))
    assert summary["nonzero_weights"] == nonzero < arrays["weights"].size
    assert header["training"]["nonzero_weights"] == nonzero
    lines = [json.loads(x) for x in trace.read_text().splitlines()]
    assert lines[0]["l1"] == 0.01
    assert lines[-1]["extra"]["nonzero_weights"] == nonzero


@pytest.mark.parametrize("name", ["sag-nus", "sag-nus-skip", "oeg", "l2sgd", "ap"])
def test_solvers_without_an_l1_term_refuse_an_elastic_net_problem(name):
    from crfsdca.solvers import SOLVERS

    problem = make("chain")
    cls = SOLVERS[name]
    config = cls.config_class()
    with pytest.raises(ValueError, match="trained by sdca .Prox-SDCA. and lbfgs .OWL-QN.$"):
        cls(config).solve(problem, Monitor(problem, name, config))


def test_the_distributed_solver_refuses_the_elastic_net():
    from crfsdca.distributed import simulate

    with pytest.raises(ValueError, match="does not train the elastic net"):
        simulate(make("chain"), 2)
