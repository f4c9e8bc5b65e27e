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

A callee's code is never run as such either: numba links the callee's LLVM module into each
caller's and optimises and emits the caller's whole module (as its ``@overload`` functions and
internal subroutines are). So a callee is lowered into a :class:`CalleeLibrary`, which keeps its
function-optimised IR for its callers to link and does nothing more: no module-wide optimisation
(its caller's covers it) and no machine code (nothing would call it). It is cached as that IR.
The structure primitives (``kernels.primitives.implements``, numba overloads) are compiled the
same way (:class:`CalleeCompiler` as their pipeline). A first ``train`` compiles about a third
less (BENCHMARKS.md section 7), and the kernels compute the same numbers bit for bit. The
environments of the callees linked into a kernel (what a callee's exceptions with run-time
arguments need) are set when the kernel is compiled, as numba does when it loads a kernel from
its cache.
"""

from __future__ import annotations

import types as pytypes

import numba
from llvmlite import binding as llvm
from numba.core import caching, compiler, types
from numba.core.codegen import JITCodeLibrary
from numba.core.compiler_machinery import LoweringPass, register_pass
from numba.core.registry import CPUDispatcher
from numba.core.typed_passes import AnnotateTypes

from crfsdca.kernels.cache import LOCATORS, KernelCache, kernel_cache

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
            callee = numba.njit(pipeline_class=CalleeCompiler, **options, **CALLEE_OPTIONS)(copy)
            if self._cache_enabled:
                callee._cache = kernel_cache(CalleeCache, copy)
            callee = self.__dict__.setdefault("_callee", callee)
        return callee

    @property
    def _numba_type_(self):
        return types.Dispatcher(self.callee)

    def enable_caching(self) -> None:
        self._cache = kernel_cache(KernelCache, self.py_func)

    def add_overload(self, cres):
        super().add_overload(cres)
        for env in cres._find_referenced_environments():  # its own and its callees'
            cres.library.codegen.set_env(env.env_name, env)


def njit(func=None, *, cache: bool = False, **options):
    """``numba.njit`` (same arguments) whose callers compile without its Python wrappers."""
    if func is not None:
        return njit(cache=cache, **options)(func)

    def decorate(f):
        if options.get("inline", "never") != "never":
            inlined = numba.njit(**options)(f)
            if cache:
                inlined._cache = kernel_cache(KernelCache, f)
            return inlined
        kernel = Kernel(py_func=f, locals={}, targetoptions={"nopython": True, **options})
        kernel._cache_enabled = cache
        if cache:
            kernel.enable_caching()
        return kernel

    return decorate


class _Unplaced:
    """A callee's view of numba's code generator: its environment has no address to set (the
    callee is in no executable module; each caller sets it in its own)."""

    def __init__(self, codegen) -> None:
        self._codegen = codegen

    def set_env(self, env_name, env) -> None:
        pass

    def __getattr__(self, name):
        return getattr(self._codegen, name)


class CalleeLibrary(JITCodeLibrary):
    """A callee's code: its functions' optimised LLVM IR, linked by its callers, never emitted."""

    @property
    def codegen(self):
        return _Unplaced(self._codegen)

    def _optimize_final_module(self) -> None:
        pass  # the caller optimises the module this one is linked into

    def _finalize_final_module(self) -> None:
        self._finalize_dynamic_globals()
        self._verify_declare_only_symbols()
        self._finalized = True  # not added to the execution engine: no machine code

    def get_pointer_to_function(self, name) -> int:
        self._ensure_finalized()
        return 0

    def serialize_using_object_code(self):
        return self.serialize_using_bitcode()  # cached as IR: there is no object code

    @classmethod
    def from_bitcode(cls, codegen, name: str, bitcode: bytes) -> CalleeLibrary:
        library = cls(codegen, name)
        library._final_module = llvm.parse_bitcode(bitcode)
        library._finalize_final_module()
        return library


@register_pass(mutates_CFG=False, analysis_only=False)
class _LowerIntoCalleeLibrary(LoweringPass):
    """Before numba's lowering: the function is lowered into a :class:`CalleeLibrary`."""

    _name = "crfsdca_callee_library"

    def __init__(self) -> None:
        LoweringPass.__init__(self)

    def run_pass(self, state) -> bool:
        state.library = CalleeLibrary(state.targetctx.codegen(), state.func_id.func_qualname)
        state.library.enable_object_caching()
        return True


class CalleeCompiler(compiler.Compiler):
    """numba's nopython pipeline, lowering into a :class:`CalleeLibrary`."""

    def define_pipelines(self):
        pipeline = compiler.DefaultPassBuilder.define_nopython_pipeline(self.state)
        pipeline.add_pass_after(_LowerIntoCalleeLibrary, AnnotateTypes)
        pipeline.finalize()
        return [pipeline]


class _CalleeCacheImpl(caching.CompileResultCacheImpl):
    _locator_classes = LOCATORS

    def rebuild(self, target_context, payload):
        (name, kind, bitcode), *rest = payload
        if kind != "bitcode":  # an entry written before callees were kept as IR
            return super().rebuild(target_context, payload)
        fndesc, env, signature, objectmode, lifted, typeann, reload_init, envs = rest
        for init in reload_init or ():
            init()
        library = CalleeLibrary.from_bitcode(target_context.codegen(), name, bitcode)
        return compiler.CompileResult(
            target_context=target_context,
            typing_context=target_context.typing_context,
            library=library,
            environment=env,
            entry_point=target_context.get_executable(library, fndesc, env),
            fndesc=fndesc,
            type_annotation=typeann,
            signature=signature,
            objectmode=objectmode,
            lifted=lifted,
            typing_error=None,
            call_helper=None,
            metadata=None,
            reload_init=reload_init,
            referenced_envs=envs,
        )


class CalleeCache(caching.FunctionCache):
    """numba's cache of a function, storing a :class:`CalleeLibrary` as its IR."""

    _impl_class = _CalleeCacheImpl
