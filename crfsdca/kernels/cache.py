"""numba's cache of the kernels, one folder per digest of the kernels' sources.

numba checks a cached function against the text of its own file only: a kernel whose callee in
another module changed (or an ``inline="always"`` function, a structure primitive, a named
tuple it takes) would be loaded as it was compiled, stale. Here every kernel of the package is
cached in a folder named after a digest of all of them (:func:`sources_fingerprint`), through a
locator of numba's cache (:class:`DigestLocator`): edited sources make another folder, so
code compiled from other sources is never found, whichever process wrote it and whenever (a
process still running the old code, the compile-ahead process, a second checkout, a ``git
pull`` into an editable install). numba's own check of the file's text becomes the digest.

The folders live under one root (:func:`cache_root`): ``$NUMBA_CACHE_DIR/crfsdca`` when numba's
cache folder is set, else ``kernels/__pycache__/numba`` next to the sources, else (a read-only
install) ``$XDG_CACHE_HOME/crfsdca/numba`` (``~/.cache/crfsdca/numba``). Each folder lists the
packages that use it (``users/``: one file per package folder, its path). A package importing
the kernels cleans the root up (:func:`clean_up`, when it holds other folders): a folder is
kept while a package registered in it still has those sources, every other one is
removed (renamed first, so that a concurrent process never reads a half-removed folder: it
finds the files or it does not, and then compiles). Removing is never what keeps code fresh,
the digest is: a process that writes into a folder after it was removed only leaves files no
other sources will look up, and the next clean-up removes them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from numba.core import caching

__all__ = [
    "DigestLocator",
    "KernelCache",
    "cache_root",
    "clean_up",
    "current",
    "kernel_cache",
    "prepare",
    "sources_fingerprint",
    "user_cache_dir",
]

#: the package whose kernels are cached here (``crfsdca``)
PACKAGE_DIR = Path(__file__).resolve().parents[1]
#: hex digits of the digest that name a folder
DIGEST_LENGTH = 16
#: the folder of a digest that lists its users
USERS = "users"


def sources_fingerprint(package_dir: Path) -> str:
    """A digest of what compiled kernels depend on: the text of every kernel module and of the
    layout module whose named tuple they take, and where every module of the package lives (a
    moved module changes the names numba's cached types refer to)."""
    digest = hashlib.sha256()
    modules = sorted(p.relative_to(package_dir).as_posix() for p in package_dir.rglob("*.py"))
    for name in modules:
        digest.update(name.encode() + b"\0")
        if name.startswith("kernels/") or name == "features/layout.py":
            digest.update((package_dir / name).read_bytes() + b"\0")
    return digest.hexdigest()[:DIGEST_LENGTH]


def user_cache_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """``$XDG_CACHE_HOME/crfsdca/numba``, ``~/.cache/crfsdca/numba`` without it."""
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "crfsdca" / "numba"


def _writable(folder: Path) -> bool:
    """Whether files can be written into ``folder`` (created if missing)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def cache_root(
    package_dir: Path, numba_cache_dir: str = "", environ: Mapping[str, str] = os.environ
) -> Path | None:
    """The folder of the digest folders: under numba's cache folder (``NUMBA_CACHE_DIR``) when
    it is set, else next to the kernels, else (a read-only package) in :func:`user_cache_dir`;
    None when none can be written (the kernels are then compiled in every process)."""
    if numba_cache_dir:
        candidates = [Path(numba_cache_dir) / "crfsdca"]
    else:
        candidates = [package_dir / "kernels" / "__pycache__" / "numba", user_cache_dir(environ)]
    return next((folder for folder in candidates if _writable(folder)), None)


def _user_file(folder: Path, package_dir: Path) -> Path:
    key = hashlib.sha256(str(package_dir).encode()).hexdigest()[:DIGEST_LENGTH]
    return folder / USERS / key


def register(folder: Path, package_dir: Path) -> bool:
    """Record that ``package_dir`` uses the digest folder ``folder``; False when it already
    had."""
    user = _user_file(folder, package_dir)
    if user.is_file():
        return False
    user.parent.mkdir(parents=True, exist_ok=True)
    tmp = user.with_name(f".{user.name}.{uuid.uuid4().hex}")
    tmp.write_text(str(package_dir), encoding="utf-8")
    os.replace(tmp, user)
    return True


def _still_used(folder: Path, digests: dict[Path, str | None]) -> bool:
    """Whether a package registered in ``folder`` still has its sources (``digests``: the
    packages looked at so far, their digest or None when they are gone)."""
    try:
        users = list((folder / USERS).iterdir())
    except OSError:
        return False
    for user in users:
        try:
            package = Path(user.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
        if package not in digests:
            found = (package / "kernels").is_dir()
            digests[package] = sources_fingerprint(package) if found else None
        if digests[package] == folder.name:
            return True
    return False


def _remove(path: Path) -> None:
    """Remove ``path`` (a folder) by renaming it aside first; another process removing it too,
    or writing into it meanwhile, is no error."""
    trash = path.with_name(f".removed-{path.name}-{uuid.uuid4().hex}")
    try:
        os.rename(path, trash)
    except OSError:
        return  # gone already, or not ours to remove
    shutil.rmtree(trash, ignore_errors=True)


def clean_up(root: Path, keep: Path, package_dir: Path) -> list[str]:
    """Remove every folder of ``root`` but ``keep`` that no package registered in it uses any
    more (another digest of its sources, or the package is gone), and what an interrupted
    removal left; returns the names removed."""
    digests: dict[Path, str | None] = {package_dir: keep.name}
    removed = []
    try:
        entries = list(root.iterdir())
    except OSError:
        return removed
    for entry in entries:
        if entry == keep or not entry.is_dir():
            continue
        if entry.name.startswith(".removed-") or not _still_used(entry, digests):
            _remove(entry)
            removed.append(entry.name)
    return removed


def _remove_unkeyed_entries(package_dir: Path) -> None:
    """numba's own cache files next to the kernels (written before the digest folders): no
    locator looks them up any more."""
    for pycache in (package_dir / "kernels").rglob("__pycache__"):
        stamp = pycache / "crfsdca-sources.sha256"  # their digest, when it emptied them
        for path in [*pycache.glob("*.nbi"), *pycache.glob("*.nbc"), stamp]:
            path.unlink(missing_ok=True)


@dataclass(frozen=True)
class CacheFolder:
    """Where this process caches the package's kernels: the package, its sources' digest and
    the digest's folder (None: nowhere writable, nothing is cached)."""

    package_dir: Path
    digest: str
    folder: Path | None


_current: CacheFolder | None = None


def prepare(package_dir: Path = PACKAGE_DIR) -> CacheFolder:
    """Choose this process's cache folder for the kernels of ``package_dir``, register the
    package in it and clean the root up (:func:`clean_up`). Called once, on importing
    ``crfsdca.kernels``, before any kernel is compiled or loaded."""
    global _current
    from numba.core import config

    digest = sources_fingerprint(package_dir)
    root = cache_root(package_dir, config.CACHE_DIR)
    folder = None if root is None else root / digest
    if folder is not None:
        try:
            if register(folder, package_dir):
                _remove_unkeyed_entries(package_dir)
            clean_up(root, folder, package_dir)
        except OSError:
            pass  # another process cleaning the root meanwhile: the folder is made on saving
    _current = CacheFolder(package_dir, digest, folder)
    return _current


def current() -> CacheFolder:
    """The cache folder chosen by :func:`prepare` (prepared now if it was not)."""
    return _current or prepare()


class UncachedKernel(Exception):
    """A kernel of the package that cannot be cached in its digest's folder."""


class DigestLocator(caching._CacheLocator):
    """numba's cache locator for the package's kernels: the digest folder of the sources,
    below it the kernel's folder relative to the package, and the digest as the freshness
    stamp. Functions outside the package are left to numba's locators."""

    def __init__(self, path: Path, stamp: str, lineno: int, py_file: str) -> None:
        self._path, self._stamp, self._lineno = str(path), stamp, lineno
        self._py_file = py_file  # where numba's "cannot cache" warning points

    def get_cache_path(self) -> str:
        return self._path

    def get_source_stamp(self) -> str:
        return self._stamp

    def get_disambiguator(self) -> str:
        return str(self._lineno)

    @classmethod
    def from_function(cls, py_func, py_file):
        where = current()
        try:
            relative = Path(py_file).resolve().parent.relative_to(where.package_dir)
        except ValueError:
            return None  # not one of the package's kernels
        if where.folder is None:
            raise UncachedKernel(py_file)
        lineno = py_func.__code__.co_firstlineno
        self = cls(where.folder / relative, where.digest, lineno, py_file)
        try:
            self.ensure_cache_path()
        except OSError as err:
            raise UncachedKernel(py_file) from err
        return self


LOCATORS = [DigestLocator, *caching.CacheImpl._locator_classes]


class _KernelCacheImpl(caching.CompileResultCacheImpl):
    _locator_classes = LOCATORS


class KernelCache(caching.FunctionCache):
    """numba's cache of a function, located by :class:`DigestLocator`."""

    _impl_class = _KernelCacheImpl


def kernel_cache(cache_class: type, py_func) -> caching._Cache:
    """``cache_class(py_func)`` (a numba cache whose implementation locates with
    :data:`LOCATORS`), or numba's null cache for a kernel that cannot be cached in its
    digest's folder (compiled in every process rather than cached where it could go stale)."""
    try:
        return cache_class(py_func)
    except UncachedKernel:
        return caching.NullCache()
