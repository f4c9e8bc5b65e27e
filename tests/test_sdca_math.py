"""Junction-tree entropy, KL and the line search against brute force on tiny chains."""

import itertools
import math

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.optimize import minimize_scalar

from crfsdca.kernels.primitives import BlockBuffers, BlockBuffers32
from crfsdca.kernels.solvers import line_search as K_ls
from crfsdca.kernels.solvers import sdca as K_sdca
from crfsdca.kernels.solvers import trees
from crfsdca.kernels.solvers.sdca import chain_runs as R
from crfsdca.structures.objectives import dot, squared_norm


def random_chain(rng, T, K, scale=1.0):
    """Joint distribution of a random chain MRF and its log node/edge marginals."""
    unary = scale * rng.normal(size=(T, K))
    pair = scale * rng.normal(size=(max(T - 1, 0), K, K))
    ys = np.array(list(itertools.product(range(K), repeat=T)))
    score = unary[np.arange(T), ys].sum(1)
    for t in range(T - 1):
        score += pair[t, ys[:, t], ys[:, t + 1]]
    p = np.exp(score - score.max())
    p /= p.sum()
    node = np.zeros((T, K))
    edge = np.zeros((max(T - 1, 1), K, K))
    for y, py in zip(ys, p, strict=True):
        node[np.arange(T), y] += py
        for t in range(T - 1):
            edge[t, y[t], y[t + 1]] += py
    return p, np.log(node), np.log(edge[: max(T - 1, 0)]) if T > 1 else np.zeros((0, K, K))


def block_bufs(T, K):
    size = max(T - 1, 0) * K * K + T * K
    return BlockBuffers(*(np.empty(size) for _ in range(4)))


def block_bufs32(T, K):
    size = max(T - 1, 0) * K * K + T * K
    return BlockBuffers32(*(np.empty(size, np.float32) for _ in range(3)))


def gap_of(lpn, lpe, lqn, lqe, bufs, b32=None):
    """block_gap on a block stored alone (offsets 0); fills b32 if given."""
    T, K = lpn.shape
    b32 = block_bufs32(T, K) if b32 is None else b32
    mu_src = (lpe.reshape(-1).copy(), lpn.reshape(-1).copy())
    nu_src = np.concatenate([lqe.reshape(-1), lqn.reshape(-1)])
    return K_sdca.block_gap(mu_src, nu_src, R(T, K), bufs, b32)


@pytest.mark.parametrize("T,K", [(1, 3), (2, 2), (3, 3), (4, 2), (4, 3), (1, 1)])
def test_entropy_and_kl_equal_brute_force(T, K):
    rng = np.random.default_rng(T * 10 + K)
    p, lpn, lpe = random_chain(rng, T, K)
    q, lqn, lqe = random_chain(rng, T, K)
    brute_h = -np.sum(p * np.log(p))
    assert K_sdca.block_entropy(lpn, lpe) == pytest.approx(brute_h, rel=1e-10, abs=1e-12)
    gap, fp0 = gap_of(lpn, lpe, lqn, lqe, block_bufs(T, K))
    brute_kl = np.sum(p * np.log(p / q))
    assert gap == pytest.approx(brute_kl, rel=1e-10, abs=1e-12)
    assert fp0 == pytest.approx(brute_kl + np.sum(q * np.log(q / p)), rel=1e-10, abs=1e-12)


def line_function(gamma, lpn, lpe, lqn, lqe, cb):
    """f(gamma) - const = H~(mu + gamma delta) - cb gamma^2 / 2 - gamma * (linear part).

    In KL form the linear part is -sum <delta, log nu>, which we fold in directly.
    """
    mix_n = np.log((1 - gamma) * np.exp(lpn) + gamma * np.exp(lqn))
    mix_e = np.log((1 - gamma) * np.exp(lpe) + gamma * np.exp(lqe))
    h = K_sdca.block_entropy(mix_n, mix_e)
    T, K = lpn.shape
    coef = np.array([K_sdca.node_coefficient(t, T) for t in range(T)])
    dn = np.exp(lqn) - np.exp(lpn)
    de = np.exp(lqe) - np.exp(lpe)
    lin = np.sum(de * lqe) + np.sum(coef[:, None] * dn * lqn)
    return h + gamma * lin - 0.5 * cb * gamma**2


