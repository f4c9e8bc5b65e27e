"""Compiled (numba) kernels. Importing this package first chooses numba's cache folder
(:func:`choose_cache_dir`) and selects the vector width (:mod:`crfsdca.kernels.vector_width`),
before any kernel is compiled."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

CACHE_ENV = "NUMBA_CACHE_DIR"


def _writable(folder: Path) -> bool:
    """Whether numba can write its cache files into ``folder`` (created if missing)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def user_cache_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """``$XDG_CACHE_HOME/crfsdca/numba``, ``~/.cache/crfsdca/numba`` without it."""
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "crfsdca" / "numba"


def choose_cache_dir(package_dir: Path, environ: Mapping[str, str] = os.environ) -> Path | None:
    """The folder to give numba as its cache, or None to keep numba's choice.

    numba caches next to the sources (``__pycache__``). When that folder cannot be written
    (a system-wide or read-only install) and ``NUMBA_CACHE_DIR`` is not set, the cache goes to
    :func:`user_cache_dir`, so compiled kernels are still kept between runs.
    """
    if environ.get(CACHE_ENV) or _writable(package_dir / "__pycache__"):
        return None
    return user_cache_dir(environ)


def cache_location() -> str:
    """Where numba keeps this package's compiled kernels."""
    from numba.core import config

    return config.CACHE_DIR or str(Path(__file__).parent / "__pycache__")


def _set_cache_dir() -> None:
    folder = choose_cache_dir(Path(__file__).parent)
    if folder is not None:
        from numba.core import config

        os.environ[CACHE_ENV] = str(folder)
        config.reload_config()


_set_cache_dir()

from crfsdca.kernels import vector_width  # noqa: E402

vector_width.enable()
