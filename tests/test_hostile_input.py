"""Malformed, hostile and random input for every corpus reader, directly and through the CLI.

Policy (decided here, documented in ``crfsdca/io/textfile.py`` and ``crfsdca/io/readers.py``): a
reader
either returns a corpus or raises ``DataFormatError`` whose message names ``file:line`` (or only
the file when no line is to blame, e.g. an empty file) and says what was expected. Nothing else
may escape, nothing may hang, and one line costs at most ``MAX_LINE_BYTES`` of memory.

Accepted, as a reasonable reader would: ``\\r\\n`` line breaks, a missing final newline, a UTF-8
byte order mark, trailing spaces/tabs, any mix of spaces and tabs between CoNLL columns (CoNLL
columns are whitespace-separated; CoNLL-U and CRFsuite fields are tab-separated, where a space
belongs to the field), blank lines made of whitespace, trailing blank lines in OCR files, a
CRFsuite item with a label and no attribute. Rejected: everything in ``tests/data/bad`` listed
in ``REJECTED`` below.

The fuzz tests bound every example by a hypothesis deadline and a SIGALRM watchdog (a hang
fails instead of stalling CI); the budget is about a minute in all, ``CRFSDCA_FUZZ_SCALE``
multiplies it.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import re
import signal
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crfsdca.cli.main import main
from crfsdca.errors import DataFormatError
from crfsdca.io import (
    MAX_COLUMNS,
    MAX_LINE_BYTES,
    AttributeCorpus,
    DenseCorpus,
    TokenCorpus,
    open_text,
    read_conll,
    read_conllu,
    read_crfsuite,
    read_ocr,
)

DATA = Path(__file__).parent / "data"
BAD = DATA / "bad"
READERS = {"conll": read_conll, "conllu": read_conllu, "ocr": read_ocr, "crfsuite": read_crfsuite}
TEMPLATES = {"conll": "conll", "conllu": "pos"}  # the CLI needs a template for token formats

FINITE = r"attribute 'score': expected a finite weight after the last ':', got "
# file, reader, expected "file:line: message" (None as line: the file as a whole is to blame)
REJECTED = [
    ("conll_wrong_columns.txt", "conll", 3, r"expected 3 columns \(w f1 label\), got 2"),
    ("conll_extra_column.txt", "conll", 2, r"expected 3 columns \(w f1 label\), got 4"),
    ("conll_no_label.txt", "conll", 2, r"expected 3 columns .*, got 1 \(a token without a"),
    ("conll_empty.txt", "conll", None, r"expected at least one token line, got none"),
    ("conll_blank_only.txt", "conll", None, r"expected at least one token line, got none"),
    ("conll_bad_utf8.txt", "conll", 2, r"expected UTF-8 text, got bytes b'\\xe9 NN' at column 4"),
    ("conll_nul.txt", "conll", 2, r"expected text, got a NUL byte at column 2; a binary file\?"),
    ("conll_bare_cr.txt", "conll", 1, r"expected \\n or \\r\\n line breaks, got a bare \\r"),
    ("conll_utf16.txt", "conll", 1, r"expected UTF-8 text, got a UTF-16 byte order mark"),
    ("conll_truncated.txt.gz", "conll", 27, r"corrupt or truncated gzip stream"),
    ("conllu_bad_id.conllu", "conllu", 4, r"expected an id like 3, 3-4 or 3\.1, got '2a'"),
    ("conllu_unicode_id.conllu", "conllu", 4, r"expected an id like 3, 3-4 or 3\.1, got '\u0662'"),
    ("conllu_wrong_columns.conllu", "conllu", 4, r"expected 10 tab-separated columns .*, got 9"),
    ("conllu_spaces.conllu", "conllu", 3, r"expected 10 tab-separated columns .*, got 1"),
    ("conllu_empty_label.conllu", "conllu", 4, r"column 5 \(XPOS\): expected a tag, got ''"),
    ("ocr_non_numeric_pixel.data", "ocr", 2, r"pixel 6 \(p_0_5\): expected 0 or 1, got 'x'"),
    ("ocr_non_binary_pixel.data", "ocr", 1, r"pixel 40 \(p_4_7\): expected 0 or 1, got '2'"),
    ("ocr_wrong_field_count.data", "ocr", 2, r"expected 128 pixel fields after 'fold', got 127"),
    ("ocr_truncated_word.data", "ocr", 2, r"expected next_id -1 on the last letter of the file"),
    ("ocr_truncated_line.data", "ocr", 2, r"expected 128 pixel fields after 'fold', got 14"),
    ("ocr_non_integer_fold.data", "ocr", 1, r"field fold: expected an integer, got '1_0'"),
    ("ocr_empty_letter.data", "ocr", 1, r"field letter: expected a label, got ''"),
    ("ocr_space_separated.data", "ocr", 1, r"expected 134 tab-separated fields, got 1"),
    ("crfsuite_nan.txt", "crfsuite", 1, FINITE + r"'nan'"),
    ("crfsuite_inf.txt", "crfsuite", 2, FINITE + r"'inf'"),
    ("crfsuite_overflow.txt", "crfsuite", 1, FINITE + r"'1e400'"),
    ("crfsuite_empty_name.txt", "crfsuite", 3, r"expected an attribute name, got ':2\.5'"),
    ("crfsuite_no_label.txt", "crfsuite", 2, r"expected a label in the first field, got ''"),
]
BINARY = [
    ("model.npz", r"expected UTF-8 text, got a zip archive \(an \.npz model\?\)"),
    ("random.bin", r"expected UTF-8 text, got bytes b'\\x82\\xc2\\xd9\\xcf' at column 9"),
]


def _where(name: str, line: int | None) -> str:
    return re.escape(name) + ("" if line is None else f":{line}") + ": "


@pytest.mark.parametrize(("name", "fmt", "line", "message"), REJECTED)
def test_bad_file_names_file_line_and_expectation(name, fmt, line, message):
    with pytest.raises(DataFormatError, match=_where(name, line) + message) as info:
        READERS[fmt](BAD / name)
    assert info.value.line == line and info.value.path == str(BAD / name)


@pytest.mark.parametrize(("name", "message"), BINARY)
@pytest.mark.parametrize("fmt", READERS)
def test_binary_file_is_rejected_by_every_reader(name, message, fmt):
    with pytest.raises(DataFormatError, match=_where(name, 1) + message):
        READERS[fmt](BAD / name)


@pytest.mark.parametrize(
    ("name", "labels"),
    [
        ("conll_mixed_separators.txt", [["B-NP", "I-NP"], ["B-VP"]]),
        ("conll_no_final_newline.txt", [["B-NP", "I-NP"]]),
        ("conll_crlf.txt", [["B-NP", "I-NP"], ["B-VP"]]),
        ("conll_trailing_spaces.txt", [["B-NP", "I-NP"], ["B-VP"]]),
    ],
)
def test_conll_accepts_what_a_reasonable_reader_accepts(name, labels):
    corpus = read_conll(BAD / name)
    assert corpus.labels == labels
    assert corpus.tokens[0] == [("The", "DT"), ("cat", "NN")]
    assert corpus.lines[0] == 1
    assert corpus.field_names == ("w", "f1")


def test_ocr_accepts_trailing_whitespace_and_blank_lines():
    corpus = read_ocr(BAD / "ocr_trailing_blank.data")
    assert corpus.labels == [["a", "b"]] and corpus.values.shape == (2, 128)
    assert corpus.lines == [1]


def test_crfsuite_accepts_items_without_attributes_and_spaced_weights():
    corpus = read_crfsuite(BAD / "crfsuite_label_only.txt")
    assert corpus.labels == [["O", "B"], ["O"]]
    assert corpus.attributes == [[[], [("w=b", 1.0), ("scale", 0.5)]], [[]]]


def test_million_token_line(tmp_path):
    line = " ".join(["tok"] * 10**6) + "\n"
    first = tmp_path / "first.txt"
    first.write_text(line + "a b\n")
    pattern = rf"first\.txt:1: expected at most {MAX_COLUMNS} columns .* got 1000000; not a CoNLL"
    with pytest.raises(DataFormatError, match=pattern):
        read_conll(first)
    later = tmp_path / "later.txt"
    later.write_text("The DT B-NP\n" + line)
    with pytest.raises(DataFormatError, match=r"later\.txt:2: expected 3 columns .* got 1000000$"):
        read_conll(later)


def test_explicit_column_count_is_not_capped(tmp_path):
    path = tmp_path / "wide.txt"
    n = MAX_COLUMNS + 5
    path.write_text(" ".join(f"c{j}" for j in range(n)) + "\n")
    corpus = read_conll(path, n_columns=n)
    assert len(corpus.tokens[0][0]) == n - 1 and corpus.labels == [[f"c{n - 1}"]]
    with pytest.raises(
        DataFormatError,
        match=r"wide\.txt:1: expected 1006 columns \(w f1 f2 \.\.\. f1004 label\), got 1005$",
    ):
        read_conll(path, n_columns=n + 1)


@pytest.mark.parametrize("compress", [False, True])
def test_overlong_line_is_rejected_before_it_is_read_whole(tmp_path, compress):
    def write(name: str, data: bytes) -> Path:
        path = tmp_path / name
        path.write_bytes(gzip.compress(data, compresslevel=1) if compress else data)
        return path

    long_line = b"a" * (MAX_LINE_BYTES + 10) + b" B\n"
    message = rf"expected a line of at most {MAX_LINE_BYTES} bytes, got a longer one"
    first = write("first.txt", long_line)
    for reader in READERS.values():
        with pytest.raises(DataFormatError, match=r"first\.txt:1: " + message):
            reader(first)
    later = write("later.txt", b"x y\n" + long_line)
    with pytest.raises(DataFormatError, match=r"later\.txt:2: " + message):
        read_conll(later)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_endless_binary_stream_costs_one_bounded_line():
    with pytest.raises(DataFormatError, match=r"/dev/zero:1: expected a line of at most"):
        read_conll("/dev/zero")


def test_huge_numbers_are_format_errors_not_crashes(tmp_path):
    digits = "9" * 5000  # int() refuses more than 4300 digits with a bare ValueError
    path = tmp_path / "id.conllu"
    path.write_text("\t".join([digits, "w", "w", "X", "X", "_", "0", "root", "_", "_"]) + "\n")
    with pytest.raises(DataFormatError, match=r"id\.conllu:1: .* got '9{40}'\.\.\. \(5000 char"):
        read_conllu(path)
    pixels = "\t".join(["0"] * 128)
    ocr = tmp_path / "big.data"
    ocr.write_text(f"1\ta\t{digits}\t1\t1\t0\t{pixels}\n")
    with pytest.raises(DataFormatError, match=r"big\.data:1: field next_id: expected an integer"):
        read_ocr(ocr)
    crf = tmp_path / "big.txt"
    crf.write_text(f"O\tx:{digits}\n")
    with pytest.raises(DataFormatError, match=r"big\.txt:1: attribute 'x': expected a finite"):
        read_crfsuite(crf)


@pytest.mark.parametrize(
    ("weight", "value"),
    [("0.5", 0.5), (" -2 ", -2.0), ("1e-3", 1e-3), ("+.5E+2", 50.0), ("1e308", 1e308)],
)
def test_crfsuite_weights_in_decimal_notation(tmp_path, weight, value):
    path = tmp_path / "w.txt"
    path.write_text(f"O\tx:{weight}\n")
    assert read_crfsuite(path).attributes == [[[("x", value)]]]


@pytest.mark.parametrize("weight", ["0x10", "1_0", "\u0661", "1e", "--1", "", "infinity"])
def test_crfsuite_rejects_other_number_syntax(tmp_path, weight):
    path = tmp_path / "w.txt"
    path.write_text(f"O\tx:{weight}\n")
    with pytest.raises(DataFormatError, match=r"w\.txt:1: attribute 'x': expected a finite"):
        read_crfsuite(path)


# ----------------------------------------------------------------------------- CLI


def _cli_args(path: Path, fmt: str) -> list[str]:
    template = ["--template", TEMPLATES[fmt]] if fmt in TEMPLATES else []
    return ["train", str(path), "--format", fmt, *template, "-q"]


@pytest.mark.parametrize(
    ("name", "fmt", "line"),
    [(name, fmt, line) for name, fmt, line, _ in REJECTED if line is not None]
    + [("model.npz", "conll", 1), ("random.bin", "crfsuite", 1)],
)
def test_cli_reports_one_line_with_file_and_line(name, fmt, line):
    result = CliRunner().invoke(main, _cli_args(BAD / name, fmt))
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{BAD / name}:{line}: " in lines[0], result.stderr
    assert lines[0].startswith("crfsdca: error: ") and result.stdout == ""


def test_cli_empty_file_names_the_file():
    result = CliRunner().invoke(main, _cli_args(BAD / "conll_empty.txt", "conll"))
    assert result.exit_code == 1
    path = BAD / "conll_empty.txt"
    assert result.stderr == f"crfsdca: error: {path}: expected at least one token line, got none\n"


# ----------------------------------------------------------------------------- fuzzing

# examples per fuzz test: the three together take about a minute on two busy cores;
# CRFSDCA_FUZZ_SCALE=10 (say) digs deeper, e.g. nightly
SCALE = float(os.environ.get("CRFSDCA_FUZZ_SCALE", "1"))
WATCHDOG_SECONDS = 20


@contextlib.contextmanager
def watchdog(seconds: float):
    """Fail with TimeoutError instead of hanging (SIGALRM; POSIX main thread only)."""
    if not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum, frame):
        raise TimeoutError(f"a reader ran for more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def fuzz(examples: int) -> settings:
    """Hypothesis settings of a fuzz test: a budget and a per-example deadline."""
    return settings(
        max_examples=max(1, round(examples * SCALE)),
        deadline=timedelta(seconds=5),
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def _check_all_readers(path: Path, data: bytes) -> None:
    """Every reader accepts ``path`` or raises a one-line DataFormatError about it."""
    n_lines = data.count(b"\n") + 1
    with watchdog(WATCHDOG_SECONDS):
        for reader, kwargs in [
            (read_conll, {}),
            (read_conll, {"n_columns": 3, "docstart": "keep"}),
            (read_conllu, {}),
            (read_conllu, {"tag": "upos"}),
            (read_ocr, {}),
            (read_crfsuite, {}),
        ]:
            try:
                corpus = reader(path, **kwargs)
            except DataFormatError as err:
                message = str(err)
                assert err.path == str(path) and message.startswith(f"{path}")
                assert "\n" not in message and len(message) < 400, message
                assert err.line is None or 1 <= err.line <= n_lines, (err.line, n_lines)
            else:
                _check_corpus(corpus)
        with contextlib.suppress(DataFormatError), open_text(path) as lines:
            for _ in lines:
                pass


def _check_corpus(corpus: TokenCorpus | AttributeCorpus | DenseCorpus) -> None:
    n = len(corpus.labels)
    assert n >= 1 and len(corpus.lines) == n
    assert all(len(s) >= 1 for s in corpus.labels)
    assert corpus.lines == sorted(corpus.lines)
    if isinstance(corpus, TokenCorpus):
        width = len(corpus.field_names)
        assert all(len(tok) == width for s in corpus.tokens for tok in s)
        assert all(y for s in corpus.labels for y in s)
        _check_heads(corpus)
    elif isinstance(corpus, DenseCorpus):
        assert corpus.values.shape == (corpus.n_tokens, 128) and corpus.values.max() <= 1
    else:
        assert all(len(a) == len(y) for a, y in zip(corpus.attributes, corpus.labels, strict=True))


def _check_heads(corpus: TokenCorpus) -> None:
    """CoNLL-U heads are trees on every sentence, or absent with the first problem's line."""
    import numpy as np

    from crfsdca.structures.graphs import Tree

    if corpus.heads:
        assert corpus.head_problem is None and len(corpus.heads) == len(corpus.labels)
        for i, (heads, labels) in enumerate(zip(corpus.heads, corpus.labels, strict=True)):
            assert len(heads) == len(labels)
            Tree(np.asarray(heads, np.int64), example=i)  # a GraphError would fail the test
    if corpus.head_problem is not None:
        line, message = corpus.head_problem
        assert line >= corpus.lines[0] and message.startswith("column 7 (HEAD): ")


