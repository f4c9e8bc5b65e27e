"""Compiled (numba) kernels, by role: ``numerics`` (vectorizable math, no structure or solver
named), ``structures`` (inference on chains, trees and junction trees, and each structure's
primitives), ``solvers`` (SDCA, SAG-NUS, OEG and CRFsuite's algorithms, written once against
the primitives); ``primitives`` is the interface between the last two and ``jit`` the ``njit``
they are all compiled with.

Importing this package first chooses the folder numba caches the kernels in, one per digest of
their sources (:mod:`crfsdca.kernels.cache`), and selects the vector width
(:mod:`crfsdca.kernels.numerics.vector_width`), before any kernel is compiled."""

from __future__ import annotations

from crfsdca.kernels import cache
from crfsdca.kernels.numerics import vector_width

cache.prepare()
vector_width.enable()


def cache_location() -> str:
    """Where numba keeps this package's compiled kernels."""
    folder = cache.current().folder
    return str(folder) if folder is not None else "none (no writable folder: compiled each run)"
