"""Corpus readers and atomic file writing: the public names of crfsdca's data layer.

Four input formats are read into three corpus containers, from plain or gzip files (detected by
their magic bytes, never by the file name):

- CoNLL columns (:func:`read_conll`) and CoNLL-U (:func:`read_conllu`) -> :class:`TokenCorpus`;
- CRFsuite attribute files (:func:`read_crfsuite`) -> :class:`AttributeCorpus`;
- Taskar's OCR ``letter.data`` (:func:`read_ocr`) -> :class:`DenseCorpus`.

Every reader checks its input once and raises :class:`~crfsdca.errors.DataFormatError` with the
file and 1-based line number of the first problem, and nothing else on malformed content. The
implementation is split by concept, all re-exported here: line reading and the rules every
format shares (encodings, line breaks, gzip, NUL bytes, line length) in :mod:`crfsdca.io.textfile`,
the four readers and their column rules in :mod:`crfsdca.io.readers`, the containers in
:mod:`crfsdca.io.corpora`. Encoders in :mod:`crfsdca.features.attributes` turn a corpus into a
packed
:class:`~crfsdca.features.sequences.SequenceData`.
"""

from __future__ import annotations

import gzip
import os

from crfsdca.io.atomicfile import atomic_open, atomic_write_bytes
from crfsdca.io.corpora import AttributeCorpus, DenseCorpus, TokenCorpus
from crfsdca.io.readers import (
    DOCSTART,
    MAX_COLUMNS,
    OCR_PIXELS,
    read_conll,
    read_conllu,
    read_crfsuite,
    read_ocr,
)
from crfsdca.io.textfile import GZIP_MAGIC, MAX_LINE_BYTES, TextLines, open_text

__all__ = [
    "DOCSTART",
    "GZIP_MAGIC",
    "MAX_COLUMNS",
    "MAX_LINE_BYTES",
    "OCR_PIXELS",
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
