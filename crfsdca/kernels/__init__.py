"""Compiled (numba) kernels, by role: ``numerics`` (vectorizable math, no structure or solver
named), ``structures`` (inference on chains, trees and junction trees, and each structure's
primitives), ``solvers`` (SDCA, SAG-NUS, OEG and CRFsuite's algorithms, written once against
the primitives); ``primitives`` is the interface between the last two and ``jit`` the ``njit``
they are all compiled with.

Importing this package first chooses numba's cache folder (:func:`choose_cache_dir`), empties it
when the sources it was compiled from have changed (:func:`drop_stale_cache`), and selects the
vector width (:mod:`crfsdca.kernels.numerics.vector_width`), before any kernel is compiled."""

from __future__ import annotations

import hashlib
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


#: the stamp numba's cache folder keeps of the sources its kernels were compiled from
STAMP = "crfsdca-sources.sha256"


def sources_fingerprint(package_dir: Path) -> str:
    """A digest of what compiled kernels depend on: the text of every kernel module and of the
    layout module whose named tuple they take, and where every module of the package lives.

    numba checks a cached kernel against its own file only: a kernel whose callee in another
    module changed, or whose argument types moved to another module, would be loaded stale
    (or fail to load). Any change here empties the cache instead.
    """
    digest = hashlib.sha256()
    modules = sorted(p.relative_to(package_dir).as_posix() for p in package_dir.rglob("*.py"))
    for name in modules:
        digest.update(name.encode() + b"\0")
        if name.startswith("kernels/") or name == "features/layout.py":
            digest.update((package_dir / name).read_bytes() + b"\0")
    return digest.hexdigest()


def drop_stale_cache(folder: Path, fingerprint: str, caches: Path | None = None) -> bool:
    """Delete numba's cache files below ``caches`` (default: ``folder``) unless ``folder``'s
    stamp is ``fingerprint``; then stamp it. Returns True when files were dropped (or the
    folder was not stamped yet). Next to the sources, numba keeps a ``__pycache__`` per
    subpackage: ``caches`` is then the kernels' folder, stamped in its own ``__pycache__``."""
    caches = folder if caches is None else caches
    stamp = folder / STAMP
    try:
        if stamp.read_text() == fingerprint:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".stamp-")
        with os.fdopen(fd, "w") as fh:
            fh.write(fingerprint)
        os.replace(tmp, stamp)  # stamped first: a process starting now keeps what follows
        for path in [*caches.rglob("*.nbi"), *caches.rglob("*.nbc")]:
            path.unlink(missing_ok=True)
    except OSError:
        return False  # not ours to clean (read-only): numba's own checks still apply
    return True


def cache_location() -> str:
    """Where numba keeps this package's compiled kernels."""
    from numba.core import config

    return config.CACHE_DIR or str(Path(__file__).parent / "__pycache__")


def _set_cache_dir() -> None:
    here = Path(__file__).parent
    user_set = bool(os.environ.get(CACHE_ENV))
    folder = choose_cache_dir(here)
    if folder is not None:
        from numba.core import config

        os.environ[CACHE_ENV] = str(folder)
        config.reload_config()
    if not user_set:  # a folder the user chose is the user's to manage
        # next to the sources, the stamp is in kernels/__pycache__ and the caches in every
        # subpackage's __pycache__
        stamped = folder or here / "__pycache__"
        drop_stale_cache(stamped, sources_fingerprint(here.parent), caches=folder or here)


_set_cache_dir()

from crfsdca.kernels.numerics import vector_width  # noqa: E402

vector_width.enable()
