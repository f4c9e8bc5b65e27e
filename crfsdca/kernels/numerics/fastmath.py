"""Vectorizable double-precision ``log``, ``exp``, ``log1p`` and ``expm1`` for numba loops.

llvmlite's wheels ship without Intel SVML, so LLVM cannot vectorize a numba loop that calls
``np.log`` or ``np.exp``: every element goes through a scalar libm call (about 15-25 ns). The
functions here are written with plain arithmetic, integer bit manipulation and selects only (no
branches, calls or tables), so that once numba inlines them into a simple loop, LLVM's loop
vectorizer turns the loop into packed AVX2 / AVX-512 code (four or eight doubles per
instruction; see "Vector width" below).

Methods (all constants are the published fdlibm ones unless stated otherwise):

* ``fast_log``: fdlibm / musl ``e_log.c``. ``x = 2**k * m`` with ``m`` in
  ``[sqrt(2)/2, sqrt(2))`` (subnormals are first scaled by ``2**54``), ``f = m - 1`` (exact),
  ``s = f / (2 + f)``, ``log(1 + f) = f - f**2/2 + s * (f**2/2 + R(s**2))`` with fdlibm's
  minimax polynomial ``R`` (degree 14 in ``s``), and ``k * log(2)`` split into an exact high
  part and a low part. Error < 1 ulp (measured maximum 0.87 ulp, near ``sqrt(2)/2``;
  ``log(2**k)`` is correctly rounded).
* ``fast_logf`` (float32, positive normal inputs only): musl ``logf.c``, the same reduction
  on 32 bits with a degree-4 polynomial in ``s**2``; error < 1 ulp (measured maximum 0.75 ulp
  of float32). Sixteen lanes per 512-bit instruction; the SDCA line-search predictor uses it.
* ``fast_exp``: ``k = round(x / log 2)`` by the ``0x1.8p52`` shift trick, ``r = hi - lo`` with
  ``hi = x - k * ln2_hi`` exact and ``lo = k * ln2_lo``, ``|r| <= log(2)/2``;
  ``exp(r) = 1 + hi + t``, ``t = r**2 * q(r) - lo``, where ``q`` is a degree-10 polynomial
  interpolating ``(exp(r) - 1 - r) / r**2`` at Chebyshev nodes (computed for this module with
  60-digit decimal arithmetic; approximation error < 3e-19, 0.003 ulp) and the rounding error of
  ``1 + hi`` is recovered by Fast2Sum. The result is scaled by ``2**k1 * 2**k2`` with
  ``k1 + k2 = k``, exact up to the last multiplication, so overflow to ``inf`` and gradual
  underflow into subnormals are rounded once, from the sub-ulp accurate ``exp(r)``. Error < 1 ulp
  everywhere (measured maxima 0.76 ulp for normal results, 0.78 units of ``2**-1074`` for
  subnormal ones).
* ``fast_log1p``: the ``fast_log`` reduction applied to ``u = 1 + x`` plus fdlibm
  ``s_log1p.c``'s correction ``c / u`` for the rounding error ``c`` of ``1 + x`` (recovered
  exactly by Fast2Sum). Error < 1 ulp (measured maximum 0.83 ulp).
* ``fast_expm1``: the ``fast_exp`` reduction, then ``2**k * (1 + hi + t) - 1`` summed as
  ``(2**k - 1) + 2**k * hi + 2**k * t`` (exact terms for ``|k| <= 53``, the first sum's rounding
  error recovered by Fast2Sum). ``x < -40`` gives ``-1`` and ``k >= 57`` uses ``fast_exp``'s
  scaling. Error < 1.5 ulp; the excess over 1 ulp comes from the rounding errors of ``t``
  amplified by ``2**k`` where the result cancels (``k = 1``, ``x`` near 0.36) and near ``k = 53``
  (measured maximum 1.16 ulp).

With FMA (here) ``llvm.fmuladd`` fuses the polynomial steps; without it the same code runs
unfused and stays within the same bounds (measured maxima change by < 0.1 ulp).

Special values follow IEEE 754 / numpy: ``log(0) = -inf`` (either sign of zero), ``log(x < 0) =
nan``, ``log(inf) = inf``, ``exp(-inf) = 0``, ``exp(inf) = inf``, ``exp(x) = inf`` above
``709.782712893384``, subnormal results below ``-708.3964185322641``, ``0`` below
``-745.1332191019411``, ``nan`` in gives ``nan`` out; ``log1p(-1) = -inf``,
``log1p(x < -1) = nan``, ``expm1(-inf) = -1``, and ``log1p`` / ``expm1`` keep the sign of zero
and return subnormal ``x`` exactly. The vectorized and the scalar code paths give identical
results; they can differ from numpy's (which is not correctly rounded either) in the last bit.

Using them
----------
``fast_log``, ``fast_log_positive``, ``fast_log_normal`` and ``fast_exp`` are plain
``@njit(cache=True, nogil=True, error_model="numpy")`` functions: numba compiles each once and
LLVM inlines it into the caller's loop before vectorizing (same code, same bits), instead of
numba inlining and retyping their bodies at every call site, which cost about 2 CPU s of a first
``crfsdca train`` (BENCHMARKS §7). The others are ``@njit(inline="always")``, so numba inlines
them into any njit caller (also ``cache=True, nogil=True`` ones in other modules). numba's cache
alone tracks neither dependency; the kernels' cache folder is keyed on all their sources
(:mod:`crfsdca.kernels.cache`), so an edit here reaches every cached caller.

Loop shapes that vectorize (checked on this machine with numba 0.68 / llvmlite 0.50, by packed
``ymm`` instructions in ``inspect_asm`` and by timing)::

    for i in range(x.shape[0]):          # range(n), range(len(x)), range(x.size) all work
        out[i] = fast_log(x[i])
    s = 0.0
    for i in range(m.shape[0]):          # reduction: accumulate with add_reassoc
        s = add_reassoc(s, c[i] * d[i] * (a[i] - fast_log(m[i])) if d[i] != 0.0 else 0.0)

* Float sums: a plain ``s += term`` keeps the *whole* loop scalar (LLVM must keep the serial sum
  order without fastmath), 3-4x slower. Accumulate with ``s = add_reassoc(s, term)``: only that
  addition may be reordered, everything else stays IEEE exact.
* Conditions: selects (``v = expr if cond else 0.0``), ``if cond: s = add_reassoc(s, ...)`` and
  ``if cond: ...; continue`` before the call all vectorize (LLVM if-converts them, evaluating
  ``fast_log`` on every lane, which is harmless: no traps, and the select discards the value).
  ``break`` or ``return`` inside the loop keep it scalar.
* ``error_model``: nothing needed for these functions (their one division is emitted without
  numba's zero-division check). A ``/`` written in the caller's loop body gets that check under
  the default ``error_model="python"`` and keeps the loop scalar; use ``error_model="numpy"``.
* Arrays: index 1-d C-contiguous arrays by the loop variable (``x[i]``, ``x[i + c]``); strided
  views (``A`` layout) compile to gathers that run at scalar speed; scattered or reversed
  writes (``out[idx[i]]``, ``out[n - 1 - i]``) stay scalar. 2-d: make the last (contiguous)
  axis the inner loop. ``boundscheck=True`` did not block the simple ``range`` loops.
* Aliasing: LLVM adds a run-time overlap check; ``out is x`` (in place) runs vectorized,
  partially overlapping arrays fall back to the scalar loop (results stay correct).
* Any libm call (``np.log``, ``np.exp``, ``math.*``) left in the loop body keeps it scalar.
* No ``fastmath`` on callers: ``fastmath=True`` returns ``log(inf) = 709.78`` and
  ``exp(nan) = 0`` (its ``nnan`` / ``ninf`` flags drop the special-value selects) and lets LLVM
  reassociate the hi/lo splittings (``log`` error grows to 1.5-2.2 ulp).
* Vector width: LLVM prefers 256-bit vectors on recent Intel CPUs (4 doubles per instruction).
  With ``NUMBA_CPU_FEATURES`` set to the host features plus ``-prefer-256-bit`` it emits 512-bit
  code, about 1.7x faster on data in cache (not on data streamed from memory). That is a
  process-wide setting; :mod:`crfsdca.kernels.numerics.vector_width` makes it on AVX-512 hosts when
  ``crfsdca.kernels`` is imported (opt out with ``CRFSDCA_VECTOR_WIDTH=256``).
"""

