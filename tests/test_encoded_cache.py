"""The cache of encoded corpora (``crfsdca.features.encoded_cache``): an entry gives exactly
what encoding gives, is only used for the inputs that made it, and a bad one is replaced; for
registered datasets and for files given by path."""

from __future__ import annotations

import dataclasses
import gzip
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import data_loaders
from crfsdca.features import encoded_cache, sources
from crfsdca.features.sources import Source, load_inputs
from data_loaders import load_encoded

DATA_DIR = os.environ.get("CRFSDCA_DATA_DIR")
pytestmark = pytest.mark.skipif(
    not DATA_DIR or not Path(DATA_DIR).is_dir(), reason="CRFSDCA_DATA_DIR not set or missing"
)
FILES = ("conll2000/train.txt.gz", "conll2000/test.txt.gz")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """The cache on, in a folder of this test's own; returns its entries' folder."""
    monkeypatch.setenv("CRFSDCA_ENCODED_CACHE", "1")
    monkeypatch.setenv("CRFSDCA_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "encoded"


@pytest.fixture
def data_dir(tmp_path):
    """A copy of CoNLL-2000's files, which a test may edit."""
    folder = tmp_path / "data"
    for rel in FILES:
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(DATA_DIR) / rel, folder / rel)
    return folder


def fresh(monkeypatch, **kwargs):
    """load_encoded with the cache off."""
    with monkeypatch.context() as m:
        m.setenv("CRFSDCA_ENCODED_CACHE", "0")
        return load_encoded("conll2000", **kwargs)


def assert_same(got, want):
    assert got[0].to_dict() == want[0].to_dict()
    for a, b in zip(got[1:], want[1:], strict=True):
        assert (a is None) == (b is None)
        if a is None:
            continue
        for f in dataclasses.fields(a):
            x, y = getattr(a, f.name), getattr(b, f.name)
            if isinstance(x, np.ndarray):
                assert x.dtype == y.dtype and np.array_equal(x, y), f.name
            else:
                assert x == y and type(x) is type(y), f.name


def no_encoding(monkeypatch):
    """Make any encoding fail: what a load returns then comes from the cache."""

    def refuse(name):
        raise AssertionError(f"encoded {name} again")

    monkeypatch.setattr(data_loaders.registry, "make_encoder", refuse)


def test_a_second_load_reads_the_entry_and_equals_a_fresh_encoding(cache, monkeypatch):
    first = load_encoded("conll2000", max_sequences=40)
    assert len(list(cache.glob("*.npz"))) == 1
    no_encoding(monkeypatch)
    second = load_encoded("conll2000", max_sequences=40)
    monkeypatch.undo()
    want = fresh(monkeypatch, max_sequences=40)
    assert_same(first, want)
    assert_same(second, want)


def test_other_inputs_are_other_entries(cache, monkeypatch):
    load_encoded("conll2000", max_sequences=40)
    load_encoded("conll2000", max_sequences=41)
    load_encoded("conll2000", template="crfsuite-chunking", max_sequences=40)
    assert len(list(cache.glob("*.npz"))) == 3
    files = [Path(DATA_DIR) / rel for rel in FILES]
    inputs = {"dataset": "conll2000", "template": "conll", "max_sequences": 40}
    base = encoded_cache.key(inputs, files)
    monkeypatch.setattr(encoded_cache, "_code_digest", lambda: b"other code")
    assert encoded_cache.key(inputs, files) != base


def test_an_edited_data_file_is_encoded_again(cache, data_dir, monkeypatch):
    before = load_encoded("conll2000", data_dir=data_dir, max_sequences=40)
    path = data_dir / FILES[0]
    text = gzip.decompress(path.read_bytes()).decode()
    # every "the" of the corpus (the template keeps words seen 3 times or more)
    path.write_bytes(gzip.compress(text.replace("\nthe ", "\nzyxwvut ").encode()))
    after = load_encoded("conll2000", data_dir=data_dir, max_sequences=40)
    assert len(list(cache.glob("*.npz"))) == 2

    def has_word(encoder):
        return any("zyxwvut" in vocabulary for vocabulary in encoder.vocabularies)

    assert has_word(after[0]) and not has_word(before[0])
    assert_same(after, fresh(monkeypatch, data_dir=data_dir, max_sequences=40))


