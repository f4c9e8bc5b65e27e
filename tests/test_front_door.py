"""The front door (issue 24): no silent wrong answers, nothing but regular files replaced, and one
clear line naming what the user gave.

Every case asserts the exit status and the exact message. Usage errors (exit 2) are checked on
click's ``Error:`` line, data and runtime errors (exit 1) on the single ``crfsdca: error:`` line.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_cli_errors import DATA, ENV, cli, conll_text, one_error_line, usage_error

from crfsdca.atomicfile import _HOST, atomic_write_bytes, check_writable, remove_stale_temporaries
from crfsdca.errors import OutputPathError
from crfsdca.modelfile import save_model

CONLLU_WORDS = [("the", "DET", "DT"), ("cat", "NOUN", "NN"), ("sat", "VERB", "VBD")]


def conllu_text(n: int) -> str:
    """``n`` three-word sentences (the cat sat), heads 2 0 2."""
    out = []
    for i in range(n):
        out.append(f"# sent_id = {i + 1}")
        for t, (word, upos, xpos) in enumerate(CONLLU_WORDS):
            head = 0 if t == 1 else 2
            out.append(f"{t + 1}\t{word}\t{word}\t{upos}\t{xpos}\t_\t{head}\tdep\t_\t_")
        out.append("")
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """Tiny data files and a model trained on each (a few epochs)."""
    root = tmp_path_factory.mktemp("front")
    (root / "chunk.txt").write_text(conll_text(30))
    shutil.copy(DATA / "crfsuite_ok.txt", root / "items.attr")
    (root / "s.conllu").write_text(conllu_text(6))
    trainings = {
        "chunk.npz": ["chunk.txt", "--format", "conll", "--template", "conll"],
        "order2.npz": ["chunk.txt", "--format", "conll", "--template", "conll", "--order", "2"],
        "attr.npz": ["items.attr"],
        "upos.npz": ["s.conllu", "--graph", "chain", "--label", "upos"],
        "tree.npz": ["s.conllu", "--graph", "tree"],
        "wordpos_conllu.npz": ["s.conllu", "--graph", "chain", "--template", "conll"],
    }
    for model, args in trainings.items():
        args = [root / a if "." in a else a for a in args]
        result = cli("train", *args, "--epochs", "3", "-q", "--model", root / model)
        assert result.exit_code == 0, result.output
    return root


def fifo_in(folder: Path, name: str = "pipe") -> Path:
    path = folder / name
    os.mkfifo(path)
    return path


def char_device_in(folder: Path) -> Path:
    """A character device node (as /dev/null: major 1, minor 3) in ``folder``, or skip."""
    path = folder / "null"
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except (PermissionError, AttributeError, OSError) as err:
        pytest.skip(f"cannot make a device node here: {err}")
    return path


def assert_untouched(path: Path, kind=stat.S_ISFIFO) -> None:
    assert kind(os.lstat(path).st_mode), f"{path} was replaced"
    assert not [p for p in path.parent.iterdir() if p.name.startswith(f".{path.name}.")]


# ------------------------------------------------------------------ 2. nothing but files replaced


def writer_commands(work: Path, out: Path) -> dict[str, list]:
    """Every command that writes a file, writing ``out``."""
    return {
        "export": ["export", work / "attr.npz", out],
        "import-crfsuite": ["import-crfsuite", work / "attr.crfsuite", out],
        "train --model": ["train", work / "items.attr", "--model", out],
        "train --trace": ["train", work / "items.attr", "--trace", out],
        "train --plot": ["train", work / "items.attr", "--plot", out],
        "plot --out": ["plot", work / "trace.jsonl", "--out", out],
    }


@pytest.fixture(scope="module")
def writers_work(work):
    result = cli("export", work / "attr.npz", work / "attr.crfsuite")
    assert result.exit_code == 0, result.output
    result = cli(
        "train", work / "items.attr", "--epochs", "2", "-q", "--trace", work / "trace.jsonl"
    )
    assert result.exit_code == 0, result.output
    return work


FLAGS = {
    "export": "OUT.crfsuite",
    "import-crfsuite": "OUT.npz",
    "train --model": "--model",
    "train --trace": "--trace",
    "train --plot": "--plot",
    "plot --out": "--out",
}


@pytest.mark.parametrize("writer", FLAGS)
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_no_writer_replaces_a_pipe_or_a_device(writers_work, tmp_path, writer, kind):
    pytest.importorskip("matplotlib") if "plot" in writer else None
    out = fifo_in(tmp_path, "out.png") if kind == "fifo" else char_device_in(tmp_path)
    if kind == "device" and "plot" in writer:
        out = out.rename(tmp_path / "null.png")
    result = cli(*writer_commands(writers_work, out)[writer])
    line = usage_error(result)
    expected = f"{out} is a device or pipe; expected a file name"
    assert line == f"Error: Invalid value for {FLAGS[writer]}: {expected}"
    assert_untouched(out, stat.S_ISFIFO if kind == "fifo" else stat.S_ISCHR)


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_the_library_refuses_to_replace_what_is_not_a_regular_file(tmp_path, kind):
    if kind == "fifo":
        out, what, test = fifo_in(tmp_path), "a named pipe", stat.S_ISFIFO
    elif kind == "device":
        out, what, test = char_device_in(tmp_path), "a character device", stat.S_ISCHR
    else:
        out, what, test = tmp_path / "dir", "a folder", stat.S_ISDIR
        out.mkdir()
    with pytest.raises(OutputPathError) as err:
        save_model(out, {"w": np.zeros(2)}, {})
    assert str(err.value) == (
        f"{out}: is {what}, not a regular file; crfsdca writes only regular files: give a file name"
    )
    assert_untouched(out, test)


def test_a_symlink_is_written_through_and_kept(tmp_path):
    real = tmp_path / "real.bin"
    real.write_bytes(b"old")
    link = tmp_path / "link.bin"
    link.symlink_to(real)
    atomic_write_bytes(link, b"new")
    assert link.is_symlink() and real.read_bytes() == b"new"
    fifo = fifo_in(tmp_path)
    (tmp_path / "to_pipe").symlink_to(fifo)
    with pytest.raises(OutputPathError, match="to_pipe: is a named pipe, not a regular file"):
        atomic_write_bytes(tmp_path / "to_pipe", b"x")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_tag_output_into_a_pipe_is_written_in_place(work, tmp_path):
    """``tag --output`` writes into a pipe or device in place (as ``> /dev/null``), never over."""
    device = char_device_in(tmp_path)
    result = cli("tag", work / "attr.npz", work / "items.attr", "--output", device)
    assert result.exit_code == 0, result.output
    assert_untouched(device, stat.S_ISCHR)


def test_a_kill_9_during_a_save_leaves_no_temporary_for_long(tmp_path):
    """A writer killed mid-save leaves its temporary; the next write to the target removes it."""
    target = tmp_path / "model.npz"
    code = (
        "import os, signal, sys\n"
        "from crfsdca.atomicfile import atomic_open\n"
        f"with atomic_open({str(target)!r}, 'wb') as f:\n"
        "    f.write(b'half'); f.flush()\n"
        "    print('writing', flush=True)\n"
        "    sys.stdin.readline()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=ENV
    )
    assert proc.stdout.readline() == b"writing\n"  # the handshake: the temporary exists now
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(f".model.npz.{proc.pid}-{_HOST}.")
    # while the writer lives, its temporary is not touched
    assert remove_stale_temporaries(target) == [] and len(list(tmp_path.iterdir())) == 1
    proc.kill()
    proc.wait()
    proc.stdin.close()
    proc.stdout.close()
    save_model(target, {"w": np.ones(3)}, {})
    assert [p.name for p in tmp_path.iterdir()] == ["model.npz"]


def test_old_style_temporaries_go_after_a_day(tmp_path):
    target = tmp_path / "m.npz"
    old, new = tmp_path / ".m.npz.0123456789ab.tmp", tmp_path / ".m.npz.ba9876543210.tmp"
    old.write_bytes(b"x")
    new.write_bytes(b"x")
    os.utime(old, (1.0, 1.0))
    other = tmp_path / f".m.npz.{2**22 + 7}-000000.abcdef012345.tmp"  # another host's writer
    other.write_bytes(b"x")
    atomic_write_bytes(target, b"data")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["m.npz", new.name, other.name])


def test_unwritable_outputs_name_the_users_path_never_the_temporary(work, tmp_path):
    line = usage_error(cli("train", work / "items.attr", "--model", "/proc/x.npz"))
    assert line == (
        "Error: Invalid value for --model: cannot write /proc/x.npz: the folder /proc does not"
        " accept new files"
    )
    line = usage_error(cli("export", work / "attr.npz", "/proc/x.crfsuite"))
    assert line == (
        "Error: Invalid value for OUT.crfsuite: cannot write /proc/x.crfsuite: the folder /proc"
        " does not accept new files"
    )
    with pytest.raises(OutputPathError) as err:
        save_model("/proc/x.npz", {"w": np.zeros(1)}, {})
    assert str(err.value) == "cannot write /proc/x.npz: the folder /proc does not accept new files"
    with pytest.raises(OutputPathError, match=r"^cannot write /proc/a/b\.npz: cannot create"):
        check_writable("/proc/a/b.npz")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_is_refused_before_training(work, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        line = usage_error(cli("train", work / "items.attr", "--model", folder / "m.npz"))
    finally:
        folder.chmod(0o700)
    assert line == (
        f"Error: Invalid value for --model: cannot write {folder}/m.npz: permission denied"
    )


def test_export_and_import_create_missing_folders(work, tmp_path):
    out = tmp_path / "a" / "b" / "m.crfsuite"
    result = cli("export", work / "attr.npz", out)
    assert result.exit_code == 0 and out.is_file(), result.output
    back = tmp_path / "c" / "m.npz"
    result = cli("import-crfsuite", out, back)
    assert result.exit_code == 0 and back.is_file(), result.output
    line = one_error_line(cli("import-crfsuite", tmp_path / "none.crfsuite", back))
    assert line == (
        f"crfsdca: error: {tmp_path}/none.crfsuite: no such file; expected a CRFsuite model file"
    )


# ------------------------------------------------------------------ 1. no silent wrong answers


@pytest.fixture(scope="module")
def fake_ewt(work):
    """A --data-dir where the registered ewt-pos is the tiny s.conllu (train and test)."""
    folder = work / "fake_data" / "ud_english_ewt"
    folder.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        shutil.copy(work / "s.conllu", folder / f"en_ewt-ud-{split}.conllu")
    return folder.parent


def accuracy(result) -> str:
    assert result.exit_code == 0, result.output
    return result.stdout.strip().splitlines()[0]


def test_a_chain_model_is_scored_on_the_label_column_it_learnt(work, fake_ewt):
    on_file = accuracy(cli("evaluate", work / "upos.npz", work / "s.conllu"))
    on_name = accuracy(cli("evaluate", work / "upos.npz", "ewt-pos", "--data-dir", fake_ewt))
    assert on_name == on_file == "token accuracy 100.00%"
    # the XPOS column on purpose: every gold label is unknown to the UPOS model
    line = one_error_line(
        cli("evaluate", work / "upos.npz", "ewt-pos", "--data-dir", fake_ewt, "--label", "xpos")
    )
    assert line == (
        "crfsdca: error: ewt-pos: none of its gold labels is a label of the model (data: DT, NN,"
        " VBD; model: DET, NOUN, VERB); a model for other data?"
    )


def test_train_on_a_registered_conllu_dataset_learns_the_label_asked_for(work, fake_ewt, tmp_path):
    model = tmp_path / "m.npz"
    result = cli("train", "ewt-pos", "--label", "upos", "--data-dir", fake_ewt, "--epochs", "3",
                 "-q", "--model", model)  # fmt: skip
    assert result.exit_code == 0, result.output
    from crfsdca.model import SequenceCRF

    loaded = SequenceCRF.load(model)
    assert set(loaded.label_names_) == {"DET", "NOUN", "VERB"} and loaded.meta["label"] == "upos"
    assert accuracy(cli("evaluate", model, "ewt-pos", "--data-dir", fake_ewt)) == (
        "token accuracy 100.00%"
    )


@pytest.mark.parametrize("model", ["chunk.npz", "order2.npz"])
@pytest.mark.parametrize("command", ["tag", "evaluate"])
def test_a_word_pos_model_refuses_conllu_whose_second_field_is_upos(work, model, command):
    line = one_error_line(cli(command, work / model, work / "s.conllu"))
    assert line == (
        f"crfsdca: error: {work}/s.conllu: a --format conllu file, but the model {work}/{model}"
        " was trained on CoNLL columns (word POS ...) and its template conll reads (w pos), the"
        " second from the file's second column, where this data holds UPOS (column 4); give the"
        " model data as it was trained on"
    )


def test_a_word_pos_model_trained_on_conllu_refuses_conll_columns(work, tmp_path):
    conll = tmp_path / "s.conll"
    conll.write_text("the DT\ncat NN\nsat VBD\n\n")
    model = work / "wordpos_conllu.npz"
    line = one_error_line(cli("tag", model, conll))
    assert line == (
        f"crfsdca: error: {conll}: a --format conll file, but the model {model} was trained on"
        " CoNLL-U and its template conll reads (w pos), the second from UPOS (column 4), where"
        " this data holds the file's second column; give the model data as it was trained on"
    )
    result = cli("tag", model, work / "s.conllu")
    assert result.exit_code == 0 and result.stdout.split()[:3] == ["DT", "NN", "VBD"]
    # gold UPOS would move UPOS out of the field the model reads
    line = one_error_line(cli("evaluate", model, work / "s.conllu", "--label", "upos"))
    assert line.endswith(
        "the second from UPOS (column 4), where this data holds XPOS (column 5); give the model"
        " data as it was trained on"
    )


def test_a_word_only_model_takes_either_token_format(work, tmp_path):
    conll = tmp_path / "s.conll"
    conll.write_text("the DT\ncat NN\nsat VBD\n\n")
    result = cli("tag", work / "upos.npz", conll)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[:3] == ["the DT DET", "cat NN NOUN", "sat VBD VERB"]


HISTORY = "--history must be >= 1 (correction pairs); got "


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--solver", "lbfgs", "--history", "0"], HISTORY + "0"),
        (["--solver", "lbfgs", "--history", "-3"], HISTORY + "-3"),
        (["--refresh-every", "-1"], "--refresh-every must be >= 0 (0 = never); got -1"),
        (["--init-epsilon", "0"], "--init-epsilon must be in (0, 1]; got 0.0"),
        (["--init-epsilon", "1.5"], "--init-epsilon must be in (0, 1]; got 1.5"),
    ],
)  # fmt: skip
def test_solver_values_that_cannot_train_are_usage_errors(work, args, message):
    line = usage_error(cli("train", work / "items.attr", *args))
    assert line == f"Error: {message}"


DATA_DIR = os.environ.get("CRFSDCA_DATA_DIR")
EWT_TEST = Path(DATA_DIR or "/nonexistent") / "ud_english_ewt" / "en_ewt-ud-test.conllu.gz"


@pytest.mark.slow
@pytest.mark.skipif(not EWT_TEST.exists(), reason="needs CRFSDCA_DATA_DIR with ud_english_ewt")
def test_ewt_upos_chain_scores_the_same_by_name_and_by_file(tmp_path):
    model = tmp_path / "c.npz"
    result = cli("train", "ewt-pos", "--graph", "chain", "--label", "upos", "--max-sequences",
                 "300", "--epochs", "3", "-q", "--model", model)  # fmt: skip
    assert result.exit_code == 0, result.output
    by_name = accuracy(cli("evaluate", model, "ewt-pos"))
    by_file = cli("evaluate", model, EWT_TEST, "--format", "conllu")
    assert by_name == accuracy(by_file)
    assert float(by_name.split()[-1].rstrip("%")) > 50


# ------------------------------------------------------------------ 3. corrupt model files


def rewrite_model(src: Path, dst: Path, header_change=None, arrays_change=None) -> Path:
    """A copy of the model ``src`` with its header (dict) or arrays changed in place."""
    import json

    with np.load(src) as npz:
        arrays = {k: npz[k] for k in npz.files}
    header = json.loads(arrays.pop("header").tobytes())
    if header_change:
        header_change(header)
    if arrays_change:
        arrays_change(arrays)
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), np.uint8)
    with open(dst, "wb") as f:
        np.savez(f, **arrays)
    return dst


def _set(key, value):
    return lambda h: h.__setitem__(key, value)


def _del(key):
    return lambda h: h.pop(key)


def _encoder(key, value):
    return lambda h: h["encoder"].__setitem__(key, value)


HEADER = "corrupt model header: "
CORRUPT_HEADERS = {
    "n_labels too big": (
        _set("n_labels", 99),
        "the label list has 3 names for 99 labels (n_labels)",
    ),
    "n_labels a string": (
        _set("n_labels", "3"),
        "the number of labels (n_labels) must be an integer >= 1; got '3'",
    ),
    "n_labels missing": (_del("n_labels"), "the number of labels (n_labels) is missing"),
    "n_attributes negative": (
        _set("n_attributes", -1),
        "the number of attributes (n_attributes) must be an integer >= 0; got -1",
    ),
    "labels short": (
        lambda h: h.__setitem__("labels", h["labels"][:-1]),
        "the label list has 2 names for 3 labels (n_labels)",
    ),
    "labels duplicated": (
        lambda h: h.__setitem__("labels", [h["labels"][0]] * 3),
        "the label 'B-NP' appears more than once in the label list",
    ),
    "labels missing": (_del("labels"), "the label list (labels) is missing"),
    "labels not names": (
        _set("labels", [1, 2, 3]),
        "the label list (labels) must be a list of names; got [1, 2, 3]",
    ),
    "solver unknown": (
        _set("solver", "x"),
        "the solver name (solver) is 'x', not one of crfsdca's",
    ),
    "regularization text": (
        _set("regularization", "a"),
        "the regularization must be a number > 0; got 'a'",
    ),
    "regularization negative": (
        _set("regularization", -1.0),
        "the regularization must be a number > 0; got -1.0",
    ),
    "bias rows": (
        _set("n_bias_rows", 2),
        "the number of bias rows (n_bias_rows) must be 0 or 3; got 2",
    ),
    "bias rows bool": (
        _set("n_bias_rows", True),
        "the number of bias rows (n_bias_rows) must be 0 or 3; got True",
    ),
    "solver option unknown": (
        _set("solver_options", {"foo": 1}),
        "the solver options name 'foo', which sdca does not have",
    ),
    "solver option value": (
        _set("solver_options", {"tol": -1}),
        "the solver options: tol must be >= 0; got -1",
    ),
    "solver options a list": (
        _set("solver_options", []),
        "the solver options (solver_options) must be a JSON object",
    ),
    "graph": (
        _set("graph", "star"),
        "the graph kind (graph) must be one of chain, tree, junction; got 'star'",
    ),
    "edge types": (
        _set("n_edge_types", 0),
        "the number of edge types (n_edge_types) must be an integer >= 1; got 0",
    ),
    "order": (_set("order", 3), "a chain model has order 1; got order 3"),
    "meta": (_set("meta", []), "the training data's description (meta) must be a JSON object"),
    "encoder vocabulary": (
        _encoder("vocabulary", 5),
        "the attribute encoder (encoder) is damaged or was not written by crfsdca",
    ),
    "encoder kind": (
        _encoder("kind", "x"),
        "the attribute encoder (encoder) is damaged or was not written by crfsdca",
    ),
    "encoder labels": (
        lambda h: h["encoder"].__setitem__("label_names", h["encoder"]["label_names"][::-1]),
        "the attribute encoder's label list (encoder) differs from the model's (labels)",
    ),
    "encoder size": (
        lambda h: h["encoder"].__setitem__("vocabulary", h["encoder"]["vocabulary"][:-1]),
        "the encoder knows 9 attributes, the model has weights for 10 (n_attributes)",
    ),
}
CORRUPT_ARRAYS = {
    "weights short": (
        lambda a: a.__setitem__("weights", a["weights"][:-1]),
        "corrupt model: the weights hold 38 numbers, but the header's sizes (attributes, labels,"
        " bias rows, edge types) need 39",
    ),
    "weights NaN": (
        lambda a: a.__setitem__("weights", a["weights"] * np.nan),
        "corrupt model: the weights hold NaN or infinities",
    ),
    "weights 2-d": (
        lambda a: a.__setitem__("weights", a["weights"][None]),
        "corrupt model: the weights are not a flat array of numbers",
    ),
    "weights text": (
        lambda a: a.__setitem__("weights", np.array(["a"])),
        "corrupt model: the weights are not a flat array of numbers",
    ),
    "weights missing": (
        lambda a: a.pop("weights"),
        "corrupt model: the file holds no weights array",
    ),
}


@pytest.fixture(scope="module")
def corrupt_models(work, tmp_path_factory):
    folder = tmp_path_factory.mktemp("corrupt")
    made = {}
    for name, (change, message) in CORRUPT_HEADERS.items():
        path = rewrite_model(work / "attr.npz", folder / f"{name.replace(' ', '_')}.npz", change)
        made[name] = (path, HEADER + message)
    for name, (change, message) in CORRUPT_ARRAYS.items():
        dst = folder / f"{name.replace(' ', '_')}.npz"
        made[name] = (rewrite_model(work / "attr.npz", dst, None, change), message)
    return made


@pytest.mark.parametrize("case", [*CORRUPT_HEADERS, *CORRUPT_ARRAYS])
@pytest.mark.parametrize("command", ["tag", "evaluate"])
def test_a_corrupt_model_is_blamed_on_its_file_in_words(work, corrupt_models, case, command):
    path, message = corrupt_models[case]
    line = one_error_line(cli(command, path, work / "items.attr"))
    assert line == f"crfsdca: error: {path}: {message}"


@pytest.mark.parametrize(
    "case", [c for c in CORRUPT_HEADERS if not c.startswith("encoder")] + [*CORRUPT_ARRAYS]
)
def test_export_refuses_a_corrupt_model_and_writes_nothing(corrupt_models, tmp_path, case):
    path, message = corrupt_models[case]
    out = tmp_path / "out.crfsuite"
    line = one_error_line(cli("export", path, out))
    assert line == f"crfsdca: error: {path}: {message}"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.9, -22])
def test_a_truncated_model_file_is_one_line_without_python_text(work, tmp_path, cut):
    data = (work / "attr.npz").read_bytes()
    path = tmp_path / "cut.npz"
    path.write_bytes(data[: int(len(data) * cut)] if cut > 0 else data[:cut])
    line = one_error_line(cli("tag", path, work / "items.attr"))
    assert line == (
        f"crfsdca: error: {path}: not a readable .npz archive; the file is truncated or corrupted"
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"{not json", "the header is not valid JSON (character 2); the file is corrupted"),
        (b'{"a": "\xff"}', "the header is not UTF-8 text (byte 8); the file is corrupted"),
    ],
)
def test_a_header_that_is_not_json_names_the_file(tmp_path, work, raw, message):
    path = tmp_path / "m.npz"
    np.savez(path, header=np.frombuffer(raw, np.uint8), weights=np.zeros(3))
    line = one_error_line(cli("evaluate", path, work / "items.attr"))
    assert line == f"crfsdca: error: {path}: {message}"


# ------------------------------------------------------------------ 3. CoNLL-U trees


def conllu_with_heads(path: Path, heads: list[str]) -> Path:
    """One good sentence (lines 1-3), a blank line, then the cat sat with ``heads`` (5-7)."""
    good = conllu_text(1).splitlines()[1:4]
    bad = [
        f"{t + 1}\t{word}\t{word}\t{upos}\t{xpos}\t_\t{head}\tdep\t_\t_"
        for t, ((word, upos, xpos), head) in enumerate(zip(CONLLU_WORDS, heads, strict=True))
    ]
    path.write_text("\n".join([*good, "", *bad]) + "\n")
    return path


EXPECTED_HEAD = "column 7 (HEAD): expected 0 (the root) or a word id from 1 to 3; got "
BAD_HEADS = {
    "out of range": (["2", "0", "99"], 7, EXPECTED_HEAD + "99, beyond the sentence's 3 words"),
    "cycle": (
        ["2", "1", "0"],
        5,
        "column 7 (HEAD): word 1 lies on a cycle of heads (1 -> 2 -> 1); the heads of a"
        " sentence must form a tree",
    ),
    "long cycle": (
        ["0", "3", "2"],
        6,
        "column 7 (HEAD): word 2 lies on a cycle of heads (2 -> 3 -> 2); the heads of a"
        " sentence must form a tree",
    ),
    "self-loop": (["2", "2", "2"], 6, "column 7 (HEAD): word 2 is its own head (a self-loop)"),
    "superscript two": (["\u00b2", "0", "2"], 5, EXPECTED_HEAD + "'\u00b2', not an ASCII integer"),
    "arabic three": (["\u0663", "0", "2"], 5, EXPECTED_HEAD + "'\u0663', not an ASCII integer"),
    "minus one": (["-1", "0", "2"], 5, EXPECTED_HEAD + "-1, a negative number"),
    "no head": (["2", "0", "_"], 7, EXPECTED_HEAD + "'_' (no head)"),
    "word": (["2", "root", "2"], 6, EXPECTED_HEAD + "'root', not an ASCII integer"),
}


@pytest.mark.parametrize("case", BAD_HEADS)
def test_bad_heads_are_file_line_for_trees_and_ignored_by_chains(work, tmp_path, case):
    heads, line, message = BAD_HEADS[case]
    data = conllu_with_heads(tmp_path / "bad.conllu", heads)
    where = f"crfsdca: error: {data}:{line}: {message}"
    result = cli("train", data, "--graph", "tree", "--epochs", "1", "-q")
    assert one_error_line(result) == f"{where}; --graph tree reads the trees of HEAD"
    for command in ("tag", "evaluate"):
        result = cli(command, work / "tree.npz", data)
        model = work / "tree.npz"
        assert one_error_line(result) == f"{where}; the tree model {model} reads the trees of HEAD"
    # chains never read HEAD: the same file trains and tags
    for args in (["--graph", "chain"], ["--template", "pos"]):
        result = cli("train", data, *args, "--epochs", "1", "-q", "--model", tmp_path / "c.npz")
        assert result.exit_code == 0, result.output
    result = cli("tag", work / "upos.npz", data)
    assert result.exit_code == 0 and result.stdout.split() == ["DET", "NOUN", "VERB"] * 2


def test_the_reader_keeps_the_first_head_problem_for_tree_readers(tmp_path):
    from crfsdca.readers import read_conllu

    corpus = read_conllu(conllu_with_heads(tmp_path / "x.conllu", ["\u0663", "0", "2"]))
    assert corpus.heads == [] and corpus.labels[1] == ["DT", "NN", "VBD"]
    assert corpus.head_problem == (5, EXPECTED_HEAD + "'\u0663', not an ASCII integer")
    good = read_conllu(conllu_with_heads(tmp_path / "y.conllu", ["2", "0", "2"]))
    assert good.heads == [[1, -1, 1], [1, -1, 1]] and good.head_problem is None


# ------------------------------------------------------------------ 3. one clear line


def test_a_scheduler_that_refuses_fails_within_seconds(work):
    """Nothing listens on a bound port: the connection is refused at once, with one line."""
    pytest.importorskip("distributed")
    import socket

    with socket.socket() as bound:  # bound, never listening: connections are refused
        bound.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{bound.getsockname()[1]}"
        result = cli("train", work / "items.attr", "--scheduler", address, "--round-timeout", "600")
    assert one_error_line(result) == (
        f"crfsdca: error: --scheduler {address}: cannot connect (connection refused); start a"
        " Dask scheduler there (dask scheduler --port PORT) or correct the address"
    )


@pytest.mark.parametrize("address", ["127.0.0.1", "http://127.0.0.1:8786", "tcp://h:0", "tcp://:1"])
def test_a_scheduler_address_that_is_not_one_is_a_usage_error(work, address):
    line = usage_error(cli("train", work / "items.attr", "--scheduler", address))
    assert line == (
        f"Error: Invalid value for --scheduler: expected tcp://HOST:PORT (a Dask scheduler), got"
        f" {address!r}"
    )


def test_the_scheduler_check_times_out_apart_from_the_round_timeout(monkeypatch):
    import socket

    from crfsdca.cli_distributed import check_scheduler

    def silent(address, timeout):
        assert timeout == 0.5
        raise TimeoutError("timed out")

    monkeypatch.setattr(socket, "create_connection", silent)
    with pytest.raises(OSError) as err:
        check_scheduler("tcp://192.0.2.1:8786", timeout=0.5)
    assert str(err.value) == (
        "--scheduler tcp://192.0.2.1:8786: no answer within 0.5 s; is a Dask scheduler running"
        " there (dask scheduler --port PORT) and reachable?"
    )


@pytest.mark.parametrize("value", ["1e308", "-2e150", "1.5e101"])
@pytest.mark.parametrize("command", ["train", "tag", "evaluate"])
def test_huge_attribute_values_are_file_line_before_any_numpy_warning(
    work, tmp_path, value, command
):
    data = tmp_path / "huge.attr"
    data.write_text(f"A\tx\ty\nB\tz\n\nA\tx:{value}\tz\nB\tz\n\n")
    args = [data] if command == "train" else [work / "attr.npz", data]
    line = one_error_line(cli(command, *args))
    assert line == (
        f"crfsdca: error: {data}:4: attribute 'x': expected a value of magnitude at most 1e+100,"
        f" got {float(value):g}; scale the values (training squares them and multiplies them by"
        " weights)"
    )


def test_a_failed_download_is_one_line_saying_what_to_do(work, tmp_path, monkeypatch):
    """No network: pooch raises what requests raises when the host is not found."""
    from data_loaders import download

    monkeypatch.delenv("CRFSDCA_DATA_DIR", raising=False)
    monkeypatch.setenv("CRFSDCA_CACHE_DIR", str(tmp_path / "cache"))

    def unreachable(url, dest):
        raise OSError(
            f"HTTPSConnectionPool(host='x', port=443): Max retries exceeded with url: {url}"
            " (Caused by NameResolutionError(\"Failed to resolve 'x' ([Errno -2] Name or service"
            ' not known)"))'
        )

    monkeypatch.setattr(download, "fetch_url", unreachable)
    (tmp_path / "empty").mkdir()
    line = one_error_line(cli("train", "ocr", "--data-dir", tmp_path / "empty"))
    assert line == (
        f"crfsdca: error: dataset 'ocr': ocr/letter.data.gz not found; looked in --data-dir"
        f" {tmp_path}/empty, $CRFSDCA_DATA_DIR (not set), cache {tmp_path}/cache; download failed"
        " (http://ai.stanford.edu/~btaskar/ocr/letter.data.gz: host not found (offline, or no"
        " DNS?)). Point crfsdca at a local copy with --data-dir DIR or CRFSDCA_DATA_DIR=DIR,"
        " where DIR/ocr/letter.data.gz (gzipped or not) exists"
    )
    assert "Errno" not in line and "HTTPSConnectionPool" not in line


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        ("ConnectionError", "host not found (offline, or no DNS?)"),
        ("HTTPError", "the server answered HTTP 404"),
        ("ReadTimeout", "no answer in time"),
    ],
)
def test_pooch_failures_are_said_in_a_few_words(tmp_path, monkeypatch, error, reason):
    """pooch itself fails (monkeypatched: no network) with what requests raises."""
    pooch = pytest.importorskip("pooch")
    requests = pytest.importorskip("requests")

    def retrieve(url, **kwargs):
        if error == "HTTPError":
            response = requests.Response()
            response.status_code = 404
            raise requests.exceptions.HTTPError(f"404 Client Error: Not Found for url: {url}",
                                                response=response)  # fmt: skip
        raise getattr(requests.exceptions, error)(
            f"HTTPSConnectionPool(host='h', port=443): Max retries exceeded with url: {url}"
            " (Caused by NameResolutionError(\"Failed to resolve 'h' ([Errno -2] Name or service"
            ' not known)"))'
            if error == "ConnectionError"
            else "HTTPSConnectionPool(host='h', port=443): Read timed out. (read timeout=30)"
        )

    monkeypatch.setattr(pooch, "retrieve", retrieve)
    monkeypatch.delenv("CRFSDCA_DATA_DIR", raising=False)
    monkeypatch.setenv("CRFSDCA_CACHE_DIR", str(tmp_path / "cache"))
    line = one_error_line(cli("train", "ocr", "--epochs", "1"))
    assert f"download failed (http://ai.stanford.edu/~btaskar/ocr/letter.data.gz: {reason})" in line
    assert "Errno" not in line and "Pool" not in line and len(line) < 500


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (TimeoutError("read timed out"), "no answer in time"),
        (
            ConnectionRefusedError(111, "Connection refused"),
            "cannot connect (offline, or blocked?)",
        ),
        (EOFError("Compressed file ended"), "the download is not a readable archive"),
        (KeyError("t/a"), "the archive lacks the expected file (t/a)"),
    ],
)
def test_download_failures_are_said_in_a_few_words(exc, reason):
    from data_loaders.download import describe_failure

    assert describe_failure("https://h/f.gz", exc) == f"https://h/f.gz: {reason}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{w}/chunk.txt", "--format", "conll"], "--format conll needs --template (e.g. conll,"),
        (["{w}/chunk.txt", "--template", "conll", "--label", "upos"],
         "--label applies to CoNLL-U files; {w}/chunk.txt is not one"),
        (["{w}/items.attr", "--template", "pos"],
         "--template pos reads token columns (CoNLL, CoNLL-U); {w}/items.attr holds CRFsuite"),
        (["{w}/items.attr", "--graph", "tree"], "--graph needs CoNLL-U data"),
        (["{w}/items.attr", "--solver", "lbfgs", "--sampling", "gap"],
         "--sampling does not apply to --solver lbfgs"),
        (["{w}/items.attr", "--template", "nope"], "Invalid value for '--template'"),
    ],
)  # fmt: skip
def test_flags_that_do_not_fit_the_data_are_usage_errors(work, args, message):
    line = usage_error(cli("train", *[str(a).format(w=work) for a in args]))
    assert message.format(w=work) in line


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (float("nan"), "nan"),
        (float("inf"), "inf"),
        (-float("inf"), "-inf"),
        (10**400, "an integer of 1329 bits"),
    ],
)
def test_non_finite_feature_values_in_the_python_api_say_where(value, shown):
    import crfsdca

    X = [[{"a": 1.0}, {"b": "x"}], [{"a": 2.0}, {"b": "y", "x": value}]]
    y = [["A", "B"], ["A", "B"]]
    with pytest.raises(ValueError) as err:
        crfsdca.CRF().fit(X, y)
    assert str(err.value) == f"X[1][1]: feature 'x': expected a finite number; got {shown}"
    X[1][1] = {"x": {"inner": value}}
    with pytest.raises(ValueError, match=r"^X\[1\]\[1\]: feature 'x:inner': expected a finite"):
        crfsdca.CRF().fit(X, y)


# ------------------------------------------------------------------ 4. the README's promise, wider
#
# Generated variants of the cases above, each checked against the README's promise only: data
# errors exit 1 with one line naming the file (and the line, when one line is to blame), usage
# errors exit 2 naming the flag, never a traceback, and no file that is not a regular file
# replaced.


def _mutate_line(text: bytes, line: int, change) -> bytes:
    lines = text.split(b"\n")
    lines[line - 1] = change(lines[line - 1])
    return b"\n".join(lines)


#: (data file in ``work``, model for tag/evaluate, extra train args) per format
FORMATS = {
    "conll": ("chunk.txt", "chunk.npz", ["--format", "conll", "--template", "conll"]),
    "conllu": ("s.conllu", "upos.npz", ["--template", "pos", "--label", "upos"]),
    "crfsuite": ("items.attr", "attr.npz", []),
}
#: format -> mutation name -> (line, change of that line's bytes)
MUTATIONS = {
    "conll": {
        "column dropped": (3, lambda b: b.rsplit(b" ", 1)[0]),
        "column added": (4, lambda b: b + b" extra"),
        "bad utf-8": (2, lambda b: b"\xff\xfe" + b),
        "NUL byte": (5, lambda b: b[:2] + b"\x00" + b[2:]),
        "bare CR": (3, lambda b: b.replace(b" ", b"\r", 1)),
    },
    "conllu": {
        "nine columns": (3, lambda b: b.rsplit(b"\t", 1)[0]),
        "bad id": (4, lambda b: b"x" + b.split(b"\t", 1)[1]),
        "id jump": (3, lambda b: b"7\t" + b.split(b"\t", 1)[1]),
        "arabic id": (4, lambda b: "\u0662".encode() + b"\t" + b.split(b"\t", 1)[1]),
        "empty tags": (2, lambda b: b.replace(b"\tDET\tDT\t", b"\t\t\t")),
        "bad utf-8": (3, lambda b: b.replace(b"cat", b"c\xc3t")),
    },
    "crfsuite": {
        "bad weight": (2, lambda b: b + b"\tw:abc"),
        "nan weight": (1, lambda b: b + b"\tw:nan"),
        "no label": (2, lambda b: b"\t" + b.split(b"\t", 1)[1]),
        "huge weight": (2, lambda b: b + b"\tw:1e300"),
        "spaces, no tabs": (1, lambda b: b.replace(b"\t", b" ")),
        "NUL byte": (2, lambda b: b + b"\x00"),
    },
}
#: tag copies CoNLL lines through and reads only the columns the model needs: a line with one
#: column less (word POS, no gold label) is what it is made for
ACCEPTED = {("conll", "column dropped", "tag")}
HOSTILE_DATA = [
    (fmt, name, command)
    for fmt, mutations in MUTATIONS.items()
    for name in mutations
    for command in ("train", "tag", "evaluate")
    if (fmt, name, command) not in ACCEPTED
]


def check_promise(result, status: int, names: str) -> str:
    """The README's promise for a failed command; returns its one message line."""
    assert "Traceback" not in result.output
    assert result.exit_code == status, (result.exit_code, result.output)
    if status == 2:
        line = usage_error(result)
        assert names in line, line
        return line
    line = one_error_line(result)
    assert names in line, line
    return line