from __future__ import annotations

import numpy as np

from crfsdca.kernels.jit import njit
from crfsdca.kernels.numerics.intrinsics import (
    _as_float,
    _as_int,
    _div,
    _fma,
    add_reassoc,
    add_reassoc32,
    logf_split,
    max_num,
)

__all__ = [
    "add_reassoc",
    "add_reassoc32",
    "approx_logf",
    "exp_into",
    "fast_exp",
    "fast_expm1",
    "fast_log",
    "fast_log1p",
    "fast_log_normal",
    "fast_log_positive",
    "fast_logf",
    "log_inplace",
    "make_map",
    "make_weighted_sum",
    "max_num",
]


# --- constants ---------------------------------------------------------------------------------

_INF = np.inf
_NAN = np.nan
_SHIFT = 6755399441055744.0  # 0x1.8p52: adding it rounds |y| < 2**51 to an integer
_SHIFT_BITS = 0x4338000000000000  # its bit pattern; bits(y + SHIFT) - SHIFT_BITS == round(y)
_TWO54 = 18014398509481984.0  # 2**54, scales subnormals to normals
_MIN_NORMAL = 2.2250738585072014e-308
_MANT_MASK = 0x000FFFFFFFFFFFFF
# Adding _BIAS_SHIFT to the bits of a positive double carries into the exponent field exactly when
# the significand is >= 0x1.6a09e (~ sqrt(2)); then k is one higher and m = significand / 2, so
# that m lands in [sqrt(2)/2, sqrt(2)) (musl's high-word trick, on all 64 bits).
_BIAS_SHIFT = (0x3FF00000 - 0x3FE6A09E) << 32
_M_BASE = 0x3FE6A09E << 32