def test_an_unreadable_entry_is_encoded_again_and_replaced(cache, monkeypatch):
    want = load_encoded("conll2000", max_sequences=40)
    (entry,) = cache.glob("*.npz")
    entry.write_bytes(entry.read_bytes()[:1000])
    assert_same(load_encoded("conll2000", max_sequences=40), want)
    no_encoding(monkeypatch)
    assert_same(load_encoded("conll2000", max_sequences=40), want)


def test_only_the_newest_entries_are_kept(cache, monkeypatch):
    monkeypatch.setattr(encoded_cache, "MAX_ENTRIES", 1)
    for n in (10, 11):
        load_encoded("conll2000", max_sequences=n)
    assert len(list(cache.glob("*.npz"))) == 1
    no_encoding(monkeypatch)
    load_encoded("conll2000", max_sequences=11)


def test_the_cache_off_writes_nothing(cache, monkeypatch):
    monkeypatch.setenv("CRFSDCA_ENCODED_CACHE", "0")
    load_encoded("conll2000", max_sequences=10)
    assert not cache.exists()


def test_a_cache_folder_that_takes_no_entry_is_skipped(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv("CRFSDCA_ENCODED_CACHE", "1")
    monkeypatch.setenv("CRFSDCA_CACHE_DIR", str(blocker))
    assert_same(load_encoded("conll2000", max_sequences=10), fresh(monkeypatch, max_sequences=10))
    assert blocker.read_text() == "x"


def load_files(train, test=None, template=None):
    """(encoder, train, test) of ``crfsdca train TRAIN [--test TEST] [--template T]``."""
    kw = {"fmt": None, "template": template, "data_dir": None, "max_sequences": None}
    inputs = load_inputs(str(train), test=None if test is None else str(test), **kw)
    return inputs.encoder, inputs.train, inputs.test


@pytest.mark.parametrize(
    ("train", "test", "template"),
    [
        ("conll_ok.txt", "conll_ok.txt", "conll"),  # a template encoder
        ("crfsuite_ok.txt", None, None),  # CRFsuite attribute files, no test set
        ("ocr_ok.data", None, None),  # dense rows
    ],
)
def test_files_given_by_path_are_cached(cache, tmp_path, monkeypatch, train, test, template):
    data = Path(__file__).parent / "data"
    names = [n for n in (train, test) if n is not None]
    local = {n: tmp_path / n.replace("crfsuite_ok.txt", "ok.attr") for n in names}  # by format
    for name in names:
        shutil.copyfile(data / name, local[name])
    args = (local[train], local.get(test), template)
    first = load_files(*args)
    assert len(list(cache.glob("*.npz"))) == 1
    with monkeypatch.context() as m:
        m.setattr(sources, "encoder_for", lambda *a: pytest.fail("encoded again"))
        second = load_files(*args)
    monkeypatch.setenv("CRFSDCA_ENCODED_CACHE", "0")
    want = load_files(*args)
    assert_same(first, want)
    assert_same(second, want)


def test_an_edited_file_given_by_path_is_encoded_again(cache, tmp_path):
    path = tmp_path / "train.txt"
    shutil.copyfile(Path(__file__).parent / "data" / "conll_ok.txt", path)
    before = load_files(path, template="conll")
    path.write_text(path.read_text().replace("I-NP", "I-XYZ"))
    after = load_files(path, template="conll")
    assert "I-XYZ" in after[1].label_names and "I-XYZ" not in before[1].label_names
    assert len(list(cache.glob("*.npz"))) == 2


def test_pipes_and_standard_input_are_never_cached(cache, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # hashing it would consume what the reader is waiting for
    regular = tmp_path / "train.txt"
    regular.write_text("a B\n")
    assert encoded_cache.key({}, [regular]) is not None
    assert encoded_cache.key({}, [fifo]) is None
    assert encoded_cache.key({}, [tmp_path / "missing"]) is None
    stdin = Source("-", "conll", False)
    assert sources._file_key(stdin, None, "conll", None, None) is None
    file = Source(str(regular), "conll", False)
    assert sources._file_key(file, stdin, "conll", None, None) is None


def test_the_compile_ahead_corpus_leaves_no_entry(cache, tmp_path):
    from crfsdca.estimators.compile_ahead import tiny_inputs

    assert tiny_inputs(tmp_path).train.n_sequences > 0
    assert not cache.exists()


def test_the_key_reads_a_file_to_its_last_byte(cache, tmp_path):
    big = tmp_path / "big.txt"
    content = bytearray(b"x" * (3 << 20) + b"y")  # more than the digest's 1 MiB blocks
    big.write_bytes(content)
    before = encoded_cache.key({}, [big])
    content[-1:] = b"z"
    big.write_bytes(content)
    assert encoded_cache.key({}, [big]) not in (before, None)


@pytest.mark.parametrize("value", ["maybe", "2"])
def test_a_bad_switch_value_is_one_clear_error(monkeypatch, value):
    monkeypatch.setenv("CRFSDCA_ENCODED_CACHE", value)
    with pytest.raises(ValueError, match=rf"^\$CRFSDCA_ENCODED_CACHE must be 1 or 0 .*'{value}'$"):
        load_encoded("conll2000", max_sequences=10)
    monkeypatch.setenv("CRFSDCA_ENCODED_CACHE", " OFF ")
    assert not encoded_cache.enabled()


def test_conllu_trees_are_cached_with_their_heads(cache, tmp_path, monkeypatch):
    """``--graph tree`` caches the encoded sentences and their heads: a second run reads no file
    and builds the same trees; a file edited afterwards is read again."""
    from crfsdca.cli import graph
    from crfsdca.io import readers

    train = tmp_path / "train.conllu"
    sentences = [
        [
            "1\tdogs\tdog\tNOUN\tNNS\t_\t2\tnsubj\t_\t_",
            "2\tbark\tbark\tVERB\tVBP\t_\t0\troot\t_\t_",
        ],
        [
            "1\tthe\tthe\tDET\tDT\t_\t2\tdet\t_\t_",
            "2\tcat\tcat\tNOUN\tNN\t_\t3\tnsubj\t_\t_",
            "3\tsleeps\tsleep\tVERB\tVBZ\t_\t0\troot\t_\t_",
        ],
    ]
    train.write_text("\n\n".join("\n".join(s) for s in sentences) + "\n\n")
    run = {"template": None, "max_sequences": None}
    first = graph.encoded_graph_inputs(run, "tree", "upos", str(train), None)
    assert np.array_equal(first[3], [1, -1, 1, 2, -1]) and first[2] is None
    assert len(list(cache.glob("*.npz"))) == 1
    reads = []
    real = readers.read_conllu
    monkeypatch.setattr(readers, "read_conllu", lambda *a, **k: reads.append(a) or real(*a, **k))
    second = graph.encoded_graph_inputs(run, "tree", "upos", str(train), None)
    assert reads == []
    assert_same(second[:3], first[:3])
    assert np.array_equal(second[3], first[3])
    trees = graph.tree_data(second[3], second[1]).graphs
    assert [t.parents.tolist() for t in trees] == [[1, -1], [1, 2, -1]]
    train.write_text(train.read_text().replace("\t2\tdet\t", "\t3\tdet\t"))
    third = graph.encoded_graph_inputs(run, "tree", "upos", str(train), None)
    assert len(reads) == 1 and np.array_equal(third[3], [1, -1, 2, 2, -1])
