"""A cache of encoded corpora: a second run on the same data skips reading and encoding it.

Reading and encoding CoNLL-2000 with its default template takes about 1.8 s of every
``crfsdca train conll2000``; loading the cached arrays takes about 0.1 s. Registered datasets
(``data_loaders.load_encoded``) and training files given by path (``crfsdca train FILE
[--test FILE]``, ``crfsdca.features.sources.load_inputs``) are cached; standard input is not.
An entry holds the fitted encoder (its ``to_dict``, as JSON) and the encoded train and test
splits (their arrays, with ``allow_pickle=False``; and what a caller stores beside them, e.g.
the heads of CoNLL-U sentences for ``--graph tree``), in ``<cache>/encoded/<key>.npz``
(``$CRFSDCA_CACHE_DIR``, else ``~/.cache/crfsdca``). The key is a SHA-256 of everything the
encoding depends on:

- what was asked for: the dataset or file names, template, format, label column,
  ``max_sequences``;
- each file's path as found and the SHA-256 of its bytes (an edited or replaced file is a new
  key; a file that is not a regular file, e.g. a named pipe, is never cached);
- the bytes of the modules that read and encode a corpus (``crfsdca/features``, ``crfsdca/io``,
  ``data_loaders``), and numpy's version: a change to the code is a new key.

So an entry is only ever used for the exact inputs that made it; a stale one is never read.
Entries are written atomically; one that cannot be read (truncated, another format) is encoded
again and replaced. The newest :data:`MAX_ENTRIES` are kept. ``CRFSDCA_ENCODED_CACHE=0``
turns the cache off.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import stat
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from crfsdca.features.attributes import encoder_from_dict
from crfsdca.features.sequences import SequenceData
from crfsdca.io import atomic_write_bytes

FORMAT = 1
#: entries kept (the oldest are removed after a write)
MAX_ENTRIES = 8
_SPLITS = ("train", "test")
_CODE_DIRS = ("crfsdca/features", "crfsdca/io", "data_loaders")


ENV = "CRFSDCA_ENCODED_CACHE"
_OFF, _ON = ("0", "off", "no", "false"), ("", "1", "on", "yes", "true")


def enabled() -> bool:
    """Whether ``$CRFSDCA_ENCODED_CACHE`` leaves the cache on (unset, 1, on, yes, true) or turns
    it off (0, off, no, false); ValueError naming the variable for any other value."""
    value = os.environ.get(ENV, "").strip().lower()
    if value not in _OFF + _ON:
        raise ValueError(f"${ENV} must be 1 or 0 (on or off); got {os.environ[ENV]!r}")
    return value in _ON


def key(inputs: dict[str, Any], files: list[Path]) -> str | None:
    """The SHA-256 that names an entry (see the module docstring): ``inputs`` = what the
    encoding was asked for (JSON-serialisable: dataset or file names, template, format,
    ``max_sequences``, ...), ``files`` = the files it reads. None (not cached) with the cache
    off, or when a file is not a regular file (a named pipe would be consumed by hashing it) or
    cannot be read."""
    if not enabled():
        return None
    h = hashlib.sha256()
    described = {"format": FORMAT, "numpy": np.__version__, "inputs": inputs,
                 "files": [os.fspath(f) for f in files]}  # fmt: skip
    h.update(json.dumps(described, sort_keys=True).encode())
    try:
        for f in files:
            if not stat.S_ISREG(os.stat(f).st_mode):
                return None
            h.update(_file_digest(f))
    except OSError:
        return None
    h.update(_code_digest())
    return h.hexdigest()


def _file_digest(path: str | os.PathLike) -> bytes:
    """SHA-256 of a file's bytes, read in 1 MiB blocks (a corpus may not fit twice in memory)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.digest()


def _code_digest() -> bytes:
    root = Path(__file__).resolve().parents[2]  # the folder of crfsdca/ and data_loaders/
    h = hashlib.sha256()
    for folder in _CODE_DIRS:
        for path in sorted((root / folder).glob("*.py")):
            h.update(path.name.encode())
            h.update(path.read_bytes())
    return h.digest()