_LN2_HI = 6.93147180369123816490e-01  # 0x3fe62e42fee00000: 32 significant bits, k*hi exact
_LN2_LO = 1.90821492927058770002e-10  # 0x3dea39ef35793c76
_INVLN2 = 1.44269504088896338700e00

# fdlibm e_log.c: R(z) ~ Lg1*s^2 + ... + Lg7*s^14, |error| < 2**-58.45
_LG = (
    6.666666666666735130e-01,
    3.999999999940941908e-01,
    2.857142874366239149e-01,
    2.222219843214978396e-01,
    1.818357216161805012e-01,
    1.531383769920937332e-01,
    1.479819860511658591e-01,
)
_LG1, _LG2, _LG3, _LG4, _LG5, _LG6, _LG7 = _LG

# single precision (musl logf.c, fdlibm e_logf.c): R(z) ~ LGF1*s^2 + ... + LGF4*s^8
_F0 = np.float32(0.0)
_F_HALF = np.float32(0.5)
_F_ONE = np.float32(1.0)
_F_TWO = np.float32(2.0)
_LN2F_HI = np.float32(6.9313812256e-01)  # 0x3f317180
_LN2F_LO = np.float32(9.0580006145e-06)  # 0x3717f7d1
_LGF1 = np.float32(0.66666662693)  # 0xaaaaaa.0p-24
_LGF2 = np.float32(0.40000972152)  # 0xccce13.0p-25
_LGF3 = np.float32(0.28498786688)  # 0x91e9ee.0p-25
_LGF4 = np.float32(0.24279078841)  # 0xf89e26.0p-26

# approx_logf: Q(f) ~ (log1p(f) - f) / f**2 on f in [sqrt(2)/2 - 1, sqrt(2) - 1], degree 6,
# interpolated at the Chebyshev nodes and rounded to float32 (|f + f**2 Q(f) - log1p(f)| < 1.2e-7)
_QF = tuple(
    np.float32(c)
    for c in (
        -0.10188586264848709,
        0.15984095633029938,
        -0.17132386565208435,
        0.19929057359695435,
        -0.24982450902462006,
        0.333341121673584,
        -0.5000008940696716,
    )
)
_QF0, _QF1, _QF2, _QF3, _QF4, _QF5, _QF6 = _QF

