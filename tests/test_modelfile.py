"""Tests of crfsdca.io.modelfile: pickle-free, atomic model files."""

from __future__ import annotations

import ast
import json
import os
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest

import crfsdca
from crfsdca.errors import ModelFormatError
from crfsdca.io.modelfile import (
    FORMAT_NAME,
    FORMAT_VERSION,
    atomic_write_text,
    load_model,
    save_json_atomic,
    save_model,
)

REPO = Path(__file__).resolve().parents[1]

HEADER = {
    "template": {"window": 2, "features": ["word", "suffix3"]},
    "label_names": ["B-NP", "I-NP", "O", "é-ünïcode"],
    "regularization": 1e-3,
    "solver": "sdca",
    "n_bias_rows": 3,
    "empty": {},
}


def make_arrays(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "weights": rng.standard_normal(37),
        "attribute_ids": rng.integers(0, 10**12, size=5, dtype=np.int64),
        "matrix": np.asfortranarray(rng.standard_normal((3, 4)).astype(np.float32)),
        "flags": np.array([True, False]),
        "empty": np.zeros((0, 3)),
        "vocabulary": np.array(["le", "chat", "naïve"]),
    }


def test_roundtrip_is_bitwise(tmp_path):
    path = tmp_path / "model.npz"
    arrays = make_arrays()
    arrays["weights"][[0, 1, 2]] = [np.nan, -0.0, np.inf]
    save_model(path, arrays, HEADER)
    loaded, header = load_model(path)
    assert set(loaded) == set(arrays)
    for name, array in arrays.items():
        assert loaded[name].dtype == array.dtype and loaded[name].shape == array.shape
        assert loaded[name].tobytes() == np.ascontiguousarray(array).tobytes(), name
    assert header == {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "crfsdca_version": crfsdca.__version__,
        **HEADER,
    }
    assert [p.name for p in tmp_path.iterdir()] == ["model.npz"]


def test_header_accepts_numpy_scalars_and_overwrites_previous_model(tmp_path):
    path = tmp_path / "model.npz"
    save_model(path, make_arrays(1), HEADER)
    save_model(path, {"weights": np.ones(2)}, {"n": np.int64(3), "c": np.float64(0.5)})
    arrays, header = load_model(path)
    assert list(arrays) == ["weights"]
    assert header["n"] == 3 and header["c"] == 0.5


