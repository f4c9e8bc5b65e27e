"""Accuracy, special values and vectorization of ``crfsdca.kernels.numerics.fastmath``.

Errors are measured in ulps of the exact result, taken from numpy's ``longdouble`` functions
(x87 80-bit extended precision on x86-64, 11 more bits than float64, so the reference error is
below 0.001 ulp). The ulp of a real ``t`` is ``2**(floor(log2|t|) - 52)``, at least ``2**-1074``.
"""

from __future__ import annotations

import importlib
import platform
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import njit

from crfsdca.kernels.numerics import fastmath as fm

pytestmark = pytest.mark.skipif(
    np.finfo(np.longdouble).nmant < 63, reason="needs 80-bit longdouble for reference values"
)

N = 1_000_000
DBL_MAX = np.finfo(np.float64).max
FUNCS = {
    "log": (fm.fast_log, np.log),
    "exp": (fm.fast_exp, np.exp),
    "log1p": (fm.fast_log1p, np.log1p),
    "expm1": (fm.fast_expm1, np.expm1),
}
# Bounds asserted: < 1 ulp for log / exp / log1p (measured maxima 0.87 / 0.76 / 0.83 ulp, within
# 0.1 ulp of that without FMA); expm1 loses up to ~0.6 ulp more where 2**k * (1 + p) - 1 cancels
# (k = 1, x near 0.36; measured maximum 1.16 ulp). Subnormal results of exp are measured in units
# of the subnormal spacing 2**-1074 (measured maximum 0.78).
BOUND = {"log": 1.0, "exp": 1.0, "log1p": 1.0, "expm1": 1.5}

_KERNELS: dict = {}


def kernel(name):
    """Vectorized map kernel ``(x, out)`` for one function, compiled once per session."""
    if name not in _KERNELS:
        _KERNELS[name] = fm.make_map(FUNCS[name][0])
    return _KERNELS[name]


def apply(name, x):
    x = np.ascontiguousarray(x, dtype=np.float64)
    out = np.empty_like(x)
    kernel(name)(x, out)
    return out


def ulp_error(name, x, y):
    """Error of ``y = f(x)`` in ulps of the exact ``f(x)``; ``inf`` where an inf / nan is wrong.

    An infinite ``y`` is accepted (error 0) when the exact value is beyond the largest double.
    """
    with np.errstate(all="ignore"):
        t = FUNCS[name][1](x.astype(np.longdouble))
    _, e = np.frexp(t)
    ulp = np.ldexp(np.longdouble(1.0), np.maximum(e - 53, -1074))
    err = np.full(x.shape, np.inf)
    fin = np.isfinite(y) & np.isfinite(t)
    err[fin] = (np.abs(y[fin].astype(np.longdouble) - t[fin]) / ulp[fin]).astype(np.float64)
    overflow = np.isinf(y) & (np.abs(t) > DBL_MAX) & (np.sign(y) == np.sign(t))
    err[overflow] = 0.0
    err[np.isnan(y) & np.isnan(t)] = 0.0
    return err


def consecutive(center, m=2000):
    """The 2m + 1 doubles around ``center``, in increasing order."""
    c = np.float64(center)
    lo, hi = [c], [c]
    for _ in range(m):
        lo.append(np.nextafter(lo[-1], -np.inf))
        hi.append(np.nextafter(hi[-1], np.inf))
    return np.array(lo[:0:-1] + hi)