# q(r) ~ (exp(r) - 1 - r) / r**2 on |r| <= 0.3466 (Chebyshev interpolation, degree 10,
# |r**2 * (q - q_true)| < 3e-19)
_E = (
    0.5,
    0.1666666666666667,
    0.04166666666666667,
    0.008333333333326136,
    0.0013888888888883748,
    0.00019841269874820627,
    2.4801587325547743e-05,
    2.7557255400206422e-06,
    2.7557273643110345e-07,
    2.5105217004720745e-08,
    2.0914686968072297e-09,
)
_E0, _E1, _E2, _E3, _E4, _E5, _E6, _E7, _E8, _E9, _E10 = _E


# --- shared pieces ------------------------------------------------------------------------------


@njit(inline="always")
def _log_reduce(bits):
    """Split the bits of a positive normal double into ``(k, f)``: ``x = 2**k * (1 + f)``.

    ``1 + f`` lies in ``[sqrt(2)/2, sqrt(2))`` and ``f`` is exact. ``k`` is returned as a float.
    """
    tmp = bits + _BIAS_SHIFT
    # (tmp >> 52) & 0x7ff is the biased exponent; + SHIFT_BITS - SHIFT converts without cvtqq2pd
    kbits = ((tmp >> 52) & 0x7FF) + (_SHIFT_BITS - 1023)
    k = _as_float(kbits) - _SHIFT
    f = _as_float((tmp & _MANT_MASK) + _M_BASE) - 1.0
    return k, f


@njit(inline="always")
def _log1pf_parts(f):
    """fdlibm's ``(hfsq, s * (hfsq + R))`` for ``log(1 + f) = f - hfsq + s * (hfsq + R)``."""
    hfsq = 0.5 * f * f
    s = _div(f, 2.0 + f)
    z = s * s
    w = z * z
    t1 = w * _fma(w, _fma(w, _LG6, _LG4), _LG2)
    t2 = z * _fma(w, _fma(w, _fma(w, _LG7, _LG5), _LG3), _LG1)
    return hfsq, s * (hfsq + (t2 + t1))


@njit(inline="always")
def _exp_reduce(xc):
    """Return ``(ki, hi, t)`` with ``exp(xc) = 2**ki * (1 + hi + t)`` (``|hi| <= 0.347``)."""
    kd = _fma(xc, _INVLN2, _SHIFT)
    ki = _as_int(kd) - _SHIFT_BITS
    kd = kd - _SHIFT
    hi = xc - kd * _LN2_HI
    lo = kd * _LN2_LO
    r = hi - lo
    q = _fma(r, _E10, _E9)
    q = _fma(r, q, _E8)
    q = _fma(r, q, _E7)
    q = _fma(r, q, _E6)
    q = _fma(r, q, _E5)
    q = _fma(r, q, _E4)
    q = _fma(r, q, _E3)
    q = _fma(r, q, _E2)
    q = _fma(r, q, _E1)
    q = _fma(r, q, _E0)
    t = _fma(r * r, q, -lo)
    return ki, hi, t


@njit(inline="always")
def _one_plus(hi, t):
    """``1 + hi + t`` (``|hi| <= 0.347``, ``|t| < 0.07``), the rounding of ``1 + hi`` recovered."""
    u = 1.0 + hi
    return u + (t + (hi - (u - 1.0)))  # Fast2Sum: 1 >= |hi|


@njit(inline="always")
def _scale(y, ki):
    """``y * 2**ki`` for ``ki`` in ``[-1077, 1025]``, with one rounding (gradual underflow)."""
    # two factors, each a normal power of two; (ki + 2048) >= 0 so the shift needs no sign
    k1 = (((ki + 2048) >> 1) & 0xFFF) - 1024
    k2 = ki - k1
    return y * _as_float((k1 + 1023) << 52) * _as_float((k2 + 1023) << 52)


# --- public functions --------------------------------------------------------------------------


@njit(cache=True, nogil=True, error_model="numpy")
def fast_log(x):
    """``log(x)`` of a float64, vectorizable (fdlibm method; measured maximum error 0.87 ulp,
    ``tests/test_fastmath.py``): ``-inf`` for ``x == 0``, ``nan`` for ``x < 0`` or nan, ``inf``
    for ``inf``. Method and loop shapes: the module docstring."""
    r = fast_log_positive(x)
    r = r if x < _INF else x  # +inf -> inf, nan -> nan
    r = r if x >= 0.0 else _NAN  # negative (and nan) -> nan
    return -_INF if x == 0.0 else r