def test_truncated_file(tmp_path):
    path = tmp_path / "model.npz"
    save_model(path, make_arrays(), HEADER)
    data = path.read_bytes()
    for cut in (len(data) // 2, len(data) - 10, 30):
        path.write_bytes(data[:cut])
        with pytest.raises(ModelFormatError, match="model.npz: not a readable .npz archive"):
            load_model(path)
    path.write_bytes(b"")
    with pytest.raises(ModelFormatError, match="model.npz: empty file; not a crfsdca model"):
        load_model(path)


RANDOM_BYTES = np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes()


@pytest.mark.parametrize("data", [RANDOM_BYTES, b"\x80\x04K\x01.", b"not a model\n"])
def test_random_bytes(tmp_path, data):
    path = tmp_path / "model.npz"
    path.write_bytes(data)
    with pytest.raises(ModelFormatError, match=r"model.npz: not an .npz \(zip\) archive"):
        load_model(path)


def test_pickled_npy_is_refused(tmp_path):
    path = tmp_path / "model.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ModelFormatError, match="holds a single .npy array"):
        load_model(path)


def test_single_npy_array(tmp_path):
    path = tmp_path / "weights.npy"
    np.save(path, np.ones(3))
    with pytest.raises(ModelFormatError, match="holds a single .npy array"):
        load_model(path)


def test_foreign_npz(tmp_path):
    path = tmp_path / "other.npz"
    np.savez(path, weights=np.ones(3))
    with pytest.raises(ModelFormatError, match=r"other.npz: missing 'header'; not a crfsdca model"):
        load_model(path)


def write_raw_header(path, text: bytes):
    np.savez(path, weights=np.ones(3), header=np.frombuffer(text, dtype=np.uint8))


def test_foreign_format_name(tmp_path):
    path = tmp_path / "m.npz"
    write_raw_header(path, json.dumps({"format": "other", "format_version": 1}).encode())
    with pytest.raises(ModelFormatError, match="format is 'other', expected 'crfsdca-model'"):
        load_model(path)


def test_future_version(tmp_path):
    path = tmp_path / "model.npz"
    write_raw_header(path, json.dumps({"format": FORMAT_NAME, "format_version": 7}).encode())
    message = f"model.npz: format version 7 is newer than this crfsdca ({FORMAT_VERSION}); upgrade"
    with pytest.raises(ModelFormatError, match=re.escape(message)):
        load_model(path)


@pytest.mark.parametrize("version", ["1", 0, True, None])
def test_bad_version(tmp_path, version):
    path = tmp_path / "model.npz"
    write_raw_header(path, json.dumps({"format": FORMAT_NAME, "format_version": version}).encode())
    with pytest.raises(ModelFormatError, match="format_version must be an integer >= 1"):
        load_model(path)


@pytest.mark.parametrize("text", [b"{not json", b"\xff\xfe", b"[1, 2]", b""])
def test_header_not_json_object(tmp_path, text):
    path = tmp_path / "model.npz"
    write_raw_header(path, text)
    with pytest.raises(ModelFormatError, match="header is"):
        load_model(path)


def test_header_of_wrong_dtype(tmp_path):
    path = tmp_path / "model.npz"
    np.savez(path, header=np.arange(3.0))
    with pytest.raises(ModelFormatError, match="'header' is not a uint8 byte array"):
        load_model(path)


def test_object_members_are_not_unpickled(tmp_path):
    path = tmp_path / "model.npz"
    np.savez(path, weights=np.array([None, {"a": 1}], dtype=object))
    with pytest.raises(ModelFormatError, match="not a readable .npz archive"):
        load_model(path)


def test_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_model(tmp_path / "absent.npz")


@pytest.mark.parametrize(
    "arrays",
    [
        {"weights": np.array([1, "a", None], dtype=object)},
        {"weights": [{"a": 1}]},
        {"weights": np.zeros(2, dtype=[("a", "f8"), ("b", "O")])},
    ],
)
def test_object_arrays_are_refused(tmp_path, arrays):
    with pytest.raises(TypeError, match="needs pickle"):
        save_model(tmp_path / "model.npz", arrays, {})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["header", "file", "allow_pickle", "a/b", "", "1x"])
def test_bad_array_names(tmp_path, name):
    with pytest.raises(ValueError, match="array name"):
        save_model(tmp_path / "model.npz", {name: np.ones(1)}, {})


def test_bad_headers(tmp_path):
    path = tmp_path / "model.npz"
    with pytest.raises(ValueError, match="reserved"):
        save_model(path, {}, {"format": "mine"})
    with pytest.raises(ValueError, match="NaN/inf"):
        save_model(path, {}, {"regularization": float("nan")})
    with pytest.raises(TypeError, match="not JSON serialisable"):
        save_model(path, {}, {"config": object()})
    assert list(tmp_path.iterdir()) == []


def test_failed_write_keeps_previous_model_and_leaves_no_temp_file(tmp_path, monkeypatch):
    path = tmp_path / "model.npz"
    save_model(path, {"weights": np.arange(4.0)}, {"run": 1})
    before = path.read_bytes()

    def savez_then_fail(file, **arrays):
        file.write(b"PK\x03\x04 half a zip")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", savez_then_fail)
    with pytest.raises(OSError, match="disk full"):
        save_model(path, {"weights": np.zeros(4)}, {"run": 2})
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["model.npz"]
    monkeypatch.undo()
    arrays, header = load_model(path)
    assert header["run"] == 1 and np.array_equal(arrays["weights"], np.arange(4.0))


