"""The cache of encoded registered datasets (``data_loaders.encoded_cache``): an entry gives
exactly what encoding gives, is only used for the inputs that made it, and a bad one is
replaced."""

from __future__ import annotations

import dataclasses
import gzip
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import data_loaders
from data_loaders import encoded_cache, load_encoded

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
    base = encoded_cache.key("conll2000", "conll", 40, files)
    monkeypatch.setattr(encoded_cache, "_code_digest", lambda: b"other code")
    assert encoded_cache.key("conll2000", "conll", 40, files) != base


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
