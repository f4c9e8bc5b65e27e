"""Readers for labelled sequence corpora and atomic file writing.

Four input formats are read into three corpus containers, from plain or gzip files (detected by
their magic bytes, never by the file name):

- CoNLL columns (:func:`read_conll`) and CoNLL-U (:func:`read_conllu`) -> :class:`TokenCorpus`;
- CRFsuite attribute files (:func:`read_crfsuite`) -> :class:`AttributeCorpus`;
- Taskar's OCR ``letter.data`` (:func:`read_ocr`) -> :class:`DenseCorpus`.

Every reader checks its input once and raises :class:`~crfsdca.errors.DataFormatError` with the
file and 1-based line number of the first problem. Encoders in :mod:`crfsdca.attributes` turn a
corpus into a packed :class:`~crfsdca.sequences.SequenceData`.
"""

from __future__ import annotations

import contextlib
import gzip
import math
import os
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np
from numpy.typing import NDArray

from crfsdca._dtypes import INDEX
from crfsdca.errors import DataFormatError

__all__ = [
    "AttributeCorpus",
    "DenseCorpus",
    "TextLines",
    "TokenCorpus",
    "atomic_open",
    "atomic_write_bytes",
    "open_text",
    "read_conll",
    "read_conllu",
    "read_crfsuite",
    "read_ocr",
    "write_crfsuite",
]

GZIP_MAGIC = b"\x1f\x8b"
DOCSTART = "-DOCSTART-"
OCR_PIXELS = 128

# ----------------------------------------------------------------------------- files


