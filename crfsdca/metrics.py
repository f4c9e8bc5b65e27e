"""Scores of label sequences, with sklearn-crfsuite's names and signatures.

``y_true`` and ``y_pred`` are lists of label sequences (lists of str), as ``CRF.predict``
returns them.

- ``flat_*``: scikit-learn's token-level metrics on the flattened sequences (they need
  scikit-learn: ``pip install crfsdca[sklearn]``); keyword arguments go to scikit-learn.
- :func:`sequence_accuracy_score`: fraction of sequences predicted entirely right.
- :func:`chunk_f1_score`, :func:`chunk_classification_report`: entity (chunk) scores as
  ``conlleval`` computes them, by :func:`crfsdca.evaluation.chunk_scores`.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import Any

from crfsdca.evaluation import chunk_scores, format_report

__all__ = [
    "chunk_classification_report",
    "chunk_f1_score",
    "flat_accuracy_score",
    "flat_classification_report",
    "flat_f1_score",
    "flat_fbeta_score",
    "flat_precision_score",
    "flat_recall_score",
    "sequence_accuracy_score",
]

Labels = Sequence[Sequence[str]]


def _sklearn_metrics() -> Any:
    try:
        from sklearn import metrics
    except ImportError:
        raise ImportError(
            "crfsdca.metrics.flat_* need scikit-learn; install it with"
            " `pip install crfsdca[sklearn]`"
        ) from None
    return metrics


def _flatten(y_true: Labels, y_pred: Labels) -> tuple[list[str], list[str]]:
    """Both label lists flattened, after checking that their sequences have equal lengths."""
    y_true, y_pred = list(y_true), list(y_pred)
    if len(y_true) != len(y_pred):
        raise ValueError(f"y_true has {len(y_true)} sequences but y_pred has {len(y_pred)}")
    for i, (a, b) in enumerate(zip(y_true, y_pred, strict=True)):
        if len(a) != len(b):
            raise ValueError(f"sequence {i}: {len(a)} true labels but {len(b)} predicted")
    return list(chain.from_iterable(y_true)), list(chain.from_iterable(y_pred))


def flat_accuracy(y_true: Labels, y_pred: Labels) -> float:
    """Token accuracy without scikit-learn (what ``CRF.score`` returns); 0.0 without tokens."""
    true, pred = _flatten(y_true, y_pred)
    if not true:
        return 0.0
    return sum(a == b for a, b in zip(true, pred, strict=True)) / len(true)


def flat_accuracy_score(y_true: Labels, y_pred: Labels) -> float:
    """Token accuracy (scikit-learn's ``accuracy_score`` on the flattened labels)."""
    true, pred = _flatten(y_true, y_pred)
    return float(_sklearn_metrics().accuracy_score(true, pred))


def flat_precision_score(y_true: Labels, y_pred: Labels, **kwargs: Any) -> Any:
    """Token precision (``sklearn.metrics.precision_score``; pass ``average=``)."""
    true, pred = _flatten(y_true, y_pred)
    return _sklearn_metrics().precision_score(true, pred, **kwargs)


def flat_recall_score(y_true: Labels, y_pred: Labels, **kwargs: Any) -> Any:
    """Token recall (``sklearn.metrics.recall_score``; pass ``average=``)."""
    true, pred = _flatten(y_true, y_pred)
    return _sklearn_metrics().recall_score(true, pred, **kwargs)


def flat_f1_score(y_true: Labels, y_pred: Labels, **kwargs: Any) -> Any:
    """Token F1 (``sklearn.metrics.f1_score``; pass ``average=`` and ``labels=``)."""
    true, pred = _flatten(y_true, y_pred)
    return _sklearn_metrics().f1_score(true, pred, **kwargs)


def flat_fbeta_score(y_true: Labels, y_pred: Labels, beta: float, **kwargs: Any) -> Any:
    """Token F-beta (``sklearn.metrics.fbeta_score``)."""
    true, pred = _flatten(y_true, y_pred)
    return _sklearn_metrics().fbeta_score(true, pred, beta=beta, **kwargs)


def flat_classification_report(
    y_true: Labels, y_pred: Labels, labels: Sequence[str] | None = None, **kwargs: Any
) -> Any:
    """Per-label token report (``sklearn.metrics.classification_report``)."""
    true, pred = _flatten(y_true, y_pred)
    return _sklearn_metrics().classification_report(true, pred, labels=labels, **kwargs)


def sequence_accuracy_score(y_true: Labels, y_pred: Labels) -> float:
    """Fraction of sequences whose every label is right; 0.0 for no sequences."""
    y_true, y_pred = list(y_true), list(y_pred)
    if len(y_true) != len(y_pred):
        raise ValueError(f"y_true has {len(y_true)} sequences but y_pred has {len(y_pred)}")
    if not y_true:
        return 0.0
    right = sum(list(a) == list(b) for a, b in zip(y_true, y_pred, strict=True))
    return right / len(y_true)


def chunk_f1_score(y_true: Labels, y_pred: Labels, scheme: str = "auto") -> float:
    """Entity (chunk) F1 as a fraction in [0, 1], as ``conlleval`` counts chunks.

    ``scheme`` is passed to :func:`crfsdca.evaluation.chunk_scores` (IOB1/IOB2/IOE by the
    Perl rules; IOBES when an ``S-`` tag appears). ``conlleval`` prints 100 times this value.
    """
    return chunk_scores([list(s) for s in y_true], [list(s) for s in y_pred], scheme).f1 / 100.0


def chunk_classification_report(y_true: Labels, y_pred: Labels, scheme: str = "auto") -> str:
    """``conlleval``'s text report: overall and per-type precision, recall and F1 (percent)."""
    report = chunk_scores([list(s) for s in y_true], [list(s) for s in y_pred], scheme)
    return format_report(report)