@pytest.mark.parametrize("T,K,cb", [(3, 3, 0.7), (1, 4, 2.0), (2, 3, 1e-3), (4, 2, 50.0)])
def test_line_search_matches_grid_and_finite_differences(T, K, cb):
    rng = np.random.default_rng(7 + T + K)
    _, lpn, lpe = random_chain(rng, T, K)
    _, lqn, lqe = random_chain(rng, T, K, scale=2.0)
    bufs = block_bufs(T, K)
    _, fp0 = gap_of(lpn, lpe, lqn, lqe, bufs)
    f = lambda g: line_function(g, lpn, lpe, lqn, lqe, cb)  # noqa: E731
    for g in (0.1, 0.5, 0.9):
        d1, d2, _ = K_ls.line_derivatives(g, bufs, R(T, K), cb)
        h = 1e-5
        assert d1 == pytest.approx((f(g + h) - f(g - h)) / (2 * h), rel=1e-6, abs=1e-8)
        assert d2 == pytest.approx((f(g + h) - 2 * f(g) + f(g - h)) / h**2, rel=1e-4, abs=1e-5)
        assert d2 < 0
    assert K_ls.line_derivatives(0.0, bufs, R(T, K), cb)[0] == pytest.approx(fp0)
    assert K_ls.line_derivatives(1.0, bufs, R(T, K), cb)[0] == pytest.approx(-cb)
    gamma, its, status, have, _ = K_ls.rtsafe(bufs, R(T, K), cb, fp0, 0.5, 1e-10, 100)
    assert status == 0 and its >= 1 and have
    grid = np.linspace(0, 1, 20001)
    values = np.array([f(g) for g in grid])
    assert abs(gamma - grid[values.argmax()]) <= 1e-4
    best = minimize_scalar(
        lambda g: -f(g), bounds=(0, 1), method="bounded", options={"xatol": 1e-12}
    )
    assert gamma == pytest.approx(best.x, abs=1e-7)
    for start in (0.5, 1e-3, 0.999, gamma):
        loose = K_ls.rtsafe(bufs, R(T, K), cb, fp0, start, 1e-3, 100)[0]
        assert abs(loose - best.x) <= 1e-3


