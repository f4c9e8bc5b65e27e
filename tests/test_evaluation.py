"""Tests of crfsdca.evaluation: token accuracy and conlleval chunk scores."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crfsdca.evaluation import (
    UNKNOWN_TAG,
    chunk_scores,
    evaluate_labels,
    format_report,
    looks_like_chunk_tags,
    token_accuracy,
)

# ---------------------------------------------------------------- token accuracy


def test_token_accuracy_counts_unknown_gold_as_errors():
    gold = np.array([0, 1, -1, 2, -1], np.int64)
    pred = np.array([0, 2, 0, 2, 1], np.int64)
    assert token_accuracy(gold, pred) == pytest.approx(2 / 5)


def test_token_accuracy_empty_is_nan_and_shapes_checked():
    assert math.isnan(token_accuracy(np.zeros(0, np.int64), np.zeros(0, np.int64)))
    with pytest.raises(ValueError, match="one length"):
        token_accuracy(np.zeros(3, np.int64), np.zeros(2, np.int64))


# ---------------------------------------------------------------- hand-worked conlleval cases


def counts(report):
    return report.n_gold_chunks, report.n_pred_chunks, report.n_correct_chunks


def test_iob2_example_by_hand():
    # gold chunks NP[0,1] VP[3,4] NP[5,5]; predicted NP[0,1] VP[3] VP[4] NP[5,5] (ends at the end)
    gold = [["B-NP", "I-NP", "O", "B-VP", "I-VP", "B-NP"]]
    pred = [["B-NP", "I-NP", "O", "B-VP", "B-VP", "B-NP"]]
    report = chunk_scores(gold, pred)
    assert counts(report) == (3, 4, 2)
    assert report.n_tokens == 6 and report.n_correct_tags == 5
    assert report.accuracy == pytest.approx(500 / 6)
    assert report.precision == pytest.approx(50.0)
    assert report.recall == pytest.approx(200 / 3)
    assert report.f1 == pytest.approx(2 * 50 * (200 / 3) / (50 + 200 / 3))
    np_, vp = report.per_type["NP"], report.per_type["VP"]
    assert (np_.support, np_.n_predicted, np_.n_correct, np_.f1) == (2, 2, 2, 100.0)
    assert (vp.support, vp.n_predicted, vp.n_correct, vp.f1) == (1, 2, 0, 0.0)


def test_iob1_example_by_hand():
    # IOB1: B- only separates two adjacent chunks of one type
    gold = [["I-NP", "I-NP", "B-NP", "I-NP", "O", "I-VP"]]
    pred = [["I-NP", "I-NP", "I-NP", "I-NP", "O", "I-VP"]]
    report = chunk_scores(gold, pred, scheme="iob1")
    assert counts(report) == (3, 2, 1)
    assert report.per_type["VP"].n_correct == 1
    assert report.per_type["NP"].n_correct == 0


def test_iob1_and_iob2_encodings_score_alike():
    iob1 = [["I-NP", "I-NP", "B-NP", "O", "I-VP", "I-PP"]]
    iob2 = [["B-NP", "I-NP", "B-NP", "O", "B-VP", "B-PP"]]
    report = chunk_scores(iob1, iob2)
    assert counts(report) == (4, 4, 4)
    assert report.f1 == 100.0
    assert report.n_correct_tags == 3  # the tags differ, the chunks do not


def test_type_change_inside_chunk_starts_a_new_chunk():
    gold = [["B-NP", "I-VP", "I-VP"]]  # NP[0] VP[1,2]
    report = chunk_scores(gold, [["B-NP", "I-NP", "I-NP"]])  # NP[0,2]
    assert counts(report) == (2, 1, 0)
    assert chunk_scores(gold, gold).f1 == 100.0
    assert counts(chunk_scores(gold, gold)) == (2, 2, 2)


def test_i_after_o_starts_a_chunk():
    report = chunk_scores([["O", "I-NP", "I-NP"]], [["O", "B-NP", "I-NP"]])
    assert counts(report) == (1, 1, 1)
    assert report.n_correct_tags == 2


def test_sequence_boundary_ends_chunks():
    gold = [["B-NP", "I-NP"], ["I-NP", "O"]]  # NP[0,1] in the first, NP[0] in the second
    assert counts(chunk_scores(gold, gold)) == (2, 2, 2)
    pred = [["B-NP", "I-NP"], ["B-NP", "O"]]
    assert counts(chunk_scores(gold, pred)) == (2, 2, 2)
    merged = chunk_scores([["B-NP", "I-NP", "I-NP", "O"]], [["B-NP", "I-NP", "I-NP", "O"]])
    assert counts(merged) == (1, 1, 1)


def test_wrong_end_or_wrong_start_is_not_correct():
    gold = [["B-NP", "I-NP", "I-NP", "O"]]
    assert counts(chunk_scores(gold, [["B-NP", "I-NP", "O", "O"]])) == (1, 1, 0)
    assert counts(chunk_scores(gold, [["O", "B-NP", "I-NP", "O"]])) == (1, 1, 0)
    assert counts(chunk_scores(gold, [["B-NP", "I-NP", "I-NP", "I-NP"]])) == (1, 1, 0)
    assert counts(chunk_scores(gold, [["B-VP", "I-VP", "I-VP", "O"]])) == (1, 1, 0)


def test_conlleval_quirk_e_then_b_does_not_split():
    # Perl has no E->B rule: E-NP B-NP I-NP is one chunk; the IOBES rules split it
    tags = [["E-NP", "B-NP", "I-NP", "O"]]
    assert counts(chunk_scores(tags, tags, scheme="conlleval")) == (1, 1, 1)
    assert counts(chunk_scores(tags, tags, scheme="iobes")) == (2, 2, 2)


def test_ioe_chunks():
    # IOE1: E- only ends a chunk followed by one of the same type
    gold = [["I-NP", "E-NP", "I-NP", "O", "I-VP"]]  # NP[0,1] NP[2] VP[4]
    pred = [["I-NP", "I-NP", "I-NP", "O", "E-VP"]]  # NP[0,2] VP[4]
    report = chunk_scores(gold, pred, scheme="ioe1")
    assert counts(report) == (3, 2, 1)


def test_s_tags_merge_under_conlleval_but_not_auto():
    tags = [["S-PER", "S-PER", "B-LOC", "E-LOC"]]
    assert counts(chunk_scores(tags, tags, scheme="conlleval")) == (2, 2, 2)
    assert chunk_scores(tags, tags).rules == "iobes"
    assert counts(chunk_scores(tags, tags)) == (3, 3, 3)
    assert chunk_scores([["B-NP"]], [["B-NP"]]).rules == "conlleval"


def test_tags_without_type_and_perl_false_type():
    # "B" and "I" without type make chunks of the empty type; "B-0" has the empty type too
    report = chunk_scores([["B", "I", "B", "O", "B-0"]], [["B", "I", "I", "O", "B"]])
    assert counts(report) == (3, 2, 1)
    assert list(report.per_type) == [""]
    assert report.n_correct_tags == 4  # ("B", "") == ("B", "") for "B-0" and "B"
    # a tag with no hyphen other than B/I/E never starts a chunk (POS tags)
    assert counts(chunk_scores([["NN", "VB", "NN"]], [["NN", "NN", "NN"]])) == (0, 0, 0)


def test_typeless_chunk_survives_sequence_boundary_as_in_perl():
    # "NN" after B-NP starts a chunk of the empty type (type change) that no "O" ends
    gold, pred = [["B-NP", "NN"], ["NN"]], [["B-VP", "NN"], ["NN"]]
    report = chunk_scores(gold, pred)
    assert counts(report) == (2, 2, 1)
    assert report.per_type[""].n_correct == 1


def test_chunk_tags_compare_whole():
    # the empty chunk tag of "-X" followed by "BO" is not the pair ("B", "O")
    assert counts(chunk_scores([["-X", "BO-X"]], [["-X", "B-X"]])) == (1, 1, 1)


def test_hyphen_inside_type_and_bracket_tags():
    report = chunk_scores([["B-PER-NAME", "I-PER-NAME"]], [["B-PER-NAME", "I-PER-NAME"]])
    assert list(report.per_type) == ["PER-NAME"] and report.f1 == 100.0
    # "[" and "]" chunks have length one
    assert counts(chunk_scores([["[-NP", "]-NP"]], [["[-NP", "]-NP"]])) == (2, 2, 2)


def test_dot_tag_never_starts_a_chunk():
    report = chunk_scores([["B-NP", ".", "I-NP"]], [["B-NP", ".", "I-NP"]])
    assert counts(report) == (2, 2, 2)  # "." ends NP (type change), I-NP then starts anew
    assert counts(chunk_scores([[".", "."]], [[".", "."]])) == (0, 0, 0)


def test_perfect_prediction_scores_100():
    tags = [["B-NP", "I-NP", "O", "B-VP"], ["I-PP", "B-NP"], ["O"]]
    report = chunk_scores(tags, tags)
    assert (report.precision, report.recall, report.f1, report.accuracy) == (100, 100, 100, 100)
    assert all(s.f1 == 100.0 for s in report.per_type.values())


def test_all_o_prediction():
    gold = [["B-NP", "I-NP", "O", "B-VP", "O"]]
    report = chunk_scores(gold, [["O"] * 5])
    assert counts(report) == (2, 0, 0)
    assert (report.precision, report.recall, report.f1) == (0.0, 0.0, 0.0)
    assert report.accuracy == pytest.approx(40.0)
    assert report.per_type["NP"].n_predicted == 0


def test_empty_input():
    report = chunk_scores([], [])
    assert report.n_tokens == 0 and math.isnan(report.accuracy) and report.f1 == 0.0
    assert format_report(report) == (
        "processed 0 tokens with 0 phrases; found: 0 phrases; correct: 0.\n"
    )


def test_input_errors():
    with pytest.raises(ValueError, match="sequence 1: 2 gold tags but 1 predicted"):
        chunk_scores([["O"], ["O", "O"]], [["O"], ["O"]])
    with pytest.raises(ValueError, match="1 gold sequences but 0 predicted"):
        chunk_scores([["O"]], [])
    with pytest.raises(ValueError, match="scheme must be one of"):
        chunk_scores([["O"]], [["O"]], scheme="bio")
    with pytest.raises(ValueError, match="allows tags O and B/I-TYPE; got 'E-NP'"):
        chunk_scores([["E-NP"]], [["O"]], scheme="iob2")
    with pytest.raises(TypeError, match="expected a list of tags"):
        chunk_scores(["B-NP"], ["B-NP"])


def test_format_report_matches_conlleval_layout():
    gold = [["B-NP", "I-NP", "O", "B-VP", "I-VP", "B-NP"]]
    pred = [["B-NP", "I-NP", "O", "B-VP", "B-VP", "B-NP"]]
    assert format_report(chunk_scores(gold, pred)) == (
        "processed 6 tokens with 3 phrases; found: 4 phrases; correct: 2.\n"
        "accuracy:  83.33%; precision:  50.00%; recall:  66.67%; FB1:  57.14\n"
        "               NP: precision: 100.00%; recall: 100.00%; FB1: 100.00  2\n"
        "               VP: precision:   0.00%; recall:   0.00%; FB1:   0.00  2\n"
    )


# ---------------------------------------------------------------- evaluate_labels

CHUNK_LABELS = ("B-NP", "I-NP", "B-VP", "I-VP", "O")


def test_evaluate_labels_unknown_gold_labels_are_errors_and_missed_chunks():
    # sequence 0: B-NP I-NP O | sequence 1: B-LST(-1) O B-VP  (LST unknown to the model)
    gold = np.array([0, 1, 4, -1, 4, 2], np.int64)
    pred = np.array([0, 1, 4, 4, 4, 2], np.int64)
    offsets = np.array([0, 3, 6], np.int64)
    names = [None, None, None, "B-LST", None, None]
    result = evaluate_labels(gold, pred, offsets, CHUNK_LABELS, unknown_names=names)
    assert result["chunk"] is True
    assert result["token_accuracy"] == pytest.approx(5 / 6)
    assert result["precision"] == pytest.approx(100.0)
    assert result["recall"] == pytest.approx(200 / 3)
    assert result["per_label"]["LST"]["support"] == 1
    assert result["per_label"]["LST"]["n_correct"] == 0
    # without names the unknown tokens read UNKNOWN_TAG and still count as a missed chunk
    plain = evaluate_labels(gold, pred, offsets, CHUNK_LABELS)
    assert plain["recall"] == pytest.approx(200 / 3)
    assert UNKNOWN_TAG.split("-", 1)[1] in plain["per_label"]


def test_evaluate_labels_unknown_never_matches_even_if_predictor_guesses_its_type():
    gold = np.array([-1, -1], np.int64)
    pred = np.array([0, 1], np.int64)  # B-NP I-NP
    result = evaluate_labels(gold, pred, np.array([0, 2]), CHUNK_LABELS, ["B-LST", "I-LST"])
    assert result["token_accuracy"] == 0.0 and result["f1"] == 0.0
    with pytest.raises(ValueError, match="a label the model can predict"):
        evaluate_labels(gold, pred, np.array([0, 2]), CHUNK_LABELS, ["B-NP", "I-NP"])


def test_evaluate_labels_pos_has_no_f1():
    labels = ("NN", "VB", "DT")
    gold = np.array([2, 0, 1, -1], np.int64)
    pred = np.array([2, 0, 0, 1], np.int64)
    result = evaluate_labels(gold, pred, np.array([0, 4]), labels)
    assert result["chunk"] is False
    assert result["f1"] is None and result["precision"] is None and result["recall"] is None
    assert result["token_accuracy"] == pytest.approx(0.5)
    nn = result["per_label"]["NN"]
    assert (nn["support"], nn["n_predicted"], nn["n_correct"]) == (1, 2, 1)
    assert nn["precision"] == pytest.approx(50.0) and nn["recall"] == pytest.approx(100.0)
    assert result["per_label"][UNKNOWN_TAG]["support"] == 1
    text = format_report(result)
    assert text.startswith("processed 4 tokens; accuracy:  50.00%\n")
    assert "               NN: precision:  50.00%; recall: 100.00%; FB1:  66.67  2\n" in text


def test_evaluate_labels_checks_inputs():
    gold = np.array([0, 1], np.int64)
    with pytest.raises(ValueError, match="pred_ids must lie in"):
        evaluate_labels(gold, np.array([0, 5]), np.array([0, 2]), CHUNK_LABELS)
    with pytest.raises(ValueError, match="gold_ids must lie in"):
        evaluate_labels(np.array([0, -2]), gold, np.array([0, 2]), CHUNK_LABELS)
    with pytest.raises(ValueError, match="seq_offsets must be non-decreasing from 0 to 2"):
        evaluate_labels(gold, gold, np.array([0, 3]), CHUNK_LABELS)
    with pytest.raises(ValueError, match="unknown_names must have one entry per token"):
        evaluate_labels(gold, gold, np.array([0, 2]), CHUNK_LABELS, ["I-LST"])


def test_looks_like_chunk_tags():
    assert looks_like_chunk_tags(["B-NP", "I-NP", "O"])
    assert looks_like_chunk_tags(["S-PER", "E-PER", "O"])
    assert not looks_like_chunk_tags(["O"])
    assert not looks_like_chunk_tags(["NN", "VB"])
    assert not looks_like_chunk_tags(["a", "b", "c"])  # OCR letters
    assert not looks_like_chunk_tags(["B-NP", "-LRB-"])


# ---------------------------------------------------------------- against a brute-force reference


def brute_spans(sequences: list[list[str]]) -> set[tuple[int, str, int, int]]:
    """(sequence, type, first, last) of every chunk of B/I/O tags, IOB1 or IOB2.

    A chunk runs over a maximal stretch of tokens of one type in which every token after the
    first is an ``I-`` tag; ``O`` and sequence ends separate chunks.
    """
    spans = set()
    for s, tags in enumerate(sequences):
        t = 0
        while t < len(tags):
            if tags[t] == "O":
                t += 1
                continue
            kind = tags[t][2:]
            last = t
            while last + 1 < len(tags) and tags[last + 1] == "I-" + kind:
                last += 1
            spans.add((s, kind, t, last))
            t = last + 1
    return spans


def iob2_tags(pieces: list[tuple[int, int, str]]) -> list[str]:
    """A valid IOB2 tagging: per piece, ``gap`` O tags then a chunk of ``width`` tokens."""
    tags = []
    for gap, width, kind in pieces:
        tags += ["O"] * gap + ["B-" + kind] + ["I-" + kind] * (width - 1)
    return tags


def fit(tags: list[str], length: int) -> list[str]:
    """Cut or pad with O (both keep an IOB2 tagging valid)."""
    return tags[:length] + ["O"] * (length - len(tags))


PIECES = st.lists(
    st.tuples(st.integers(0, 2), st.integers(1, 3), st.sampled_from(["NP", "VP", "PP"])),
    max_size=4,
)
IOB2_PAIRS = st.lists(st.tuples(PIECES, PIECES), max_size=5).map(
    lambda seqs: (
        [iob2_tags(g) for g, _ in seqs],
        [fit(iob2_tags(p), len(iob2_tags(g))) for g, p in seqs],
    )
)
BIO_TAG = st.sampled_from(["O", "B-NP", "I-NP", "B-VP", "I-VP"])
# arbitrary B/I/O taggings (IOB1, IOB2 or neither) of equal shapes
BIO_PAIRS = st.lists(st.lists(st.tuples(BIO_TAG, BIO_TAG), max_size=8), max_size=5).map(
    lambda seqs: ([[g for g, _ in s] for s in seqs], [[p for _, p in s] for s in seqs])
)


def check_against_spans(gold, pred):
    report = chunk_scores(gold, pred)
    gold_spans, pred_spans = brute_spans(gold), brute_spans(pred)
    correct = gold_spans & pred_spans
    assert counts(report) == (len(gold_spans), len(pred_spans), len(correct))
    for kind, scores in report.per_type.items():
        assert scores.support == sum(1 for s in gold_spans if s[1] == kind)
        assert scores.n_predicted == sum(1 for s in pred_spans if s[1] == kind)
        assert scores.n_correct == sum(1 for s in correct if s[1] == kind)
    n_tokens = sum(map(len, gold))
    n_same = sum(
        g == p for gs, ps in zip(gold, pred, strict=True) for g, p in zip(gs, ps, strict=True)
    )
    assert (report.n_tokens, report.n_correct_tags) == (n_tokens, n_same)


@settings(max_examples=200, deadline=None)
@given(IOB2_PAIRS)
def test_iob2_matches_span_sets(pair):
    check_against_spans(*pair)


@settings(max_examples=200, deadline=None)
@given(BIO_PAIRS)
def test_any_bio_tagging_matches_span_sets(pair):
    check_against_spans(*pair)


@settings(max_examples=60, deadline=None)
@given(BIO_PAIRS)
def test_evaluate_labels_agrees_with_chunk_scores(pair):
    gold, pred = pair
    index = {name: k for k, name in enumerate(CHUNK_LABELS)}
    offsets = np.cumsum([0] + [len(s) for s in gold])
    gold_ids = np.array([index[t] for s in gold for t in s], np.int64)
    pred_ids = np.array([index[t] for s in pred for t in s], np.int64)
    result = evaluate_labels(gold_ids, pred_ids, offsets, CHUNK_LABELS)
    report = chunk_scores(gold, pred)
    assert (result["precision"], result["recall"], result["f1"]) == (
        report.precision,
        report.recall,
        report.f1,
    )
    if report.n_tokens:
        assert result["token_accuracy"] == pytest.approx(report.accuracy / 100)