def _write(fuzz_dir: Path, data: bytes, compress: bool) -> Path:
    path = fuzz_dir / ("input.gz" if compress else "input.txt")
    path.write_bytes(gzip.compress(data, compresslevel=1, mtime=0) if compress else data)
    return path


@fuzz(1500)
@given(data=st.binary(max_size=600), compress=st.booleans())
def test_fuzz_random_bytes(fuzz_dir, data, compress):
    _check_all_readers(_write(fuzz_dir, data, compress), data)


# pieces that reach the readers' corners: numbers at and past the limits, control characters,
# CRFsuite escapes, CoNLL-U ids, separators, BOMs and invalid UTF-8
PIECES = [
    "0", "1", "-1", "2", "07", "nan", "inf", "-inf", "1e400", "1e-400", "1e308", "0x1F", "1_0",
    "9" * 19, "9" * 4400, "\u0663", "\u00b2", "-DOCSTART-", "_", "#", "1-2", "1.1", "3.",
    ":", "\\:", "\\", "\\\\", "a:b", ":1", "x:1e308", "\x00", "\r", "\x0b", "\x0c", "\x1c",
    "\x85", "\u2028", "\ufeff", "\udcff", "é", "漢", "\U0001f600",
]  # fmt: skip
SEPARATORS = ["\t", " ", "  ", " \t", "\t\t", "\x0b", ""]
TOKEN = st.sampled_from(PIECES) | st.text(max_size=6)
LINE = st.lists(st.tuples(TOKEN, st.sampled_from(SEPARATORS)), max_size=12).map(
    lambda parts: "".join(tok + sep for tok, sep in parts)
)


