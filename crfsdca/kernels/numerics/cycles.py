"""A cycle counter readable inside compiled loops (LLVM ``llvm.readcyclecounter``).

``cycles()`` returns the processor's time-stamp counter (``rdtsc`` on x86, 0 where the target has
none). It costs a few tens of cycles, so kernels can split their own time between phases
(e.g. the SDCA line search against the whole step) without leaving compiled code; callers turn
cycle fractions into seconds with a wall clock around the kernel call.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def cycles(typingctx):
    """Current value of the cycle counter (int64)."""
    sig = types.int64()

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.IntType(64), [])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.readcyclecounter")
        return builder.call(fn, [])

    return sig, codegen
