"""The generic segment-table kernels against direct numpy formulas."""

from __future__ import annotations

import numpy as np
import pytest

from crfsdca.kernels import segments


def block(rng, sizes, tiny=False):
    """Logs of normalised tables laid end to end (some entries -inf or far below exp's range)."""
    parts = []
    for n in sizes:
        x = rng.normal(size=n) * 3
        if tiny:
            x[0] = -900.0  # exp underflows to 0 but the log is finite
        x[-1] = -np.inf if n > 2 else x[-1]
        top = x[np.isfinite(x)].max()
        parts.append(x - (top + np.log(np.exp(x - top).sum())))
    return np.concatenate(parts)


RUNS = (np.array([0, 9, 18]), np.array([9, 9, 3]), np.array([1.0, -0.5, 2.0]))


def numpy_terms(log_p, log_q, runs, fn):
    total = 0.0
    for a, n, c in zip(*runs, strict=True):
        lp, lq = log_p[a : a + n], log_q[a : a + n]
        total += c * fn(lp, lq)
    return total


def kl_np(lp, lq):
    keep = np.isfinite(lp)
    return float((np.exp(lp[keep]) * (lp[keep] - lq[keep])).sum())


@pytest.mark.parametrize("tiny", [False, True])
def test_kl_pair_and_mix_equal_the_direct_formulas(tiny):
    rng = np.random.default_rng(0)
    lmu, lnu = block(rng, [9, 9, 3], tiny), block(rng, [9, 9, 3])
    lnu[np.isinf(lnu)] = -50.0  # nu has full support (a KL with it stays finite)
    mu, nu = np.exp(lmu), np.exp(lnu)
    kl, both = segments.kl_pair(mu, nu, lmu, lnu, RUNS)
    assert kl == pytest.approx(numpy_terms(lmu, lnu, RUNS, kl_np), rel=1e-13)
    assert kl == pytest.approx(segments.kl(lmu, lnu, RUNS), rel=1e-13)
    assert not np.isfinite(both)  # nu has support where mu is 0: KL(nu || mu) is infinite
    full = np.where(np.isinf(lmu), -40.0, lmu)
    kl, both = segments.kl_pair(np.exp(full), nu, full, lnu, RUNS)
    assert both - kl == pytest.approx(segments.kl(lnu, full, RUNS), rel=1e-12)
    for gamma in (0.3, 1.0):
        out = lmu.copy()
        h = segments.mix(mu, nu, out, lnu, RUNS, gamma)
        with np.errstate(divide="ignore"):
            want = np.logaddexp(
                np.log1p(-gamma) + lmu if gamma < 1 else -np.inf, np.log(gamma) + lnu
            )
        np.testing.assert_allclose(out, np.minimum(want, 0.0), rtol=1e-13, atol=1e-14)
        assert h == pytest.approx(segments.entropy(out, RUNS), rel=1e-13)
    small = lmu.astype(np.float32)
    h32 = segments.mix(np.exp(small.astype(float)), nu, small, lnu, RUNS, 0.3)
    assert h32 == pytest.approx(segments.entropy(small, RUNS), rel=1e-12)
