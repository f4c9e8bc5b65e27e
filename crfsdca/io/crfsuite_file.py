"""CRFsuite's binary model file: :class:`CRFsuiteModel` to bytes and back.

A CRFsuite model (``crf1d_model.c`` in chokkan/crfsuite; written by ``crfsuite learn`` and
``pycrfsuite.Trainer``) holds state features (attribute, label) and transition features
(label, label), each with a float64 weight. All integers are little-endian uint32:

=========== ==================================================================================
chunk       content
=========== ==================================================================================
header      48 bytes: ``b"lCRF"``, file size, ``b"FOMC"``, version 100, number of features,
            of labels, of attributes, then the offsets of the five chunks below
``FEAT``    tag, size, count; per feature 20 bytes: type (0 state, 1 transition), source
            (attribute or label at t), destination (label at t+1 or label), weight (float64)
labels      CQDB label name <-> label id (:mod:`crfsdca.io.cqdb`)
attributes  CQDB attribute name <-> attribute id
``LFRF``    tag, size, count, then per label the file offset of its list (count, feature
            ids...) of the transitions leaving it; 4-byte aligned
``AFRF``    the same per attribute: the ids of its state features; 4-byte aligned
=========== ==================================================================================

:func:`parse_crfsuite_model` checks every offset, count and id before use (CRFsuite itself
checks almost nothing and crashes on a corrupted file).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from crfsdca._dtypes import FLOAT
from crfsdca.errors import ModelFormatError
from crfsdca.io.atomicfile import atomic_write_bytes
from crfsdca.io.cqdb import CQDBError, build_cqdb, read_cqdb

__all__ = [
    "CRFsuiteModel",
    "crfsuite_model_bytes",
    "parse_crfsuite_model",
    "read_crfsuite_model",
    "write_crfsuite_model",
]

MAGIC, MODEL_TYPE, VERSION = b"lCRF", b"FOMC", 100
_HEADER = struct.Struct("<4sI4sIIIIIIIII")
_CHUNK = struct.Struct("<4sII")
_FEATURE = np.dtype([("type", "<u4"), ("src", "<u4"), ("dst", "<u4"), ("weight", "<f8")])
STATE, TRANSITION = 0, 1


class _Malformed(ValueError):
    """What is wrong with the bytes; :func:`read_crfsuite_model` adds the path."""


@dataclass(frozen=True, eq=False)
class CRFsuiteModel:
    """The content of a CRFsuite model file, dense.

    Attributes
    ----------
    labels : tuple of str
        Label names; label id ``k`` is ``labels[k]``.
    attributes : tuple of str
        Attribute names; attribute id ``a`` is ``attributes[a]``.
    state : ndarray (n_attributes, n_labels) float64
        ``state[a, k]``: weight of the state feature (attribute a, label k); 0 if not stored.
    transition : ndarray (n_labels, n_labels) float64
        ``transition[i, j]``: weight of label i at t followed by label j at t+1.
    """

    labels: tuple[str, ...]
    attributes: tuple[str, ...]
    state: NDArray[np.float64]
    transition: NDArray[np.float64]


# ------------------------------------------------------------------------------- writer


def _references(begin: int, tag: bytes, counts: NDArray[np.int64], first_fid: int) -> bytes:
    """An ``LFRF``/``AFRF`` chunk at file offset ``begin``: item ``r`` refers to the next
    ``counts[r]`` feature ids, counting from ``first_fid``."""
    n, total = counts.size, int(counts.sum())
    # item r's list starts at word r + (features of the items before r) after the offset table
    starts = np.arange(n) + np.cumsum(counts) - counts
    words = np.empty(n + total, "<u4")
    is_count = np.zeros(n + total, bool)
    is_count[starts] = True
    words[is_count] = counts
    words[~is_count] = np.arange(first_fid, first_fid + total)
    table_end = begin + _CHUNK.size + 4 * n
    offsets = (table_end + 4 * starts).astype("<u4")
    size = _CHUNK.size + 4 * n + 4 * words.size
    return _CHUNK.pack(tag, size, n) + offsets.tobytes() + words.tobytes()


def _pad4(buffer: bytearray) -> None:
    buffer += b"\0" * (-len(buffer) % 4)


def crfsuite_model_bytes(cm: CRFsuiteModel) -> bytes:
    """The bytes of a CRFsuite model file holding ``cm`` (features of weight 0 left out)."""
    n_labels, n_attrs = len(cm.labels), len(cm.attributes)
    if n_labels < 1:
        raise ValueError("a CRFsuite model needs at least one label")
    if cm.state.shape != (n_attrs, n_labels) or cm.transition.shape != (n_labels, n_labels):
        raise ValueError("state must be (n_attributes, n_labels), transition (n_labels, n_labels)")
    if not (np.all(np.isfinite(cm.state)) and np.all(np.isfinite(cm.transition))):
        raise ValueError("weights must be finite")
    attr, label = np.nonzero(cm.state)  # attribute-major, as the AFRF lists go
    src, dst = np.nonzero(cm.transition)
    features = np.empty(attr.size + src.size, _FEATURE)
    features["type"] = np.r_[np.full(attr.size, STATE), np.full(src.size, TRANSITION)]
    features["src"] = np.r_[attr, src]
    features["dst"] = np.r_[label, dst]
    features["weight"] = np.r_[cm.state[attr, label], cm.transition[src, dst]]

    out = bytearray(_HEADER.size)
    off_features = len(out)
    out += _CHUNK.pack(b"FEAT", _CHUNK.size + features.nbytes, features.size)
    out += features.tobytes()
    off_labels = len(out)
    out += build_cqdb(cm.labels, "label")
    off_attrs = len(out)
    out += build_cqdb(cm.attributes, "attribute")
    _pad4(out)
    off_labelrefs = len(out)
    trans_counts = np.count_nonzero(cm.transition, axis=1)
    out += _references(off_labelrefs, b"LFRF", trans_counts, attr.size)
    _pad4(out)
    off_attrrefs = len(out)
    out += _references(off_attrrefs, b"AFRF", np.count_nonzero(cm.state, axis=1), 0)
    if len(out) >= 2**32:
        raise ValueError(f"the model needs {len(out)} bytes; CRFsuite files stop at 4 GiB")
    out[: _HEADER.size] = _HEADER.pack(
        MAGIC, len(out), MODEL_TYPE, VERSION, features.size, n_labels, n_attrs,
        off_features, off_labels, off_attrs, off_labelrefs, off_attrrefs,
    )  # fmt: skip
    return bytes(out)


def write_crfsuite_model(cm: CRFsuiteModel, path: str | os.PathLike) -> None:
    """Write ``cm`` to ``path`` as a CRFsuite model file, atomically."""
    data = crfsuite_model_bytes(cm)
    atomic_write_bytes(path, data)


# ------------------------------------------------------------------------------- reader


def read_crfsuite_model(path: str | os.PathLike) -> CRFsuiteModel:
    """Read a CRFsuite model file (as written by CRFsuite, python-crfsuite or crfsdca).

    Raises
    ------
    ModelFormatError
        Not a CRFsuite model, another model type or version, or a truncated or corrupted file
        (every offset, count and id is checked before use).
    """
    with open(path, "rb") as f:
        buffer = f.read()
    try:
        return parse_crfsuite_model(buffer)
    except _Malformed as err:
        raise ModelFormatError(f"{path}: {err}") from err


def parse_crfsuite_model(buffer: bytes) -> CRFsuiteModel:
    """Parse the bytes of a CRFsuite model file (see :func:`read_crfsuite_model`)."""
    if buffer[:4] != MAGIC:
        raise _Malformed(f"not a CRFsuite model: expected magic b'lCRF', got {buffer[:4]!r}")
    if len(buffer) < _HEADER.size:
        raise _Malformed(f"truncated: {len(buffer)} bytes, shorter than the 48-byte header")
    (_, size, model_type, version, _, n_labels, n_attrs, *offsets) = _HEADER.unpack_from(buffer)
    if model_type != MODEL_TYPE or version != VERSION:
        raise _Malformed(
            f"unsupported CRFsuite model type {model_type!r} version {version};"
            f" expected {MODEL_TYPE!r} version {VERSION}"
        )
    if size > len(buffer):
        raise _Malformed(f"truncated: the header gives {size} bytes, the file has {len(buffer)}")
    buffer = memoryview(buffer)[:size]
    off_features, off_labels, off_attrs, off_labelrefs, off_attrrefs = offsets
    if n_labels < 1:
        raise _Malformed("the model has no labels")
    labels = _dictionary(buffer, off_labels, n_labels, "labels")
    attributes = _dictionary(buffer, off_attrs, n_attrs, "attributes")
    features = _features(buffer, off_features)
    words = np.frombuffer(buffer, "<u4", len(buffer) // 4).astype(np.int64)
    state = np.zeros((n_attrs, n_labels), FLOAT)
    owner, fids = _reference_lists(words, off_attrrefs, b"AFRF", n_attrs, features.size)
    _check_features(features[fids], owner, STATE, n_labels, "state")
    np.add.at(state, (owner, features["dst"][fids]), features["weight"][fids])
    transition = np.zeros((n_labels, n_labels), FLOAT)
    owner, fids = _reference_lists(words, off_labelrefs, b"LFRF", n_labels, features.size)
    _check_features(features[fids], owner, TRANSITION, n_labels, "transition")
    transition[owner, features["dst"][fids]] = features["weight"][fids]
    if not (np.all(np.isfinite(state)) and np.all(np.isfinite(transition))):
        raise _Malformed("weights contain non-finite values")
    return CRFsuiteModel(tuple(labels), tuple(attributes), state, transition)


def _dictionary(buffer: memoryview, offset: int, n: int, what: str) -> list[str]:
    """The ``n`` strings of the CQDB chunk at ``offset``, checked to be distinct."""
    if not _HEADER.size <= offset < len(buffer):
        raise _Malformed(f"{what} chunk offset {offset} is outside the file ({len(buffer)} bytes)")
    try:
        strings = read_cqdb(buffer[offset:], n)
    except CQDBError as err:
        raise _Malformed(f"{what} dictionary: {err}") from err
    if len(set(strings)) != n:
        raise _Malformed(f"{what} dictionary holds a name twice (corrupted)")
    return strings


def _chunk_header(buffer: memoryview, offset: int, tag: bytes) -> tuple[int, int]:
    if not _HEADER.size <= offset <= len(buffer) - _CHUNK.size:
        raise _Malformed(f"{tag.decode()} chunk offset {offset} is outside the file (truncated?)")
    found, size, count = _CHUNK.unpack_from(buffer, offset)
    if found != tag:
        raise _Malformed(f"expected a {tag.decode()} chunk at offset {offset}, got {found!r}")
    return size, count


def _features(buffer: memoryview, offset: int) -> NDArray[Any]:
    _, count = _chunk_header(buffer, offset, b"FEAT")
    start = offset + _CHUNK.size
    if start + count * _FEATURE.itemsize > len(buffer):
        raise _Malformed(f"FEAT chunk holds {count} features but the file ends first (truncated)")
    return np.frombuffer(buffer, _FEATURE, count, start)


def _reference_lists(
    words: NDArray[np.int64], offset: int, tag: bytes, n: int, n_features: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(owner item, feature id) of every reference of an ``LFRF``/``AFRF`` chunk; ``words``
    is the file as little-endian uint32."""
    name = tag.decode()
    if offset % 4:
        raise _Malformed(f"{name} chunk at offset {offset} is not 4-byte aligned")
    if not _HEADER.size <= offset <= 4 * words.size - _CHUNK.size:
        raise _Malformed(f"{name} chunk offset {offset} is outside the file (truncated?)")
    found = words[offset // 4].astype("<u4").tobytes()
    if found != tag:
        raise _Malformed(f"expected a {name} chunk at offset {offset}, got {found!r}")
    count = int(words[offset // 4 + 2])
    table = offset + _CHUNK.size
    if count < n or table + 4 * n > 4 * words.size:
        raise _Malformed(f"{name} chunk cannot hold {n} reference lists (truncated?)")
    starts = words[table // 4 : table // 4 + n]
    if np.any(starts % 4) or np.any(starts < table) or np.any(starts >= 4 * words.size):
        raise _Malformed(f"{name} chunk has a list offset outside the file or misaligned")
    counts = words[starts // 4]
    ends = starts // 4 + 1 + counts
    if np.any(ends > words.size):
        raise _Malformed(f"{name} chunk has a list running past the end of the file (truncated)")
    if n + int(counts.sum()) > words.size:  # disjoint lists fit in the file
        raise _Malformed(f"{name} chunk's lists overlap (corrupted)")
    owner = np.repeat(np.arange(n), counts)
    first = np.repeat(starts // 4 + 1 - (np.cumsum(counts) - counts), counts)
    fids = words[first + np.arange(owner.size)]
    if np.any(fids >= n_features):
        raise _Malformed(f"{name} chunk refers to a feature id >= {n_features}, the feature count")
    return owner, fids


def _check_features(
    features: NDArray[Any], owner: NDArray[np.int64], kind: int, n_labels: int, what: str
) -> None:
    bad = (features["type"] != kind) | (features["src"] != owner) | (features["dst"] >= n_labels)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        f = features[i]
        raise _Malformed(
            f"{what} feature list of id {owner[i]} holds a feature of type {f['type']},"
            f" source {f['src']}, destination {f['dst']} (corrupted)"
        )
