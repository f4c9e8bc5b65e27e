"""Readers, writers and corpus containers of crfsdca.io."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pytest

from crfsdca.errors import DataFormatError
from crfsdca.io import (
    AttributeCorpus,
    atomic_open,
    atomic_write_bytes,
    open_text,
    read_conll,
    read_conllu,
    read_crfsuite,
    read_ocr,
    write_crfsuite,
)

HERE = Path(__file__).parent / "data"
DATA_DIR = os.environ.get("CRFSDCA_DATA_DIR")
needs_data = pytest.mark.skipif(
    not DATA_DIR or not Path(DATA_DIR).is_dir(), reason="CRFSDCA_DATA_DIR not set or missing"
)


def _gzip_copy(src: Path, dest: Path) -> Path:
    dest.write_bytes(gzip.compress(src.read_bytes()))
    return dest


# ----------------------------------------------------------------------------- files


def test_open_text_detects_gzip_by_magic_not_name(tmp_path):
    plain = HERE / "conll_ok.txt"
    disguised = _gzip_copy(plain, tmp_path / "looks_plain.txt")
    misnamed = tmp_path / "not_gzip.gz"
    misnamed.write_bytes(plain.read_bytes())
    expected = plain.read_text().splitlines()
    for path in (disguised, misnamed):
        with open_text(path) as lines:
            assert list(lines) == expected


def test_open_text_closes_after_iteration():
    lines = open_text(HERE / "conll_ok.txt")
    assert len(list(lines)) == 8
    assert lines.lineno == 8 and lines._raw.closed


def test_open_text_strips_bom_and_crlf(tmp_path):
    path = tmp_path / "crlf.txt"
    path.write_bytes(b"\xef\xbb\xbfa b\r\nc d\r\n")
    with open_text(path) as lines:
        assert list(lines) == ["a b", "c d"]


def test_bad_utf8_reports_line():
    with pytest.raises(DataFormatError, match=r"bad_utf8\.txt:3: expected UTF-8") as info:
        read_conll(HERE / "bad_utf8.txt")
    assert info.value.line == 3
    assert info.value.path.endswith("bad_utf8.txt")


def test_bad_utf8_inside_gzip_reports_line(tmp_path):
    path = _gzip_copy(HERE / "bad_utf8.txt", tmp_path / "bad.gz")
    with pytest.raises(DataFormatError, match=r"bad\.gz:3: expected UTF-8"):
        read_conll(path)


def test_truncated_gzip_is_a_data_error(tmp_path):
    data = gzip.compress((HERE / "conll_ok.txt").read_bytes() * 50)
    path = tmp_path / "cut.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(DataFormatError, match="corrupt or truncated gzip"):
        read_conll(path)


def test_atomic_write_replaces_file(tmp_path):
    path = tmp_path / "out.bin"
    atomic_write_bytes(path, b"one")
    atomic_write_bytes(path, b"two")
    assert path.read_bytes() == b"two"
    assert os.listdir(tmp_path) == ["out.bin"]


def test_atomic_open_failure_leaves_nothing(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("original")
    with pytest.raises(RuntimeError), atomic_open(path, "w") as handle:
        handle.write("half written")
        raise RuntimeError("boom")
    assert path.read_text() == "original"
    assert os.listdir(tmp_path) == ["out.txt"]


def test_atomic_open_rejects_read_mode(tmp_path):
    with pytest.raises(ValueError, match="mode must be"), atomic_open(tmp_path / "x", "r"):
        pass


# ----------------------------------------------------------------------------- CoNLL


def test_read_conll_sequences_lines_and_fields():
    corpus = read_conll(HERE / "conll_ok.txt", field_names=("w", "pos"))
    assert len(corpus) == 2 and corpus.n_tokens == 4
    assert corpus.tokens[0] == [("The", "DT"), ("cat", "NN")]
    assert corpus.labels == [["B-NP", "I-NP"], ["B-VP", "O"]]
    assert corpus.lines == [1, 6]  # several blank lines between sequences
    assert corpus.field_names == ("w", "pos")


def test_read_conll_default_field_names():
    assert read_conll(HERE / "conll_ok.txt").field_names == ("w", "f1")


@pytest.mark.parametrize(
    ("docstart", "n_sequences", "n_tokens", "first_line"),
    [("drop", 3, 4, 2), ("keep", 4, 6, 1)],
)
def test_read_conll_docstart(docstart, n_sequences, n_tokens, first_line):
    corpus = read_conll(HERE / "conll_docstart.txt", docstart=docstart)
    assert (len(corpus), corpus.n_tokens, corpus.lines[0]) == (n_sequences, n_tokens, first_line)
    if docstart == "keep":
        assert corpus.tokens[0][0] == ("-DOCSTART-", "-DOCSTART-")
        assert corpus.labels[0][0] == "O"


def test_read_conll_wrong_column_count():
    with pytest.raises(DataFormatError, match=r"conll_bad_columns\.txt:5: expected 3 columns "):
        read_conll(HERE / "conll_bad_columns.txt")
    with pytest.raises(DataFormatError, match=r"expected 3 columns \(w pos label\), got 2"):
        read_conll(HERE / "conll_bad_columns.txt", field_names=("w", "pos"))


def test_read_conll_label_less_line():
    pattern = r"conll_no_label\.txt:2: expected 3 columns \(w f1 label\), got 1 \(a token without"
    with pytest.raises(DataFormatError, match=pattern):
        read_conll(HERE / "conll_no_label.txt")


def test_read_conll_single_column_first_line(tmp_path):
    path = tmp_path / "one.txt"
    path.write_text("word\n")
    with pytest.raises(DataFormatError, match=r"one\.txt:1: expected at least 2 columns"):
        read_conll(path)


def test_read_conll_given_column_count():
    with pytest.raises(DataFormatError, match=r":1: expected 4 columns \(w f1 f2 label\), got 3"):
        read_conll(HERE / "conll_ok.txt", n_columns=4)
    with pytest.raises(ValueError, match="disagrees"):
        read_conll(HERE / "conll_ok.txt", n_columns=4, field_names=("w", "pos"))


@pytest.mark.parametrize("name", ["empty.txt", "blank_lines.txt"])
def test_read_conll_no_tokens(name):
    with pytest.raises(DataFormatError, match=rf"{name}: expected at least one token"):
        read_conll(HERE / name)


def test_read_conll_bad_docstart_option():
    with pytest.raises(ValueError, match="docstart must be"):
        read_conll(HERE / "conll_ok.txt", docstart="split")


# ----------------------------------------------------------------------------- CoNLL-U


def test_read_conllu_skips_comments_ranges_and_empty_nodes():
    corpus = read_conllu(HERE / "ok.conllu")
    assert corpus.field_names == ("w", "upos")
    assert [[t[0] for t in s] for s in corpus.tokens] == [["Do", "n't", "go", "."], ["Yes"]]
    assert corpus.labels == [["VBP", "RB", "VB", "."], ["UH"]]
    assert corpus.lines == [5, 12]
    upos = read_conllu(HERE / "ok.conllu", tag="upos")
    assert upos.labels[0] == ["AUX", "PART", "VERB", "PUNCT"]
    assert upos.field_names == ("w", "xpos") and upos.tokens[0][0] == ("Do", "VBP")


@pytest.mark.parametrize(
    ("name", "pattern"),
    [
        (
            "bad_columns.conllu",
            r"bad_columns\.conllu:6: expected 10 tab-separated columns .* got 9",
        ),
        ("bad_id.conllu", r"bad_id\.conllu:7: expected an id like 3, 3-4 or 3\.1, got 'x3'"),
        ("skipped_id.conllu", r"skipped_id\.conllu:7: expected word id 3, got 5"),
        ("empty.txt", r"empty\.txt: expected at least one word line"),
    ],
)
def test_read_conllu_errors(name, pattern):
    with pytest.raises(DataFormatError, match=pattern):
        read_conllu(HERE / name)


# ----------------------------------------------------------------------------- OCR


def test_read_ocr_words_pixels_folds():
    corpus = read_ocr(HERE / "ocr_ok.data")
    assert corpus.labels == [["o", "m", "m"], ["a", "n"]]
    assert corpus.seq_offsets.tolist() == [0, 3, 5]
    assert corpus.folds.tolist() == [1, 0]
    assert corpus.lines == [1, 4]
    assert corpus.values.shape == (5, 128) and corpus.values.dtype == np.uint8
    expected = [[1 if (j * 7 + k) % 5 == 0 else 0 for j in range(128)] for k in range(1, 6)]
    np.testing.assert_array_equal(corpus.values, expected)
    test = corpus.subset(np.flatnonzero(corpus.folds == 0))
    assert test.labels == [["a", "n"]] and test.seq_offsets.tolist() == [0, 2]
    np.testing.assert_array_equal(test.values, corpus.values[3:])


@pytest.mark.parametrize(
    ("name", "pattern"),
    [
        (
            "ocr_bad_pixel.data",
            r"ocr_bad_pixel\.data:4: pixel 10 \(p_1_1\): expected 0 or 1, got '2'",
        ),
        ("ocr_unterminated.data", r"ocr_unterminated\.data:4: expected next_id -1 on the last"),
        ("ocr_fold_mismatch.data", r"ocr_fold_mismatch\.data:2: expected the fold of its word, 1"),
        ("empty.txt", r"empty\.txt: expected at least one letter line"),
        ("conll_ok.txt", r"conll_ok\.txt:1: expected 134 tab-separated fields, got 1"),
    ],
)
def test_read_ocr_errors(name, pattern):
    with pytest.raises(DataFormatError, match=pattern):
        read_ocr(HERE / name)


def test_read_ocr_non_integer_field(tmp_path):
    lines = (HERE / "ocr_ok.data").read_text().splitlines()
    lines[1] = lines[1].replace("2\tm\t3", "2\tm\tthree", 1)
    path = tmp_path / "bad.data"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataFormatError, match=r"bad\.data:2: field next_id: expected an integer"):
        read_ocr(path)


# ----------------------------------------------------------------------------- CRFsuite


def test_read_crfsuite_escapes_and_weights():
    corpus = read_crfsuite(HERE / "crfsuite_ok.txt")
    assert corpus.labels == [["B-NP", "I-NP"], ["O"]]
    assert corpus.lines == [1, 5]
    assert corpus.attributes[0][0] == [
        ("w[0]=The", 1.0),
        ("pos[0]=DT", 1.0),
        ("time=12:30", 1.0),
        ("path=C:\\dir", 1.0),
        ("scale", 0.5),
        ("ratio:x", 2.5),
        ("__BOS__", 1.0),
    ]
    assert corpus.attributes[0][1] == [("w[0]=cat", 1.0), ("w[-1]=The", 1.0), ("w[0]=cat", 1.0)]
    assert corpus.attributes[1][0] == [("w[0]=.", 1.0), ("scale", -1e-3)]


@pytest.mark.parametrize(
    ("name", "pattern"),
    [
        ("crfsuite_nan.txt", r"crfsuite_nan\.txt:1: attribute 'score': expected a finite weight"),
        ("crfsuite_bad_weight.txt", r"crfsuite_bad_weight\.txt:2: .*got 'abc' \(write a colon"),
        ("empty.txt", r"empty\.txt: expected at least one item line"),
    ],
)
def test_read_crfsuite_errors(name, pattern):
    with pytest.raises(DataFormatError, match=pattern):
        read_crfsuite(HERE / name)


@pytest.mark.parametrize("field", ["x:inf", ":1.5", "\tno_label"])
def test_read_crfsuite_more_errors(tmp_path, field):
    path = tmp_path / "bad.txt"
    path.write_text(f"O\tw=a\nO\t{field}\n" if not field.startswith("\t") else f"{field}\n")
    with pytest.raises(DataFormatError, match=r"bad\.txt:\d: .*expected"):
        read_crfsuite(path)


@pytest.mark.parametrize("suffix", [".txt", ".txt.gz"])
def test_write_crfsuite_round_trip(tmp_path, suffix):
    corpus = AttributeCorpus(
        attributes=[
            [[("w=a:b", 1.0), ("back\\slash", 2.0), ("c\\:", -0.25)], []],
            [[("x", 1e-300), ("ü=é", 1.0)]],
        ],
        labels=[["L:1", "B\\"], ["O"]],
    )
    path = tmp_path / f"out{suffix}"
    write_crfsuite(path, corpus)
    assert (path.read_bytes()[:2] == b"\x1f\x8b") == suffix.endswith(".gz")
    back = read_crfsuite(path)
    assert back.attributes == corpus.attributes
    assert back.labels == corpus.labels


def test_write_crfsuite_rejects_tabs(tmp_path):
    corpus = AttributeCorpus(attributes=[[[("a\tb", 1.0)]]], labels=[["O"]])
    with pytest.raises(ValueError, match="cannot contain tabs"):
        write_crfsuite(tmp_path / "x.txt", corpus)
    assert not (tmp_path / "x.txt").exists()


def test_corpus_subset_and_head():
    corpus = read_conll(HERE / "conll_ok.txt")
    assert corpus.head(1).tokens == corpus.tokens[:1]
    sub = corpus.subset([1, 0])
    assert sub.labels == [corpus.labels[1], corpus.labels[0]] and sub.lines == [6, 1]
    assert len(corpus.head(10)) == 2
    crf = read_crfsuite(HERE / "crfsuite_ok.txt").subset(np.array([1]))
    assert crf.labels == [["O"]] and crf.lines == [5]


# ----------------------------------------------------------------------------- real corpora


TEXT_FILES = [
    # path, reader kwargs, sequences, tokens, labels, distinct words: the numbers of
    # ../shared/data/SOURCES.md (its words exclude -DOCSTART-; with "keep" it is one more word)
    ("conll2000/train.txt.gz", {}, 8936, 211727, 22, 19122),
    ("conll2000/test.txt.gz", {}, 2012, 47377, 19, 8118),
    ("conll2002_ned/ned.train.gz", {"docstart": "keep"}, 15806, 202931, 9, 27804),
    ("conll2002_ned/ned.train.gz", {}, 15806, 202644, 9, 27803),
    ("conll2002_ned/ned.testa.gz", {"docstart": "keep"}, 2895, 37761, 9, 8150),
    ("conll2002_ned/ned.testb.gz", {"docstart": "keep"}, 5195, 68994, 9, 11802),
    ("conll2002_ned/ned.testb.gz", {}, 5195, 68875, 9, 11801),
]


@pytest.mark.slow
@needs_data
@pytest.mark.parametrize(("relpath", "kwargs", "n_seq", "n_tok", "n_lab", "n_words"), TEXT_FILES)
def test_real_conll_counts(relpath, kwargs, n_seq, n_tok, n_lab, n_words):
    corpus = read_conll(Path(DATA_DIR) / relpath, n_columns=3, **kwargs)
    assert (len(corpus), corpus.n_tokens) == (n_seq, n_tok)
    assert len({y for s in corpus.labels for y in s}) == n_lab
    assert len({t[0] for s in corpus.tokens for t in s}) == n_words
    keep = kwargs.get("docstart") == "keep"
    assert plain_counts(Path(DATA_DIR) / relpath, keep) == (n_seq, n_tok, n_lab, n_words)


def plain_counts(path, keep_docstart):
    """(blocks of non-blank lines, tokens, distinct last columns, distinct first columns)."""
    blocks, tokens, labels, words, in_block = 0, 0, set(), set(), False
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            fields = line.split()
            blocks += bool(fields) and not in_block
            in_block = bool(fields)
            if not fields or (fields[0] == "-DOCSTART-" and not keep_docstart):
                continue
            tokens += 1
            labels.add(fields[-1])
            words.add(fields[0])
    return blocks, tokens, len(labels), len(words)


@pytest.mark.slow
@needs_data
@pytest.mark.parametrize(
    ("split", "n_seq", "n_tok", "n_xpos", "n_words"),
    [
        ("train", 12544, 204577, 49, 19674),
        ("dev", 2001, 25147, 49, 5494),
        ("test", 2077, 25094, 48, 5629),
    ],
)
def test_real_conllu_counts(split, n_seq, n_tok, n_xpos, n_words):
    corpus = read_conllu(Path(DATA_DIR) / f"ud_english_ewt/en_ewt-ud-{split}.conllu.gz")
    assert (len(corpus), corpus.n_tokens) == (n_seq, n_tok)
    assert len({y for s in corpus.labels for y in s}) == n_xpos
    assert len({t[1] for s in corpus.tokens for t in s}) == 17  # UPOS kept as a field
    assert len({t[0] for s in corpus.tokens for t in s}) == n_words


@pytest.mark.slow
@needs_data
def test_real_ocr_counts():
    corpus = read_ocr(Path(DATA_DIR) / "ocr/letter.data.gz")
    assert (len(corpus), corpus.n_tokens) == (6877, 52152)
    assert np.bincount(corpus.folds).tolist() == [626, 704, 684, 698, 693, 651, 739, 717, 690, 675]
    lengths = np.diff(corpus.seq_offsets)
    assert (lengths.min(), lengths.max()) == (3, 14)
    assert sorted({y for s in corpus.labels for y in s}) == list("abcdefghijklmnopqrstuvwxyz")
    assert corpus.values.sum(axis=1).max() == 67


def _read_all(read, path):
    """The lines ``read`` yields, or the error it raises (message, line)."""
    try:
        return list(read(path))
    except DataFormatError as err:
        return ("error", str(err), err.line)


def _line_by_line(path):
    """TextLines as it read before chunks: every line through _read_line and _decode."""
    from crfsdca.io.textfile import TextLines

    text = TextLines(path)
    try:
        while data := text._read_line():
            text.lineno += 1
            yield text._decode(data)
    finally:
        text.close()


@pytest.mark.parametrize("compress", [False, True])
def test_chunked_reading_equals_line_by_line_reading(tmp_path, monkeypatch, compress):
    """The same lines, or the same error on the same line, for files of hostile bytes read by
    chunks of a few bytes (chunk boundaries inside lines, \\r\\n pairs, UTF-8 sequences)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from crfsdca.io import textfile

    monkeypatch.setattr(textfile, "CHUNK_BYTES", 5)
    monkeypatch.setattr(textfile, "MAX_LINE_BYTES", 12)
    pieces = st.sampled_from([b"a", b"b c", b"\n", b"\r\n", b"\r", b"\x00", b"\xff", b"\xc3\xa9",
                              b"\xc3", b"\xef\xbb\xbf", b"  ", b"x" * 13, b"\t"])  # fmt: skip
    seen = []

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(pieces, max_size=30), st.integers(0, 40))
    def check(parts, cut):
        data = b"".join(parts)
        path = tmp_path / "f.txt"
        if compress:
            whole = gzip.compress(data)
            path.write_bytes(whole[: max(len(whole) - cut, 10)] if cut > 30 else whole)
        else:
            path.write_bytes(data)
        expected = _read_all(_line_by_line, path)
        assert _read_all(textfile.TextLines, path) == expected, data
        seen.append(isinstance(expected, tuple))

    check()
    assert any(seen) and not all(seen)  # both files read and files refused were tried


@pytest.mark.parametrize("head", ["9" * 4400, "\u00b2"])
def test_a_head_that_is_no_ascii_integer_drops_the_heads_instead_of_failing(tmp_path, head):
    from crfsdca.io import read_conllu

    path = tmp_path / "x.conllu"
    path.write_text(
        f"1\tDo\tdo\tAUX\tVBP\t_\t{head}\taux\t_\t_\n2\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_\n"
    )
    corpus = read_conllu(path)
    assert corpus.labels == [["VBP", "VB"]] and corpus.heads == []
