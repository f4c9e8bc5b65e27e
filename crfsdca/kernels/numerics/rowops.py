"""Sums and scatters of short rows (K labels), written as explicit eight-lane vector code.

The node scores gather one row of K emission weights per attribute entry
(``chain.unary_scores``), the forward pass adds K rows of the transition matrix per position
(``chain.scaled_forward``), and the primal direction scatters each token's node differences into
one row per attribute entry (``direction.primal_direction``). K is small (9-26 on the datasets
here).
LLVM vectorizes a loop over one such row 32 doubles at a time (eight lanes, four vectors
interleaved), so a row of 26 runs through its remainder loops: mostly loop control, and every
row of a sum waits on the previous one through memory.

The kernels here take all the rows of a token (or a position) in one call and walk the K
labels in chunks of eight lanes, the last one masked (``llvm.masked.load`` /
``llvm.masked.store``: one instruction each with AVX-512; LLVM splits them on narrower
machines):

* ``rows_sum_into`` / ``rows_sum``: up to four chunks (32 labels) of the output stay in
  registers, with two accumulators each (even and odd rows), while every row is added with a
  fused multiply-add;
* ``scale_rows_into``: a chunk of the source stays in a register while it is added to every
  destination row.

The results can differ from plain loops in the last bits: fused multiply-adds, and the even/odd
split of the sums. No bounds checks: the callers own the index arrays (validated attribute ids
and the slots of ``crfsdca.features.layout.sequence_layout``).

Measured on OCR (K = 26, 28 entries per token), in a compiled SDCA epoch: node scores
1.55 -> 0.9 ns and primal direction 1.24 -> 1.0 ns per pairwise entry, forward pass 1050 -> 890
cycles per position.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["rows_sum", "rows_sum_into", "scale_rows_into"]

_W = 8  # lanes per chunk
_G = 4  # chunks per pass of rows_sum (32 labels; more take several passes)
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
_VEC = ir.VectorType(ir.DoubleType(), _W)
_MASK = ir.VectorType(ir.IntType(1), _W)
_ALIGN = ir.Constant(_I32, 8)
_ZERO = ir.Constant(_VEC, [0.0] * _W)


def _is_c_1d(ty, dtype) -> bool:
    return isinstance(ty, types.Array) and ty.ndim == 1 and ty.layout == "C" and ty.dtype == dtype


def _row_args(out, src, rows, coefs):
    """Signature of (out, src, rows, coefs, p0, p1, K), or None if the types do not fit."""
    f64 = types.float64
    if not (
        _is_c_1d(out, f64)
        and _is_c_1d(src, f64)
        and (isinstance(rows, types.NoneType) or _is_c_1d(rows, types.int64))
        and _is_c_1d(coefs, f64)
    ):
        return None
    return types.void(out, src, rows, coefs, types.intp, types.intp, types.intp)


class _Emitter:
    """IR helpers for one kernel: array data pointers, masked vector loads and stores."""

    def __init__(self, context, builder, signature, args):
        self.builder = builder
        self.data = [
            context.make_array(ty)(context, builder, value).data
            if isinstance(ty, types.Array)
            else None
            for ty, value in zip(signature.args, args, strict=True)
        ]
        module = builder.module
        ptr = _VEC.as_pointer()
        self._fma = cgutils.get_or_insert_function(
            module, ir.FunctionType(_VEC, [_VEC, _VEC, _VEC]), "llvm.fmuladd.v8f64"
        )
        self._load = cgutils.get_or_insert_function(
            module, ir.FunctionType(_VEC, [ptr, _I32, _MASK, _VEC]), "llvm.masked.load.v8f64.p0"
        )
        self._store = cgutils.get_or_insert_function(
            module,
            ir.FunctionType(ir.VoidType(), [_VEC, ptr, _I32, _MASK]),
            "llvm.masked.store.v8f64.p0",
        )

    def const(self, value):
        return ir.Constant(_I64, value)

    def splat(self, value, vty=_VEC):
        vec = ir.Constant(vty, [ir.Undefined] * _W)
        for j in range(_W):
            vec = self.builder.insert_element(vec, value, ir.Constant(_I32, j))
        return vec

    def mask(self, K, base):
        """Lanes base + j < K."""
        lanes = ir.Constant(ir.VectorType(_I64, _W), list(range(_W)))
        rem = self.splat(self.builder.sub(K, base), ir.VectorType(_I64, _W))
        return self.builder.icmp_signed("<", lanes, rem)

    def ptr(self, data, offset):
        return self.builder.bitcast(self.builder.gep(data, [offset]), _VEC.as_pointer())

    def load(self, data, offset, mask):
        return self.builder.call(self._load, [self.ptr(data, offset), _ALIGN, mask, _ZERO])

    def store(self, value, data, offset, mask):
        self.builder.call(self._store, [value, self.ptr(data, offset), _ALIGN, mask])

    def fma(self, a, x, y):
        return self.builder.call(self._fma, [a, x, y])

    def scalar(self, data, index):
        return self.builder.load(self.builder.gep(data, [index]))

    def row(self, rows_data, p):
        """rows[p], or p when rows is None."""
        return p if rows_data is None else self.scalar(rows_data, p)


def _rows_sum_codegen(accumulate: bool):
    def codegen(context, builder, signature, args):
        em = _Emitter(context, builder, signature, args)
        out_d, src_d, rows_d, coefs_d = em.data[:4]
        p0, p1, K = args[4:]
        one = em.const(1)
        span = _W * _G
        n_groups = builder.sdiv(builder.add(K, em.const(span - 1)), em.const(span))
        n_rows = builder.sub(p1, p0)
        n_pairs = builder.ashr(n_rows, one)
        with cgutils.for_range(builder, n_groups) as group:
            start = builder.mul(group.index, em.const(span))
            bases = [builder.add(start, em.const(_W * j)) for j in range(_G)]
            masks = [em.mask(K, b) for b in bases]
            pairs = zip(bases, masks, strict=True)
            first = [em.load(out_d, b, m) if accumulate else _ZERO for b, m in pairs]
            even = [cgutils.alloca_once_value(builder, v) for v in first]
            odd = [cgutils.alloca_once_value(builder, _ZERO) for _ in range(_G)]

            def add_row(p, accs):
                c = em.splat(em.scalar(coefs_d, p))
                row_start = builder.mul(em.row(rows_d, p), K)
                for b, m, acc in zip(bases, masks, accs, strict=True):
                    x = em.load(src_d, builder.add(row_start, b), m)
                    builder.store(em.fma(c, x, builder.load(acc)), acc)

            with cgutils.for_range(builder, n_pairs) as pair:
                p = builder.add(p0, builder.shl(pair.index, one))
                add_row(p, even)
                add_row(builder.add(p, one), odd)
            with builder.if_then(builder.icmp_signed("!=", builder.shl(n_pairs, one), n_rows)):
                add_row(builder.sub(p1, one), even)
            for b, m, e, o in zip(bases, masks, even, odd, strict=True):
                em.store(builder.fadd(builder.load(e), builder.load(o)), out_d, b, m)
        return context.get_dummy_value()

    return codegen


@intrinsic
def rows_sum_into(typingctx, out, src, rows, coefs, p0, p1, K):
    """out[:K] += sum_{p0 <= p < p1} coefs[p] * src[rows[p] K : rows[p] K + K].

    out, src, coefs: 1-d C-contiguous float64; rows: 1-d C-contiguous int64, or None for
    rows[p] = p (then the sum is coefs[p0:p1] @ src viewed as (., K)); p0 <= p1. Each output
    element is (out + even rows) + odd rows, both parts summed in row order. out must not overlap
    a row.
    """
    sig = _row_args(out, src, rows, coefs)
    return None if sig is None else (sig, _rows_sum_codegen(True))


@intrinsic
def rows_sum(typingctx, out, src, rows, coefs, p0, p1, K):
    """out[:K] = sum_{p0 <= p < p1} coefs[p] * src[rows[p] K : rows[p] K + K]: as
    :func:`rows_sum_into`, without reading out."""
    sig = _row_args(out, src, rows, coefs)
    return None if sig is None else (sig, _rows_sum_codegen(False))


def _scale_rows_codegen(context, builder, signature, args):
    em = _Emitter(context, builder, signature, args)
    x_d, dst_d, rows_d, coefs_d = em.data[:4]
    p0, p1, K = args[4:]
    n_chunks = builder.sdiv(builder.add(K, em.const(_W - 1)), em.const(_W))
    with cgutils.for_range(builder, n_chunks) as chunk:
        base = builder.mul(chunk.index, em.const(_W))
        mask = em.mask(K, base)
        xv = em.load(x_d, base, mask)
        with cgutils.for_range(builder, builder.sub(p1, p0)) as entry:
            p = builder.add(p0, entry.index)
            c = em.splat(em.scalar(coefs_d, p))
            off = builder.add(builder.mul(em.row(rows_d, p), K), base)
            em.store(em.fma(c, xv, em.load(dst_d, off, mask)), dst_d, off, mask)
    return context.get_dummy_value()


@intrinsic
def scale_rows_into(typingctx, x, dst, rows, coefs, p0, p1, K):
    """dst[rows[p] K : rows[p] K + K] += coefs[p] * x[:K] for p = p0, ..., p1 - 1.

    x, dst, coefs: 1-d C-contiguous float64; rows: 1-d C-contiguous int64; p0 <= p1. A repeated
    row gets its terms in order; x must not overlap a destination row.
    """
    if isinstance(rows, types.NoneType):
        return None
    sig = _row_args(x, dst, rows, coefs)
    return None if sig is None else (sig, _scale_rows_codegen)
