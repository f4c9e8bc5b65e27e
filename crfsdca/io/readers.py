"""Readers of the four corpus formats: CoNLL, CoNLL-U, Taskar's OCR, CRFsuite attribute files.

Every reader checks its input once and raises :class:`~crfsdca.errors.DataFormatError` naming the
file and the 1-based line of the first problem; no other exception escapes on malformed content
(``tests/test_hostile_input.py`` fuzzes them). Line-level rules (encodings, line breaks, gzip,
NUL bytes, the line-length bound) are those of :mod:`crfsdca.io.textfile`; each reader documents its
own column rules. Numbers are ASCII decimals: ``int()`` and ``float()`` would also take ``1_0``,
surrounding spaces and digits of other scripts.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from typing import Literal, NoReturn

import numpy as np
from numpy.typing import NDArray

from crfsdca._dtypes import INDEX
from crfsdca.errors import DataFormatError
from crfsdca.io.corpora import AttributeCorpus, DenseCorpus, TokenCorpus
from crfsdca.io.textfile import blocks as _blocks
from crfsdca.io.textfile import open_text
from crfsdca.io.textfile import quote as _quote

__all__ = ["MAX_COLUMNS", "read_conll", "read_conllu", "read_crfsuite", "read_ocr"]

DOCSTART = "-DOCSTART-"
OCR_PIXELS = 128
MAX_COLUMNS = 1000  # bound on a CoNLL column count inferred from the first token line

_INT = re.compile(r"-?[0-9]{1,18}")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _int_or_none(text: str) -> int | None:
    """An ASCII decimal integer of at most 18 digits, else None."""
    return int(text) if _INT.fullmatch(text) else None


# ----------------------------------------------------------------------------- CoNLL


def read_conll(
    path: str | os.PathLike,
    n_columns: int | None = None,
    field_names: Sequence[str] | None = None,
    docstart: Literal["drop", "keep"] = "drop",
) -> TokenCorpus:
    """Read whitespace-separated columns, one token per line, label in the last column.

    Blank lines (one or more, possibly holding spaces or tabs) separate sequences. Columns are
    separated by any run of spaces and tabs, mixed or not; leading and trailing whitespace is
    ignored. Every token line must have the same number of columns: ``n_columns``, else
    ``len(field_names) + 1``, else the count of the first token line (at most
    :data:`MAX_COLUMNS`).

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
        rows = [line.split() for _, line in block]
        if n_columns is None or set(map(len, rows)) != {n_columns}:
            for (lineno, _), cols in zip(block, rows, strict=True):  # the first bad line
                if len(cols) != n_columns:
                    n_columns, names = _check_columns(path, lineno, len(cols), n_columns, names)
        linenos = [lineno for lineno, _ in block]
        if drop and any(cols[0] == DOCSTART for cols in rows):
            kept = [i for i, cols in enumerate(rows) if cols[0] != DOCSTART]
            rows, linenos = [rows[i] for i in kept], [linenos[i] for i in kept]
        if rows:
            corpus.lines.append(linenos[0])
            corpus.labels.append([cols.pop() for cols in rows])
            corpus.tokens.append(list(map(tuple, rows)))
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
    if n_columns is None and 2 <= n_got <= MAX_COLUMNS:
        return n_got, names or _default_names(n_got)
    if n_columns is None:
        bound = "at least 2" if n_got < 2 else f"at most {MAX_COLUMNS}"
        msg = f"expected {bound} columns (token fields, then a label), got {n_got}"
        raise DataFormatError(path, lineno, msg + ("; not a CoNLL file?" if n_got > 2 else ""))
    spec = names or _default_names(n_columns)
    spec += ("label",)
    if len(spec) > 8:
        spec = spec[:3] + ("...",) + spec[-2:]
    msg = f"expected {n_columns} columns ({' '.join(spec)}), got {n_got}"
    if n_got == 1:
        msg += " (a token without a label?)"
    raise DataFormatError(path, lineno, msg)


# ----------------------------------------------------------------------------- CoNLL-U

_CONLLU_SPEC = "ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC"
_CONLLU_WORD = re.compile(r"[0-9]{1,18}")
_CONLLU_RANGE = re.compile(r"[0-9]{1,18}[-.][0-9]{1,18}")


