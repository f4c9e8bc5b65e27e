"""Evaluation of predicted label sequences: token accuracy and CoNLL chunk scores.

Token accuracy is the fraction of tokens whose predicted label equals the gold label; a gold label
``-1`` (a label the model does not know, e.g. ``I-LST`` in the CoNLL-2000 test set) is always an
error.

Chunk scores reproduce ``conlleval.pl`` (CoNLL-2000 shared task, version 2004-01-26). A tag
``B-NP`` splits at its first hyphen into the chunk tag ``B`` and the type ``NP``; a tag without a
hyphen has the empty type (as does the type ``"0"``, which Perl reads as false). Between two
tokens a chunk *ends* (``endOfChunk``) when the pair of tags (previous, current) is one of
``BB BO IB IO EE EI EO``, when the previous tag is not ``O`` or ``.`` and the type changes, or when
the previous tag is ``[`` or ``]``. A chunk *starts* (``startOfChunk``) on ``BB IB OB OI EE EI OE``,
when the current tag is not ``O`` or ``.`` and the type changes, or when it is ``[`` or ``]``.
These rules read IOB1, IOB2, IOE1 and IOE2 alike; in particular ``I-`` after ``O`` starts a chunk
and ``B-NP I-VP`` is two chunks. A predicted chunk is correct when it starts and ends where a
gold chunk does and has its type. Sentence boundaries are ``O`` (a chunk of a type-less tag such
as ``NN`` after ``B-NP`` is not ended by them, as in Perl). Precision, recall and F1 are in
percent, as ``conlleval`` prints them.

The Perl script merges ``S-X S-X`` into one chunk; the ``"iobes"`` rules add the pairs of the
IOBES-aware ``conlleval`` variant (a chunk ends after ``E`` or ``S`` and before ``B`` or ``S``,
and starts on ``B`` or ``S`` and after ``E`` or ``S``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "SCHEMES",
    "UNKNOWN_TAG",
    "ChunkReport",
    "TypeScores",
    "chunk_scores",
    "evaluate_data",
    "evaluate_labels",
    "format_report",
    "looks_like_chunk_tags",
    "token_accuracy",
]

SCHEMES = ("auto", "conlleval", "iob1", "iob2", "ioe", "ioe1", "ioe2", "iobes")
UNKNOWN_TAG = "I-<unknown>"


def _pairs(text: str) -> frozenset[tuple[str, str]]:
    """(previous chunk tag, current chunk tag) pairs from ``"BB BO ..."``."""
    return frozenset((pair[0], pair[1]) for pair in text.split())


_PERL_END = _pairs("BB BO IB IO EE EI EO")
_PERL_START = _pairs("BB IB OB OI EE EI OE")
_IOBES_END = _PERL_END | _pairs("BS IS ES EB SE SI SO SS SB")
_IOBES_START = _PERL_START | _pairs("SB EB BS IS OS SS ES SI SE")
_PREFIXES = dict(iob1="BI", iob2="BI", ioe="IE", ioe1="IE", ioe2="IE", iobes="BIES")
_CHUNK_NAME = re.compile(r"^[BIES]-.")


@dataclass(frozen=True, kw_only=True, slots=True)
class TypeScores:
    """Scores of one chunk type (or one label); precision, recall and f1 in percent."""

    precision: float
    recall: float
    f1: float
    support: int  # gold chunks (tokens) of this type
    n_predicted: int
    n_correct: int


@dataclass(frozen=True, kw_only=True, slots=True)
class ChunkReport:
    """The numbers ``conlleval`` prints; rates in percent (``accuracy`` is nan without tokens)."""

    n_tokens: int
    n_correct_tags: int
    n_gold_chunks: int
    n_pred_chunks: int
    n_correct_chunks: int
    accuracy: float
    precision: float
    recall: float
    f1: float
    per_type: dict[str, TypeScores] = field(default_factory=dict)
    rules: str = "conlleval"  # the rule set used: "conlleval" or "iobes"

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (``per_type`` values become dicts too)."""
        return asdict(self)


