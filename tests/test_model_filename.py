"""No model lost: ``CRF(model_filename=...)`` writes CRFsuite's format under a ``.crfsuite``
name (as sklearn-crfsuite does) and reads it back, never replaces another program's file, and
a CRFsuite model given where a crfsdca model is expected names ``crfsdca import-crfsuite``."""

from __future__ import annotations

import os

import numpy as np
import pytest
from click.testing import CliRunner
from test_partial_fit import sentences

from crfsdca import CRF, ModelFormatError
from crfsdca.cli.main import main
from crfsdca.estimators.model import SequenceCRF
from crfsdca.io.crfsuite_file import read_crfsuite_model
from crfsdca.io.modelfile import file_format


@pytest.fixture(scope="module")
def data():
    return sentences(0, 30)


def fit(data, path, **kw):
    X, y = data
    return CRF(c2=0.1, max_iterations=30, model_filename=str(path), **kw).fit(X, y)


def test_a_crfsuite_name_gets_crfsuites_format_and_reads_back(data, tmp_path):
    """fit over an existing CRFsuite model writes CRFsuite's format there (not an .npz under
    that name); a new CRF given the file predicts as the fitted one."""
    path = tmp_path / "model.crfsuite"
    other = sentences(1, 10)
    fit(other, tmp_path / "first.crfsuite").export_crfsuite(path)  # a CRFsuite model is there
    before = read_crfsuite_model(path)
    crf = fit(data, path)
    assert file_format(path) == "crfsuite"
    written = read_crfsuite_model(path)
    assert written != before and set(written.labels) == set(crf.classes_)
    again = CRF(model_filename=str(path))
    X, _ = data
    assert again.predict(X) == crf.predict(X)
    assert again.state_features_ == crf.state_features_
    assert again.transition_features_ == crf.transition_features_
    npz = tmp_path / "model.npz"
    fit(data, npz)
    assert file_format(npz) == "crfsdca"


def test_a_model_written_by_python_crfsuite_is_read_under_model_filename(data, tmp_path):
    """sklearn-crfsuite's file (written by python-crfsuite's Trainer) predicts in crfsdca as
    python-crfsuite's own Tagger tags."""
    pycrfsuite = pytest.importorskip("pycrfsuite")
    X, y = data
    path = tmp_path / "theirs.crfsuite"
    trainer = pycrfsuite.Trainer(verbose=False)
    for xseq, yseq in zip(X, y, strict=True):
        trainer.append(xseq, yseq)  # python-crfsuite reads the feature dicts itself
    trainer.set_params({"c2": 0.1, "max_iterations": 30})
    trainer.train(str(path))
    tagger = pycrfsuite.Tagger()
    tagger.open(str(path))
    expected = [tagger.tag(xseq) for xseq in X]
    tagger.close()
    assert CRF(model_filename=str(path)).predict(X) == expected


@pytest.mark.parametrize("name", ["other.npz", "notes.crfsuite", "notes.txt"])
def test_another_programs_file_is_not_replaced(data, tmp_path, name, monkeypatch):
    """An .npz of another program, a text file under a .crfsuite name: refused before any
    training, naming the path; the file keeps its bytes."""
    path = tmp_path / name
    if name.endswith(".npz"):
        np.savez(path, weights=np.arange(3.0))
    else:
        path.write_text("my notes\n")
    before = path.read_bytes()
    from crfsdca.estimators import model as model_module

    def no_training(*args, **kwargs):
        raise AssertionError("trained before checking model_filename")

    monkeypatch.setattr(model_module.SequenceCRF, "fit", no_training)
    with pytest.raises(ValueError) as err:
        fit(data, path)
    assert str(err.value) == (
        f"model_filename {str(path)!r} holds a file that is neither a crfsdca model nor a"
        " CRFsuite model; not replacing it: remove it or give another name"
    )
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no temporary left


def test_an_empty_file_or_a_crfsdca_model_is_replaced(data, tmp_path):
    path = tmp_path / "m.npz"
    path.write_bytes(b"")  # e.g. a NamedTemporaryFile's name
    first = fit(data, path)
    assert file_format(path) == "crfsdca"
    second = fit(sentences(3, 20), path)  # over its own model: the new one
    saved = SequenceCRF.load(str(path)).weights_
    np.testing.assert_array_equal(saved, second._model.weights_)
    assert not np.array_equal(saved, first._model.weights_)


@pytest.mark.parametrize("order", ["tree", "second-order"])
def test_a_crfsuite_name_for_a_model_crfsuite_cannot_hold_is_refused_first(data, tmp_path, order):
    X, y = data
    kw = {"order": 2} if order == "second-order" else {}
    graphs = [np.arange(-1, len(s) - 1) for s in X] if order == "tree" else None
    path = tmp_path / "m.crfsuite"
    with pytest.raises(ValueError, match=r"holds linear-chain models; this CRF is (tree-str|sec)"):
        CRF(c2=0.1, max_iterations=3, model_filename=str(path), **kw).fit(X, y, graphs=graphs)
    assert not path.exists()


def test_loading_a_crfsuite_model_as_a_crfsdca_model_names_import_crfsuite(data, tmp_path):
    path = tmp_path / "m.crfsuite"
    crf = fit(data, path)
    expected = f"crfsdca import-crfsuite {path} MODEL.npz"
    with pytest.raises(
        ModelFormatError, match=f"a CRFsuite model, not a crfsdca model .*{expected}"
    ):
        SequenceCRF.load(str(path))
    text = tmp_path / "in.txt"
    text.write_text("anna\nlives\n")
    for command in (["tag", path, text], ["evaluate", path, text], ["export", path, "x.crfsuite"]):
        result = CliRunner().invoke(main, [os.fspath(a) for a in command])
        assert result.exit_code == 1, (command, result.output)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], (command, lines)
    converted = tmp_path / "m.npz"
    result = CliRunner().invoke(main, ["import-crfsuite", str(path), str(converted)])
    assert result.exit_code == 0, result.output
    assert list(SequenceCRF.load(str(converted)).label_names_) == crf.classes_