class TextLines:
    """Lines of a UTF-8 text file, plain or gzip, decoded one at a time.

    Iterating yields each line as ``str`` with its line ending removed (``\\n`` or ``\\r\\n``);
    ``lineno`` is the 1-based number of the line last yielded. Invalid UTF-8 or a corrupt gzip
    stream raises :class:`DataFormatError` naming the line. The file is closed when iteration
    ends or fails, or on leaving a ``with`` block.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = str(path)
        self.lineno = 0
        raw = open(path, "rb")  # noqa: SIM115 -- closed by close(), __exit__ or the end of __iter__
        self._gzip = raw.peek(2)[:2] == GZIP_MAGIC
        self._stream: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="rb") if self._gzip else raw
        self._raw = raw

    def __iter__(self) -> Iterator[str]:
        data = b""
        try:
            for data in self._stream:
                self.lineno += 1
                if self.lineno == 1 and data.startswith(b"\xef\xbb\xbf"):
                    data = data[3:]
                yield data.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as exc:
            bad = data[exc.start : exc.start + 4]
            msg = f"expected UTF-8 text, got bytes {bad!r} at column {exc.start + 1}"
            raise DataFormatError(self.path, self.lineno, msg) from None
        except (OSError, EOFError, zlib.error) as exc:
            if not self._gzip:
                raise
            msg = f"corrupt or truncated gzip stream after line {self.lineno}: {exc}"
            raise DataFormatError(self.path, None, msg) from None
        finally:
            self.close()

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


def _umask() -> int:
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


# read once at import: os.umask can only be read by setting it, which is not thread-safe
_FILE_MODE = 0o666 & ~_umask()


@contextlib.contextmanager
def atomic_open(
    path: str | os.PathLike, mode: Literal["w", "wb"] = "w", encoding: str = "utf-8"
) -> Iterator[IO[Any]]:
    """Write a file atomically: a temporary file in the same folder, renamed on success.

    If the ``with`` block raises, the temporary file is removed and ``path`` is untouched.

    Parameters
    ----------
    path : str or PathLike
        Destination; its folder must exist.
    mode : {"w", "wb"}
        Text or binary.
    encoding : str
        Text encoding for mode ``"w"``.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb'; got {mode!r}")
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        kwargs = {"encoding": encoding, "newline": ""} if mode == "w" else {}
        with os.fdopen(fd, mode, **kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, _FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_open`)."""
    with atomic_open(path, "wb") as handle:
        handle.write(data)


# ----------------------------------------------------------------------------- corpora


def _take(items: list, indices: Sequence[int] | slice) -> list:
    if not items:
        return []
    if isinstance(indices, slice):
        return items[indices]
    return [items[int(i)] for i in indices]


class _ListCorpus:
    """Shared methods of the corpora stored as one Python list per sequence."""

    _per_sequence: tuple[str, ...] = ()
    labels: list[list[str]]

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def n_tokens(self) -> int:
        return sum(map(len, self.labels))

    def subset(self, indices: Sequence[int] | slice) -> Any:
        """The sequences at ``indices``, in that order."""
        return replace(self, **{k: _take(getattr(self, k), indices) for k in self._per_sequence})

    def head(self, n: int) -> Any:
        """The first ``n`` sequences."""
        return self.subset(slice(0, n))


@dataclass(eq=False)
class TokenCorpus(_ListCorpus):
    """Sequences of tokens with string fields and one label per token.

    ``tokens[i][t]`` is the tuple of fields of token ``t`` of sequence ``i`` (label excluded),
    named by ``field_names``; ``labels[i][t]`` its label; ``lines[i]`` the 1-based line of the
    first token of sequence ``i`` in ``path``.
    """

    tokens: list[list[tuple[str, ...]]]
    labels: list[list[str]]
    field_names: tuple[str, ...]
    path: str = ""
    lines: list[int] = field(default_factory=list)
    _per_sequence = ("tokens", "labels", "lines")


@dataclass(eq=False)
class AttributeCorpus(_ListCorpus):
    """Sequences of items, each a list of ``(attribute name, value)`` pairs, with labels."""

    attributes: list[list[list[tuple[str, float]]]]
    labels: list[list[str]]
    path: str = ""
    lines: list[int] = field(default_factory=list)
    _per_sequence = ("attributes", "labels", "lines")


@dataclass(eq=False)
class DenseCorpus(_ListCorpus):
    """Sequences of dense attribute vectors (e.g. OCR pixels) with labels.

    ``values`` (n_tokens, n_dims) holds all tokens; sequence ``i`` is rows ``seq_offsets[i]`` to
    ``seq_offsets[i + 1]``; ``labels[i]`` its labels; ``folds[i]`` (int64) its cross-validation
    fold; ``lines[i]`` the 1-based line of its first token.
    """

    values: NDArray[Any]
    seq_offsets: NDArray[np.int64]
    labels: list[list[str]]
    folds: NDArray[np.int64]
    path: str = ""
    lines: list[int] = field(default_factory=list)

    @property
    def n_dims(self) -> int:
        return int(self.values.shape[1])

    def subset(self, indices: Sequence[int] | slice) -> DenseCorpus:
        """The sequences at ``indices``, in that order."""
        idx = np.arange(len(self))[indices]
        starts, lengths = self.seq_offsets[idx], np.diff(self.seq_offsets)[idx]
        offsets = np.zeros(idx.size + 1, INDEX)
        np.cumsum(lengths, out=offsets[1:])
        rows = np.arange(offsets[-1]) - np.repeat(offsets[:-1] - starts, lengths)
        return replace(
            self,
            values=self.values[rows],
            seq_offsets=offsets,
            labels=_take(self.labels, idx),
            folds=self.folds[idx],
            lines=_take(self.lines, idx),
        )


def _blocks(path: str | os.PathLike, comment: str = "") -> Iterator[list[tuple[int, str]]]:
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


# ----------------------------------------------------------------------------- CoNLL


def read_conll(
    path: str | os.PathLike,
    n_columns: int | None = None,
    field_names: Sequence[str] | None = None,
    docstart: Literal["drop", "keep"] = "drop",
) -> TokenCorpus:
    """Read whitespace-separated columns, one token per line, label in the last column.

    Blank lines (one or more) separate sequences. Every token line must have the same number of
    columns: ``n_columns``, else ``len(field_names) + 1``, else the count of the first token line.

    Parameters
    ----------
    path : str or PathLike
        Plain or gzip file.
    n_columns : int, optional
        Expected number of columns (fields + label), at least 2.
    field_names : sequence of str, optional
        Names of the non-label columns; default ``("w", "f1", "f2", ...)``.
    docstart : {"drop", "keep"}
        What to do with ``-DOCSTART-`` lines (first column). ``"drop"`` removes them (a
        sequence left empty disappears); ``"keep"`` keeps them as ordinary tokens, which is what
        the SAG4CRF NER encoding and the official CoNLL-2002 token counts do.

    Returns
    -------
    TokenCorpus
    """
    if docstart not in ("drop", "keep"):
        raise ValueError(f"docstart must be 'drop' or 'keep'; got {docstart!r}")
    names = tuple(field_names) if field_names is not None else None
    if names is not None:
        if n_columns is not None and n_columns != len(names) + 1:
            raise ValueError(f"n_columns={n_columns} disagrees with {len(names)} field names")
        n_columns = len(names) + 1
    if n_columns is not None and n_columns < 2:
        raise ValueError(f"n_columns must be >= 2 (fields and a label); got {n_columns}")
    if n_columns is not None and names is None:
        names = _default_names(n_columns)
    drop = docstart == "drop"
    corpus = TokenCorpus([], [], (), str(path), [])
    for block in _blocks(path):
        seq_tokens: list[tuple[str, ...]] = []
        seq_labels: list[str] = []
        for lineno, line in block:
            cols = line.split()
            if len(cols) != n_columns:
                n_columns, names = _check_columns(path, lineno, len(cols), n_columns, names)
            if drop and cols[0] == DOCSTART:
                continue
            if not seq_tokens:
                corpus.lines.append(lineno)
            seq_labels.append(cols.pop())
            seq_tokens.append(tuple(cols))
        if seq_tokens:
            corpus.tokens.append(seq_tokens)
            corpus.labels.append(seq_labels)
    if not corpus.tokens:
        raise DataFormatError(path, None, "expected at least one token line, got none")
    assert names is not None
    corpus.field_names = names
    return corpus


def _default_names(n_columns: int) -> tuple[str, ...]:
    return ("w",) + tuple(f"f{i}" for i in range(1, n_columns - 1))


def _check_columns(
    path: str | os.PathLike,
    lineno: int,
    n_got: int,
    n_columns: int | None,
    names: tuple[str, ...] | None,
) -> tuple[int, tuple[str, ...]]:
    """Fix the column count on the first token line, or raise on a mismatch."""
    if n_columns is None and n_got >= 2:
        return n_got, names or _default_names(n_got)
    if n_columns is None:
        msg = f"expected at least 2 columns (token fields, then a label), got {n_got}"
        raise DataFormatError(path, lineno, msg)
    names = names or _default_names(n_columns)
    msg = f"expected {n_columns} columns ({' '.join(names + ('label',))}), got {n_got}"
    if n_got == 1:
        msg += " (a token without a label?)"
    raise DataFormatError(path, lineno, msg)


def read_conllu(path: str | os.PathLike, tag: Literal["xpos", "upos"] = "xpos") -> TokenCorpus:
    """Read a CoNLL-U treebank for tagging: label = XPOS or UPOS of each word.

    ``#`` comment lines, multiword-token ranges (id ``n-m``) and empty nodes (id ``n.m``) are
    skipped; word ids must run 1, 2, ... in each sentence. Token fields are ``(form, other
    tag)``, named ``("w", "upos")`` when labelling with XPOS and ``("w", "xpos")`` otherwise.

    Parameters
    ----------
    path : str or PathLike
        Plain or gzip file with 10 tab-separated columns per word line.
    tag : {"xpos", "upos"}
        Which column is the label.
    """
    if tag not in ("xpos", "upos"):
        raise ValueError(f"tag must be 'xpos' or 'upos'; got {tag!r}")
    label_col, other_col = (4, 3) if tag == "xpos" else (3, 4)
    corpus = TokenCorpus([], [], ("w", "upos" if tag == "xpos" else "xpos"), str(path), [])
    for block in _blocks(path, comment="#"):
        seq_tokens: list[tuple[str, ...]] = []
        seq_labels: list[str] = []
        for lineno, line in block:
            cols = line.split("\t")
            if len(cols) != 10:
                spec = "ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC"
                msg = f"expected 10 tab-separated columns ({spec}), got {len(cols)}"
                raise DataFormatError(path, lineno, msg)
            if not _conllu_is_word(path, lineno, cols[0], len(seq_tokens)):
                continue
            if not seq_tokens:
                corpus.lines.append(lineno)
            seq_tokens.append((cols[1], cols[other_col]))
            seq_labels.append(cols[label_col])
        if seq_tokens:
            corpus.tokens.append(seq_tokens)
            corpus.labels.append(seq_labels)
    if not corpus.tokens:
        raise DataFormatError(path, None, "expected at least one word line, got none")
    return corpus


def _conllu_is_word(path: str | os.PathLike, lineno: int, token_id: str, n_words: int) -> bool:
    """True for an integer word id (checked to be the next one); False for ``n-m`` or ``n.m``."""
    if token_id.isdigit():
        if int(token_id) != n_words + 1:
            raise DataFormatError(path, lineno, f"expected word id {n_words + 1}, got {token_id}")
        return True
    parts = token_id.split("-" if "-" in token_id else ".")
    if len(parts) == 2 and all(p.isdigit() for p in parts):
        return False
    raise DataFormatError(path, lineno, f"expected an id like 3, 3-4 or 3.1, got {token_id!r}")


# ----------------------------------------------------------------------------- OCR

_OCR_HEAD = ("id", "letter", "next_id", "word_id", "position", "fold")


def read_ocr(path: str | os.PathLike) -> DenseCorpus:
    """Read Taskar's OCR ``letter.data``: one letter per line, words as runs of lines.

    Tab-separated fields ``id letter next_id word_id position fold p_0_0 ... p_15_7`` (a trailing
    tab is allowed); a word ends at ``next_id == -1``. Pixels must be ``0`` or ``1``.

    Returns
    -------
    DenseCorpus
        ``values`` (n_letters, 128) uint8, labels = letters, ``folds`` per word.
    """
    corpus = DenseCorpus(np.zeros((0, OCR_PIXELS), np.uint8), np.zeros(1, INDEX), [], [], str(path))
    pixels: list[str] = []
    line_of_row: list[int] = []
    word: list[str] = []
    with open_text(path) as text:
        for lineno, line in enumerate(text, 1):
            head = line.split("\t", 6)
            if len(head) < 7:
                msg = f"expected {6 + OCR_PIXELS} tab-separated fields, got {len(head)}"
                raise DataFormatError(path, lineno, msg)
            pix = head[6][:-1] if head[6].endswith("\t") else head[6]
            if len(pix) != 2 * OCR_PIXELS - 1 or not pix.isascii():
                _ocr_pixel_error(path, lineno, pix)
            fold = _ocr_int(path, lineno, head, 5)
            if not word:
                corpus.lines.append(lineno)
                corpus.folds.append(fold)
            elif fold != corpus.folds[-1]:
                msg = f"expected the fold of its word, {corpus.folds[-1]}, got {fold}"
                raise DataFormatError(path, lineno, msg)
            word.append(head[1])
            pixels.append(pix)
            line_of_row.append(lineno)
            if _ocr_int(path, lineno, head, 2) == -1:
                corpus.labels.append(word)
                word = []
    if word:
        raise DataFormatError(path, lineno, "expected next_id -1 on the last letter of the file")
    if not corpus.labels:
        raise DataFormatError(path, None, "expected at least one letter line, got none")
    corpus.values = _ocr_pixel_matrix(path, line_of_row, pixels)
    corpus.seq_offsets = np.zeros(len(corpus.labels) + 1, INDEX)
    np.cumsum([len(w) for w in corpus.labels], out=corpus.seq_offsets[1:])
    corpus.folds = np.asarray(corpus.folds, INDEX)
    return corpus


def _ocr_int(path: str | os.PathLike, lineno: int, head: list[str], col: int) -> int:
    try:
        return int(head[col])
    except ValueError:
        msg = f"field {_OCR_HEAD[col]}: expected an integer, got {head[col]!r}"
        raise DataFormatError(path, lineno, msg) from None


def _ocr_pixel_error(path: str | os.PathLike, lineno: int, pix: str) -> None:
    """Raise the precise error for a malformed pixel block (128 values 0/1, tab-separated)."""
    values = pix.split("\t")
    if len(values) != OCR_PIXELS:
        msg = f"expected {OCR_PIXELS} pixel fields after 'fold', got {len(values)}"
        raise DataFormatError(path, lineno, msg)
    for j, v in enumerate(values):
        if v not in ("0", "1"):
            msg = f"pixel {j + 1} (p_{j // 8}_{j % 8}): expected 0 or 1, got {v!r}"
            raise DataFormatError(path, lineno, msg)


def _ocr_pixel_matrix(
    path: str | os.PathLike, line_of_row: list[int], pixels: list[str]
) -> NDArray[np.uint8]:
    """Turn the pixel strings (each 255 ASCII characters) into a (N, 128) uint8 matrix."""
    raw = np.frombuffer("".join(pixels).encode("ascii"), np.uint8).reshape(len(pixels), -1)
    digits = raw[:, ::2]
    bad = np.any((digits != ord("0")) & (digits != ord("1")), axis=1)
    bad |= np.any(raw[:, 1::2] != ord("\t"), axis=1)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        _ocr_pixel_error(path, line_of_row[row], pixels[row])
    return digits - np.uint8(ord("0"))


# ----------------------------------------------------------------------------- CRFsuite


def read_crfsuite(path: str | os.PathLike) -> AttributeCorpus:
    """Read a CRFsuite data file: ``label<TAB>attr[:weight]<TAB>...``, blank lines between items.

    In names and labels, ``\\:`` stands for a colon and ``\\\\`` for a backslash (CRFsuite's
    escaping); the weight, if any, follows the last unescaped colon and must be a finite number
    (default 1). Empty fields (consecutive tabs) are ignored.
    """
    corpus = AttributeCorpus([], [], str(path), [])
    for block in _blocks(path):
        corpus.lines.append(block[0][0])
        seq_attrs, seq_labels = [], []
        for lineno, line in block:
            fields = line.split("\t")
            if not fields[0]:
                raise DataFormatError(path, lineno, "expected a label in the first field, got ''")
            seq_labels.append(_split_escaped(fields[0])[0] if "\\" in fields[0] else fields[0])
            seq_attrs.append([_parse_attribute(path, lineno, f) for f in fields[1:] if f])
        corpus.attributes.append(seq_attrs)
        corpus.labels.append(seq_labels)
    if not corpus.attributes:
        raise DataFormatError(path, None, "expected at least one item line, got none")
    return corpus


def _split_escaped(text: str) -> tuple[str, int]:
    """Unescape ``\\:`` and ``\\\\``; return the text and the index of its last bare colon."""
    out: list[str] = []
    colon = -1
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] in "\\:":
            c = text[i + 1]
            i += 1
        elif c == ":":
            colon = len(out)
        out.append(c)
        i += 1
    return "".join(out), colon


def _parse_attribute(path: str | os.PathLike, lineno: int, text: str) -> tuple[str, float]:
    text, colon = _split_escaped(text) if "\\" in text else (text, text.rfind(":"))
    name, weight = text, 1.0
    if colon >= 0:
        name, raw = text[:colon], text[colon + 1 :]
        try:
            weight = float(raw)
        except ValueError:
            weight = math.nan
        if not math.isfinite(weight):
            msg = f"attribute {name!r}: expected a finite weight after the last ':', got {raw!r}"
            raise DataFormatError(path, lineno, msg + " (write a colon in a name as \\:)")
    if not name:
        raise DataFormatError(path, lineno, f"expected an attribute name, got {text!r}")
    return name, weight


def _escape(text: str) -> str:
    if "\t" in text or "\n" in text or "\r" in text:
        raise ValueError(f"attribute names and labels cannot contain tabs or newlines: {text!r}")
    return text.replace("\\", "\\\\").replace(":", "\\:")


def write_crfsuite(path: str | os.PathLike, corpus: AttributeCorpus) -> None:
    """Write ``corpus`` in CRFsuite's data format, atomically; gzip it if ``path`` ends in .gz.

    Colons and backslashes in names and labels are escaped; a weight of 1 is omitted.
    """
    out: list[str] = []
    for seq_attrs, seq_labels in zip(corpus.attributes, corpus.labels, strict=True):
        for item, label in zip(seq_attrs, seq_labels, strict=True):
            fields = [_escape(label)]
            for name, weight in item:
                w = float(weight)
                fields.append(_escape(name) if w == 1.0 else f"{_escape(name)}:{w!r}")
            out.append("\t".join(fields))
        out.append("")
    data = ("\n".join(out) + "\n").encode("utf-8")
    if str(path).endswith(".gz"):
        data = gzip.compress(data, compresslevel=6, mtime=0)
    atomic_write_bytes(path, data)
