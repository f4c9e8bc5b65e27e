"""The generic segment-table kernels against direct numpy formulas."""

from __future__ import annotations

import numpy as np
import pytest

from crfsdca.kernels.numerics import segments


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


def entropy_np(lp, lq):
    keep = np.isfinite(lp)
    return float(-(np.exp(lp[keep]) * lp[keep]).sum())


@pytest.mark.parametrize("tiny", [False, True])
def test_entropy_and_kl_equal_the_direct_formulas(tiny):
    rng = np.random.default_rng(0)
    lmu, lnu = block(rng, [9, 9, 3], tiny), block(rng, [9, 9, 3])
    lnu[np.isinf(lnu)] = -50.0  # nu has full support (a KL with it stays finite)
    assert segments.kl(lmu, lnu, RUNS) == pytest.approx(
        numpy_terms(lmu, lnu, RUNS, kl_np), rel=1e-13
    )
    assert segments.kl(lmu, lmu, RUNS) == 0.0
    assert segments.entropy(lmu, RUNS) == pytest.approx(
        numpy_terms(lmu, lmu, RUNS, entropy_np), rel=1e-13
    )
    small = lmu.astype(np.float32)  # float32 storage, float64 arithmetic
    want = numpy_terms(small.astype(float), small.astype(float), RUNS, entropy_np)
    assert segments.entropy(small, RUNS) == pytest.approx(want, rel=1e-13)
