"""Line-by-line reading of plain or gzip UTF-8 text, the input of every corpus reader.

Accepted: ``\\n`` or ``\\r\\n`` line breaks, a missing final line break, a UTF-8 byte order
mark, gzip compression (detected by the magic bytes ``1f 8b``, not by the name). Rejected with
:class:`~crfsdca.errors.DataFormatError` naming the file and line: invalid UTF-8, NUL bytes
(binary files, UTF-16 text), a bare ``\\r`` inside a line (classic Mac line breaks), a corrupt
or truncated gzip stream, and lines longer than :data:`MAX_LINE_BYTES`, which bounds the memory
a single line can take whatever the file holds (``/dev/zero``, a gigabyte without a newline).
Messages quote at most :data:`QUOTE_CHARS` characters of the offending text (:func:`quote`).
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Iterator
from typing import IO

from crfsdca.errors import DataFormatError

__all__ = ["MAX_LINE_BYTES", "QUOTE_CHARS", "TextLines", "blocks", "open_text", "quote"]

GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"
MAX_LINE_BYTES = 1 << 22  # 4 MiB: a generous bound for a token, letter or item line
QUOTE_CHARS = 40
CHUNK_BYTES = 1 << 20  # read and decoded at once after the first line

# what a non-text file starts with, for a helpful message on line 1
_SIGNATURES = (
    (b"\xff\xfe", "a UTF-16 byte order mark; re-encode the file as UTF-8"),
    (b"\xfe\xff", "a UTF-16 byte order mark; re-encode the file as UTF-8"),
    (b"PK\x03\x04", "a zip archive (an .npz model?), not a text corpus"),
    (b"\x93NUMPY", "a NumPy .npy array, not a text corpus"),
)


def quote(text: str) -> str:
    """repr of ``text``, cut to QUOTE_CHARS characters so that a message stays one short line."""
    if len(text) <= QUOTE_CHARS:
        return repr(text)
    return f"{text[:QUOTE_CHARS]!r}... ({len(text)} characters)"


class TextLines:
    """Lines of a UTF-8 text file, plain or gzip, decoded one at a time.

    Iterating yields each line as ``str`` with its line ending removed (``\\n`` or ``\\r\\n``);
    ``lineno`` is the 1-based number of the line last yielded. Invalid UTF-8, a NUL byte, a bare
    ``\\r``, a line over :data:`MAX_LINE_BYTES` or a corrupt gzip stream raise
    :class:`DataFormatError` naming the line. The file is closed when iteration ends or fails,
    or on leaving a ``with`` block.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = str(path)
        self.lineno = 0
        raw = open(path, "rb")  # noqa: SIM115 -- closed by close(), __exit__ or the end of __iter__
        self._gzip = raw.peek(2)[:2] == GZIP_MAGIC
        self._stream: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="rb") if self._gzip else raw
        self._raw = raw

    def __iter__(self) -> Iterator[str]:
        """The first line one at a time (byte order mark, signatures), the rest by chunks of
        CHUNK_BYTES checked and decoded at once; a chunk that fails a check is gone through
        line by line, so that an error names the same line and column as a line-by-line read."""
        try:
            if not (data := self._read_line()):
                return
            self.lineno += 1
            yield self._decode(data)
            pending = b""
            while data := self._read_chunk():
                data = pending + data
                cut = data.rfind(b"\n") + 1
                pending = data[cut:]
                yield from self._lines(data[:cut])
                if len(pending) > MAX_LINE_BYTES:
                    self._check_length(pending)
            if pending:
                yield from self._lines(pending)
        finally:
            self.close()

    def _read_chunk(self) -> bytes:
        """At most CHUNK_BYTES more bytes (one read: all that a gzip stream gives before it
        fails is returned first), b"" at the end."""
        try:
            return self._stream.read1(CHUNK_BYTES)
        except (OSError, EOFError, zlib.error) as exc:
            if not self._gzip:
                raise
            msg = f"corrupt or truncated gzip stream ({exc})"
            raise self._error(msg, self.lineno + 1) from None

    def _lines(self, data: bytes) -> Iterator[str]:
        """The lines of ``data`` (whole lines; the last may lack its line break)."""
        first = data.find(b"\n")  # only the first line can be long: the rest lie in one chunk
        if data.find(b"\x00") < 0 and (first if first >= 0 else len(data)) <= MAX_LINE_BYTES:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                text = None
            if text is not None and text.count("\r") == text.count("\r\n"):
                lines = text.split("\n")
                if not lines[-1]:
                    lines.pop()
                if "\r" in text:
                    lines = [line.rstrip("\r") for line in lines]
                for line in lines:
                    self.lineno += 1
                    yield line
                return
        start = 0
        while start < len(data):  # line by line, for the error
            end = data.find(b"\n", start) + 1 or len(data)
            line = data[start:end]
            self._check_length(line)
            self.lineno += 1
            yield self._decode(line)
            start = end

    def _check_length(self, line: bytes) -> None:
        """The error of a line of more than MAX_LINE_BYTES bytes before its line break."""
        if len(line) - line.endswith(b"\n") > MAX_LINE_BYTES:
            msg = f"expected a line of at most {MAX_LINE_BYTES} bytes, got a longer one"
            raise self._error(msg + "; a binary file, or missing line breaks?", self.lineno + 1)

    def _error(self, message: str, line: int | None = None) -> DataFormatError:
        return DataFormatError(self.path, self.lineno if line is None else line, message)

    def _read_line(self) -> bytes:
        """The next raw line (with its ending), at most MAX_LINE_BYTES + 1 bytes."""
        try:
            data = self._stream.readline(MAX_LINE_BYTES + 1)
        except (OSError, EOFError, zlib.error) as exc:
            if not self._gzip:
                raise
            msg = f"corrupt or truncated gzip stream ({exc})"
            raise self._error(msg, self.lineno + 1) from None
        if len(data) > MAX_LINE_BYTES and not data.endswith(b"\n"):
            msg = f"expected a line of at most {MAX_LINE_BYTES} bytes, got a longer one"
            raise self._error(msg + "; a binary file, or missing line breaks?", self.lineno + 1)
        return data

    def _decode(self, data: bytes) -> str:
        if self.lineno == 1:
            if data.startswith(UTF8_BOM):
                data = data[3:]
            for magic, what in _SIGNATURES:
                if data.startswith(magic):
                    raise self._error(f"expected UTF-8 text, got {what}")
        nul = data.find(b"\x00")
        if nul >= 0:
            raise self._error(f"expected text, got a NUL byte at column {nul + 1}; a binary file?")
        try:
            text = data.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as exc:
            bad = data[exc.start : exc.start + 4]
            msg = f"expected UTF-8 text, got bytes {bad!r} at column {exc.start + 1}"
            raise self._error(msg) from None
        cr = text.find("\r")
        if cr >= 0:
            msg = f"expected \\n or \\r\\n line breaks, got a bare \\r at column {cr + 1}"
            raise self._error(msg + " (classic Mac line breaks? convert them to \\n)")
        return text

    def close(self) -> None:
        self._stream.close()
        self._raw.close()

    def __enter__(self) -> TextLines:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_text(path: str | os.PathLike) -> TextLines:
    """Open a plain or gzip-compressed UTF-8 text file for streaming line iteration.

    Parameters
    ----------
    path : str or PathLike
        The file; gzip is detected from the magic bytes ``1f 8b``, not from the name.

    Returns
    -------
    TextLines
        Context manager yielding lines without their line ending; a leading BOM is dropped.
    """
    return TextLines(path)


def blocks(path: str | os.PathLike, comment: str = "") -> Iterator[list[tuple[int, str]]]:
    """Blocks of non-blank lines as lists of (line number, line); lines starting with
    ``comment`` (if given) are skipped."""
    block: list[tuple[int, str]] = []
    with open_text(path) as text:
        for lineno, line in enumerate(text, 1):
            if not line or line.isspace():
                if block:
                    yield block
                    block = []
            elif not (comment and line.startswith(comment)):
                block.append((lineno, line))
    if block:
        yield block
