"""crfsdca.kernels.jit: kernels compiled without Python wrappers where only kernels call them."""

import numpy as np
from numba.core.registry import CPUDispatcher

from crfsdca.kernels import chain
from crfsdca.kernels.jit import CALLEE_SUFFIX, Kernel, njit


@njit(nogil=True)
def _scale(x, a):
    return a * x + 1.0


@njit(nogil=True)
def _scale_all(xs, a):
    out = np.empty_like(xs)
    for i in range(xs.shape[0]):
        out[i] = _scale(xs[i], a)
    return out


@njit(inline="always")
def _inlined(x):
    return x - 1.0


@njit
def _uses_inlined(x):
    return _inlined(x) * 2.0


def test_python_and_a_kernel_call_the_same_function():
    xs = np.array([0.5, -2.0, 3.25])
    want = [_scale(x, 3.0) for x in xs]  # from Python: the dispatcher with its wrapper
    assert want == [2.5, -5.0, 10.75]
    np.testing.assert_array_equal(_scale_all(xs, 3.0), want)  # from a kernel: the callee


def test_a_calling_kernel_compiles_the_callee_without_wrappers():
    _scale_all(np.ones(2), 1.0)
    callee = _scale.callee
    assert callee.signatures and callee.py_func.__qualname__ == "_scale" + CALLEE_SUFFIX
    assert callee.targetoptions["no_cpython_wrapper"] and callee.targetoptions["no_cfunc_wrapper"]
    assert callee.targetoptions["nogil"]  # the kernel's own options carry over
    assert not _scale_all.__dict__.get("_callee")  # called from Python only: no callee made
    assert _scale.py_func.__qualname__ == "_scale"  # Python's dispatcher keeps its name


def test_inlined_functions_keep_numbas_dispatcher():
    assert type(_inlined) is CPUDispatcher and isinstance(_scale, Kernel)
    assert _uses_inlined(4.0) == 6.0


def test_cached_kernels_cache_their_callee_apart():
    """A package kernel and its callee have cache files of their own names (numba's cache
    index is keyed by qualified name, so a callee never loads an entry without its wrapper)."""
    kernel = chain.transition_exp
    assert kernel._cache_enabled and kernel._cache is not None
    callee_cache = kernel.callee._cache
    assert callee_cache is not None
    assert callee_cache._cache_file._index_name != kernel._cache._cache_file._index_name
    assert CALLEE_SUFFIX in callee_cache._cache_file._index_name
