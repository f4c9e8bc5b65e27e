"""Locating dataset files on disk, and downloading them into the cache when absent.

A file is looked for, in order, in the ``data_dir`` argument (the CLI's ``--data-dir``), in
``$CRFSDCA_DATA_DIR``, and in the cache (``$CRFSDCA_CACHE_DIR``, default ``~/.cache/crfsdca``),
each time as ``<dir>/<relpath>`` (gzipped) or the same path without ``.gz``. A download goes to
the cache: the raw response is fetched by ``pooch.retrieve`` with a progress bar on stderr,
unpacked (gzip or a zip member), checked against the SHA-256 of the uncompressed content, and
stored gzipped at ``<cache>/<relpath>``; every write is atomic.

The registry pins the SHA-256 of the *content*, not of the payload: the same file is served
zipped by one source and gzipped by another, and a recompressed payload with the same content
is still accepted. pooch is therefore called without ``known_hash`` and the content is checked
here after unpacking.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import logging
import os
import zipfile
from pathlib import Path

from crfsdca.io import atomic_write_bytes
from data_loaders.spec import DataFile, Source

GZIP_MAGIC = b"\x1f\x8b"
ZIP_MAGIC = b"PK\x03\x04"


class DatasetNotFoundError(FileNotFoundError):
    """A dataset file is neither on disk nor downloadable; the message lists where we looked."""


def default_cache_dir() -> Path:
    """``$CRFSDCA_CACHE_DIR`` if set, else ``~/.cache/crfsdca``."""
    env = os.environ.get("CRFSDCA_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "crfsdca"


def search_dirs(data_dir: str | os.PathLike | None, cache_dir: Path) -> list[tuple[str, Path]]:
    """The folders searched, in order, each with a label for error messages."""
    places = []
    if data_dir is not None:
        places.append(("data_dir/--data-dir", Path(data_dir)))
    env = os.environ.get("CRFSDCA_DATA_DIR")
    if env:
        places.append(("$CRFSDCA_DATA_DIR", Path(env)))
    places.append(("cache", cache_dir))
    return places


def locate(relpath: str, dirs: list[tuple[str, Path]]) -> Path | None:
    """First existing ``<dir>/<relpath>`` or ``<dir>/<relpath without .gz>``, else None."""
    names = [relpath] + ([relpath[: -len(".gz")]] if relpath.endswith(".gz") else [])
    for _, folder in dirs:
        for name in names:
            candidate = folder / name
            if candidate.is_file():
                return candidate
    return None


def sha256_of_content(path: str | os.PathLike) -> str:
    """SHA-256 of a file's uncompressed content (gzip detected by magic bytes)."""
    digest = hashlib.sha256()
    with open(path, "rb") as raw:
        stream = gzip.GzipFile(fileobj=raw) if raw.peek(2)[:2] == GZIP_MAGIC else raw
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_url(url: str, dest: Path) -> None:
    """Download ``url`` to ``dest`` with ``pooch.retrieve`` (atomic, progress bar on stderr)."""
    try:
        import pooch
    except ImportError as exc:
        raise OSError("downloading datasets needs pooch: pip install pooch") from exc
    logger = pooch.get_logger()
    level = logger.level
    logger.setLevel(logging.WARNING)  # not pooch's "use this hash as known_hash" advice
    try:
        pooch.retrieve(url, known_hash=None, fname=dest.name, path=dest.parent, progressbar=True)
    finally:
        logger.setLevel(level)


def _unpack(data: bytes, source: Source) -> bytes:
    """The file's content from a downloaded payload: a zip member, gunzipped, or as is."""
    if source.member is not None:
        if not data.startswith(ZIP_MAGIC):
            raise ValueError(f"{source.url}: expected a zip archive with {source.member}")
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return archive.read(source.member)
    if data.startswith(GZIP_MAGIC):
        return gzip.decompress(data)
    return data


class ChecksumError(ValueError):
    """Downloaded content whose SHA-256 is not the registry's."""


def describe_failure(url: str, exc: BaseException) -> str:
    """``url: reason`` in a few words for a failed download (not the HTTP library's text)."""
    text = f"{type(exc).__name__} {exc} {getattr(exc, 'reason', '')}".lower()
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(exc, ChecksumError):
        reason = f"the content is not the registered file ({exc})"
    elif isinstance(exc, KeyError):
        reason = f"the archive lacks the expected file ({exc.args[0] if exc.args else exc})"
    elif status is not None:
        reason = f"the server answered HTTP {status}"
    elif any(k in text for k in _NO_HOST):
        reason = "host not found (offline, or no DNS?)"
    elif "timeout" in text or "timed out" in text:
        reason = "no answer in time"
    elif any(k in text for k in _NO_CONNECTION):
        reason = "cannot connect (offline, or blocked?)"
    elif isinstance(exc, zipfile.BadZipFile | EOFError) or "gzip" in text:
        reason = "the download is not a readable archive"
    elif isinstance(exc, OSError) and exc.strerror:
        reason = exc.strerror[0].lower() + exc.strerror[1:]
    else:
        reason = f"download failed ({type(exc).__name__})"
    return f"{url}: {reason}"


_NO_HOST = (
    "nameresolution",
    "name or service not known",
    "getaddrinfo",
    "nodename nor servname",
    "temporary failure in name",
)
_NO_CONNECTION = (
    "connectionerror",
    "connection refused",
    "network is unreachable",
    "no route to host",
    "proxyerror",
    "sslerror",
    "urlerror",
)


def download_file(datafile: DataFile, cache_dir: Path) -> Path:
    """Fetch ``datafile`` from its sources into ``cache_dir``; return the stored path.

    Raises
    ------
    OSError
        When no source gives content with the expected SHA-256; the message lists each attempt.
    """
    failures = []
    downloads = cache_dir / "downloads"
    for source in datafile.sources:
        archive = downloads / source.url.rstrip("/").rsplit("/", 1)[-1]
        try:
            if not archive.is_file():
                downloads.mkdir(parents=True, exist_ok=True)
                fetch_url(source.url, archive)
            content = _unpack(archive.read_bytes(), source)
            digest = hashlib.sha256(content).hexdigest()
            if digest != datafile.sha256:
                archive.unlink()
                raise ChecksumError(
                    f"SHA-256 of the content is {digest}; expected {datafile.sha256}"
                )
            dest = cache_dir / datafile.relpath
            dest.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(dest, gzip.compress(content, compresslevel=9, mtime=0))
            if source.member is None:
                archive.unlink()
            return dest
        except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as exc:
            failures.append(describe_failure(source.url, exc))
    with contextlib.suppress(OSError):
        downloads.rmdir()  # only if empty: leave no trace of a failed attempt
    raise OSError("; ".join(failures) or "no download source")
