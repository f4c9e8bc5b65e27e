"""The command line never shows a traceback: every misuse a new user met is one clear line.

Each test asserts the exit status (1: data or runtime error, 2: usage error) and the message.
Models are trained on tiny files in a module-scoped folder; registered dataset names are used
only where the command fails before reading any data.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from _signals import sigint
from click.testing import CliRunner

from crfsdca.cli.main import LAZY_COMMANDS, main

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).parent.parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
WORDS = ["the", "cat", "dog", "ran", "big", "home", "a", "sat"]
TAGS = {"the": "DT", "a": "DT", "cat": "NN", "dog": "NN", "home": "NN", "big": "JJ"}
CHUNKS = {"DT": "B-NP", "JJ": "I-NP", "NN": "I-NP", "VBD": "B-VP"}


def conll_text(n, seed=0, labels=True):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        for _ in range(rng.integers(1, 6)):
            word = WORDS[rng.integers(0, len(WORDS))]
            pos = TAGS.get(word, "VBD")
            out.append(f"{word} {pos} {CHUNKS[pos]}" if labels else f"{word} {pos}")
        out.append("")
    return "\n".join(out) + "\n"


def cli(*args, input=None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input)


def one_error_line(result, status=1):
    """The single stderr line of a failed command, checked to be no traceback."""
    assert result.exit_code == status, (result.exit_code, result.output)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("crfsdca: error: ")
    return lines[0]


def usage_error(result):
    """The ``Error:`` line of a usage error (exit 2), checked to be no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert "Traceback" not in result.stderr
    return next(line for line in result.stderr.splitlines() if line.startswith("Error:"))


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A folder with tiny data files of every format and a model trained on each."""
    root = tmp_path_factory.mktemp("cli")
    (root / "chunk.txt").write_text(conll_text(40))
    shutil.copy(DATA / "crfsuite_ok.txt", root / "items.attr")
    shutil.copy(DATA / "ocr_ok.data", root / "letters.data")
    shutil.copy(DATA / "ok.conllu", root / "tree.conllu")
    trainings = {
        "chunk.npz": ["chunk.txt", "--format", "conll", "--template", "conll"],
        "attr.npz": ["items.attr"],
        "ocr.npz": ["letters.data"],
        "tree.npz": ["tree.conllu", "--template", "pos"],
    }
    for model, args in trainings.items():
        result = cli("train", *[root / a if "." in a else a for a in args], "--epochs", "5",
                     "-q", "--model", root / model)  # fmt: skip
        assert result.exit_code == 0, result.output
    return root


# ----------------------------------------------------------------------------- mismatches


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["evaluate", "{w}/chunk.npz", "ocr"],
            "ocr: a dataset of dense vectors (OCR pixels), but the model {w}/chunk.npz reads"
            " token columns (CoNLL, CoNLL-U)",
        ),
        (
            ["evaluate", "{w}/ocr.npz", "conll2000"],
            "conll2000: a dataset of token columns (CoNLL, CoNLL-U), but the model {w}/ocr.npz"
            " reads dense vectors (OCR pixels)",
        ),
        (
            ["evaluate", "{w}/attr.npz", "{w}/letters.data"],
            "{w}/letters.data: a --format ocr file of dense vectors (OCR pixels), but the model"
            " {w}/attr.npz reads CRFsuite attributes",
        ),
        (
            ["train", "conll2000", "--test", "ocr"],
            "--test ocr holds dense vectors (OCR pixels), but the training data conll2000 holds"
            " token columns",
        ),
        (
            ["tag", "{w}/ocr.npz", "{w}/chunk.txt", "--format", "conll"],
            "{w}/chunk.txt: a --format conll file of token columns (CoNLL, CoNLL-U), but the"
            " model {w}/ocr.npz reads dense vectors",
        ),
        (  # a name that does not tell the format: read as the model's, OCR here
            ["tag", "{w}/ocr.npz", "{w}/chunk.txt"],
            "{w}/chunk.txt:1: expected 134 tab-separated fields, got 1",
        ),
        (
            ["tag", "{w}/chunk.npz", "{w}/items.attr"],
            "{w}/items.attr: a --format crfsuite file of CRFsuite attributes, but the model",
        ),
    ],
)
def test_model_data_mismatch_is_one_line(work, args, message):
    line = one_error_line(cli(*[a.format(w=work) for a in args]))
    assert message.format(w=work) in line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["train", "ocr", "--template", "ner"],
            "--template ner reads token columns (CoNLL, CoNLL-U); ocr holds dense vectors",
        ),
        (
            ["train", "{w}/chunk.txt", "--format", "conll", "--template", "ocr"],
            "--template ocr reads dense vectors (OCR pixels); {w}/chunk.txt holds token columns",
        ),
    ],
)
def test_a_template_for_other_data_is_a_usage_error(work, args, message):
    line = usage_error(cli(*[a.format(w=work) for a in args]))
    assert message.format(w=work) in line


def test_labels_unknown_to_the_model_are_an_error_or_a_counted_warning(work):
    other = work / "pos.txt"  # the same words, labelled with POS tags instead of chunks
    other.write_text("\n".join(" ".join(line.split()[:2] + [line.split()[1]]) if line else ""
                               for line in conll_text(5).splitlines()) + "\n")  # fmt: skip
    line = one_error_line(cli("evaluate", work / "chunk.npz", other, "--format", "conll"))
    assert f"{other}: none of its gold labels is a label of the model (data: " in line
    data_part, model_part = line.split("(data: ")[1].split("; model: ")
    assert set(data_part.split(", ")) == {"DT", "NN", "JJ", "VBD"}
    assert set(model_part.split(")")[0].split(", ")) == {"B-NP", "I-NP", "B-VP"}

    partly = work / "partly.txt"
    partly.write_text("the DT B-NP\ncat NN I-NP\nran VBD B-XX\n\n")
    result = cli("evaluate", work / "chunk.npz", partly, "--format", "conll", "--json")
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        f"crfsdca: warning: {partly}: 1 of 3 tokens (33.33%) have gold labels the model does"
        " not know (B-XX); they count as errors\n"
    )
    assert json.loads(result.stdout)["token_accuracy"] <= 2 / 3
    quiet = cli("evaluate", work / "chunk.npz", partly, "--format", "conll", "-q")
    assert quiet.exit_code == 0 and quiet.stderr == ""


# ----------------------------------------------------------------------------- tag


def test_tag_every_model_kind_prints_one_label_per_item(work):
    attr = cli("tag", work / "attr.npz", work / "items.attr")
    assert attr.exit_code == 0, attr.output
    # crfsuite_ok.txt: a sequence of 2 items, a blank line, a sequence of 1 item
    lines = attr.stdout.split("\n")
    assert lines[2] == "" and lines[4] == "" and len(lines) == 6
    assert {lines[0], lines[1], lines[3]} <= {"B-NP", "I-NP", "O"}
    ocr = cli("tag", work / "ocr.npz", work / "letters.data")
    assert ocr.exit_code == 0, ocr.output
    words = ocr.stdout.split("\n\n")
    assert [len(w.split()) for w in words[:2]] == [3, 2]  # "omm" and "an"
    assert set(ocr.stdout.split()) <= set("oman")
    tree = cli("tag", work / "tree.npz", work / "tree.conllu")
    assert tree.exit_code == 0, tree.output
    assert [len(s.split()) for s in tree.stdout.strip().split("\n\n")] == [4, 1]


def test_tag_reads_stdin_and_writes_output_atomically(work, tmp_path):
    raw = conll_text(3, seed=5, labels=False)
    from_file = tmp_path / "raw.txt"
    from_file.write_text(raw)
    expected = cli("tag", work / "chunk.npz", from_file)
    assert expected.exit_code == 0, expected.output
    piped = cli("tag", work / "chunk.npz", "-", input=raw)
    assert piped.exit_code == 0 and piped.stdout == expected.stdout
    out = tmp_path / "new" / "tagged.txt"
    written = cli("tag", work / "chunk.npz", "-", "--output", out, input=raw)
    assert written.exit_code == 0 and written.stdout == ""
    assert out.read_text() == expected.stdout
    assert os.listdir(out.parent) == ["tagged.txt"]  # no temporary file left behind
    attr = cli("tag", work / "attr.npz", "-", "--format", "crfsuite",
               input=(work / "items.attr").read_text())  # fmt: skip
    assert attr.exit_code == 0 and len(attr.stdout.split()) == 3
    bad = cli("tag", work / "chunk.npz", "-", input="the DT\ncat\n")
    assert "crfsdca: error: <stdin>:2: expected 2 columns" in one_error_line(bad)


def test_tag_into_an_unwritable_path_fails_before_reading(work):
    result = cli("tag", work / "chunk.npz", work / "chunk.txt", "--output",
                 work / "chunk.txt" / "out.txt")  # fmt: skip
    assert f"cannot create {work}/chunk.txt/out.txt: {work}/chunk.txt is a file" in usage_error(
        result
    )
    result = cli("tag", work / "chunk.npz", work / "chunk.txt", "--output", work)
    assert f"{work} is a directory; expected a file name" in usage_error(result)


def test_tag_into_a_closed_pipe_exits_quietly(work, tmp_path):
    big = tmp_path / "big.txt"
    big.write_text(conll_text(8000, labels=False))  # more than a pipe's buffer of output
    proc = subprocess.Popen(
        [sys.executable, "-m", "crfsdca.cli", "tag", str(work / "chunk.npz"), str(big)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    first = proc.stdout.readline()
    proc.stdout.close()  # as `| head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 141
    assert len(first.split()) == 3 and err == ""


# ----------------------------------------------------------------------------- inputs


def test_missing_or_wrong_model_file_names_the_file(work, tmp_path):
    line = one_error_line(cli("tag", tmp_path / "nope.npz", work / "chunk.txt"))
    assert line == (
        f"crfsdca: error: {tmp_path}/nope.npz: no such file; expected a crfsdca model (.npz,"
        " from crfsdca train --model)"
    )
    line = one_error_line(cli("evaluate", tmp_path, work / "chunk.txt"))
    assert f"{tmp_path}: is a directory; expected a crfsdca model" in line
    line = one_error_line(cli("evaluate", work / "chunk.txt", work / "chunk.txt"))
    assert str(work / "chunk.txt") in line


def test_unknown_dataset_lists_the_registered_ones_and_the_closest(work):
    line = one_error_line(cli("train", "conll2001"))
    assert line == (
        "crfsdca: error: conll2001: no such file, and not a registered dataset (conll2000,"
        " conll2002-ned, ocr, ewt-pos); did you mean conll2000?"
    )
    assert "did you mean ewt-pos?" in one_error_line(cli("evaluate", work / "tree.npz", "ewt_pos"))
    assert "did you mean" not in one_error_line(cli("train", "zzzz"))
    line = one_error_line(cli("datasets", "info", "ocr2"))
    assert line.endswith("ocr2: not a registered dataset (conll2000, conll2002-ned, ocr,"
                         " ewt-pos); did you mean ocr?")  # fmt: skip


def test_directories_and_empty_files_are_one_line(work, tmp_path):
    line = one_error_line(cli("train", tmp_path, "--format", "conll", "--template", "conll"))
    assert line == f"crfsdca: error: {tmp_path}: is a directory; expected a data file"
    empty = tmp_path / "empty.attr"
    empty.write_text("")
    line = one_error_line(cli("train", empty))
    assert line == f"crfsdca: error: {empty}: expected at least one item line, got none"
    empty_raw = tmp_path / "empty.txt"
    empty_raw.write_text("\n\n")
    line = one_error_line(cli("tag", work / "chunk.npz", empty_raw))
    assert line == f"crfsdca: error: {empty_raw}: no token lines to tag"


# ----------------------------------------------------------------------------- formats


def test_format_is_guessed_from_the_file_name(work, tmp_path):
    for name in ("items.attr", "letters.data", "tree.conllu"):
        args = ["--template", "pos"] if name.endswith("conllu") else []
        result = cli("train", work / name, *args, "--epochs", "1", "-q", "--json")
        assert result.exit_code == 0, result.output
    gz = tmp_path / "letters.data.gz"
    gz.write_bytes(__import__("gzip").compress((work / "letters.data").read_bytes()))
    assert cli("train", gz, "--epochs", "1", "-q").exit_code == 0
    unknown = tmp_path / "corpus.xyz"
    unknown.write_text("the DT B-NP\n")
    line = one_error_line(cli("train", unknown))
    assert f"{unknown}: cannot tell the format from the name; give --format" in line
    # a token template says the file is CoNLL
    assert cli("train", unknown, "--template", "conll", "--epochs", "1", "-q").exit_code == 0


def test_conllu_label_column(work):
    def labels(label):
        args = ["--label", label] if label else []
        model = work / f"tree-{label}.npz"
        result = cli("train", work / "tree.conllu", "--template", "pos", *args, "--epochs", "1",
                     "-q", "--model", model)  # fmt: skip
        assert result.exit_code == 0, result.output
        from crfsdca.estimators.model import SequenceCRF

        return set(SequenceCRF.load(str(model)).label_names_)

    assert labels("upos") == {"AUX", "PART", "VERB", "PUNCT", "INTJ"}
    assert labels("xpos") == labels(None) == {"VBP", "RB", "VB", ".", "UH"}
    line = usage_error(cli("train", work / "tree.conllu", "--template", "pos", "--label", "pos"))
    assert "'--label'" in line
    line = usage_error(cli("train", work / "chunk.txt", "--format", "conll", "--template",
                           "conll", "--label", "upos"))  # fmt: skip
    assert line.endswith(f"--label applies to CoNLL-U files; {work}/chunk.txt is not one")


def test_crfsuite_format_on_a_space_separated_file_names_the_line(work, tmp_path):
    data = tmp_path / "mixed.txt"
    data.write_text("B-NP\tw=the\nI-NP\tw=cat\n\nthe DT B-NP\n")
    line = one_error_line(cli("train", data, "--format", "crfsuite"))
    assert line == (
        f"crfsdca: error: {data}:4: expected tab-separated fields (label TAB attribute TAB ...),"
        " got 'the DT B-NP' without a tab; a CoNLL file? (--format conll)"
    )
    # a label with a space but with attributes, or without attributes and spaces, is CRFsuite's
    data.write_text("B NP\tw=the\nO\n")
    assert cli("train", data, "--format", "crfsuite", "--epochs", "1", "-q").exit_code == 0


# ----------------------------------------------------------------------------- options


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--fixed-step", "1.5"],
            "--fixed-step must be in (0, 1] (or 0 with line search); got 1.5",
        ),
        (["--fixed-step", "-0.5"], "--fixed-step must be in (0, 1]"),
        (["--epochs", "-1"], "--epochs must be > 0; got -1.0"),
        (["--epochs", "nan"], "--epochs must be > 0; got nan"),
        (["--tol", "nan"], "--tol must be >= 0; got nan"),
        (["--non-uniformity", "2"], "--non-uniformity must be in [0, 1]; got 2.0"),
        (["--lambda", "-0.1"], "Invalid value for '--lambda': expected a finite number > 0"),
        (["--lambda", "nan"], "Invalid value for '--lambda': expected a finite number > 0"),
        (["--checkpoint-every", "inf"], "'--checkpoint-every': expected a finite number > 0"),
        (["--solver", "lbfgs", "--epochs", "0"], "--epochs must be > 0; got 0.0"),
    ],
)
def test_options_are_checked_before_the_data_and_name_the_flag(tmp_path, args, message):
    # the data file does not exist: the option is refused first
    line = usage_error(cli("train", tmp_path / "missing.txt", *args))
    assert message in line
    assert "fixed_step" not in line and "max_epochs" not in line


def test_unwritable_outputs_are_refused_before_training(work):
    blocker = work / "chunk.txt"
    for flag in ("--model", "--trace", "--checkpoint"):
        result = cli("train", work / "missing.txt", flag, blocker / "x")
        assert f"Invalid value for {flag}: cannot create {blocker}/x: {blocker} is a file" in (
            usage_error(result)
        )


def test_model_into_a_missing_directory_is_created(work, tmp_path):
    model = tmp_path / "a" / "b" / "m.npz"
    result = cli("train", work / "items.attr", "--epochs", "1", "-q", "--model", model)
    assert result.exit_code == 0 and model.exists()


def test_stopping_at_epochs_above_tol_is_one_plain_line(work):
    result = cli("train", work / "items.attr", "--epochs", "2", "--tol", "1e-12")
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("crfsdca: stopped at --epochs 2 before reaching --tol 1e-12")
    assert len(result.stderr.splitlines()) == 1
    assert "Warning" not in result.stderr and "solver.solve" not in result.stderr
    quiet = cli("train", work / "items.attr", "--epochs", "2", "--tol", "1e-12", "-q")
    assert quiet.exit_code == 0 and quiet.stderr == ""
    threads = cli("train", work / "items.attr", "--epochs", "2", "--tol", "1e-12", "--workers",
                  "2", "--worker-threads")  # fmt: skip
    assert threads.exit_code == 0, threads.output
    assert re.match(
        r"crfsdca: stopped at --epochs 2 \(\d+ rounds\) before reaching --tol 1e-12 \(duality"
        r" gap [0-9.e+-]+\); train longer or raise --tol$",
        threads.stderr,
    ), threads.stderr


# ----------------------------------------------------------------------------- resume


def test_resume_by_appending_to_the_same_command(work, tmp_path, monkeypatch):
    common = ["train", work / "chunk.txt", "--format", "conll", "--template", "conll",
              "--sampling", "uniform", "--tol", "0", "--seed", "3", "-q"]  # fmt: skip
    straight = cli(*common, "--epochs", "4", "--model", tmp_path / "a.npz")
    assert straight.exit_code == 0, straight.output
    ck = tmp_path / "ck"
    first = cli(*common, "--epochs", "2", "--checkpoint", ck)
    assert first.exit_code == 0, first.output
    resumed = cli(*common, "--epochs", "4", "--checkpoint", ck, "--model", tmp_path / "b.npz",
                  "--resume", ck)  # fmt: skip
    assert resumed.exit_code == 0, resumed.output
    from crfsdca.io.modelfile import load_model

    np.testing.assert_array_equal(
        load_model(tmp_path / "a.npz")[0]["weights"], load_model(tmp_path / "b.npz")[0]["weights"]
    )
    monkeypatch.chdir(work)  # the same file by another name, from another folder
    relative = cli("train", "chunk.txt", *common[2:], "--epochs", "5", "--resume", ck)
    assert relative.exit_code == 0, relative.output
    changed = cli(*common[:-2], "4", "-q", "--resume", ck)  # --seed 4 instead of 3
    line = usage_error(changed)
    assert f"--seed: the run saved in {ck} has 3, this command 4" in line
    changed = cli(*common, "--lambda", "0.5", "--resume", ck)
    assert f"--lambda: the run saved in {ck} has (not set), this command 0.5" in usage_error(
        changed
    )


# ----------------------------------------------------------------------------- start-up


def test_importing_the_cli_does_not_import_numba():
    code = "import sys, crfsdca.cli.main; assert 'numba' not in sys.modules, 'numba imported'"
    subprocess.run([sys.executable, "-c", code], check=True, env=ENV)
    for args in (["--help"], ["tag", "--help"], ["evaluate", "--help"], ["datasets", "list"]):
        code = (
            "import sys\nfrom crfsdca.cli.main import main\n"
            f"try:\n    main({args!r})\nexcept SystemExit as e:\n    assert not e.code\n"
            "assert 'numba' not in sys.modules, 'numba imported'"
        )
        result = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True)
        assert result.returncode == 0, (args, result.stderr)
    result = subprocess.run(
        [sys.executable, "-m", "crfsdca.cli", "--help"], env=ENV, capture_output=True, text=True
    )
    assert result.returncode == 0 and "train" in result.stdout


def test_lazy_train_help_matches_the_command():
    from crfsdca.cli.train import train
    from crfsdca.cli.warmup import warmup

    assert LAZY_COMMANDS["train"][2] == train.help.splitlines()[0]
    assert LAZY_COMMANDS["warmup"][2] == warmup.help.splitlines()[0]
    assert "--sampling" in cli("train", "--help").stdout
    assert "--solver" in cli("warmup", "--help").stdout


def start_reading_stdin(tmp_path, *options):
    """``crfsdca train -`` copying stdin, once its copy has begun (the event the tests wait for).

    stdin stays open, so the command is in its copy loop until the test closes it. The copy is
    made in TMPDIR (crfsdca/features/sources.py: local_path), here ``tmp_path``.
    """
    command = [sys.executable, "-m", "crfsdca.cli", "train", "-", "--format", "conll",
               "--template", "conll", *options]  # fmt: skip
    env = {**ENV, "TMPDIR": str(tmp_path)}
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    proc = subprocess.Popen(command, env=env, **pipes)
    proc.stdin.write(conll_text(4000).encode())  # more than one 64 KiB read of the copy
    proc.stdin.flush()
    deadline = time.monotonic() + 300
    while not any(p.stat().st_size > 0 for p in tmp_path.glob("crfsdca-stdin-*")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.01)
    return proc


def test_ctrl_c_while_reading_is_one_line_and_exit_130(tmp_path):
    with sigint():  # as from an interactive shell, even when pytest runs in the background
        proc = start_reading_stdin(tmp_path)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert err.decode() == "crfsdca: interrupted\n" and out == b""
    assert list(tmp_path.glob("crfsdca-stdin-*")) == []  # the copy of stdin is removed


def test_started_with_sigint_ignored_the_command_keeps_ignoring_it(tmp_path):
    """A background job of a script (SIGINT ignored) is not stopped by the Ctrl-C of the
    foreground (crfsdca/solvers/interrupts.py): it reads all of stdin and trains."""
    with sigint(signal.SIG_IGN):
        proc = start_reading_stdin(tmp_path, "--epochs", "1", "-q", "--json")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    summary = json.loads(out.decode().splitlines()[-1])
    assert summary["epochs"] == 1 and summary["stop_reason"] == "max_epochs"


def test_more_misuses_found_by_walking_the_cli(work, tmp_path):
    line = usage_error(cli("train", work / "items.attr", "--threads", "100000"))
    assert line.startswith("Error: Invalid value for --threads: must lie in [1, ")
    line = usage_error(cli("train", work / "items.attr", "--seed", "-1"))
    assert "Invalid value for '--seed': -1 is not in the range x>=0" in line
    line = usage_error(cli("train", "--resume", work / "items.attr"))
    assert f"--resume: {work}/items.attr is a file; expected the folder given to --checkpoint" in (
        line
    )
    ck = tmp_path / "ck"
    trained = cli("train", work / "items.attr", "--epochs", "1", "-q", "--checkpoint", ck)
    assert trained.exit_code == 0, trained.output
    line = one_error_line(cli("evaluate", ck / "checkpoint.npz", work / "items.attr"))
    assert line == (
        f"crfsdca: error: {ck}/checkpoint.npz: a training checkpoint, not a model; continue it"
        f" with crfsdca train --resume {ck} --model FILE"
    )
    line = usage_error(cli("evaluate", work / "attr.npz", work / "items.attr", "--label", "upos"))
    assert line.endswith(f"--label applies to CoNLL-U files; {work}/items.attr is not one")
    line = usage_error(cli("evaluate", work / "chunk.npz", "conll2000", "--label", "upos"))
    assert line.endswith("--label applies to CoNLL-U files; conll2000 is not one")


DATA_DIR = os.environ.get("CRFSDCA_DATA_DIR")


@pytest.mark.slow
@pytest.mark.skipif(
    not DATA_DIR
    or not Path(DATA_DIR, "conll2000", "train.txt.gz").exists()
    or not Path(DATA_DIR, "ud_english_ewt", "en_ewt-ud-test.conllu.gz").exists(),
    reason="needs CRFSDCA_DATA_DIR with conll2000 and ud_english_ewt",
)
def test_chunk_model_on_the_pos_dataset_is_refused(tmp_path):
    model = tmp_path / "chunk.npz"
    trained = cli("train", "conll2000", "--max-sequences", "30", "--epochs", "1", "-q",
                  "--model", model)  # fmt: skip
    assert trained.exit_code == 0, trained.output
    line = one_error_line(cli("evaluate", model, "ewt-pos"))
    assert line == (
        f"crfsdca: error: ewt-pos: a dataset, but the model {model} was trained on CoNLL columns"
        " (word POS ...) and its template conll reads (w pos), the second from the file's second"
        " column, where this data holds UPOS (column 4); give the model data as it was trained on"
    )
    known = cli("evaluate", model, "conll2000", "--json")  # I-LST is not in 30 sentences
    assert known.exit_code == 0 and "labels the model does not know" in known.stderr


def test_an_unexpected_exception_is_one_line_and_the_traceback_needs_v(capsys):
    from crfsdca.cli.common import errors_to_exit

    for verbose in (0, 1):
        with pytest.raises(SystemExit) as exit_info, errors_to_exit(verbose):
            raise TypeError("unsupported operand")
        assert exit_info.value.code == 1
        err = capsys.readouterr().err
        assert err.endswith(
            "crfsdca: internal error: TypeError: unsupported operand (a bug; please report it"
            " with the traceback that -v prints)\n"
        )
        assert ("Traceback" in err) == bool(verbose)


def test_warnings_are_plain_lines_and_quiet_drops_them(capsys):
    import warnings

    from crfsdca.cli.common import plain_warnings

    with plain_warnings(quiet=False):
        warnings.warn("watch out", RuntimeWarning, stacklevel=1)
    assert capsys.readouterr().err == "crfsdca: warning: watch out\n"
    with plain_warnings(quiet=True):
        warnings.warn("watch out", RuntimeWarning, stacklevel=1)
    assert capsys.readouterr().err == ""


def test_tag_takes_files_only_and_output_dash_is_stdout(work, tmp_path):
    line = one_error_line(cli("tag", work / "chunk.npz", "conll2000"))
    assert line == "crfsdca: error: conll2000: no such file"
    line = one_error_line(cli("tag", work / "chunk.npz", tmp_path / "nope.txt"))
    assert line == f"crfsdca: error: {tmp_path}/nope.txt: no such file"
    to_stdout = cli("tag", work / "attr.npz", work / "items.attr", "--output", "-")
    assert to_stdout.exit_code == 0 and len(to_stdout.stdout.split()) == 3
    assert not Path("-").exists()


def test_a_pipe_as_output_is_written_in_place_never_replaced(work, tmp_path):
    import stat
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    result = cli("tag", work / "attr.npz", work / "items.attr", "--output", fifo)
    reader.join(timeout=60)
    assert result.exit_code == 0, result.output
    assert stat.S_ISFIFO(fifo.stat().st_mode)  # an atomic rename would have replaced it
    assert len(received[0].split()) == 3
    line = usage_error(cli("train", work / "items.attr", "--model", fifo))
    assert f"Invalid value for --model: {fifo} is a device or pipe; expected a file name" in line


def test_a_missing_data_dir_is_a_usage_error(work, tmp_path):
    for args in (["train", "conll2000"], ["evaluate", work / "chunk.npz", "conll2000"],
                 ["datasets", "info", "ocr"]):  # fmt: skip
        line = usage_error(cli(*args, "--data-dir", tmp_path / "nowhere"))
        assert f"Invalid value for '--data-dir': Directory '{tmp_path}/nowhere' does not exist" in (
            line
        )