def token_accuracy(gold: NDArray[np.int64], pred: NDArray[np.integer]) -> float:
    """Fraction of tokens predicted correctly.

    Parameters
    ----------
    gold : ndarray of int64, shape (n_items,)
        Gold label ids; ``-1`` marks a label unknown to the model and is always an error.
    pred : ndarray of int, shape (n_items,)
        Predicted label ids.

    Returns
    -------
    float
        Accuracy in [0, 1]; nan when there are no tokens.
    """
    gold, pred = np.asarray(gold), np.asarray(pred)
    if gold.ndim != 1 or gold.shape != pred.shape:
        raise ValueError(
            f"gold and pred must be 1-d arrays of one length; got {gold.shape} and {pred.shape}"
        )
    if gold.size == 0:
        return float("nan")
    return float(np.count_nonzero((gold == pred) & (gold >= 0)) / gold.size)


def _split_tag(tag: str) -> tuple[str, str]:
    """Split like conlleval's ``/^([^-]*)-(.*)$/``; Perl reads the type "0" as false (empty)."""
    head, hyphen, chunk_type = tag.partition("-")
    if not hyphen:
        return tag, ""
    return head, "" if chunk_type == "0" else chunk_type


def _rules_for(scheme: str, tags: Sequence[tuple[str, str]]) -> str:
    """Resolve ``scheme`` to a rule set, checking the chunk tags it allows."""
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {', '.join(SCHEMES)}; got {scheme!r}")
    if scheme == "conlleval":
        return "conlleval"
    if scheme == "auto":
        return "iobes" if any(tag == "S" for tag, _ in tags) else "conlleval"
    allowed = _PREFIXES[scheme]
    for tag, chunk_type in tags:
        if tag != "O" and (tag not in allowed or not chunk_type):
            shown = f"{tag}-{chunk_type}" if chunk_type else tag
            raise ValueError(
                f"scheme {scheme!r} allows tags O and {'/'.join(allowed)}-TYPE; got {shown!r}"
            )
    return "iobes" if scheme == "iobes" else "conlleval"


@dataclass
class _Counts:
    """conlleval's counters."""

    n_tokens: int = 0
    n_correct_tags: int = 0
    found_correct: Counter = field(default_factory=Counter)
    found_guessed: Counter = field(default_factory=Counter)
    correct_chunks: Counter = field(default_factory=Counter)


def _ends(prev: tuple[str, str], cur: tuple[str, str], pairs: frozenset) -> bool:
    """Say whether a chunk ended between the previous and the current token (endOfChunk)."""
    return (
        (prev[0], cur[0]) in pairs
        or (prev[0] not in ("O", ".") and prev[1] != cur[1])
        or prev[0] in ("[", "]")
    )


def _starts(prev: tuple[str, str], cur: tuple[str, str], pairs: frozenset) -> bool:
    """Say whether a chunk starts at the current token (conlleval's startOfChunk)."""
    return (
        (prev[0], cur[0]) in pairs
        or (cur[0] not in ("O", ".") and prev[1] != cur[1])
        or cur[0] in ("[", "]")
    )


def _count_chunks(
    gold: Sequence[Sequence[tuple[str, str]]], pred: Sequence[Sequence[tuple[str, str]]], rules: str
) -> _Counts:
    """Run conlleval's main loop over split tags, with an ``O`` line after every sequence."""
    end, start = (_IOBES_END, _IOBES_START) if rules == "iobes" else (_PERL_END, _PERL_START)
    counts = _Counts()
    outside = ("O", "")
    last_c = last_g = outside
    in_correct = False
    for gold_seq, pred_seq in zip(gold, pred, strict=True):
        for i in range(len(gold_seq) + 1):
            boundary = i == len(gold_seq)
            c, g = (outside, outside) if boundary else (gold_seq[i], pred_seq[i])
            end_c, end_g = _ends(last_c, c, end), _ends(last_g, g, end)
            if in_correct:
                if end_c and end_g and last_g[1] == last_c[1]:
                    in_correct = False
                    counts.correct_chunks[last_c[1]] += 1
                elif end_c != end_g or g[1] != c[1]:
                    in_correct = False
            start_c, start_g = _starts(last_c, c, start), _starts(last_g, g, start)
            if start_c and start_g and g[1] == c[1]:
                in_correct = True
            if start_c:
                counts.found_correct[c[1]] += 1
            if start_g:
                counts.found_guessed[g[1]] += 1
            if not boundary:
                counts.n_correct_tags += c == g
                counts.n_tokens += 1
            last_c, last_g = c, g
    if in_correct:  # a chunk of a type-less tag (e.g. "NN") survives the boundary
        counts.correct_chunks[last_c[1]] += 1
    return counts