@pytest.mark.parametrize(("fmt", "mutation", "command"), HOSTILE_DATA)
def test_hostile_data_is_one_line_with_file_and_line(work, tmp_path, fmt, mutation, command):
    source, model, train_args = FORMATS[fmt]
    line_no, change = MUTATIONS[fmt][mutation]
    data = tmp_path / source
    data.write_bytes(_mutate_line((work / source).read_bytes(), line_no, change))
    if command == "train":
        result = cli("train", data, *train_args, "--epochs", "1", "-q")
    else:
        result = cli(command, work / model, data)
    check_promise(result, 1, f"crfsdca: error: {data}:{line_no}: ")


TRUNCATIONS = [0.05, 0.3, 0.6, 0.95, -1]


@pytest.mark.parametrize("model", ["chunk.npz", "order2.npz", "attr.npz", "upos.npz", "tree.npz"])
@pytest.mark.parametrize("cut", TRUNCATIONS)
def test_every_kind_of_truncated_model_is_one_line(work, tmp_path, model, cut):
    data = (work / model).read_bytes()
    path = tmp_path / model
    path.write_bytes(data[: int(len(data) * cut)] if cut > 0 else data[:cut])
    source = {"chunk.npz": "chunk.txt", "order2.npz": "chunk.txt", "attr.npz": "items.attr"}
    for command in ("tag", "evaluate", "export"):
        target = (
            [tmp_path / "out.crfsuite"]
            if command == "export"
            else [work / source.get(model, "s.conllu")]
        )
        line = check_promise(cli(command, path, *target), 1, f"crfsdca: error: {path}: ")
        assert "Error" not in line.split(": error: ", 1)[1]  # no Python exception names
    assert not (tmp_path / "out.crfsuite").exists()