@pytest.mark.parametrize("T,K,cb", [(3, 3, 0.7), (1, 4, 2.0), (2, 3, 1e-3), (4, 2, 50.0)])
def test_single_precision_predictor_only_moves_the_start(T, K, cb):
    """The float32 derivatives track the float64 ones, also with entries below FLUSH32 (which
    the predictor drops), and line_search returns rtsafe's step: the predictor changes where the
    double-precision iteration starts, not where it stops."""
    rng = np.random.default_rng(11 + T + K)
    _, lpn, lpe = random_chain(rng, T, K)
    _, lqn, lqe = random_chain(rng, T, K, scale=2.0)
    if T > 1:
        lpe[0, 0, :] -= 90.0  # mu ~ 1e-40 there: flushed in float32 unless nu is not tiny
        lqe[-1, :, 0] -= 120.0
    bufs, b32 = block_bufs(T, K), block_bufs32(T, K)
    _, fp0 = gap_of(lpn, lpe, lqn, lqe, bufs, b32)
    for g in (1e-6, 0.1, 0.5, 0.9, 1 - 1e-6):
        d1, d2, _ = K_ls.line_derivatives(g, bufs, R(T, K), cb)
        s1, s2, s3 = K_ls.line_derivatives32(g, b32, R(T, K), cb)
        scale1 = np.abs(bufs[1] - bufs[0]).sum() * (1 + np.abs(bufs[2]).max()) + cb
        assert abs(s1 - d1) <= 1e-5 * scale1
        assert s2 == pytest.approx(d2, rel=1e-4)
        if 0.01 < g < 0.99:  # the third derivative against central differences of f''
            h = 1e-5 * min(g, 1 - g)
            up, down = (K_ls.line_derivatives(g + e, bufs, R(T, K), cb)[1] for e in (h, -h))
            assert s3 == pytest.approx((up - down) / (2 * h), rel=1e-3, abs=1e-6 * abs(d2))
    exact = K_ls.rtsafe(bufs, R(T, K), cb, fp0, 0.5, 1e-12, 100)
    for start in (0.5, 1e-3, 0.999):
        gamma, its, status, have, entropy, n32 = K_ls.line_search(
            bufs, b32, R(T, K), cb, fp0, start, 1e-10, 100
        )
        assert status == 0 and have and n32 >= 1
        assert gamma == pytest.approx(exact[0], abs=1e-9)
        assert entropy == pytest.approx(K_ls.line_derivatives(gamma, bufs, R(T, K), cb)[2])
        loose = K_ls.line_search(bufs, b32, R(T, K), cb, fp0, start, 1e-3, 100)
        alone = K_ls.rtsafe(bufs, R(T, K), cb, fp0, start, 1e-3, 100)
        assert abs(loose[0] - exact[0]) <= 1e-3
        assert loose[1] <= alone[1]  # fewer double-precision evaluations than without it
    for start in (0.3, 0.7):  # a wrong f'' for the first double evaluation only slows it
        du = K_ls.line_derivatives(start, bufs, R(T, K), cb)[1]
        for factor in (0.1, 10.0):
            rough = K_ls.rtsafe(bufs, R(T, K), cb, fp0, start, 1e-10, 100, factor * du)
            assert rough[2] == 0 and rough[0] == pytest.approx(exact[0], abs=1e-9)
    one_step = K_ls.line_search(bufs, b32, R(T, K), cb, fp0, 0.5, 1e-3, 1)
    assert one_step[5] == 0  # the one-Newton-step ablation runs no predictor
    assert one_step[:5] == K_ls.rtsafe(bufs, R(T, K), cb, fp0, 0.5, 1e-3, 1)


@pytest.mark.parametrize("T,K,cb", [(3, 3, 0.7), (1, 4, 2.0), (2, 3, 1e-3), (4, 2, 50.0)])
def test_authors_safe_newton_finds_the_step_and_its_one_step_is_crfsdcas(T, K, cb):
    """``safe_newton`` (the authors' search) converges to the maximiser of eq. 20 within its
    tolerance from any start; with tolerance 0.5 from 0.5 it takes one Newton step (one
    evaluation) when that step stays in [0, 1], else it bisects to 0.25 or 0.75 (evaluating
    0.5 twice), and in both cases lands where crfsdca's one-step ablation (rtsafe with
    max_iter = 1 from 0.5) does, up to that ablation's own tolerance."""
    rng = np.random.default_rng(13 + T + K)
    _, lpn, lpe = random_chain(rng, T, K)
    bufs = block_bufs(T, K)
    for scale in (0.3, 2.0, 6.0):
        _, lqn, lqe = random_chain(rng, T, K, scale=scale)
        _, fp0 = gap_of(lpn, lpe, lqn, lqe, bufs)
        exact = K_ls.rtsafe(bufs, R(T, K), cb, fp0, 0.5, 1e-12, 100)[0]
        for start in (0.5, 1e-3, 0.999):
            for tol in (1e-2, 1e-3, 1e-6):
                gamma, its, status, have, _ = K_ls.safe_newton(
                    bufs, R(T, K), cb, fp0, start, tol, 100
                )
                assert status == 0 and not have and its >= 1
                assert abs(gamma - exact) <= 2 * tol
        u, du, _ = K_ls.line_derivatives(0.5, bufs, R(T, K), cb)
        newton = 0.5 - u / du
        gamma, its, status, have, _ = K_ls.safe_newton(bufs, R(T, K), cb, fp0, 0.5, 0.5, 100)
        inside = 0.0 <= newton <= 1.0
        assert gamma == pytest.approx(newton if inside else (0.25 if u < 0 else 0.75))
        assert its == (1 if inside else 2) and status == 0
        ablation = K_ls.rtsafe(bufs, R(T, K), cb, fp0, 0.5, 1e-3, 1)[0]
        assert abs(gamma - ablation) <= 1e-3


