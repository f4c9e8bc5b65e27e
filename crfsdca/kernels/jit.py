"""The ``njit`` every kernel is compiled with: numba's, minus the wrappers a callee never uses.

numba compiles each ``@njit`` function that another one calls as a function of its own, and
gives it a CPython wrapper (to be called from Python) and a C-function wrapper, which are
lowered, optimised and emitted into machine code like the function itself. Inside crfsdca most
kernels are only ever called from other kernels, and those wrappers were a sixth of the
compilation of a first ``crfsdca train`` (4 of 24 CPU s; ``benchmarks/profile_compile.py``).

``njit`` here returns an ordinary numba dispatcher (the one Python calls, with both wrappers)
whose numba type, the one a calling kernel sees, is a second dispatcher of the same function
compiled without them (``no_cpython_wrapper``, ``no_cfunc_wrapper``: numba's own options for
functions that are only called from compiled code, as its ``@overload`` functions are). The two
are compiled and cached separately (the second under the qualified name plus ``__callee``), so
what Python calls always has its wrapper, and the machine code is the same. Functions inlined
by numba (``inline="always"``) are never compiled on their own and keep numba's dispatcher.
"""

from __future__ import annotations

import types as pytypes

import numba
from numba.core import types
from numba.core.registry import CPUDispatcher

__all__ = ["njit"]

#: numba's options for a function only compiled code calls
CALLEE_OPTIONS = {"no_cpython_wrapper": True, "no_cfunc_wrapper": True}
#: added to a callee's qualified name: its own entries in numba's cache
CALLEE_SUFFIX = "__callee"


class Kernel(CPUDispatcher):
    """A numba dispatcher whose calls from compiled code go to :attr:`callee`."""

    @property
    def callee(self) -> CPUDispatcher:
        """The same function compiled without wrappers (created at first use)."""
        callee = self.__dict__.get("_callee")
        if callee is None:
            func = self.py_func
            copy = pytypes.FunctionType(
                func.__code__, func.__globals__, func.__name__, func.__defaults__, func.__closure__
            )
            copy.__qualname__ = func.__qualname__ + CALLEE_SUFFIX
            copy.__kwdefaults__ = func.__kwdefaults__
            copy.__doc__ = func.__doc__
            options = {k: v for k, v in self.targetoptions.items() if k != "nopython"}
            callee = numba.njit(cache=self._cache_enabled, **options, **CALLEE_OPTIONS)(copy)
            callee = self.__dict__.setdefault("_callee", callee)
        return callee

    @property
    def _numba_type_(self):
        return types.Dispatcher(self.callee)


def njit(func=None, *, cache: bool = False, **options):
    """``numba.njit`` (same arguments) whose callers compile without its Python wrappers."""
    if func is not None:
        return njit(cache=cache, **options)(func)
    if options.get("inline", "never") != "never":
        return numba.njit(cache=cache, **options)

    def decorate(f):
        kernel = Kernel(py_func=f, locals={}, targetoptions={"nopython": True, **options})
        kernel._cache_enabled = cache
        if cache:
            kernel.enable_caching()
        return kernel

    return decorate