def _inputs(name, rng):
    """Named input sets per function (about 1e6 values each)."""
    u = rng.uniform
    if name == "log":
        return {
            "random exponent": np.ldexp(u(0.5, 1, N), rng.integers(-1074, 1025, N)),
            "log-uniform 1e-320..1e308": 10.0 ** u(-320, 308, N),
            "subnormal": u(0, 2.2250738585072014e-308, N),
            "0.5..2": u(0.5, 2, N),
            "1 +- 1e-3": 1 + u(-1e-3, 1e-3, N),
            "1 +- 2**20 ulps": 1 + np.ldexp(rng.integers(-(2**20), 2**20, N).astype(float), -52),
            "sqrt(2)/2 edge": np.sqrt(0.5) * (1 + u(-1e-6, 1e-6, N)),
            "powers of 2": np.ldexp(1.0, np.arange(-1074, 1024)),
        }
    if name == "exp":
        return {
            "uniform -745..710": u(-745, 710, N),
            "normal results": u(-708.39, 709.78, N),
            "subnormal results": u(-745.14, -708.4, N),
            "-1..1": u(-1, 1, N),
            "near 0": u(-1e-3, 1e-3, N),
            "tiny": np.ldexp(u(-1, 1, N), rng.integers(-1074, -10, N)),
            "integers": np.arange(-746.0, 711.0),
            "(k + 1/2) log 2 edges": (rng.integers(-1075, 1024, N) + 0.5)
            * np.log(2)
            * (1 + u(-1e-12, 1e-12, N)),
            "overflow edge": consecutive(709.782712893384),
            "underflow edge": consecutive(-745.1332191019411),
            "subnormal edge": consecutive(-708.3964185322641),
        }
    if name == "log1p":
        return {
            "uniform -1..1": u(-1, 1, N),
            "near -1": -1 + np.ldexp(u(0, 1, N), rng.integers(-52, 0, N)),
            "tiny": np.ldexp(u(-1, 1, N), rng.integers(-1074, -1, N)),
            "log-uniform 1e-2..1e308": 10.0 ** u(-2, 308, N),
        }
    return {  # expm1
        "uniform -50..710": u(-50, 710, N),
        "-40..40": u(-40, 40, N),
        "-1..1": u(-1, 1, N),
        "tiny": np.ldexp(u(-1, 1, N), rng.integers(-1074, -1, N)),
        "integers": np.arange(-50.0, 711.0),
        "overflow edge": consecutive(709.782712893384),
        "k = 57 switch": consecutive(56.5 * np.log(2)),
    }


CASES = [(name, label) for name in FUNCS for label in _inputs(name, np.random.default_rng(0))]


@pytest.mark.parametrize(("name", "label"), CASES)
def test_accuracy(name, label):
    x = _inputs(name, np.random.default_rng(12345))[label]
    err = ulp_error(name, x, apply(name, x))
    worst = int(np.argmax(err))
    assert err[worst] <= BOUND[name], f"{name}({x[worst]!r}): {err[worst]:.3f} ulp"


def test_exp_subnormal_results_bound():
    """Gradual underflow: error below one unit of the subnormal spacing 2**-1074."""
    x = np.random.default_rng(1).uniform(-745.14, -708.4, N)
    y = apply("exp", x)
    with np.errstate(all="ignore"):
        t = np.exp(x.astype(np.longdouble))
    err = np.abs(y.astype(np.longdouble) - t) / np.ldexp(np.longdouble(1.0), -1074)
    assert float(err.max()) < 1.0
    assert (y > 0).sum() > 0.99 * N  # only the last ~0.02 of the interval underflows to 0