#: writer -> (argv builder given the output path, the flag or argument named in the refusal)
WRITERS = {
    "export": (lambda w, out: ["export", w / "attr.npz", out], "OUT.crfsuite"),
    "import-crfsuite": (lambda w, out: ["import-crfsuite", w / "attr.crfsuite", out], "OUT.npz"),
    "train --model": (lambda w, out: ["train", w / "items.attr", "--model", out], "--model"),
    "train --trace": (lambda w, out: ["train", w / "items.attr", "--trace", out], "--trace"),
    "train --plot": (lambda w, out: ["train", w / "items.attr", "--plot", out], "--plot"),
    "train --checkpoint": (
        lambda w, out: ["train", w / "items.attr", "--checkpoint", out.parent],
        "--checkpoint",
    ),
    "train --graph tree --model": (
        lambda w, out: ["train", w / "s.conllu", "--graph", "tree", "--model", out],
        "--model",
    ),
    "train --order 2 --model": (
        lambda w, out: [
            "train",
            w / "chunk.txt",
            "--format",
            "conll",
            "--template",
            "conll",
            "--order",
            "2",
            "--model",
            out,
        ],
        "--model",
    ),  # fmt: skip
    "plot --out": (lambda w, out: ["plot", w / "trace.jsonl", "--out", out], "--out"),
    "reproduce --out": (lambda w, out: ["reproduce", "--quick", "--out", out], "--out"),
}
OUTPUT_KINDS = ["fifo", "device", "symlink to fifo", "folder"]