def test_failed_first_write_leaves_nothing(tmp_path, monkeypatch):
    def interrupted(file, **arrays):
        file.write(b"PK")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_model(tmp_path / "model.npz", {"weights": np.zeros(2)}, {})
    assert list(tmp_path.iterdir()) == []


def test_written_file_is_a_plain_zip_without_pickles(tmp_path):
    path = tmp_path / "model.npz"
    save_model(path, make_arrays(), HEADER)
    with zipfile.ZipFile(path) as archive:
        names = sorted(archive.namelist())
    assert names == sorted(f"{k}.npy" for k in [*make_arrays(), "header"])
    with np.load(path, allow_pickle=False) as npz:
        assert npz["header"].dtype == np.uint8


def test_atomic_text_and_json_helpers(tmp_path):
    path = tmp_path / "out.json"
    save_json_atomic(path, {"b": [1, 2.5], "a": "ü", "n": np.int32(4)})
    assert json.loads(path.read_text("utf-8")) == {"b": [1, 2.5], "a": "ü", "n": 4}
    assert path.read_text("utf-8").endswith("\n")
    with pytest.raises(ValueError, match="NaN/inf"):
        save_json_atomic(path, {"x": float("inf")})
    assert json.loads(path.read_text("utf-8"))["a"] == "ü"
    atomic_write_text(tmp_path / "t.txt", "line\n")
    assert (tmp_path / "t.txt").read_text() == "line\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "t.txt"]


def test_written_file_mode_follows_umask(tmp_path):
    if os.name != "posix":
        pytest.skip("POSIX permissions")
    path = tmp_path / "model.npz"
    old = os.umask(0o022)
    try:
        save_model(path, {"w": np.ones(1)}, {})
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644


# ---------------------------------------------------------------- no pickle anywhere

PICKLE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "joblib", "shelve"}


def pickle_problems(path: Path) -> list[str]:
    """Pickle imports/usages and np.load calls without allow_pickle=False in one file."""
    source = path.read_text(encoding="utf-8")
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return [f"{path}: cannot parse"]
    shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    problems = []
    for node in ast.walk(tree):
        where = f"{shown}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            names = {alias.name.split(".")[0] for alias in node.names}
            problems += [f"{where}: import {n}" for n in names & PICKLE_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in PICKLE_MODULES:
                problems.append(f"{where}: from {node.module} import")
            if node.module == "numpy" and any(a.name == "load" for a in node.names):
                problems.append(f"{where}: from numpy import load (call np.load instead)")
        elif isinstance(node, ast.Attribute) and node.attr in ("read_pickle", "to_pickle"):
            problems.append(f"{where}: .{node.attr}")
        elif isinstance(node, ast.keyword) and node.arg == "allow_pickle":
            if not (isinstance(node.value, ast.Constant) and node.value.value is False):
                problems.append(f"{where}: allow_pickle not False")
        elif isinstance(node, ast.Call) and _is_np_load(node.func):
            safe = any(
                k.arg == "allow_pickle"
                and isinstance(k.value, ast.Constant)
                and k.value.value is False
                for k in node.keywords
            )
            if not safe:
                problems.append(f"{where}: np.load without allow_pickle=False")
    return problems


def _is_np_load(func: ast.expr) -> bool:
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "load"
        and isinstance(func.value, ast.Name)
        and func.value.id in ("np", "numpy")
    )


def test_checker_catches_pickle(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import pickle\nimport numpy as np\nnp.load('x')\nnp.load('y', allow_pickle=True)\n"
        "np.load('z', allow_pickle=False)\nfrom joblib import dump\n"
    )
    assert len(pickle_problems(bad)) == 5


def test_no_pickle_in_the_code_base():
    files = [
        p
        for folder in ("crfsdca", "data_loaders", "scripts")
        for p in sorted((REPO / folder).rglob("*.py"))
    ]
    assert any(p.name == "modelfile.py" for p in files)
    problems = [problem for p in files for problem in pickle_problems(p)]
    assert problems == []
