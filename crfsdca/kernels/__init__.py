"""Compiled (numba) kernels. Importing this package first chooses the folder numba caches them
in, one per digest of their sources (:mod:`crfsdca.kernels.cache`), and selects the vector
width (:mod:`crfsdca.kernels.vector_width`), before any kernel is compiled."""

from __future__ import annotations

from crfsdca.kernels import cache, vector_width

cache.prepare()
vector_width.enable()


def cache_location() -> str:
    """Where numba keeps this package's compiled kernels."""
    folder = cache.current().folder
    return str(folder) if folder is not None else "none (no writable folder: compiled each run)"