def _make_output(folder: Path, writer: str, kind: str) -> tuple[Path, object]:
    name = "checkpoint.npz" if "checkpoint" in writer else "out.png"
    out = folder / name
    if kind == "fifo":
        os.mkfifo(out)
        return out, stat.S_ISFIFO
    if kind == "device":
        char_device_in(folder).rename(out)
        return out, stat.S_ISCHR
    if kind == "symlink to fifo":
        os.mkfifo(folder / "real_pipe")
        out.symlink_to(folder / "real_pipe")
        return out, stat.S_ISLNK
    out.mkdir()
    return out, stat.S_ISDIR


@pytest.mark.parametrize("kind", OUTPUT_KINDS)
@pytest.mark.parametrize("writer", WRITERS)
def test_no_writer_replaces_what_is_not_a_regular_file(writers_work, tmp_path, writer, kind):
    if "plot" in writer:
        pytest.importorskip("matplotlib")
    if kind == "folder" and "checkpoint" in writer:
        pytest.skip("a --checkpoint folder holding a folder checkpoint.npz: covered by the file")
    if kind == "folder" and "reproduce" in writer:
        pytest.skip("reproduce --out is a folder")
    argv, flag = WRITERS[writer]
    out, still = _make_output(tmp_path, writer, kind)
    before = sorted(p.name for p in tmp_path.iterdir())
    check_promise(cli(*argv(writers_work, out)), 2, flag)
    assert still(os.lstat(out).st_mode), f"{out} was replaced"
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no temporary left either