def _scores(n_correct: int, n_predicted: int, support: int) -> TypeScores:
    """Precision, recall, F1 in percent; 0 where conlleval prints 0."""
    precision = 100.0 * n_correct / n_predicted if n_predicted > 0 else 0.0
    recall = 100.0 * n_correct / support if support > 0 else 0.0
    total = precision + recall
    f1 = 2.0 * precision * recall / total if total > 0 else 0.0
    return TypeScores(
        precision=precision,
        recall=recall,
        f1=f1,
        support=support,
        n_predicted=n_predicted,
        n_correct=n_correct,
    )


def _report(counts: _Counts, rules: str) -> ChunkReport:
    per_type = {
        name: _scores(
            counts.correct_chunks[name], counts.found_guessed[name], counts.found_correct[name]
        )
        for name in sorted(counts.found_correct.keys() | counts.found_guessed.keys())
    }
    n_tokens = counts.n_tokens
    total = _scores(
        sum(counts.correct_chunks.values()),
        sum(counts.found_guessed.values()),
        sum(counts.found_correct.values()),
    )
    return ChunkReport(
        n_tokens=n_tokens,
        n_correct_tags=counts.n_correct_tags,
        n_gold_chunks=total.support,
        n_pred_chunks=total.n_predicted,
        n_correct_chunks=total.n_correct,
        accuracy=100.0 * counts.n_correct_tags / n_tokens if n_tokens else float("nan"),
        precision=total.precision,
        recall=total.recall,
        f1=total.f1,
        per_type=per_type,
        rules=rules,
    )


def chunk_scores(
    gold_tags: Sequence[Sequence[str]], pred_tags: Sequence[Sequence[str]], scheme: str = "auto"
) -> ChunkReport:
    """Chunk precision, recall and F1 exactly as ``conlleval.pl`` computes them.

    Parameters
    ----------
    gold_tags, pred_tags : list of list of str
        One list of tags per sequence (e.g. ``["B-NP", "I-NP", "O"]``); same lengths.
    scheme : str
        ``"conlleval"``: the Perl rules, whatever the tags. ``"auto"`` (default): the Perl rules,
        or the ``"iobes"`` rules when some tag has the chunk tag ``S``. ``"iob1"``, ``"iob2"``,
        ``"ioe"``, ``"ioe1"``, ``"ioe2"``: the Perl rules (which read all of them), after checking
        that every tag is ``O`` or uses the scheme's prefixes with a type. ``"iobes"``: the
        IOBES rules, after the same check.

    Returns
    -------
    ChunkReport
        Overall and per-type scores in percent, and the token accuracy (``accuracy``).
    """
    if len(gold_tags) != len(pred_tags):
        raise ValueError(f"{len(gold_tags)} gold sequences but {len(pred_tags)} predicted ones")
    cache: dict[str, tuple[str, str]] = {}
    gold, pred = [], []
    for i, (gold_seq, pred_seq) in enumerate(zip(gold_tags, pred_tags, strict=True)):
        if len(gold_seq) != len(pred_seq):
            raise ValueError(
                f"sequence {i}: {len(gold_seq)} gold tags but {len(pred_seq)} predicted tags"
            )
        for seq, out in ((gold_seq, gold), (pred_seq, pred)):
            if isinstance(seq, str):
                raise TypeError(f"sequence {i}: expected a list of tags; got the string {seq!r}")
            out.append(
                [cache[t] if t in cache else cache.setdefault(t, _split_tag(t)) for t in seq]
            )
    rules = _rules_for(scheme, list(cache.values()))
    return _report(_count_chunks(gold, pred, rules), rules)


def looks_like_chunk_tags(label_names: Sequence[str]) -> bool:
    """Tell whether every name is ``O`` or ``[BIES]-type``, and some name is not ``O``."""
    names = list(label_names)
    return any(n != "O" for n in names) and all(n == "O" or _CHUNK_NAME.match(n) for n in names)


