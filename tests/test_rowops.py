"""The short-row vector kernels (crfsdca.kernels.numerics.rowops) against numpy, over K = 1..40.

They write through masked vector stores and read without bounds checks, so besides the values
the tests check that nothing outside the K labels of a row is touched (sentinels around every
row), for K below, at and above the 8-lane chunk and the 32-label pass.
"""

import numpy as np
import pytest
from numba import njit

from crfsdca.kernels.numerics.rowops import rows_sum, rows_sum_into, scale_rows_into

KS = [1, 2, 7, 8, 9, 16, 23, 26, 31, 32, 33, 40]
SENTINEL = -7.25


@njit(cache=False)
def _sum_into(out, src, rows, coefs, p0, p1, K):
    rows_sum_into(out, src, rows, coefs, p0, p1, K)


@njit(cache=False)
def _sum_into_contiguous(out, src, coefs, p0, p1, K):
    rows_sum_into(out, src, None, coefs, p0, p1, K)


@njit(cache=False)
def _sum(out, src, rows, coefs, p0, p1, K):
    rows_sum(out, src, rows, coefs, p0, p1, K)


@njit(cache=False)
def _scale_into(x, dst, rows, coefs, p0, p1, K):
    scale_rows_into(x, dst, rows, coefs, p0, p1, K)


def _case(K, n_src_rows=11, n_entries=9, seed=0):
    rng = np.random.default_rng(seed + K)
    src = rng.normal(size=n_src_rows * K)
    rows = rng.integers(0, n_src_rows, n_entries).astype(np.int64)
    rows[1] = rows[0]  # a repeated row
    coefs = rng.normal(size=n_entries)
    return rng, src, rows, coefs


def _padded(values, pad=8):
    """values surrounded by sentinels; returns (buffer, view of the values)."""
    buf = np.full(values.size + 2 * pad, SENTINEL)
    buf[pad : pad + values.size] = values
    return buf, buf[pad : pad + values.size]


@pytest.mark.parametrize("K", KS)
@pytest.mark.parametrize("p0, p1", [(0, 9), (2, 7), (3, 4), (5, 5)])
def test_rows_sum_into_matches_numpy(K, p0, p1):
    rng, src, rows, coefs = _case(K)
    start = rng.normal(size=K)
    buf, out = _padded(start.copy())
    _sum_into(out, src, rows, coefs, p0, p1, K)
    expect = start + sum(
        (coefs[p] * src[rows[p] * K : rows[p] * K + K] for p in range(p0, p1)), np.zeros(K)
    )
    np.testing.assert_allclose(out, expect, rtol=1e-13, atol=1e-13)
    assert np.all(buf[:8] == SENTINEL) and np.all(buf[-8:] == SENTINEL)
    if p0 == p1:  # nothing added: out unchanged, bit for bit
        assert np.array_equal(out, start)


@pytest.mark.parametrize("K", KS)
def test_rows_sum_overwrites_and_contiguous_rows_are_a_vector_matrix_product(K):
    rng, src, rows, coefs = _case(K)
    buf, out = _padded(np.full(K, 123.0))
    _sum(out, src, rows, coefs, 0, rows.size, K)
    expect = sum(coefs[p] * src[rows[p] * K : rows[p] * K + K] for p in range(rows.size))
    np.testing.assert_allclose(out, expect, rtol=1e-13, atol=1e-13)
    assert np.all(buf[:8] == SENTINEL) and np.all(buf[-8:] == SENTINEL)

    M = rng.normal(size=(K, K))
    x = rng.normal(size=K)
    buf, out = _padded(np.zeros(K))
    _sum_into_contiguous(out, M.reshape(-1), x, 0, K, K)
    np.testing.assert_allclose(out, x @ M, rtol=1e-13, atol=1e-13)
    assert np.all(buf[:8] == SENTINEL) and np.all(buf[-8:] == SENTINEL)


def test_rows_sum_splits_even_and_odd_rows():
    """The documented order: (out + even rows) + odd rows, each in row order, fused."""
    K = 3
    src = np.array([1.0, 2.0, 3.0, 1e16, 1e16, 1e16, -1e16, -1e16, -1e16])
    rows = np.array([1, 0, 2], dtype=np.int64)  # even: rows 1 and 2; odd: row 0
    coefs = np.ones(3)
    out = np.zeros(K)
    _sum_into(out, src, rows, coefs, 0, 3, K)
    # (0 + 1e16 - 1e16) + [1, 2, 3] = [1, 2, 3] exactly (a serial sum would lose them)
    assert np.array_equal(out, [1.0, 2.0, 3.0])


@pytest.mark.parametrize("K", KS)
@pytest.mark.parametrize("p0, p1", [(0, 9), (4, 9), (6, 6)])
def test_scale_rows_into_matches_numpy_with_repeated_rows(K, p0, p1):
    rng, _, rows, coefs = _case(K)
    n_rows = 11
    start = rng.normal(size=n_rows * K)
    buf, dst = _padded(start.copy())
    x = rng.normal(size=K)
    _scale_into(x, dst, rows, coefs, p0, p1, K)
    expect = start.copy()
    for p in range(p0, p1):
        expect[rows[p] * K : rows[p] * K + K] += coefs[p] * x
    np.testing.assert_allclose(dst, expect, rtol=1e-13, atol=1e-13)
    assert np.all(buf[:8] == SENTINEL) and np.all(buf[-8:] == SENTINEL)
    untouched = np.setdiff1d(np.arange(n_rows), rows[p0:p1])
    for r in untouched:
        assert np.array_equal(dst[r * K : r * K + K], start[r * K : r * K + K])


def test_kernels_reject_arrays_they_cannot_read_as_flat_float64():
    from numba.core.errors import TypingError

    K = 4
    src = np.zeros(3 * K)
    with pytest.raises(TypingError):
        _sum_into(np.zeros(K), src, np.zeros(2, np.int32), np.ones(2), 0, 2, K)
    with pytest.raises(TypingError):
        _sum_into(np.zeros(K), src[::2], np.zeros(2, np.int64), np.ones(2), 0, 2, K)
    with pytest.raises(TypingError):
        _scale_into(np.zeros(K, np.float32), src, np.zeros(2, np.int64), np.ones(2), 0, 2, K)