def read_conllu(path: str | os.PathLike, tag: Literal["xpos", "upos"] = "xpos") -> TokenCorpus:
    """Read a CoNLL-U treebank for tagging: label = XPOS or UPOS of each word.

    ``#`` comment lines, multiword-token ranges (id ``n-m``) and empty nodes (id ``n.m``) are
    skipped; word ids must run 1, 2, ... in each sentence. Token fields are ``(form, other
    tag)``, named ``("w", "upos")`` when labelling with XPOS and ``("w", "xpos")`` otherwise.
    The HEAD column gives ``corpus.heads`` (0-based, -1 for the root) when every sentence's
    heads form a tree or forest: ASCII integers (``²`` or ``٣`` are not numbers here), 0 for a
    root, else a word id of the sentence, no word its own head, no cycle. Otherwise the corpus
    has no heads and ``corpus.head_problem`` holds the first problem (line, message, HEAD
    numbered as in the file): only a reader of trees reports it, tagging chains never needs
    the column.

    Parameters
    ----------
    path : str or PathLike
        Plain or gzip file with exactly 10 tab-separated columns per word line.
    tag : {"xpos", "upos"}
        Which column is the label; it must not be empty (``_`` is a label like any other).
    """
    if tag not in ("xpos", "upos"):
        raise ValueError(f"tag must be 'xpos' or 'upos'; got {tag!r}")
    label_col, other_col = (4, 3) if tag == "xpos" else (3, 4)
    corpus = TokenCorpus([], [], ("w", "upos" if tag == "xpos" else "xpos"), str(path), [])
    problem: tuple[int, str] | None = None  # the first sentence whose heads are not a tree
    for block in _blocks(path, comment="#"):
        seq_tokens: list[tuple[str, ...]] = []
        seq_labels: list[str] = []
        seq_heads: list[tuple[int, str]] = []
        for lineno, line in block:
            cols = line.split("\t")
            if len(cols) != 10:
                msg = f"expected 10 tab-separated columns ({_CONLLU_SPEC}), got {len(cols)}"
                raise DataFormatError(path, lineno, msg)
            if not _conllu_is_word(path, lineno, cols[0], len(seq_tokens)):
                continue
            if not cols[label_col]:
                msg = f"column {label_col + 1} ({tag.upper()}): expected a tag, got ''"
                raise DataFormatError(path, lineno, msg)
            if not seq_tokens:
                corpus.lines.append(lineno)
            seq_tokens.append((cols[1], cols[other_col]))
            seq_labels.append(cols[label_col])
            seq_heads.append((lineno, cols[6]))
        if seq_tokens:
            corpus.tokens.append(seq_tokens)
            corpus.labels.append(seq_labels)
            if problem is None:
                heads = _conllu_heads(seq_heads)
                if isinstance(heads, tuple):
                    problem = heads
                else:
                    corpus.heads.append(heads)
    if not corpus.tokens:
        raise DataFormatError(path, None, "expected at least one word line, got none")
    if problem is not None:
        corpus.heads, corpus.head_problem = [], problem
    return corpus


_HEAD = "column 7 (HEAD)"


def _conllu_heads(words: list[tuple[int, str]]) -> list[int] | tuple[int, str]:
    """0-based parents (-1: root) of one sentence from its (line, HEAD) pairs, or the first
    problem as (line, message) with HEAD numbered as in the file."""
    n = len(words)
    parents = []
    for lineno, text in words:
        if not _CONLLU_WORD.fullmatch(text):
            if _INT.fullmatch(text):
                why = f"got {text}, a negative number"
            elif text == "_":
                why = "got '_' (no head)"
            else:
                why = f"got {_quote(text)}, not an ASCII integer"
            return lineno, f"{_HEAD}: expected 0 (the root) or a word id from 1 to {n}; {why}"
        head = int(text)
        if head > n:
            return lineno, (
                f"{_HEAD}: expected 0 (the root) or a word id from 1 to {n}; got {head}, beyond"
                f" the sentence's {n} words"
            )
        if head == len(parents) + 1:
            return lineno, f"{_HEAD}: word {head} is its own head (a self-loop)"
        parents.append(head - 1)
    cycle = _first_cycle(parents)
    if cycle:
        ids = " -> ".join(str(i + 1) for i in [*cycle, cycle[0]])
        return words[min(cycle)][0], (
            f"{_HEAD}: word {min(cycle) + 1} lies on a cycle of heads ({ids}); the heads of a"
            " sentence must form a tree"
        )
    return parents


def _first_cycle(parents: list[int]) -> list[int]:
    """The words of a cycle of ``parents`` (0-based, -1 = root), first found; [] if none."""
    state = [0] * len(parents)  # 0 unseen, 1 on the current path, 2 done
    for start in range(len(parents)):
        path, node = [], start
        while node >= 0 and state[node] == 0:
            state[node] = 1
            path.append(node)
            node = parents[node]
        if node >= 0 and state[node] == 1:
            return path[path.index(node) :]
        for visited in path:
            state[visited] = 2
    return []