def _check_packed(
    gold_ids: NDArray[np.int64], pred_ids: NDArray[np.integer], seq_offsets: NDArray, n_labels: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    gold, pred = np.asarray(gold_ids, np.int64), np.asarray(pred_ids, np.int64)
    offsets = np.asarray(seq_offsets, np.int64)
    if gold.ndim != 1 or gold.shape != pred.shape:
        raise ValueError(
            f"gold_ids and pred_ids must be 1-d of one length; got {gold.shape} and {pred.shape}"
        )
    bad = offsets.ndim != 1 or offsets.size < 1 or offsets[0] != 0 or offsets[-1] != gold.size
    if bad or np.any(np.diff(offsets) < 0):
        raise ValueError(f"seq_offsets must be non-decreasing from 0 to {gold.size}")
    if gold.size and (gold.min() < -1 or gold.max() >= n_labels):
        raise ValueError(f"gold_ids must lie in [-1, {n_labels}); got [{gold.min()}, {gold.max()}]")
    if pred.size and (pred.min() < 0 or pred.max() >= n_labels):
        raise ValueError(f"pred_ids must lie in [0, {n_labels}); got [{pred.min()}, {pred.max()}]")
    return gold, pred, offsets


def _gold_names(
    gold: np.ndarray, label_names: Sequence[str], unknown_names: Sequence[str | None] | None
) -> list[str]:
    """Gold tag per token; ``-1`` becomes ``unknown_names[t]`` (or UNKNOWN_TAG)."""
    names = list(label_names) + [UNKNOWN_TAG]  # index -1 reads the last entry
    out = [names[k] for k in gold.tolist()]
    if unknown_names is None:
        return out
    if len(unknown_names) != gold.size:
        raise ValueError(
            f"unknown_names must have one entry per token ({gold.size}); got {len(unknown_names)}"
        )
    known = set(label_names)
    for t in np.flatnonzero(gold < 0).tolist():
        name = unknown_names[t]
        if name is None:
            continue
        if name in known:
            raise ValueError(
                f"token {t}: unknown gold label named {name!r}, a label the model "
                "can predict; give a name outside label_names"
            )
        out[t] = name
    return out


def _token_scores(gold_names: list[str], pred_names: list[str]) -> dict[str, dict[str, Any]]:
    """Per-label token precision/recall/F1 in percent."""
    support, predicted = Counter(gold_names), Counter(pred_names)
    correct = Counter(g for g, p in zip(gold_names, pred_names, strict=True) if g == p)
    return {
        name: asdict(_scores(correct[name], predicted[name], support[name]))
        for name in sorted(set(support) | set(predicted))
    }


def evaluate_labels(
    gold_ids: NDArray[np.int64],
    pred_ids: NDArray[np.integer],
    seq_offsets: NDArray[np.int64],
    label_names: Sequence[str],
    unknown_names: Sequence[str | None] | None = None,
    *,
    chunk: bool | None = None,
    scheme: str = "auto",
) -> dict[str, Any]:
    """Token accuracy and, for chunk tag sets, conlleval chunk scores of packed predictions.

    Parameters
    ----------
    gold_ids : ndarray of int64, shape (n_items,)
        Gold label ids in ``[-1, n_labels)``, packed as in :class:`SequenceData`; ``-1`` is a
        label unknown to the model: always a token error and, in chunk mode, a gold tag the
        model never predicts (its chunks count as missed).
    pred_ids : ndarray of int, shape (n_items,)
        Predicted label ids in ``[0, n_labels)``.
    seq_offsets : ndarray of int64, shape (n_sequences + 1,)
        Sequence ``i`` is ``seq_offsets[i]:seq_offsets[i + 1]``.
    label_names : sequence of str, length n_labels
    unknown_names : sequence of str or None, length n_items, optional
        The original gold tag of each ``-1`` token (e.g. ``"I-LST"``); other entries are
        ignored. Names must not be in ``label_names``. Without it, ``-1`` reads ``UNKNOWN_TAG``
        (adjacent unknown tokens then form one chunk).
    chunk : bool, optional
        Chunk scores or not; by default when :func:`looks_like_chunk_tags` says so.
    scheme : str
        Passed to :func:`chunk_scores`.

    Returns
    -------
    dict
        ``token_accuracy`` (fraction in [0, 1]), ``precision``, ``recall``, ``f1`` (chunk
        scores in percent, None without chunks), ``n_tokens``, ``chunk`` (bool), in chunk
        mode ``n_gold_chunks``, ``n_pred_chunks``, ``n_correct_chunks``, and
        ``per_label``: name -> {precision, recall, f1 (percent), support, n_predicted,
        n_correct}, by chunk type in chunk mode and by label otherwise.
    """
    names = list(label_names)
    gold, pred, offsets = _check_packed(gold_ids, pred_ids, seq_offsets, len(names))
    gold_names = _gold_names(gold, names, unknown_names)
    pred_names = [names[k] for k in pred.tolist()]
    result: dict[str, Any] = {
        "token_accuracy": token_accuracy(gold, pred),
        "n_tokens": int(gold.size),
        "chunk": looks_like_chunk_tags(names) if chunk is None else bool(chunk),
    }
    if not result["chunk"]:
        result.update(precision=None, recall=None, f1=None)
        result["per_label"] = _token_scores(gold_names, pred_names)
        return result
    bounds = list(zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True))
    report = chunk_scores(
        [gold_names[a:b] for a, b in bounds], [pred_names[a:b] for a, b in bounds], scheme
    )
    result.update(precision=report.precision, recall=report.recall, f1=report.f1)
    result.update(
        n_gold_chunks=report.n_gold_chunks,
        n_pred_chunks=report.n_pred_chunks,
        n_correct_chunks=report.n_correct_chunks,
    )
    result["per_label"] = {k: asdict(v) for k, v in report.per_type.items()}
    return result