HEADER_KEYS = [
    "solver", "regularization", "n_bias_rows", "n_attributes", "n_labels", "labels",
    "solver_options", "encoder", "meta", "graph", "n_edge_types", "order", "factor_arities",
    "all_possible_states", "all_possible_transitions", "format", "format_version",
]  # fmt: skip
ODD_VALUES = [None, [], "x", -1, 2.5, {"a": None}, 10**20]
#: (key, value) a model may hold and still be used: metadata, or values valid for the key
HARMLESS = [
    ("regularization", None), ("regularization", 2.5), ("regularization", 10**20),
    ("meta", {"a": None}), ("encoder", None),
]  # fmt: skip


@pytest.mark.parametrize("key", HEADER_KEYS)
@pytest.mark.parametrize("model", ["attr.npz", "order2.npz"])
def test_odd_header_values_are_refused_in_one_line_or_harmless(work, tmp_path, model, key):
    data = work / ("items.attr" if model == "attr.npz" else "chunk.txt")
    for value in ODD_VALUES:
        path = rewrite_model(work / model, tmp_path / "odd.npz", _set(key, value))
        for argv in (["tag", path, data], ["export", path, tmp_path / "o.crfsuite"]):
            result = cli(*argv)
            if (key, value) in HARMLESS or (key, value) == ("factor_arities", None):
                (tmp_path / "o.crfsuite").unlink(missing_ok=True)
                continue  # metadata, or no factor sizes (a chain has none)
            if model == "attr.npz" and (key == "factor_arities" or (key, value) == ("order", None)):
                (tmp_path / "o.crfsuite").unlink(missing_ok=True)
                continue  # a first-order chain reads neither
            if key == "encoder" and argv[0] == "export" and value is None:
                continue  # Python API models have no encoder; exported with attribute ids
            assert result.exit_code == 1, (key, value, argv[0], result.output)
            line = one_error_line(result)
            assert line.startswith(f"crfsdca: error: {path}: "), line
            assert "internal error" not in line and "Error:" not in line
            assert not (tmp_path / "o.crfsuite").exists()