def cached(
    cache_dir: Path,
    entry_key: str | None,
    encode: Callable[[], tuple],
) -> tuple:
    """The entry ``entry_key`` of ``cache_dir/encoded`` if it is there and readable, else
    ``encode()`` (an (encoder, train, test or None) triple, or a quadruple with a dict of more
    arrays, e.g. the heads of dependency trees), stored there for the next run (a folder that
    does not take it is skipped). ``entry_key`` None: ``encode()``, not cached."""
    if entry_key is None:
        return encode()
    path = Path(cache_dir) / "encoded" / f"{entry_key}.npz"
    try:
        return read_entry(path)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        pass
    result = encode()
    try:
        content = entry_bytes(*result)
    except TypeError:  # metadata JSON cannot hold: not cached
        return result
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, content)
        _prune(path.parent)
    except OSError:  # a read-only or full cache folder, or not a regular file: not cached
        pass
    return result


def entry_bytes(
    encoder: Any,
    train: SequenceData,
    test: SequenceData | None,
    extras: dict[str, np.ndarray] | None = None,
) -> bytes:
    """An entry's ``.npz`` content (``extras``: more arrays, given back by :func:`read_entry`
    as a fourth item)."""
    header: dict[str, Any] = {"format": FORMAT, "encoder": encoder.to_dict()}
    arrays: dict[str, np.ndarray] = {}
    if extras is not None:
        header["extras"] = sorted(extras)
        arrays.update({f"extra.{name}": _compact(a) for name, a in extras.items()})
    for split, data in zip(_SPLITS, (train, test), strict=True):
        if data is None:
            continue
        fields = {}
        for f in dataclasses.fields(data):
            value = getattr(data, f.name)
            if isinstance(value, np.ndarray):
                arrays[f"{split}.{f.name}"] = _compact(value)
            else:
                fields[f.name] = list(value) if isinstance(value, tuple) else value
        header[split] = fields
    buffer = io.BytesIO()
    np.savez(buffer, header=np.array(json.dumps(header)), **arrays)
    return buffer.getvalue()


def read_entry(path: Path) -> tuple:
    """The (encoder, train, test or None) stored in ``path``, and the dict of extra arrays when
    it was stored with one; ValueError if it is not a valid entry."""
    with np.load(path, allow_pickle=False) as npz:
        header = json.loads(str(npz["header"]))
        if header.get("format") != FORMAT:
            raise ValueError(f"{path}: format {header.get('format')!r}, expected {FORMAT}")
        splits: list[SequenceData | None] = []
        for split in _SPLITS:
            if split not in header:
                splits.append(None)
                continue
            arrays = {
                k.split(".", 1)[1]: _expand(npz[k]) for k in npz.files if k.startswith(f"{split}.")
            }
            splits.append(SequenceData(**arrays, **header[split]))
        entry = (encoder_from_dict(header["encoder"]), *splits)
        if "extras" in header:
            entry += ({name: _expand(npz[f"extra.{name}"]) for name in header["extras"]},)
    return entry


def _compact(a: np.ndarray) -> np.ndarray:
    """A smaller array that ``_expand`` turns back into ``a``'s values (SequenceData's
    constructor restores its dtypes): int32 for int64 values that fit, and a constant float
    array (attribute values are mostly all 1) as [value, length, nan] (the arrays stored are
    finite, so the nan marks it)."""
    if a.dtype == np.int64 and (a.size == 0 or (a.min() >= -(2**31) and a.max() < 2**31)):
        return a.astype(np.int32)
    if a.dtype == np.float64 and a.size > 2 and (a == a[0]).all():
        return np.array([a[0], a.size, np.nan])  # a constant array: value, length, marker
    return a


def _expand(a: np.ndarray) -> np.ndarray:
    if a.dtype == np.float64 and a.shape == (3,) and np.isnan(a[2]):
        return np.full(int(a[1]), a[0])
    return a


def _prune(folder: Path) -> None:
    entries = sorted(folder.glob("*.npz"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[MAX_ENTRIES:]:
        old.unlink(missing_ok=True)
