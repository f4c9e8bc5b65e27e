"""Dataset registry, file lookup, (mocked) downloads and loaders."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import urllib.error
import zipfile
from pathlib import Path

import numpy as np
import pooch
import pytest

import data_loaders
from crfsdca.features.attributes import make_encoder
from data_loaders import (
    DATASETS,
    DataFile,
    Dataset,
    DatasetNotFoundError,
    Source,
    SplitInfo,
    dataset_info,
    find_data_file,
    load_dataset,
    load_encoded,
    sha256_of_content,
)

DATA_DIR = os.environ.get("CRFSDCA_DATA_DIR")
needs_data = pytest.mark.skipif(
    not DATA_DIR or not Path(DATA_DIR).is_dir(), reason="CRFSDCA_DATA_DIR not set or missing"
)
CONTENT = b"The DT B-NP\ncat NN I-NP\n\n"


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """No $CRFSDCA_DATA_DIR, a private cache, and a network that is down."""
    monkeypatch.delenv("CRFSDCA_DATA_DIR", raising=False)
    monkeypatch.setenv("CRFSDCA_CACHE_DIR", str(tmp_path / "cache"))

    def offline(url, known_hash=None, fname=None, path=None, progressbar=False):
        raise urllib.error.URLError("network is unreachable")

    monkeypatch.setattr(pooch, "retrieve", offline)
    return tmp_path


@pytest.fixture
def tiny(monkeypatch):
    """Register a two-file dataset whose files come from one zip and one gzip URL."""
    sha = hashlib.sha256(CONTENT).hexdigest()
    dataset = Dataset(
        name="tiny",
        description="test dataset",
        format="conll",
        default_template="conll",
        files=(
            DataFile("tiny/train.txt.gz", sha, (Source("https://example.invalid/t.zip", "t/a"),)),
            DataFile("tiny/test.txt.gz", sha, (Source("https://example.invalid/test.txt.gz"),)),
        ),
        splits={
            "train": SplitInfo("tiny/train.txt.gz", 1, 2, 2),
            "test": SplitInfo("tiny/test.txt.gz", 1, 2, 2),
        },
        reader=lambda path, split: data_loaders.conll2000.read(path, split),
    )
    monkeypatch.setitem(DATASETS, "tiny", dataset)
    return dataset


def _serve(monkeypatch, payloads: dict[str, bytes]) -> list[str]:
    """Make pooch.retrieve write ``payloads[url]``; return the list of fetched URLs."""
    fetched: list[str] = []

    def fake_retrieve(url, known_hash=None, fname=None, path=None, progressbar=False):
        assert progressbar and known_hash is None  # the content hash is checked after unpacking
        fetched.append(url)
        dest = Path(path) / fname
        dest.write_bytes(payloads[url])
        return str(dest)

    monkeypatch.setattr(pooch, "retrieve", fake_retrieve)
    return fetched


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


# ----------------------------------------------------------------------------- registry


def test_registry_contents():
    assert set(DATASETS) == {"conll2000", "conll2002-ned", "ocr", "ewt-pos"}
    for name, dataset in DATASETS.items():
        assert dataset.name == name
        make_encoder(dataset.default_template)  # a valid encoder name
        assert {"train", "test"} <= set(dataset.splits)
        relpaths = {f.relpath for f in dataset.files}
        assert {s.relpath for s in dataset.splits.values()} <= relpaths
        for f in dataset.files:
            assert len(f.sha256) == 64 and f.sources
            assert all(s.url.startswith(("https://", "http://")) for s in f.sources)
    assert DATASETS["conll2002-ned"].split("testb") == DATASETS["conll2002-ned"].split("test")
    assert DATASETS["ocr"].splits["test"].n_sequences == 626
    assert "dev" in DATASETS["ewt-pos"].splits


def test_unknown_names():
    with pytest.raises(ValueError, match="unknown dataset 'nope'"):
        load_dataset("nope")
    with pytest.raises(ValueError, match="has no split 'valid'"):
        load_dataset("conll2000", "valid")
    with pytest.raises(ValueError, match="has no file"):
        find_data_file("conll2000", "conll2000/dev.txt.gz")


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_dataset_info_is_json(name, isolated):
    info = dataset_info(name)
    text = json.dumps(info, default=str)
    assert info["name"] == name and "train" in info["splits"] and info["description"]
    assert all(f["found"] is None for f in info["files"])
    assert "sha256" in text


# ----------------------------------------------------------------------------- lookup


def test_lookup_order(isolated, monkeypatch):
    first, second, cache = isolated / "first", isolated / "second", isolated / "cache"
    for folder in (first, second, cache):
        (folder / "conll2000").mkdir(parents=True)
        (folder / "conll2000/train.txt.gz").write_bytes(gzip.compress(CONTENT))
    monkeypatch.setenv("CRFSDCA_DATA_DIR", str(second))
    rel = "conll2000/train.txt.gz"
    assert find_data_file("conll2000", rel, data_dir=first) == first / rel
    assert find_data_file("conll2000", rel) == second / rel
    monkeypatch.delenv("CRFSDCA_DATA_DIR")
    assert find_data_file("conll2000", rel) == cache / rel


def test_uncompressed_copy_is_found(isolated):
    (isolated / "d/conll2000").mkdir(parents=True)
    (isolated / "d/conll2000/test.txt").write_bytes(CONTENT)
    path = find_data_file("conll2000", "conll2000/test.txt.gz", data_dir=isolated / "d")
    assert path == isolated / "d/conll2000/test.txt"
    assert load_dataset("conll2000", "test", data_dir=isolated / "d").labels == [["B-NP", "I-NP"]]


def test_not_found_message_lists_every_place(isolated):
    with pytest.raises(DatasetNotFoundError) as info:
        find_data_file("conll2000", "conll2000/train.txt.gz", data_dir=isolated / "mine")
    message = str(info.value)
    assert isinstance(info.value, OSError)
    for expected in (
        "dataset 'conll2000': conll2000/train.txt.gz not found",
        str(isolated / "mine"),
        str(isolated / "cache"),
        "$CRFSDCA_DATA_DIR (not set)",
        "train.txt.gz: cannot connect (offline, or blocked?)",
        "clips.uantwerpen.be",
        "--data-dir DIR or CRFSDCA_DATA_DIR=DIR",
    ):
        assert expected in message
    assert not (isolated / "cache/downloads").exists()  # a failed download leaves nothing
    with pytest.raises(DatasetNotFoundError, match=r"--data-dir \(not given\).*not attempted"):
        find_data_file("ocr", "ocr/letter.data.gz", allow_download=False)
    with pytest.raises(DatasetNotFoundError, match="ned.testb"):
        load_dataset("conll2002-ned", "testb")


# ----------------------------------------------------------------------------- downloads


def test_download_stores_gzip_and_verifies(isolated, tiny, monkeypatch):
    fetched = _serve(
        monkeypatch,
        {
            "https://example.invalid/t.zip": _zip({"t/a": CONTENT, "t/b": b"other"}),
            "https://example.invalid/test.txt.gz": gzip.compress(CONTENT),
        },
    )
    cache = isolated / "cache"
    train = find_data_file("tiny", "tiny/train.txt.gz")
    test = find_data_file("tiny", "tiny/test.txt.gz")
    assert (train, test) == (cache / "tiny/train.txt.gz", cache / "tiny/test.txt.gz")
    for path in (train, test):
        assert path.read_bytes()[:2] == b"\x1f\x8b"
        assert gzip.decompress(path.read_bytes()) == CONTENT
        assert sha256_of_content(path) == tiny.files[0].sha256
    assert find_data_file("tiny", "tiny/train.txt.gz") == train
    assert len(fetched) == 2  # found in the cache the second time
    assert not (cache / "downloads/test.txt.gz").exists()  # single-file payloads are removed
    encoder, train_data, test_data = load_encoded("tiny", template="crfsuite-chunking")
    assert train_data.name == "tiny:train" and test_data.meta["split"] == "test"


def test_download_checksum_mismatch(isolated, tiny, monkeypatch):
    _serve(monkeypatch, {"https://example.invalid/test.txt.gz": gzip.compress(b"tampered\n")})
    with pytest.raises(DatasetNotFoundError, match="SHA-256 of the content is [0-9a-f]{64}"):
        find_data_file("tiny", "tiny/test.txt.gz")
    assert not (isolated / "cache/tiny/test.txt.gz").exists()
    assert not (isolated / "cache/downloads/test.txt.gz").exists()


@pytest.fixture
def local_server(tmp_path):
    """A loopback HTTP server over a temporary folder; yields (folder, base URL)."""
    import functools
    import http.server
    import threading

    folder = tmp_path / "served"
    folder.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_pooch_download_over_loopback(tmp_path, monkeypatch, local_server):
    folder, base = local_server
    monkeypatch.delenv("CRFSDCA_DATA_DIR", raising=False)
    monkeypatch.setenv("CRFSDCA_CACHE_DIR", str(tmp_path / "cache"))
    (folder / "good.txt.gz").write_bytes(gzip.compress(CONTENT))
    (folder / "bad.txt.gz").write_bytes(gzip.compress(b"tampered\n"))
    sha = hashlib.sha256(CONTENT).hexdigest()
    for name in ("good", "bad"):
        datafile = DataFile(f"tiny/{name}.txt.gz", sha, (Source(f"{base}/{name}.txt.gz"),))
        dataset = Dataset(
            name=f"tiny-{name}",
            description="test dataset",
            format="conll",
            default_template="conll",
            files=(datafile,),
            splits={"train": SplitInfo(datafile.relpath, 1, 2, 2)},
            reader=lambda path, split: data_loaders.conll2000.read(path, split),
        )
        monkeypatch.setitem(DATASETS, dataset.name, dataset)
    path = find_data_file("tiny-good", "tiny/good.txt.gz")
    assert path == tmp_path / "cache/tiny/good.txt.gz"
    assert gzip.decompress(path.read_bytes()) == CONTENT
    with pytest.raises(DatasetNotFoundError, match="SHA-256 of the content is [0-9a-f]{64}"):
        find_data_file("tiny-bad", "tiny/bad.txt.gz")
    assert not (tmp_path / "cache/tiny/bad.txt.gz").exists()
    assert not (tmp_path / "cache/downloads").exists()  # a refused download leaves nothing


def test_download_missing_zip_member(isolated, tiny, monkeypatch):
    _serve(monkeypatch, {"https://example.invalid/t.zip": _zip({"t/other": CONTENT})})
    with pytest.raises(DatasetNotFoundError, match="t.zip: .*t/a"):
        find_data_file("tiny", "tiny/train.txt.gz")


# ----------------------------------------------------------------------------- real corpora

SPLITS = [(name, split) for name, d in sorted(DATASETS.items()) for split in d.splits]


@pytest.mark.slow
@needs_data
@pytest.mark.parametrize(("name", "split"), SPLITS)
def test_load_dataset_sizes(name, split):
    corpus = load_dataset(name, split, data_dir=DATA_DIR)
    info = DATASETS[name].splits[split]
    assert (len(corpus), corpus.n_tokens) == (info.n_sequences, info.n_tokens)
    assert len({y for s in corpus.labels for y in s}) == info.n_labels


@pytest.mark.slow
@needs_data
def test_shared_files_match_checksums():
    for name, dataset in DATASETS.items():
        for f in dataset.files:
            path = find_data_file(name, f.relpath, data_dir=DATA_DIR, allow_download=False)
            assert sha256_of_content(path) == f.sha256, f.relpath


@pytest.mark.slow
@needs_data
def test_ocr_split_matches_sdca4crf_files():
    scipy_io = pytest.importorskip("scipy.io")
    encoder, train, test = load_encoded("ocr", data_dir=DATA_DIR)
    assert encoder.label_names[0] == "a" and train.n_attributes == 128
    for data, mat_name in ((train, "ocr_train.mat.gz"), (test, "ocr_test.mat.gz")):
        with gzip.open(Path(DATA_DIR) / "ocr" / mat_name) as f:
            mat = scipy_io.loadmat(f)
        y = mat["y"].ravel().astype(np.int64)
        np.testing.assert_array_equal(data.labels + 1, y[y != 0])
        dense = np.zeros((data.n_items, 128))
        rows = np.repeat(np.arange(data.n_items), np.diff(data.attr_offsets))
        dense[rows, data.attr_ids] = data.attr_values
        np.testing.assert_array_equal(dense, mat["X"][y != 0])
        assert data.n_sequences == np.count_nonzero(y == 0)


@pytest.mark.slow
@needs_data
def test_load_encoded_max_sequences():
    encoder, train, test = load_encoded("conll2000", data_dir=DATA_DIR, max_sequences=50)
    assert (train.n_sequences, test.n_sequences) == (50, 2012)  # the test split stays whole
    assert train.name == "conll2000:train" and test.meta["dataset"] == "conll2000"
    assert train.meta["template"] == "conll" and train.n_attributes == encoder.n_attributes
