"""Model files: numeric arrays and a JSON header in one ``.npz``, written atomically.

A model file is a zip archive written by :func:`numpy.savez`. Each array is one member; the
member ``header`` is a 1-d ``uint8`` array holding a UTF-8 JSON object::

    {"format": "crfsdca-model", "format_version": 1, "crfsdca_version": "0.1.0", ...}

followed by whatever the caller stores (feature template, label names, regularization, solver,
``n_bias_rows``, the graph kind ``graph`` and ``n_edge_types`` of :mod:`crfsdca.estimators.model`,
...).
Nothing is pickled: object arrays are refused on save, and loading uses
``np.load(path, allow_pickle=False)``.

Every write goes through :mod:`crfsdca.io.atomicfile`: a temporary file in the target's folder moved
into place with :func:`os.replace`, so a crash or an error leaves either the previous file or the
new one, never half of one; only regular files are replaced.
"""

from __future__ import annotations

import json
import os
import re
import struct
import zipfile
import zlib
from collections.abc import Callable, Mapping
from typing import IO, Any

import numpy as np
from numpy.typing import NDArray

from crfsdca.errors import ModelFormatError
from crfsdca.io.atomicfile import atomic_open, atomic_write_text
from crfsdca.io.crfsuite_file import MAGIC as CRFSUITE_MAGIC

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "atomic_write_bytes",
    "atomic_write_text",
    "file_format",
    "load_model",
    "save_json_atomic",
    "save_model",
]

FORMAT_NAME = "crfsdca-model"
FORMAT_VERSION = 1
_RESERVED_HEADER = ("format", "format_version", "crfsdca_version")
# "file" and "allow_pickle" are parameters of np.savez and cannot be member names
_RESERVED_ARRAYS = ("header", "file", "allow_pickle")
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_ARRAY_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# what numpy and zipfile raise on truncated, corrupted or foreign bytes
_READ_ERRORS = (
    ValueError,
    OSError,
    EOFError,
    KeyError,
    MemoryError,
    struct.error,
    zipfile.BadZipFile,
    zlib.error,
)


def atomic_write_bytes(path: str | os.PathLike, write: Callable[[IO[bytes]], None]) -> None:
    """Write a file atomically: ``write(f)`` fills a temporary file that then replaces ``path``.

    The rules (only regular files replaced, errors naming ``path``, stale temporaries of dead
    writers removed) are those of :func:`crfsdca.io.atomicfile.atomic_open`.
    """
    with atomic_open(path, "wb") as f:
        write(f)


def _json_default(obj: Any) -> Any:
    """Let numpy scalars and arrays through ``json.dumps``."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray) and not obj.dtype.hasobject:
        return obj.tolist()
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def _dumps(obj: Any, indent: int | None = None) -> str:
    """Strict JSON (no NaN or infinity, which JSON does not have)."""
    try:
        return json.dumps(obj, indent=indent, allow_nan=False, default=_json_default)
    except ValueError as exc:
        raise ValueError(f"cannot write JSON: {exc}; replace NaN/inf by null") from exc


def save_json_atomic(path: str | os.PathLike, obj: Any, indent: int | None = 2) -> None:
    """Write ``obj`` as strict JSON (UTF-8, final newline) to ``path`` atomically."""
    atomic_write_text(path, _dumps(obj, indent) + "\n")


def _check_arrays(arrays: Mapping[str, Any]) -> dict[str, np.ndarray]:
    checked = {}
    for name, value in arrays.items():
        if not isinstance(name, str) or not _ARRAY_NAME.match(name):
            raise ValueError(f"array names must be Python identifiers; got {name!r}")
        if name in _RESERVED_ARRAYS:
            raise ValueError(f"array name {name!r} is reserved; choose another name")
        array = np.asarray(value)
        if array.dtype.hasobject:
            raise TypeError(
                f"array {name!r} has dtype {array.dtype}, which needs pickle; store numbers "
                "in arrays and strings in the header"
            )
        checked[name] = array
    return checked


def _header_bytes(header: Mapping[str, Any]) -> NDArray[np.uint8]:
    from crfsdca import __version__

    if not isinstance(header, Mapping):
        raise TypeError(f"header must be a dict; got {type(header).__name__}")
    clash = [k for k in _RESERVED_HEADER if k in header]
    if clash:
        raise ValueError(f"header keys {clash} are reserved; crfsdca fills them in")
    full = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "crfsdca_version": __version__}
    full.update(header)
    return np.frombuffer(_dumps(full).encode("utf-8"), dtype=np.uint8)


def save_model(
    path: str | os.PathLike, arrays: Mapping[str, NDArray[Any]], header: Mapping[str, Any]
) -> None:
    """Save arrays and a JSON header to one ``.npz`` file, atomically and without pickle.

    Parameters
    ----------
    path : str or PathLike
        Destination, written as given (no ``.npz`` is appended).
    arrays : dict of str to ndarray
        Numeric (or fixed-width string) arrays, e.g. ``{"weights": w}``; names are Python
        identifiers other than ``header``, ``file`` and ``allow_pickle``.
    header : dict
        JSON-able metadata (numpy scalars and arrays are converted); tuples come back as lists.
        The keys ``format``, ``format_version`` and ``crfsdca_version`` are added.

    Raises
    ------
    TypeError
        An object array, or a header value JSON cannot hold.
    ValueError
        A bad or reserved name, or NaN/inf in the header.
    """
    members = _check_arrays(arrays)
    members["header"] = _header_bytes(header)
    atomic_write_bytes(path, lambda f: np.savez(f, **members))


def _check_magic(path: str | os.PathLike, f: IO[bytes]) -> None:
    """Refuse what is not a zip archive before numpy guesses (it would try pickle)."""
    magic = f.read(6)
    f.seek(0)
    if not magic:
        raise ModelFormatError(f"{path}: empty file; not a crfsdca model")
    if magic == b"\x93NUMPY":
        raise ModelFormatError(f"{path}: holds a single .npy array, not a crfsdca model (.npz)")
    if magic[:4] == CRFSUITE_MAGIC:
        raise ModelFormatError(
            f"{path}: a CRFsuite model, not a crfsdca model (.npz); convert it first:"
            f" crfsdca import-crfsuite {path} MODEL.npz"
        )
    if magic[:4] not in _ZIP_MAGIC:
        raise ModelFormatError(f"{path}: not an .npz (zip) archive; not a crfsdca model")


def _open_members(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Every member of the archive, as arrays; ModelFormatError when that fails."""
    # we own the file handle: np.load(path) leaks it when the zip is unreadable
    with open(path, "rb") as f:
        _check_magic(path, f)
        try:
            with np.load(f, allow_pickle=False) as npz:
                return {name: npz[name] for name in npz.files}
        except _READ_ERRORS as exc:
            raise ModelFormatError(
                f"{path}: not a readable .npz archive; the file is truncated or corrupted"
            ) from exc


