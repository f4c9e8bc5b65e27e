"""crfsdca.metrics: sklearn-crfsuite's metric functions and conlleval chunk scores."""

from __future__ import annotations

import pytest

from crfsdca import metrics

Y_TRUE = [["B-PER", "I-PER", "O", "B-LOC"], ["O", "B-ORG"], ["O"]]
Y_PRED = [["B-PER", "I-PER", "O", "B-ORG"], ["O", "B-ORG"], ["B-LOC"]]


def test_flat_metrics_are_sklearns_on_flattened_labels():
    sk = pytest.importorskip("sklearn.metrics")
    true = [t for s in Y_TRUE for t in s]
    pred = [t for s in Y_PRED for t in s]
    assert metrics.flat_accuracy_score(Y_TRUE, Y_PRED) == pytest.approx(5 / 7)
    assert metrics.flat_accuracy(Y_TRUE, Y_PRED) == pytest.approx(5 / 7)
    for name in ("f1", "precision", "recall"):
        ours = getattr(metrics, f"flat_{name}_score")(Y_TRUE, Y_PRED, average="macro")
        theirs = getattr(sk, f"{name}_score")(true, pred, average="macro")
        assert ours == pytest.approx(theirs)
    assert metrics.flat_fbeta_score(Y_TRUE, Y_PRED, beta=2, average="micro") == pytest.approx(
        sk.fbeta_score(true, pred, beta=2, average="micro")
    )
    report = metrics.flat_classification_report(Y_TRUE, Y_PRED, labels=["B-PER", "B-LOC"])
    assert "B-PER" in report and "I-PER" not in report


def test_flat_metrics_check_lengths():
    with pytest.raises(ValueError, match="sequence 1: 2 true labels but 1 predicted"):
        metrics.flat_accuracy(Y_TRUE, [Y_PRED[0], ["O"], ["O"]])
    with pytest.raises(ValueError, match="y_true has 3 sequences but y_pred has 2"):
        metrics.flat_accuracy(Y_TRUE, Y_PRED[:2])


def test_sequence_accuracy():
    assert metrics.sequence_accuracy_score(Y_TRUE, Y_PRED) == pytest.approx(1 / 3)
    assert metrics.sequence_accuracy_score([], []) == 0.0


def test_chunk_f1_counts_entities():
    # gold chunks: PER(0-1), LOC(3), ORG(1 of seq 2) = 3; predicted: PER, ORG, ORG, LOC = 4;
    # correct: PER and the second ORG = 2 -> P = 1/2, R = 2/3, F1 = 4/7
    assert metrics.chunk_f1_score(Y_TRUE, Y_PRED) == pytest.approx(4 / 7)
    report = metrics.chunk_classification_report(Y_TRUE, Y_PRED)
    assert report.startswith("processed 7 tokens with 3 phrases; found: 4 phrases; correct: 2.")
    assert "FB1:  57.14" in report


def test_chunk_f1_reads_iob1():
    # I- after O opens a chunk (conlleval's rule), so an IOB1 "I-PER I-PER" is one entity
    assert metrics.chunk_f1_score([["I-PER", "I-PER"]], [["B-PER", "I-PER"]]) == 1.0