def _conllu_is_word(path: str | os.PathLike, lineno: int, token_id: str, n_words: int) -> bool:
    """True for an integer word id (checked to be the next one); False for ``n-m`` or ``n.m``."""
    if _CONLLU_WORD.fullmatch(token_id):
        if int(token_id) != n_words + 1:
            msg = f"expected word id {n_words + 1}, got {token_id}"
            raise DataFormatError(path, lineno, msg)
        return True
    if _CONLLU_RANGE.fullmatch(token_id):
        return False
    msg = f"expected an id like 3, 3-4 or 3.1, got {_quote(token_id)}"
    raise DataFormatError(path, lineno, msg)


# ----------------------------------------------------------------------------- OCR

_OCR_HEAD = ("id", "letter", "next_id", "word_id", "position", "fold")
_OCR_INT = r"(-?[0-9]{1,18})"
_OCR_LINE = re.compile("\t".join([_OCR_INT, "([^\t]+)"] + [_OCR_INT] * 4) + "\t")


def read_ocr(path: str | os.PathLike) -> DenseCorpus:
    """Read Taskar's OCR ``letter.data``: one letter per line, words as runs of lines.

    Tab-separated fields ``id letter next_id word_id position fold p_0_0 ... p_15_7``; the five
    numeric head fields are ASCII integers, the letter is not empty, pixels are ``0`` or ``1``.
    A word ends at ``next_id == -1``. Trailing spaces and tabs and blank lines are ignored.

    Returns
    -------
    DenseCorpus
        ``values`` (n_letters, 128) uint8, labels = letters, ``folds`` per word.
    """
    corpus = DenseCorpus(np.zeros((0, OCR_PIXELS), np.uint8), np.zeros(1, INDEX), [], [], str(path))
    pixels: list[str] = []
    line_of_row: list[int] = []
    word: list[str] = []
    lineno = 0
    with open_text(path) as text:
        for lineno, line in enumerate(text, 1):
            line = line.rstrip(" \t")
            if not line:
                continue
            head = _OCR_LINE.match(line)
            if head is None:
                _ocr_head_error(path, lineno, line)
            pix = line[head.end() :]
            if len(pix) != 2 * OCR_PIXELS - 1 or not pix.isascii():
                _ocr_pixel_error(path, lineno, pix)
            fold = int(head[6])
            if not word:
                corpus.lines.append(lineno)
                corpus.folds.append(fold)
            elif fold != corpus.folds[-1]:
                msg = f"expected the fold of its word, {corpus.folds[-1]}, got {fold}"
                raise DataFormatError(path, lineno, msg)
            word.append(head[2])
            pixels.append(pix)
            line_of_row.append(lineno)
            if int(head[3]) == -1:
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


def _ocr_head_error(path: str | os.PathLike, lineno: int, line: str) -> NoReturn:
    """Raise the precise error for a line whose six head fields do not parse."""
    head = line.split("\t", 6)
    if len(head) < 7:
        msg = f"expected {6 + OCR_PIXELS} tab-separated fields, got {len(head)}"
        raise DataFormatError(path, lineno, msg)
    for col in (0, 2, 3, 4, 5):
        if _int_or_none(head[col]) is None:
            msg = f"field {_OCR_HEAD[col]}: expected an integer, got {_quote(head[col])}"
            raise DataFormatError(path, lineno, msg)
    raise DataFormatError(path, lineno, "field letter: expected a label, got ''")


def _ocr_pixel_error(path: str | os.PathLike, lineno: int, pix: str) -> None:
    """Raise the precise error for a malformed pixel block (128 values 0/1, tab-separated)."""
    values = pix.split("\t")
    if len(values) != OCR_PIXELS:
        msg = f"expected {OCR_PIXELS} pixel fields after 'fold', got {len(values)}"
        raise DataFormatError(path, lineno, msg)
    for j, v in enumerate(values):
        if v not in ("0", "1"):
            msg = f"pixel {j + 1} (p_{j // 8}_{j % 8}): expected 0 or 1, got {_quote(v)}"
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

    As in CRFsuite, fields are separated by tabs only: spaces belong to names and labels. In
    names and labels, ``\\:`` stands for a colon and ``\\\\`` for a backslash (CRFsuite's
    escaping); the weight, if any, follows the last unescaped colon and must be a finite number
    (default 1; ASCII decimal notation, spaces around it allowed, no ``nan`` or ``inf``).
    Empty fields (consecutive tabs) are ignored; an item may have no attribute.
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
        weight = float(raw) if _FLOAT.fullmatch(raw.strip(" ")) else math.nan
        if not math.isfinite(weight):
            msg = f"attribute {_quote(name)}: expected a finite weight after the last ':', got"
            msg += f" {_quote(raw)} (write a colon in a name as \\:)"
            raise DataFormatError(path, lineno, msg)
    if not name:
        raise DataFormatError(path, lineno, f"expected an attribute name, got {_quote(text)}")
    return name, weight