NAN, INF = np.nan, np.inf
SPECIAL = {
    "log": [
        (0.0, -INF),
        (-0.0, -INF),
        (-1e-300, NAN),
        (-1.0, NAN),
        (-INF, NAN),
        (INF, INF),
        (NAN, NAN),
        (1.0, 0.0),
        (5e-324, -744.4400719213812),
        (DBL_MAX, 709.782712893384),
    ],
    "exp": [
        (-INF, 0.0),
        (INF, INF),
        (NAN, NAN),
        (0.0, 1.0),
        (-0.0, 1.0),
        (709.782712893384, 1.7976931348622732e308),
        (709.7827128933841, INF),
        (1000.0, INF),
        (DBL_MAX, INF),
        (-745.1332191019411, 5e-324),
        (-745.2, 0.0),
        (-1e300, 0.0),
        (-DBL_MAX, 0.0),
        (5e-324, 1.0),
        (-5e-324, 1.0),
    ],
    "log1p": [
        (0.0, 0.0),
        (-0.0, -0.0),
        (5e-324, 5e-324),
        (-5e-324, -5e-324),
        (1e-300, 1e-300),
        (-1.0, -INF),
        (-1.0000000000000002, NAN),
        (-INF, NAN),
        (INF, INF),
        (NAN, NAN),
        (DBL_MAX, 709.782712893384),
    ],
    "expm1": [
        (0.0, 0.0),
        (-0.0, -0.0),
        (5e-324, 5e-324),
        (-5e-324, -5e-324),
        (-1e-300, -1e-300),
        (-INF, -1.0),
        (-40.0, -1.0),
        (-1000.0, -1.0),
        (INF, INF),
        (709.7827128933841, INF),
        (DBL_MAX, INF),
        (NAN, NAN),
    ],
}


@pytest.mark.parametrize("name", list(FUNCS))
def test_special_values(name):
    x = np.array([p[0] for p in SPECIAL[name]])
    want = np.array([p[1] for p in SPECIAL[name]])
    got = apply(name, x)
    same = (got == want) & (np.signbit(got) == np.signbit(want))
    same |= np.isnan(got) & np.isnan(want)
    assert same.all(), list(zip(x[~same], got[~same], want[~same], strict=True))


def test_log_powers_of_two_exact():
    """log(2**k) = k*ln2_hi + k*ln2_lo is correctly rounded (error <= 0.5 ulp)."""
    k = np.arange(-1074, 1024)
    x = np.ldexp(1.0, k)
    assert ulp_error("log", x, apply("log", x)).max() <= 0.5


MONOTONE_POINTS = {
    "log": [1.0, 0.5, 2.0, np.sqrt(0.5), 2.2250738585072014e-308, 1e-310, 1e300],
    "exp": [0.0, *[(k + 0.5) * np.log(2) for k in (-1000, -2, -1, 0, 1, 1000)], -708.4, -745.0],
    "log1p": [0.0, 1.0, -0.5, np.sqrt(2) - 1, -1 + 2.0**-30],
    "expm1": [0.0, 0.5 * np.log(2), -0.5 * np.log(2), 56.5 * np.log(2), -39.9],
}


@pytest.mark.parametrize("name", list(FUNCS))
def test_monotone_spot_checks(name):
    """Non-decreasing on consecutive doubles around the reduction's switch points and on a
    sorted random sample."""
    for c in MONOTONE_POINTS[name]:
        y = apply(name, consecutive(c))
        assert (np.diff(y) >= 0).all(), c
    rng = np.random.default_rng(3)
    lo, hi = {"log": (0.0, 1e3), "exp": (-745, 709), "log1p": (-1, 10), "expm1": (-45, 709)}[name]
    x = np.sort(rng.uniform(lo, hi, N))
    assert (np.diff(apply(name, x)) >= 0).all()


@pytest.mark.parametrize("name", list(FUNCS))
def test_scalar_call_matches_vector_loop(name):
    """The scalar (non-vectorized) code path gives bit-identical results."""
    f = FUNCS[name][0]
    scalar = njit(lambda v: f(v))
    x = np.random.default_rng(4).uniform(-30, 30, 64)
    x[:4] = [0.0, -1.0, np.inf, np.nan]
    y = apply(name, x)
    with np.errstate(invalid="ignore"):
        assert np.array_equal(np.array([scalar(v) for v in x]), y, equal_nan=True)


