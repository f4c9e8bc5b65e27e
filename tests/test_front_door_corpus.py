"""The front door (issue 24), wider: generated hostile cases checked against the README's promise
(data errors exit 1 with one line naming the file and line, usage errors exit 2 naming the flag,
no traceback, nothing but regular files replaced). Slow: hundreds of command runs, each its own
process; the default run keeps the named cases of ``test_front_door*.py``."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from _front_door import (
    add_writer_inputs,
    char_device_in,
    make_work,
    rewrite_model,
    set_key,
)
from test_cli_errors import cli, one_error_line, usage_error

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return make_work(tmp_path_factory)


@pytest.fixture(scope="module")
def writers_work(work):
    return add_writer_inputs(work)


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
        path = rewrite_model(work / model, tmp_path / "odd.npz", set_key(key, value))
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
