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

__all__ = ["BYTEORDER", "CQDBError", "build_cqdb", "hashlittle", "read_cqdb"]

MAGIC = b"CQDB"
BYTEORDER = 0x62445371
N_TABLES = 256
_HEADER = struct.Struct("<4sIIIII")
_RECORD = struct.Struct("<iI")
DATA_OFFSET = _HEADER.size + 8 * N_TABLES  # 2072: the first record
_MASK = 0xFFFFFFFF


class CQDBError(ValueError):
    """A CQDB chunk is malformed; the message says what is wrong (no path)."""


def _rot(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & _MASK


def _mix(a: int, b: int, c: int) -> tuple[int, int, int]:
    # lookup3 mix(): reversible mixing of three 32-bit words
    for shift_a, shift_b, shift_c in ((4, 6, 8), (16, 19, 4)):
        a = ((a - c) & _MASK) ^ _rot(c, shift_a)
        c = (c + b) & _MASK
        b = ((b - a) & _MASK) ^ _rot(a, shift_b)
        a = (a + c) & _MASK
        c = ((c - b) & _MASK) ^ _rot(b, shift_c)
        b = (b + a) & _MASK
    return a, b, c


def _final(a: int, b: int, c: int) -> int:
    # lookup3 final(): xor then subtract a rotation, seven times, ending in c
    c = ((c ^ b) - _rot(b, 14)) & _MASK
    a = ((a ^ c) - _rot(c, 11)) & _MASK
    b = ((b ^ a) - _rot(a, 25)) & _MASK
    c = ((c ^ b) - _rot(b, 16)) & _MASK
    a = ((a ^ c) - _rot(c, 4)) & _MASK
    b = ((b ^ a) - _rot(a, 14)) & _MASK
    return ((c ^ b) - _rot(b, 24)) & _MASK


def hashlittle(key: bytes, seed: int = 0) -> int:
    """Bob Jenkins' lookup3 ``hashlittle`` of ``key`` (a 32-bit unsigned int).

    The key is read as little-endian 32-bit words, 12 bytes per round; the last, partial
    block is zero-padded (which adds nothing), and an empty key returns the initial state.
    """
    n = len(key)
    a = b = c = (0xDEADBEEF + n + seed) & _MASK
    if n == 0:
        return c
    padded = key + b"\0" * (-n % 12)
    words = struct.unpack(f"<{len(padded) // 4}I", padded)
    n_blocks = len(words) // 3
    for i in range(n_blocks - 1):
        a = (a + words[3 * i]) & _MASK
        b = (b + words[3 * i + 1]) & _MASK
        c = (c + words[3 * i + 2]) & _MASK
        a, b, c = _mix(a, b, c)
    last = 3 * (n_blocks - 1)
    a = (a + words[last]) & _MASK
    b = (b + words[last + 1]) & _MASK
    c = (c + words[last + 2]) & _MASK
    return _final(a, b, c)


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
    for i, key in enumerate(keys):
        offset = DATA_OFFSET + len(records)
        offsets.append(offset)
        h = hashlittle(key + b"\0")
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