@njit(cache=True, nogil=True, error_model="numpy")
def fast_log_positive(x):
    """``fast_log`` of a positive finite float64 (subnormals included), without the selects for
    the special values: the same bits as ``fast_log`` there, a few instructions fewer. Any
    value (no trap) for 0, negatives, inf and nan, which the caller must discard.
    """
    sub = x < _MIN_NORMAL
    xs = x * _TWO54 if sub else x
    k, f = _log_reduce(_as_int(xs))
    return _log_from(k - 54.0 if sub else k, f)


@njit(cache=True, nogil=True, error_model="numpy")
def fast_log_normal(x):
    """``fast_log`` of a positive normal finite float64, without the subnormal scaling either:
    the same bits as ``fast_log`` there; any value (no trap) elsewhere."""
    k, f = _log_reduce(_as_int(x))
    return _log_from(k, f)


@njit(inline="always")
def _log_from(k, f):
    """log(2**k (1 + f)) from ``_log_reduce``'s parts."""
    hfsq, sr = _log1pf_parts(f)
    return k * _LN2_HI - ((hfsq - (sr + k * _LN2_LO)) - f)


@njit(inline="always")
def fast_logf(x):
    """Natural logarithm of a positive normal float32, vectorizable (musl ``logf``, < 1 ulp).

    Only for positive normal inputs (>= 2**-126): no special values, no subnormals. Sixteen lanes
    per 512-bit instruction; used for the single-precision line-search predictor.
    """
    k, m = logf_split(x)
    f = m - _F_ONE
    s = f / (_F_TWO + f)
    z = s * s
    w = z * z
    t1 = w * (_LGF2 + w * _LGF4)
    t2 = z * (_LGF1 + w * _LGF3)
    hfsq = _F_HALF * f * f
    return s * (hfsq + (t2 + t1)) + k * _LN2F_LO - hfsq + f + k * _LN2F_HI


@njit(inline="always")
def approx_logf(x):
    """Natural logarithm of a positive normal float32 without a division (for the line-search
    predictor, whose result only moves the start of the double-precision search).

    ``fast_logf``'s reduction ``x = 2**k (1 + f)``, then ``log(1 + f) = f + f**2 Q(f)`` with the
    degree-6 polynomial ``Q`` above and ``k log 2`` split as in ``fast_logf``. Error at most
    1.5e-7 plus half an ulp of the result (measured: all of [0.5, 2) and 5e6 random normal
    inputs; at most 4.9 float32 ulps, where ``fast_logf`` stays within one).
    """
    k, m = logf_split(x)
    f = m - _F_ONE
    q = ((((((_QF0 * f + _QF1) * f + _QF2) * f + _QF3) * f + _QF4) * f + _QF5) * f) + _QF6
    return (f * f * q + k * _LN2F_LO) + f + k * _LN2F_HI


@njit(cache=True, nogil=True, error_model="numpy")
def fast_exp(x):
    """``exp(x)`` of a float64, vectorizable (measured maximum error 0.76 ulp for normal
    results, 0.78 units of ``2**-1074`` for subnormal ones): ``inf`` above
    ``709.782712893384``, gradually underflowing subnormals down to ``5e-324``, then ``0``
    (``exp(-inf) == 0``); ``nan`` for nan. Method and loop shapes: the module docstring."""
    # clamp (nan goes to -746 here and is restored at the end); exp(-746) rounds to 0 and
    # exp(710) overflows, so the clamped values give the right 0 / inf
    xc = x if x > -746.0 else -746.0
    xc = xc if xc < 710.0 else 710.0
    ki, hi, t = _exp_reduce(xc)
    y = _scale(_one_plus(hi, t), ki)
    return y if x == x else x


@njit(inline="always")
def fast_log1p(x):
    """``log(1 + x)`` of a float64, accurate for small ``x``, vectorizable (measured maximum
    error 0.83 ulp): ``-inf`` for ``x == -1``, ``nan`` below ``-1`` or for nan, ``inf`` for
    ``inf``; zeros (with their sign) and tiny ``x`` come back unchanged.

    ``u = 1 + x`` is reduced like in ``fast_log``; the rounding error ``c`` of ``1 + x`` is
    recovered exactly (Fast2Sum) and ``c / u`` added (fdlibm ``s_log1p.c``). Two divisions.
    """
    u = 1.0 + x
    k, f = _log_reduce(_as_int(u))
    c = x - (u - 1.0) if x < 1.0 else 1.0 - (u - x)
    hfsq, sr = _log1pf_parts(f)
    r = k * _LN2_HI - ((hfsq - (sr + (k * _LN2_LO + _div(c, u)))) - f)
    r = r if x < _INF else x
    r = r if x >= -1.0 else _NAN
    r = -_INF if x == -1.0 else r
    return x if x == 0.0 else r


