"""Chunk scores on the real CoNLL-2000 test set equal conlleval's.

The expected numbers come from an independent count written here from conlleval.pl's rules
(a phrase starts on the tag pairs ``BB IB OB OI EE EI OE``, at a type change, and on ``[``/``]``;
sentence boundaries are ``O``), not from ``crfsdca.evaluation``: gold phrases of the file itself,
and found/correct phrases of a trained model's predictions, compared with what
``crfsdca evaluate`` prints.
"""

from __future__ import annotations

import gzip
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from crfsdca.cli.main import main
from crfsdca.estimators.model import SequenceCRF
from crfsdca.features.sources import encode_eval, encoder_from_model, resolve

DATA_DIR = os.environ.get("CRFSDCA_DATA_DIR")
TEST_FILE = Path(DATA_DIR or ".", "conll2000", "test.txt.gz")
needs_data = pytest.mark.skipif(
    not DATA_DIR or not TEST_FILE.exists(), reason="needs CRFSDCA_DATA_DIR with conll2000"
)

STARTS = {("B", "B"), ("I", "B"), ("O", "B"), ("O", "I"), ("E", "E"), ("E", "I"), ("O", "E")}
ENDS = {("B", "B"), ("B", "O"), ("I", "B"), ("I", "O"), ("E", "E"), ("E", "I"), ("E", "O")}


def split(tag: str) -> tuple[str, str]:
    head, _, kind = tag.partition("-")
    return head, kind


def phrases(tags: list[str]) -> set[tuple[int, int, str]]:
    """(start, end, type) of every phrase of one tag stream, boundaries marked by "O"."""
    out, start, prev = set(), None, ("O", "")
    for i, tag in enumerate([*tags, "O"]):
        cur = split(tag)
        ends = (prev[0], cur[0]) in ENDS or (prev[0] not in "O." and prev[1] != cur[1])
        if start is not None and (ends or prev[0] in "[]"):
            out.add((start, i - 1, prev[1]))
            start = None
        starts = (prev[0], cur[0]) in STARTS or (cur[0] not in "O." and prev[1] != cur[1])
        if starts or cur[0] in "[]":
            start = i
        prev = cur
    return out


def read_gold(path: Path) -> list[list[str]]:
    sentences, current = [], []
    with gzip.open(path, "rt") as fh:
        for line in fh:
            if line.strip():
                current.append(line.split()[-1])
            elif current:
                sentences.append(current)
                current = []
    if current:
        sentences.append(current)
    return sentences


def stream(sentences: list[list[str]]) -> list[str]:
    """One tag stream with an "O" between sentences, as conlleval reads blank lines."""
    out: list[str] = []
    for s in sentences:
        out += [*s, "O"]
    return out


@pytest.mark.slow
@needs_data
def test_gold_phrase_count_of_the_conll2000_test_file():
    gold = read_gold(TEST_FILE)
    assert sum(map(len, gold)) == 47377  # SOURCES.md
    assert len(phrases(stream(gold))) == 23852  # conlleval: "with 23852 phrases"


@pytest.mark.slow
@needs_data
def test_evaluate_prints_conllevals_numbers(tmp_path):
    """A model trained briefly on 2,000 sentences: phrase counts, precision, recall and F1."""
    runner = CliRunner()
    model = tmp_path / "chunker.npz"
    args = ["train", "conll2000", "--data-dir", DATA_DIR, "--max-sequences", "2000"]
    args += ["--epochs", "3", "--tol", "0", "-q", "--model", str(model)]
    trained = runner.invoke(main, args)
    assert trained.exit_code == 0, trained.output
    crf = SequenceCRF.load(str(model))
    source = resolve("conll2000", None)
    data = encode_eval(source, encoder_from_model(crf.encoder), DATA_DIR)
    ids, offsets = crf.predict(data).tolist(), data.seq_offsets.tolist()
    names = crf.label_names_
    pred = [[names[k] for k in ids[a:b]] for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
    gold = read_gold(TEST_FILE)
    assert [len(p) for p in pred] == [len(g) for g in gold]
    g, p = phrases(stream(gold)), phrases(stream(pred))
    correct = len(g & p)
    precision, recall = 100 * correct / len(p), 100 * correct / len(g)
    f1 = 2 * precision * recall / (precision + recall)
    evaluated = runner.invoke(main, ["evaluate", str(model), "conll2000", "--data-dir", DATA_DIR])
    assert evaluated.exit_code == 0, evaluated.stderr
    head = re.search(
        r"processed (\d+) tokens with (\d+) phrases; found: (\d+) phrases; correct: (\d+)\.",
        evaluated.stdout,
    )
    assert head, evaluated.stdout
    assert tuple(map(int, head.groups())) == (47377, len(g), len(p), correct)
    assert len(g) == 23852
    scores = f"precision: {precision:6.2f}%; recall: {recall:6.2f}%; FB1: {f1:6.2f}"
    assert scores in evaluated.stdout