def _parse_header(path: str | os.PathLike, raw: np.ndarray) -> dict[str, Any]:
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise ModelFormatError(f"{path}: 'header' is not a uint8 byte array; not a crfsdca model")
    try:
        header = json.loads(raw.tobytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ModelFormatError(
            f"{path}: the header is not UTF-8 text (byte {exc.start + 1}); the file is corrupted"
        ) from exc
    except json.JSONDecodeError as exc:
        raise ModelFormatError(
            f"{path}: the header is not valid JSON (character {exc.pos + 1}); the file is corrupted"
        ) from exc
    if not isinstance(header, dict):
        raise ModelFormatError(f"{path}: header is a JSON {type(header).__name__}, not an object")
    name = header.get("format")
    if name != FORMAT_NAME:
        raise ModelFormatError(
            f"{path}: format is {name!r}, expected {FORMAT_NAME!r}; not a crfsdca model"
        )
    version = header.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ModelFormatError(f"{path}: format_version must be an integer >= 1; got {version!r}")
    if version > FORMAT_VERSION:
        raise ModelFormatError(
            f"{path}: format version {version} is newer than this crfsdca ({FORMAT_VERSION}); "
            "upgrade crfsdca"
        )
    return header


def load_model(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Load a model written by :func:`save_model`.

    Parameters
    ----------
    path : str or PathLike
        A ``.npz`` model file.

    Returns
    -------
    arrays : dict of str to ndarray
        Every stored array except the header.
    header : dict
        The JSON header, including ``format``, ``format_version`` and ``crfsdca_version``.

    Raises
    ------
    ModelFormatError
        Truncated or corrupted file, not an ``.npz``, no or unreadable header, another format,
        or a format version newer than this crfsdca.
    FileNotFoundError
        No file at ``path``.
    """
    members = _open_members(path)
    if "header" not in members:
        raise ModelFormatError(f"{path}: missing 'header'; not a crfsdca model")
    header = _parse_header(path, members.pop("header"))
    return members, header


def file_format(path: str | os.PathLike) -> str:
    """What the existing file ``path`` holds, read no further than needed: ``"crfsdca"`` (an
    .npz whose header names crfsdca's format, any version), ``"crfsuite"`` (CRFsuite's magic
    bytes), ``"empty"`` or ``"other"``; OSError when it cannot be read."""
    with open(path, "rb") as f:
        magic = f.read(4)
        if not magic:
            return "empty"
        if magic == CRFSUITE_MAGIC:
            return "crfsuite"
        if magic not in _ZIP_MAGIC:
            return "other"
        f.seek(0)
        try:
            with np.load(f, allow_pickle=False) as npz:  # members load on access only
                raw = npz["header"] if "header" in npz.files else None
        except _READ_ERRORS:
            return "other"
    try:
        header = json.loads(raw.tobytes().decode("utf-8")) if raw is not None else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        return "other"
    is_ours = isinstance(header, dict) and header.get("format") == FORMAT_NAME
    return "crfsdca" if is_ours else "other"
