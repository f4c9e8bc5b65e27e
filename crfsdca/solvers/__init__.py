"""The solvers, one module each, and what they share: the dual state, samplers, the monitor,
traces and checkpoints.

The registry (:data:`SOLVERS`, name -> solver class) is loaded on first use: importing a shared
module such as :mod:`crfsdca.solvers.trace` does not load the numba kernels.
"""

from importlib import import_module

_REGISTRY = {
    "AP", "AROW", "L2SGD", "LBFGS", "OEG", "PA", "SAGNUS", "SDCA", "SOLVERS", "SPDC", "LBFGSConfig",
    "SAGNUSSkip", "SDCAConfig", "SolverConfig", "SolverResult",
}  # fmt: skip

__all__ = ["LBFGS", "SDCA", "SOLVERS", "LBFGSConfig", "SDCAConfig", "SolverConfig", "SolverResult"]


def __getattr__(name: str):
    if name in _REGISTRY:
        return getattr(import_module("crfsdca.solvers.registry"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