def _encode(lines: list[str], newline: str, final: bool) -> bytes:
    text = newline.join(lines) + (newline if final else "")
    return text.encode("utf-8", errors="surrogateescape")  # "\udcff" -> the invalid byte 0xff


@fuzz(600)
@given(
    lines=st.lists(LINE, max_size=12),
    newline=st.sampled_from(["\n", "\r\n", "\r", "\n\n"]),
    final=st.booleans(),
    compress=st.booleans(),
)
def test_fuzz_random_lines(fuzz_dir, lines, newline, final, compress):
    data = _encode(lines, newline, final)
    _check_all_readers(_write(fuzz_dir, data, compress), data)


SEEDS = [
    (DATA / "conll_ok.txt").read_text().splitlines(),
    (DATA / "ok.conllu").read_text().splitlines(),
    (DATA / "ocr_ok.data").read_text().splitlines(),
    (DATA / "crfsuite_ok.txt").read_text().splitlines(),
]


@st.composite
def mutated_file(draw) -> bytes:
    """A valid file of one of the four formats with a few fields, lines or bytes changed."""
    lines = list(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, max(len(lines) - 1, 0)))
        action = draw(st.sampled_from(["field", "field", "field", "drop", "copy", "insert"]))
        if action == "insert" or not lines:
            lines.insert(i, draw(LINE))
        elif action == "drop":
            del lines[i]
        elif action == "copy":
            lines.insert(i, lines[draw(st.integers(0, len(lines) - 1))])
        else:
            sep = "\t" if "\t" in lines[i] else " "
            fields = lines[i].split(sep)
            j = draw(st.integers(0, len(fields) - 1))
            fields[j] = draw(TOKEN)
            lines[i] = draw(st.sampled_from([sep, " ", "\t"])).join(fields)
    data = _encode(lines, draw(st.sampled_from(["\n", "\r\n"])), draw(st.booleans()))
    cut = draw(st.integers(0, len(data)))
    return data[:cut] if draw(st.integers(0, 9)) == 0 else data


@fuzz(1500)
@given(data=mutated_file(), compress=st.booleans())
def test_fuzz_mutated_valid_files(fuzz_dir, data, compress):
    _check_all_readers(_write(fuzz_dir, data, compress), data)
