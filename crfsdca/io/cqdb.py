"""CQDB, the constant string <-> id dictionary inside CRFsuite model files.

A CQDB chunk (CRFsuite ``lib/cqdb/src/cqdb.c``) maps NUL-terminated byte strings to non-negative
ids and back. Every integer is a little-endian uint32 and every offset is relative to the start
of the chunk:

=============== ======= ===================================================================
part            bytes   content
=============== ======= ===================================================================
header          24      ``b"CQDB"``, chunk size, flag (0), byte-order mark ``0x62445371``,
                        number of backward entries, offset of the backward array
table refs      2048    256 x (offset of hash table ``t``, number of its buckets); 0, 0 when
                        the table is empty
records         ...     per string: id (int32), size = len(bytes) + 1, bytes, NUL
hash tables     ...     per non-empty table: 2 x (number of its strings) buckets (hash, record
                        offset); a bucket with offset 0 is empty
backward array  4 n     record offset of id 0, 1, ..., n - 1
=============== ======= ===================================================================

A string goes to table ``h % 256`` and, within it, to bucket ``(h >> 8) % n_buckets`` (then the
next free one, wrapping around), where ``h`` is Bob Jenkins' lookup3 ``hashlittle`` of its
bytes *including* the NUL, with seed 0. CRFsuite looks strings up through the hash tables and
ids up through the backward array, so both must be right for a model to tag.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

__all__ = ["BYTEORDER", "CQDBError", "build_cqdb", "hashlittle", "hashlittle_many", "read_cqdb"]

MAGIC = b"CQDB"
BYTEORDER = 0x62445371
N_TABLES = 256
_HEADER = struct.Struct("<4sIIIII")
_RECORD = struct.Struct("<iI")
DATA_OFFSET = _HEADER.size + 8 * N_TABLES  # 2072: the first record
_MASK = 0xFFFFFFFF


class CQDBError(ValueError):
    """A CQDB chunk is malformed; the message says what is wrong (no path)."""


def _rot(x: NDArray[np.uint32], k: int) -> NDArray[np.uint32]:
    return (x << np.uint32(k)) | (x >> np.uint32(32 - k))


def _mix(a: NDArray[np.uint32], b: NDArray[np.uint32], c: NDArray[np.uint32]) -> None:
    """lookup3 ``mix()``, in place: reversible mixing of three 32-bit words."""
    for shift_a, shift_b, shift_c in ((4, 6, 8), (16, 19, 4)):
        a -= c
        a ^= _rot(c, shift_a)
        c += b
        b -= a
        b ^= _rot(a, shift_b)
        a += c
        c -= b
        c ^= _rot(b, shift_c)
        b += a


def _final(a: NDArray[np.uint32], b: NDArray[np.uint32], c: NDArray[np.uint32]) -> None:
    """lookup3 ``final()``, in place: xor then subtract a rotation, seven times, into c."""
    for x, y, shift in ((c, b, 14), (a, c, 11), (b, a, 25), (c, b, 16), (a, c, 4), (b, a, 14)):
        x ^= y
        x -= _rot(y, shift)
    c ^= b
    c -= _rot(b, 24)


def hashlittle_many(keys: Sequence[bytes], seed: int = 0) -> NDArray[np.uint32]:
    """Bob Jenkins' lookup3 ``hashlittle`` of every key, (len(keys),) uint32.

    A key is read as little-endian 32-bit words, 12 bytes (a, b, c) per block: every block but
    the last is added and mixed, the last (zero-padded, which adds nothing) is added and goes
    through ``final``; an empty key gives the initial state ``0xdeadbeef + length + seed``.
    Keys with the same number of blocks are hashed together, one numpy pass per block.
    """
    lengths = np.fromiter(map(len, keys), np.int64, len(keys))
    initial = ((0xDEADBEEF + lengths + seed) & _MASK).astype(np.uint32)
    out = initial.copy()
    n_blocks = (lengths + 11) // 12
    for n in np.unique(n_blocks[n_blocks > 0]).tolist():
        rows = np.flatnonzero(n_blocks == n)
        raw = b"".join(keys[i].ljust(12 * n, b"\0") for i in rows.tolist())
        words = np.frombuffer(raw, "<u4").reshape(rows.size, 3 * n).astype(np.uint32)
        a, b, c = (initial[rows].copy() for _ in range(3))
        for block in range(n):
            a += words[:, 3 * block]
            b += words[:, 3 * block + 1]
            c += words[:, 3 * block + 2]
            if block < n - 1:
                _mix(a, b, c)
        _final(a, b, c)
        out[rows] = c
    return out


def hashlittle(key: bytes, seed: int = 0) -> int:
    """lookup3 ``hashlittle`` of one key (see :func:`hashlittle_many`)."""
    return int(hashlittle_many([key], seed)[0])


def _encode(strings: Sequence[str], what: str) -> list[bytes]:
    keys = []
    for i, s in enumerate(strings):
        key = s.encode("utf-8")
        if b"\0" in key:
            raise ValueError(
                f"{what} {i} ({s!r}) contains a NUL character; CRFsuite cannot store it"
            )
        keys.append(key)
    if len(set(keys)) != len(keys):
        seen: set[bytes] = set()
        dup = next(k for k in keys if k in seen or seen.add(k))
        raise ValueError(f"{what} {dup.decode()!r} appears twice; CRFsuite needs unique {what}s")
    return keys


def build_cqdb(strings: Sequence[str], what: str = "string") -> bytes:
    """The CQDB chunk mapping ``strings[i]`` (UTF-8) to id ``i`` and back.

    Raises ValueError (naming ``what``) on a duplicate string or one containing NUL.
    """
    keys = _encode(strings, what)
    records = bytearray()
    offsets = []
    tables: list[list[tuple[int, int]]] = [[] for _ in range(N_TABLES)]
    hashes = hashlittle_many([key + b"\0" for key in keys]).tolist()
    for i, (key, h) in enumerate(zip(keys, hashes, strict=True)):
        offset = DATA_OFFSET + len(records)
        offsets.append(offset)
        tables[h % N_TABLES].append((h, offset))
        records += _RECORD.pack(i, len(key) + 1) + key + b"\0"
    refs = bytearray()
    buckets = bytearray()
    position = DATA_OFFSET + len(records)
    for entries in tables:
        n_buckets = 2 * len(entries)
        refs += struct.pack("<II", position + len(buckets) if entries else 0, n_buckets)
        slots = [(0, 0)] * n_buckets
        for h, offset in entries:
            k = (h >> 8) % n_buckets
            while slots[k][1] != 0:
                k = (k + 1) % n_buckets
            slots[k] = (h, offset)
        buckets += b"".join(struct.pack("<II", *slot) for slot in slots)
    backward_offset = position + len(buckets) if keys else 0
    backward = struct.pack(f"<{len(keys)}I", *offsets)
    size = position + len(buckets) + len(backward)
    header = _HEADER.pack(MAGIC, size, 0, BYTEORDER, len(keys), backward_offset)
    return bytes(header + refs + records + buckets + backward)


def read_cqdb(chunk: bytes | memoryview, n: int) -> list[str]:
    """The strings of ids ``0 .. n-1`` of the CQDB chunk at the start of ``chunk``.

    Strings are decoded as UTF-8 (invalid bytes are escaped with backslashes). Every offset
    is bounds-checked; raises :class:`CQDBError` saying what is wrong.
    """
    chunk = memoryview(chunk)
    if len(chunk) < DATA_OFFSET:
        raise CQDBError(f"CQDB chunk truncated: {len(chunk)} bytes, a CQDB has >= {DATA_OFFSET}")
    magic, size, _flag, byteorder, n_backward, backward_offset = _HEADER.unpack_from(chunk)
    if magic != MAGIC:
        raise CQDBError(f"expected a CQDB chunk (b'CQDB'), got {bytes(magic)!r}")
    if byteorder != BYTEORDER:
        raise CQDBError(f"CQDB byte-order mark is {byteorder:#x}, expected {BYTEORDER:#x}")
    if not DATA_OFFSET <= size <= len(chunk):
        raise CQDBError(f"CQDB size {size} outside [{DATA_OFFSET}, {len(chunk)}] (truncated?)")
    if n == 0:
        return []
    if n_backward < n or backward_offset < DATA_OFFSET or backward_offset + 4 * n > size:
        raise CQDBError(f"CQDB backward array cannot hold {n} ids (truncated or corrupted)")
    offsets = struct.unpack_from(f"<{n}I", chunk, backward_offset)
    strings = []
    for i, offset in enumerate(offsets):
        if not DATA_OFFSET <= offset <= size - _RECORD.size:
            raise CQDBError(f"CQDB record of id {i} at offset {offset} is outside the chunk")
        record_id, length = _RECORD.unpack_from(chunk, offset)
        start = offset + _RECORD.size
        if record_id != i or length < 1 or start + length > size or chunk[start + length - 1]:
            raise CQDBError(f"CQDB record of id {i} at offset {offset} is corrupted")
        strings.append(bytes(chunk[start : start + length - 1]).decode("utf-8", "backslashreplace"))
    return strings
