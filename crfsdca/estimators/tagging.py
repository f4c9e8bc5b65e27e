"""Tag data with a trained model.

- CoNLL-style files (:func:`tag_conll`): each token line gets the predicted label appended.
  Token lines hold the fields the model's template reads (e.g. ``word POS``); a line with one
  more column (a gold label) is accepted and the extra column ignored. Blank lines separate
  sentences and are echoed; ``-DOCSTART-`` lines are echoed untouched.
- Any corpus (:func:`tag_corpus`: CRFsuite attribute files, OCR letters, CoNLL-U): one predicted
  label per line, a blank line after each sequence, as ``crfsuite tag`` prints them;
  :func:`tag_data` prints encoded data so, e.g. the sentences of a tree model with their trees.
"""

from __future__ import annotations

from collections.abc import Iterator

from crfsdca.errors import DataFormatError
from crfsdca.io import TokenCorpus, open_text


def _sentences(path: str, n_fields: int) -> Iterator[list[tuple[int, str, tuple[str, ...]]]]:
    block: list[tuple[int, str, tuple[str, ...]]] = []
    for number, line in enumerate(open_text(path), start=1):
        text = line.rstrip("\r\n")
        cols = text.split()
        if not cols or cols[0] == "-DOCSTART-":
            if block:
                yield block
                block = []
            yield [(number, text, ())]
            continue
        if len(cols) not in (n_fields, n_fields + 1):
            raise DataFormatError(
                path,
                number,
                f"expected {n_fields} columns (or {n_fields + 1}"
                f" with a gold label), got {len(cols)}",
            )
        block.append((number, text, tuple(cols[:n_fields])))
    if block:
        yield block


def tag_conll(model, encoder, path: str) -> Iterator[str]:
    """Lines of ``path`` with the predicted label appended to every token line."""
    field_names = encoder.template_set.field_names
    blocks = list(_sentences(path, len(field_names)))
    sentences = [b for b in blocks if b[0][2]]
    if not sentences:
        raise DataFormatError(path, None, "no token lines to tag")
    corpus = TokenCorpus(
        tokens=[[tok for _, _, tok in s] for s in sentences],
        labels=[[""] * len(s) for s in sentences],
        field_names=field_names,
        path=path,
        lines=[s[0][0] for s in sentences],
    )
    pred = model.predict(encoder.transform(corpus))
    names = model.label_names_
    k = 0
    for block in blocks:
        if not block[0][2]:
            yield block[0][1]
            continue
        for _, text, _ in block:
            yield f"{text} {names[pred[k]]}"
            k += 1


def tag_corpus(model, encoder, corpus) -> Iterator[str]:
    """One predicted label per item of ``corpus``, an empty string after each sequence."""
    return tag_data(model, encoder.transform(corpus))


def tag_data(model, data) -> Iterator[str]:
    """One predicted label per item of encoded ``data`` (SequenceData, or TreeData for a tree
    model), an empty string after each sequence."""
    pred = model.predict(data)
    names = model.label_names_
    offsets = data.seq_offsets.tolist()
    for start, stop in zip(offsets[:-1], offsets[1:], strict=True):
        yield from (names[k] for k in pred[start:stop].tolist())
        yield ""