def test_authors_safe_newton_border_cases_and_cap():
    T, K = 3, 2
    rng = np.random.default_rng(4)
    _, lpn, lpe = random_chain(rng, T, K)
    _, lqn, lqe = random_chain(rng, T, K, scale=3.0)
    bufs = block_bufs(T, K)
    _, fp0 = gap_of(lpn, lpe, lpn, lpe, bufs)
    assert K_ls.safe_newton(bufs, R(T, K), 1.0, fp0, 0.5, 1e-3, 100)[:3] == (0.0, 0, 0)
    _, fp0 = gap_of(lpn, lpe, lqn, lqe, bufs)
    assert K_ls.safe_newton(bufs, R(T, K), 0.0, fp0, 0.5, 1e-3, 100)[:3] == (1.0, 0, 0)
    gamma, its, status, have, entropy = K_ls.safe_newton(bufs, R(T, K), 0.7, fp0, 0.5, 1e-15, 2)
    assert status == 1 and have and its == 3  # the cap: the last point was evaluated
    assert entropy == pytest.approx(K_ls.line_derivatives(gamma, bufs, R(T, K), 0.7)[2])


@pytest.mark.parametrize("T,K,cb", [(3, 3, 0.7), (1, 4, 2.0), (4, 2, 50.0)])
def test_model_start_integrates_to_the_block_gap(T, K, cb):
    """The entropy part e(g) = f'(g) + g cb of the line function integrates over [0, 1] to the
    block gap KL~(mu || nu), the identity the quadratic model of ``model_start`` rests on; the
    start is the model's root in (0, 1)."""
    rng = np.random.default_rng(5 + T + K)
    _, lpn, lpe = random_chain(rng, T, K)
    _, lqn, lqe = random_chain(rng, T, K, scale=2.0)
    bufs = block_bufs(T, K)
    kl, fp0 = gap_of(lpn, lpe, lqn, lqe, bufs)
    e = lambda g: K_ls.line_derivatives(g, bufs, R(T, K), cb)[0] + g * cb  # noqa: E731
    integral, _ = quad(e, 0.0, 1.0, epsabs=1e-13, epsrel=1e-11)
    assert integral == pytest.approx(kl, rel=1e-8)
    assert e(0.0) == pytest.approx(fp0) and abs(e(1.0)) <= 1e-12 * fp0
    g0 = K_ls.model_start(kl, fp0, cb)
    c = min(max(6 * kl - 3 * fp0, -fp0), fp0)
    assert 0.0 < g0 < 1.0
    assert fp0 * (1 - g0) + c * g0 * (1 - g0) - g0 * cb == pytest.approx(0.0, abs=1e-12 * fp0)


def test_model_start_special_cases():
    assert K_ls.model_start(0.5, 1.0, 2.0) == pytest.approx(1.0 / 3.0)  # c = 0: secant root
    for kl in (0.0, 1.0, 1e9):  # clipped curvature keeps the root inside (0, 1)
        assert 0.0 < K_ls.model_start(kl, 1.0, 1e-9) < 1.0
        assert 0.0 < K_ls.model_start(kl, 1.0, 1e9) < 1e-8
    assert K_ls.model_start(0.1, 0.0, 1.0) == 0.5  # no search needed: rtsafe returns 0
    assert K_ls.model_start(0.1, 1.0, 0.0) == 0.5  # b = 0: rtsafe returns 1