def test_log_positive_has_the_bits_of_log_on_positive_finite_inputs():
    """fast_log_positive drops only the special-value selects: on every positive finite input
    (subnormals, both sides of sqrt(2)/2 and sqrt(2), powers of two) it returns fast_log's bits,
    and at 0 a finite value below log(5e-324) rather than -inf. fast_log_normal, which also
    drops the subnormal scaling, returns them on every positive normal input."""
    rng = np.random.default_rng(11)
    x = np.concatenate(
        [
            np.exp(rng.uniform(-745.0, 709.0, 200_000)),
            rng.uniform(0.5, 2.0, 100_000),
            np.ldexp(1.0, np.arange(-1074, 1024)),
            np.array([np.finfo(float).tiny, 5e-324, np.finfo(float).max, np.sqrt(0.5), np.sqrt(2)]),
        ]
    )
    x = x[(x > 0) & np.isfinite(x)]
    pos = fm.make_map(fm.fast_log_positive)
    y = np.empty_like(x)
    pos(x, y)
    assert np.array_equal(y, apply("log", x))
    normal = x[x >= np.finfo(float).tiny]  # fast_log_normal: normal inputs only
    y = np.empty_like(normal)
    fm.make_map(fm.fast_log_normal)(normal, y)
    assert np.array_equal(y, apply("log", normal))
    at_zero = np.empty(1)
    pos(np.zeros(1), at_zero)
    assert np.isfinite(at_zero[0]) and at_zero[0] < np.log(5e-324)


def test_in_place_and_strided():
    rng = np.random.default_rng(5)
    x = rng.uniform(0.1, 10, 1001)
    want = apply("log", x)
    y = x.copy()
    kernel("log")(y, y)
    assert np.array_equal(y, want)
    z = x.copy()
    kernel("log")(z[1:], z[:-1])  # overlapping shift: falls back to the scalar loop
    ref = x.copy()
    for i in range(1000):
        ref[i] = apply("log", ref[i + 1 : i + 2])[0]
    assert np.array_equal(z, ref)
    out = np.zeros(2002)
    kernel("log")(np.repeat(x, 2)[::2], out[::2])
    assert np.array_equal(out[::2], want)


def test_weighted_sum_kernels():
    rng = np.random.default_rng(6)
    n = 10_001
    c, a = rng.normal(size=(2, n))
    d = np.where(rng.random(n) < 0.7, rng.normal(size=n), 0.0)
    m = rng.uniform(1e-3, 2.0, n)
    m[d == 0.0] = 0.0  # log(0) = -inf must not leak through the select
    mask = d != 0.0
    want = np.sum((c * d * (a - np.log(m, where=mask, out=np.ones(n))))[mask])
    for reassoc in (True, False):
        got = fm.make_weighted_sum(fm.fast_log, reassoc=reassoc)(c, d, a, m)
        assert got == pytest.approx(want, rel=1e-12)


PACKED = re.compile(r"\bv?(?:mul|add|sub|div|fmadd\w*|fmsub\w*|fnmadd\w*)pd\s+%[xyz]mm")


def _is_vectorized(dispatcher):
    return PACKED.search(dispatcher.inspect_asm(dispatcher.signatures[0])) is not None


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 assembly check")
def test_loops_vectorize():
    x = np.linspace(0.5, 2.0, 100)
    for name in FUNCS:
        apply(name, x)
        assert _is_vectorized(kernel(name)), name
    k = fm.make_weighted_sum(fm.fast_log, reassoc=True)
    k(x, x, x, x)
    assert _is_vectorized(k)


