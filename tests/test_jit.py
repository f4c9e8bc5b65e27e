"""crfsdca.kernels.jit: kernels compiled without Python wrappers where only kernels call them."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
from numba.core.registry import CPUDispatcher

from crfsdca.kernels.jit import CALLEE_SUFFIX, CalleeLibrary, Kernel, njit
from crfsdca.kernels.structures import chain

ROOT = Path(__file__).resolve().parents[1]


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


def test_a_callee_is_linked_into_its_caller_and_never_emitted():
    _scale_all(np.ones(2), 1.0)
    (cres,) = _scale.callee.overloads.values()
    assert isinstance(cres.library, CalleeLibrary)
    assert cres.library._compiled_object is None  # no machine code was generated
    assert cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name) == 0
    (caller,) = _scale_all.overloads.values()  # linked the callee's IR, emitted and ran it
    assert not isinstance(caller.library, CalleeLibrary) and caller.library._compiled_object


KERNELS = """
    import numpy as np
    from crfsdca.kernels.jit import njit

    @njit(cache=True)
    def check(x):
        if x < 0.0:
            raise ValueError("negative", x)  # run-time arguments: the callee's environment
        return 2.0 * x

    @njit(cache=True)
    def total(xs):
        s = 0.0
        for x in xs:
            s += check(x)
        return s
"""

RUN = """
    import json, sys
    import numpy as np
    import kernels
    out = {"total": kernels.total(np.array([0.5, 1.25]))}
    try:
        kernels.total(np.array([1.0, -3.0]))
    except ValueError as e:
        out["error"] = list(e.args)
    stats = [kernels.total.stats, kernels.check.callee.stats]
    out["hits"] = [sum(s.cache_hits.values()) for s in stats]
    out["misses"] = [sum(s.cache_misses.values()) for s in stats]
    print(json.dumps(out))
"""


def test_a_cached_callee_is_linked_by_a_caller_compiled_in_another_process(tmp_path):
    """A callee cached as IR serves a caller that was not cached, in a new process, with the
    same results and the callee's exceptions carrying their run-time arguments."""
    (tmp_path / "kernels.py").write_text(textwrap.dedent(KERNELS))
    cache = tmp_path / "cache"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])

    def run():
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(RUN)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    want = {"total": 3.5, "error": ["negative", -3.0]}
    first = run()
    assert first == {**want, "hits": [0, 0], "misses": [1, 1]}
    for entry in cache.rglob("kernels.total-*"):  # the caller is compiled again
        entry.unlink()
    second = run()
    assert second == {**want, "hits": [0, 1], "misses": [1, 0]}
    assert run() == {**want, "hits": [1, 0], "misses": [0, 0]}  # all from the cache