def test_line_search_border_cases():
    T, K = 3, 2
    rng = np.random.default_rng(3)
    _, lpn, lpe = random_chain(rng, T, K)
    bufs = block_bufs(T, K)
    # delta = 0: nu == mu, f'(0) = 0 -> gamma = 0
    _, fp0 = gap_of(lpn, lpe, lpn, lpe, bufs)
    assert fp0 == 0.0
    assert K_ls.rtsafe(bufs, R(T, K), 1.0, fp0, 0.5, 1e-3, 100)[0] == 0.0
    # b = 0 (no primal movement): the dual is the entropy only, maximised at gamma = 1
    _, lqn, lqe = random_chain(rng, T, K)
    _, fp0 = gap_of(lpn, lpe, lqn, lqe, bufs)
    assert K_ls.rtsafe(bufs, R(T, K), 0.0, fp0, 0.5, 1e-3, 100)[0] == 1.0
    # one entry of a mixture that is zero on one side: exact in log space
    lm, m = K_sdca.mix_log(0.25, 0.0, 0.5, -np.inf, np.log(0.5))
    assert m == pytest.approx(0.125) and lm == pytest.approx(np.log(0.125))


@pytest.mark.parametrize("gamma", [0.3, 1.0])
def test_mu_on_the_simplex_border(gamma):
    """mu with forbidden configurations (y_0 = 1 has probability 0, -inf logs): the gap is the
    brute-force KL with 0 log 0 = 0, and the update mixes to the brute-force marginals of
    (1 - gamma) p + gamma q with their junction-tree entropy, every log finite (q > 0)."""
    T, K = 3, 2
    rng = np.random.default_rng(5)
    q, lqn, lqe = random_chain(rng, T, K)
    p, _, _ = random_chain(rng, T, K)
    ys = np.array(list(itertools.product(range(K), repeat=T)))
    p = np.where(ys[:, 0] == 1, 0.0, p)
    p /= p.sum()
    with np.errstate(divide="ignore"):
        lpn, lpe = (np.log(m) for m in joint_marginals(p, ys, T, K))
    assert np.isneginf(lpn[0, 1]) and np.isneginf(lpe[0, 1]).all()
    bufs = block_bufs(T, K)
    node, edge = lpn.reshape(-1).copy(), lpe.reshape(-1).copy()
    nu_src = np.concatenate([lqe.reshape(-1), lqn.reshape(-1)])
    gap, _ = K_sdca.block_gap((edge, node), nu_src, R(T, K), bufs, block_bufs32(T, K))
    support = p > 0
    assert gap == pytest.approx(np.sum(p[support] * np.log(p[support] / q[support])), rel=1e-10)
    entropy = K_sdca.update_block(gamma, (edge, node), R(T, K), bufs, False, np.nan)
    mixed = (1 - gamma) * p + gamma * q
    expect_n, expect_e = joint_marginals(mixed, ys, T, K)
    np.testing.assert_allclose(np.exp(node.reshape(T, K)), expect_n, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(np.exp(edge.reshape(lpe.shape)), expect_e, rtol=1e-12, atol=1e-300)
    assert np.all(np.isfinite(node)) and np.all(np.isfinite(edge))  # q > 0 everywhere

    # the junction-tree entropy of the mixed marginals: edges minus the inner nodes
    def h(m):
        return -np.sum(m * np.log(m))

    expect_h = sum(h(e) for e in expect_e) - sum(h(n) for n in expect_n[1:-1])
    assert entropy == pytest.approx(expect_h, rel=1e-12)


def joint_marginals(p, ys, T, K):
    """Node (T, K) and edge (T - 1, K, K) marginals of a joint p over the rows of ys."""
    node, edge = np.zeros((T, K)), np.zeros((T - 1, K, K))
    for y, py in zip(ys, p, strict=True):
        node[np.arange(T), y] += py
        for t in range(T - 1):
            edge[t, y[t], y[t + 1]] += py
    return node, edge


@pytest.mark.parametrize("T,K,gamma", [(1, 3, 0.3), (2, 2, 0.7), (4, 3, 0.45), (4, 2, 1.0)])
def test_update_block_mixes_and_returns_the_new_entropy(T, K, gamma):
    rng = np.random.default_rng(11 * T + K)
    _, lpn, lpe = random_chain(rng, T, K)
    _, lqn, lqe = random_chain(rng, T, K, scale=3.0)
    lpe = lpe.copy()
    if T > 1:
        lpe[0, 0, 0] = -750.0  # an entry whose mixture underflows: log-space fallback
        lqe[0, 0, 0] = -760.0
    bufs = block_bufs(T, K)
    node, edge = lpn.reshape(-1).copy(), lpe.reshape(-1).copy()
    nu_src = np.concatenate([lqe.reshape(-1), lqn.reshape(-1)])
    K_sdca.block_gap((edge, node), nu_src, R(T, K), bufs, block_bufs32(T, K))
    for have_logs in (False, True):
        ls_entropy = K_ls.line_derivatives(gamma, bufs, R(T, K), 1.0)[2] if have_logs else np.nan
        n_, e_ = node.copy(), edge.copy()
        entropy = K_sdca.update_block(gamma, (e_, n_), R(T, K), bufs, have_logs, ls_entropy)
        expect_n = np.logaddexp(np.log1p(-gamma) + lpn, np.log(gamma) + lqn) if gamma < 1 else lqn
        expect_e = np.logaddexp(np.log1p(-gamma) + lpe, np.log(gamma) + lqe) if gamma < 1 else lqe
        np.testing.assert_allclose(n_.reshape(T, K), np.minimum(expect_n, 0), rtol=1e-13)
        np.testing.assert_allclose(e_.reshape(lpe.shape), np.minimum(expect_e, 0), rtol=1e-13)
        assert entropy == pytest.approx(
            K_sdca.block_entropy(n_.reshape(T, K), e_.reshape(lpe.shape)), rel=1e-12
        )


@pytest.mark.parametrize("T,K,start", [(1, 3, 0.4), (2, 3, 0.5), (4, 3, 1e-3), (5, 2, 0.999)])
def test_line_search_in_place_equals_search_then_update(T, K, start):
    """With outs (the block's segments of the dual state) the line search leaves exactly the
    logs, and update_block(in_place=True) exactly the state and entropy, of the search into
    bufs followed by the update's copy; with outs given but in_place=False (the choice is made
    at run time) it leaves the state alone until the update; block_gap_given_nu counts the logs
    that forbid writing in place."""
    rng = np.random.default_rng(7 * T + K)
    _, lpn, lpe = random_chain(rng, T, K)
    _, lqn, lqe = random_chain(rng, T, K, scale=3.0)
    cb = 1.3
    results = []
    for mode in ("bufs", "in_place", "outs_not_in_place"):
        in_place = mode == "in_place"
        node, edge = lpn.reshape(-1).copy(), lpe.reshape(-1).copy()
        bufs, b32 = block_bufs(T, K), block_bufs32(T, K)
        nu_src = (lqn.reshape(-1).copy(), lqe.reshape(-1).copy())
        E, size = (T - 1) * K * K, (T - 1) * K * K + T * K
        bufs[1][:E], bufs[1][E:size] = np.exp(nu_src[1]), np.exp(nu_src[0])
        bufs[2][:E], bufs[2][E:size] = nu_src[1], nu_src[0]
        mu_src = (edge, node)
        gap, fp0, n_low = K_sdca.block_gap_given_nu(mu_src, R(T, K), bufs, b32)
        assert n_low == 0.0
        stored = (edge.copy(), node.copy())
        if mode == "bufs":
            search = K_ls.line_search(bufs, b32, R(T, K), cb, fp0, start, 1e-3, 100)
        else:
            outs = (edge, node)
            search = K_ls.line_search(
                bufs, b32, R(T, K), cb, fp0, start, 1e-3, 100, outs, None, in_place
            )
        if not in_place:  # the state is written by the update only
            np.testing.assert_array_equal(edge, stored[0])
            np.testing.assert_array_equal(node, stored[1])
        gamma, _, _, have, h, _ = search
        assert have and 0.0 < gamma < 1.0
        entropy = K_sdca.update_block(gamma, mu_src, R(T, K), bufs, have, h, in_place)
        results.append((search, entropy, node, edge))
    (s0, h0, n0, e0), (s1, h1, n1, e1), (s2, h2, n2, e2) = results
    assert s0 == s1 == s2 and h0 == h1 == h2
    for n_, e_ in ((n1, e1), (n2, e2)):
        np.testing.assert_array_equal(n0, n_)
        np.testing.assert_array_equal(e0, e_)
    assert h1 == pytest.approx(K_sdca.block_entropy(n1.reshape(T, K), e1.reshape(lpe.shape)))
    # one stored log below the bound (edges, or the nodes the line search writes) is counted
    bufs, b32 = block_bufs(T, K), block_bufs32(T, K)
    low_node, low_edge = lpn.reshape(-1).copy(), lpe.reshape(-1).copy()
    if T > 1:
        low_edge[1] = K_sdca.IN_PLACE_LOG_MIN - 1.0
    else:
        low_node[1] = K_sdca.IN_PLACE_LOG_MIN - 1.0
    n_low = K_sdca.block_gap_given_nu((low_edge, low_node), R(T, K), bufs, b32)[2]
    assert n_low == 1.0
    assert K_sdca.block_gap_given_nu(mu_src, R(T, K), bufs, None)[2] == 0.0


def test_mix_log_keeps_precision_when_probabilities_underflow():
    lm, lv = -800.0, -900.0
    out, m = K_sdca.mix_log(0.3, 0.0, 0.0, lm, lv)
    expected = np.logaddexp(np.log(0.7) + lm, np.log(0.3) + lv)
    assert out == pytest.approx(expected, rel=1e-14)
    assert K_sdca.mix_log(1.0, 0.0, 0.0, lm, lv)[0] == lv


def test_sum_tree_draws_follow_scores():
    rng = np.random.default_rng(0)
    scores = rng.random(13)
    tree = np.zeros(32)
    trees.build(tree, scores, False)
    assert tree[1] == pytest.approx(scores.sum())
    counts = np.bincount([trees.draw(tree, u, 13) for u in rng.random(200_000)], minlength=13)
    np.testing.assert_allclose(counts / counts.sum(), scores / scores.sum(), atol=5e-3)
    trees.update(tree, 4, 10.0, False)
    assert tree[1] == pytest.approx(scores.sum() - scores[4] + 10.0)
    mtree = np.zeros(32)
    trees.build(mtree, scores, True)
    assert trees.argmax(mtree) == scores.argmax()
    trees.update(mtree, 2, 5.0, True)
    assert trees.argmax(mtree) == 2


def test_dot_and_squared_norm_equal_exact_sums():
    """The objectives' dot products (numpy's einsum, not BLAS) equal the correctly rounded sum
    of the products to a relative 1e-13, at a weight vector's size and across scales."""
    rng = np.random.default_rng(3)
    a = rng.normal(size=200_003) * np.exp(rng.normal(size=200_003) * 3)
    b = rng.normal(size=200_003)
    assert dot(a, b) == pytest.approx(
        math.fsum(a * b), rel=1e-13, abs=1e-13 * math.fsum(abs(a * b))
    )
    assert squared_norm(a) == pytest.approx(math.fsum(a * a), rel=1e-13)
    assert isinstance(dot(a, b), float) and dot(a[:0], b[:0]) == 0.0