def test_cached_caller_in_another_module(tmp_path, monkeypatch):
    """Usable from ``@njit(cache=True, nogil=True)`` functions of other modules."""
    (tmp_path / "fastmath_cache_user.py").write_text(
        "from numba import njit\n"
        "from crfsdca.kernels.numerics.fastmath import add_reassoc, fast_exp, fast_log\n\n"
        "@njit(cache=True, nogil=True)\n"
        "def f(x):\n"
        "    s = 0.0\n"
        "    for i in range(x.shape[0]):\n"
        "        s = add_reassoc(s, fast_log(x[i]) + fast_exp(-x[i]))\n"
        "    return s\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("fastmath_cache_user")
    try:
        x = np.linspace(0.5, 3.0, 1000)
        assert mod.f(x) == pytest.approx(np.sum(np.log(x) + np.exp(-x)), rel=1e-13)
        import numba

        # next to the module, or under $NUMBA_CACHE_DIR when that is set
        cache = Path(numba.config.CACHE_DIR) if numba.config.CACHE_DIR else tmp_path
        assert list(cache.rglob("fastmath_cache_user.f-*.nbi"))
    finally:
        sys.modules.pop("fastmath_cache_user", None)


def test_single_precision_log_within_one_ulp():
    """fast_logf on positive normal float32 (its whole domain) against float64 log, in float32
    ulps of the result; powers of two and 1 are exact."""
    rng = np.random.default_rng(3)
    mant = rng.uniform(1.0, 2.0, 200_000)
    x = np.ldexp(mant, rng.integers(-126, 128, mant.size)).astype(np.float32)
    x = np.concatenate([x, np.float32(1.0) + np.arange(-200, 200, dtype=np.float32) * 2**-23])
    x = x[np.isfinite(x) & (x >= np.finfo(np.float32).tiny)]
    out = np.empty_like(x)
    fm.make_map(fm.fast_logf)(x, out)
    assert out.dtype == np.float32
    exact = np.log(x.astype(np.float64))
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    err = np.abs(out.astype(np.float64) - exact) / ulp
    assert err.max() < 1.0, x[np.argmax(err)]
    powers = np.ldexp(np.float32(1.0), np.arange(-126, 128)).astype(np.float32)
    out = np.empty_like(powers)
    fm.make_map(fm.fast_logf)(powers, out)
    np.testing.assert_array_equal(out, (np.arange(-126, 128) * np.log(2.0)).astype(np.float32))


@njit(cache=True)
def _max_reduce(x):
    m = x[0]
    for p in range(x.shape[0]):
        m = fm.max_num(m, x[p])
    return m


def test_division_free_single_precision_log_error_bound():
    """approx_logf (the line-search predictor's log): at most 1.5e-7 plus half an ulp of the
    result from log, on every float32 in [0.5, 2) and on random positive normals."""
    f32 = np.float32
    lo, hi = f32(0.5).view(np.int32), f32(2.0).view(np.int32)
    tiny, big = f32(np.finfo(f32).tiny).view(np.int32), f32(np.finfo(f32).max).view(np.int32)
    rng = np.random.default_rng(12)
    x = np.concatenate(
        [
            np.arange(lo, hi, dtype=np.int32).view(f32),
            rng.integers(tiny, big, 1_000_000, dtype=np.int32).view(f32),
            np.array([1.0, np.finfo(f32).tiny, np.finfo(f32).max], f32),
        ]
    )
    out = np.empty_like(x)
    fm.make_map(fm.approx_logf)(x, out)
    exact = np.log(x.astype(np.float64))
    half_ulp = np.spacing(np.abs(exact).astype(f32)).astype(np.float64) / 2
    excess = np.abs(out.astype(np.float64) - exact) - half_ulp
    assert excess.max() <= 1.5e-7, f"x = {x[excess.argmax()]!r}: {excess.max():.3g}"


def test_max_num_reduction_is_max_and_skips_nan():
    rng = np.random.default_rng(5)
    for n in (1, 3, 26, 676, 1001):
        x = rng.normal(size=n) * 100
        assert _max_reduce(x) == x.max()
    x = np.array([-np.inf, np.nan, -3.0, 2.5, np.nan, -np.inf])
    assert _max_reduce(x) == 2.5  # IEEE maxNum: a nan operand gives the other one
    assert np.isnan(_max_reduce(np.array([np.nan, np.nan])))
    assert _max_reduce(np.array([-np.inf, -np.inf])) == -np.inf
