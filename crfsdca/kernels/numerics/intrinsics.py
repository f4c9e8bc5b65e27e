"""LLVM instructions numba does not expose, as ``@intrinsic`` functions: bit casts between
float64 and int64, a division without numba's zero check, ``llvm.fmuladd`` and ``llvm.maxnum``,
additions flagged ``reassoc`` (so that LLVM may vectorize a sum), and the float32 logarithm's
bit-level reduction. They are the building blocks of :mod:`crfsdca.kernels.numerics.fastmath` and of
the vectorized sums in the kernels; being LLVM-level, nothing numba-specific in them blocks
vectorization.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["add_reassoc", "add_reassoc32", "max_num"]


@intrinsic
def _as_int(typingctx, x):
    """Reinterpret the bits of a float64 as an int64 (LLVM ``bitcast``)."""
    sig = types.int64(types.float64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return sig, codegen


@intrinsic
def _as_float(typingctx, i):
    """Reinterpret the bits of an int64 as a float64 (LLVM ``bitcast``)."""
    sig = types.float64(types.int64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return sig, codegen


@intrinsic
def _div(typingctx, a, b):
    """Plain IEEE ``a / b`` (LLVM ``fdiv``), without numba's zero-division check."""
    sig = types.float64(types.float64, types.float64)

    def codegen(context, builder, signature, args):
        return builder.fdiv(args[0], args[1])

    return sig, codegen


@intrinsic
def _fma(typingctx, a, b, c):
    """``a * b + c`` via ``llvm.fmuladd``: one fused rounding where the CPU has FMA, else two."""
    sig = types.float64(types.float64, types.float64, types.float64)

    def codegen(context, builder, signature, args):
        d = ir.DoubleType()
        fnty = ir.FunctionType(d, [d, d, d])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.fmuladd.f64")
        return builder.call(fn, args)

    return sig, codegen


@intrinsic
def add_reassoc(typingctx, acc, v):
    """``acc + v`` flagged ``reassoc``, so that LLVM may vectorize a sum accumulated with it.

    Without fastmath LLVM keeps a float sum in source order, which keeps a whole loop scalar.
    Writing the accumulation as ``s = add_reassoc(s, term)`` allows reordering of that sum only
    (LLVM then keeps several partial sums and adds them at the end, like a pairwise sum; the
    result may differ from the serial sum by rounding), while every other operation in the loop
    stays exact IEEE arithmetic. Both operands are float64, or both float32.
    """
    if acc not in (types.float64, types.float32) or v != acc:
        return None
    sig = acc(acc, acc)

    def codegen(context, builder, signature, args):
        return builder.fadd(args[0], args[1], flags=("reassoc",))

    return sig, codegen


add_reassoc32 = add_reassoc  # the float32 sums of the line search read better with the width


@intrinsic
def max_num(typingctx, a, b):
    """IEEE maxNum of two float64 (``llvm.maxnum``): the larger, or the other one if one is nan.

    Unlike ``max`` (a compare and branch per element, about 1 ns), LLVM vectorizes a reduction
    ``m = max_num(m, x[i])`` (0.2 ns per element for K^2 = 676 entries here).
    """
    sig = types.float64(types.float64, types.float64)

    def codegen(context, builder, signature, args):
        d = ir.DoubleType()
        fnty = ir.FunctionType(d, [d, d])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.maxnum.f64")
        return builder.call(fn, args)

    return sig, codegen


@intrinsic
def logf_split(typingctx, x):
    """(k, m) of x = 2**k * m, m in [sqrt(2)/2, sqrt(2)), both float32 (x positive normal):
    musl's logf reduction on the bits of x plus an offset that makes bits >> 23 equal k + 127."""
    f32 = types.float32
    sig = types.UniTuple(f32, 2)(f32)

    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        bits = builder.add(builder.bitcast(args[0], i32), ir.Constant(i32, 0x3F800000 - 0x3F3504F3))
        shifted = builder.ashr(bits, ir.Constant(i32, 23))
        k = builder.sitofp(builder.sub(shifted, ir.Constant(i32, 0x7F)), ir.FloatType())
        low = builder.and_(bits, ir.Constant(i32, 0x007FFFFF))
        m = builder.bitcast(builder.add(low, ir.Constant(i32, 0x3F3504F3)), ir.FloatType())
        return context.make_tuple(builder, signature.return_type, [k, m])

    return sig, codegen
