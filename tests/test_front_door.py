"""The front door (issue 24): nothing but regular files replaced, and no silent wrong answers.

Every case asserts the exit status and the exact message. Usage errors (exit 2) are checked on
click's ``Error:`` line, data and runtime errors (exit 1) on the single ``crfsdca: error:`` line.
One clear line naming what the user gave: ``test_front_door_messages.py``; generated hostile
cases against the README's promise: ``test_front_door_corpus.py``; shared fixtures:
``_front_door.py``.
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
from _front_door import (
    add_writer_inputs,
    assert_untouched,
    char_device_in,
    fifo_in,
    make_work,
)
from test_cli_errors import ENV, cli, one_error_line, usage_error

from crfsdca.errors import OutputPathError
from crfsdca.io.atomicfile import (
    _HOST,
    atomic_write_bytes,
    check_writable,
    remove_stale_temporaries,
)
from crfsdca.io.modelfile import save_model


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return make_work(tmp_path_factory)


@pytest.fixture(scope="module")
def writers_work(work):
    return add_writer_inputs(work)


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
        "from crfsdca.io.atomicfile import atomic_open\n"
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
    from crfsdca.estimators.model import SequenceCRF

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