@njit(inline="always")
def fast_expm1(x):
    """``exp(x) - 1`` of a float64, accurate for small ``x``, vectorizable (measured maximum
    error 1.16 ulp): ``-1`` for ``x < -40`` (and ``-inf``), ``inf`` above ``709.782712893384``,
    ``nan`` for nan; zeros (with their sign) and tiny ``x`` come back unchanged.

    Same reduction as ``fast_exp``: ``exp(x) = 2**k * (1 + hi + t)``. For ``k <= 56`` the result
    is ``(2**k - 1) + 2**k * hi + 2**k * t`` (exact terms for ``|k| <= 53``, the first sum
    compensated by Fast2Sum), otherwise ``fast_exp``'s value.
    """
    xc = x if x > -40.0 else -40.0
    xc = xc if xc < 710.0 else 710.0
    ki, hi, t = _exp_reduce(xc)
    kc = ki if ki < 57 else 57  # keeps 2**kc finite; that branch is not selected then
    tk = _as_float((kc + 1023) << 52)
    # (tk - 1) + tk*hi + tk*t with the first sum's rounding error recovered by Fast2Sum
    # (|tk - 1| >= |tk * hi| whenever tk != 1, and the sum is exact when tk == 1)
    s1 = tk - 1.0
    a = tk * hi
    u = s1 + a
    e = a - (u - s1)
    y = u + (tk * t + e)
    y = y if ki < 57 else _scale(_one_plus(hi, t), ki)
    y = y if x == x else x
    return x if x == 0.0 else y


# --- loop kernels (for the benchmark and tests, and as templates of the vectorizing shapes) ----


@njit(cache=True, nogil=True, error_model="numpy")
def exp_into(src, shift, dst, off, n):
    """dst[off + p] = exp(src[p] - shift) for p < n (vectorized, < 1 ulp)."""
    out = dst[off : off + n]  # a view indexed from 0: no wraparound select, plain vector stores
    for p in range(n):
        out[p] = fast_exp(src[p] - shift)


@njit(cache=True, nogil=True, error_model="numpy")
def log_inplace(x, n):
    """x[:n] = log(x[:n]) (vectorized, < 1 ulp)."""
    for p in range(n):
        x[p] = fast_log(x[p])


def make_map(func):
    """Return an njit kernel ``kernel(x, out)`` doing ``out[i] = func(x[i])`` over 1-d arrays.

    ``func`` is any numba-callable scalar function (``fast_log``, ``np.log``, ...). The loop is
    the shape LLVM vectorizes when ``func`` allows it.
    """

    @njit(nogil=True)
    def kernel(x, out):
        for i in range(x.shape[0]):
            out[i] = func(x[i])

    return kernel


def make_weighted_sum(func, reassoc=True):
    """Return an njit kernel ``kernel(c, d, a, m)``: sum of ``c*d*(a - func(m))`` where ``d != 0``.

    This is the shape of the SDCA line-search derivative (with ``func = fast_log``). With
    ``reassoc`` the sum is accumulated with ``add_reassoc`` and vectorizes; without it, it is a
    plain ``s += ...`` and LLVM keeps the whole loop scalar.
    """
    if reassoc:

        @njit(nogil=True)
        def kernel(c, d, a, m):
            s = 0.0
            for i in range(m.shape[0]):
                s = add_reassoc(s, c[i] * d[i] * (a[i] - func(m[i])) if d[i] != 0.0 else 0.0)
            return s

    else:

        @njit(nogil=True)
        def kernel(c, d, a, m):
            s = 0.0
            for i in range(m.shape[0]):
                s += c[i] * d[i] * (a[i] - func(m[i])) if d[i] != 0.0 else 0.0
            return s

    return kernel