def _type_line(name: str, s: Mapping[str, Any]) -> str:
    return (
        f"{name:>17}: precision: {s['precision']:6.2f}%; recall: {s['recall']:6.2f}%; "
        f"FB1: {s['f1']:6.2f}  {s['n_predicted']}"
    )


def format_report(report: ChunkReport | Mapping[str, Any]) -> str:
    """Text table in ``conlleval``'s layout.

    Parameters
    ----------
    report : ChunkReport or dict
        A :func:`chunk_scores` report (rendered exactly as ``conlleval`` prints it) or an
        :func:`evaluate_labels` result (token accuracy, then chunk or label lines).

    Returns
    -------
    str
        Lines ending in a newline; the last number of a type line is its predicted count.
    """
    if isinstance(report, ChunkReport):
        lines = [
            f"processed {report.n_tokens} tokens with {report.n_gold_chunks} phrases; "
            f"found: {report.n_pred_chunks} phrases; correct: {report.n_correct_chunks}."
        ]
        if report.n_tokens > 0:
            lines.append(
                f"accuracy: {report.accuracy:6.2f}%; precision: {report.precision:6.2f}%; "
                f"recall: {report.recall:6.2f}%; FB1: {report.f1:6.2f}"
            )
        lines += [_type_line(k, asdict(v)) for k, v in report.per_type.items()]
        return "\n".join(lines) + "\n"
    accuracy = 100.0 * report["token_accuracy"]
    head = f"processed {report['n_tokens']} tokens; accuracy: {accuracy:6.2f}%"
    if report.get("n_gold_chunks") is not None:  # conlleval's two lines
        head = (
            f"processed {report['n_tokens']} tokens with {report['n_gold_chunks']} phrases; "
            f"found: {report['n_pred_chunks']} phrases; correct: {report['n_correct_chunks']}.\n"
            f"accuracy: {accuracy:6.2f}%; precision: {report['precision']:6.2f}%; "
            f"recall: {report['recall']:6.2f}%; FB1: {report['f1']:6.2f}"
        )
    elif report.get("f1") is not None:
        head += (
            f"; precision: {report['precision']:6.2f}%; recall: {report['recall']:6.2f}%; "
            f"FB1: {report['f1']:6.2f}"
        )
    lines = [head] + [_type_line(k, v) for k, v in report["per_label"].items()]
    return "\n".join(lines) + "\n"


def evaluate_data(data: Any, pred_ids: NDArray[np.integer], **kwargs: Any) -> dict[str, Any]:
    """:func:`evaluate_labels` of predictions for a :class:`SequenceData`'s gold labels.

    Gold tags unknown to the model are scored under their own names (as ``conlleval`` reads the
    file), so a test label never seen in training still forms its gold chunks.
    """
    return evaluate_labels(
        data.labels,
        pred_ids,
        data.seq_offsets,
        data.label_names,
        data.gold_names_of_unknown(),
        **kwargs,
    )
