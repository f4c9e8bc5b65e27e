"""Fixtures and helpers shared by the front-door tests (issue 24): tiny data files and a model
trained on each, pipes and device nodes, and model files rewritten by hand."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest
from test_cli_errors import DATA, cli, conll_text

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


def make_work(tmp_path_factory):
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


def add_writer_inputs(work):
    result = cli("export", work / "attr.npz", work / "attr.crfsuite")
    assert result.exit_code == 0, result.output
    result = cli(
        "train", work / "items.attr", "--epochs", "2", "-q", "--trace", work / "trace.jsonl"
    )
    assert result.exit_code == 0, result.output
    return work


def rewrite_model(src: Path, dst: Path, header_change=None, arrays_change=None) -> Path:
    """A copy of the model ``src`` with its header (dict) or arrays changed in place."""
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


def set_key(key, value):
    return lambda h: h.__setitem__(key, value)


def del_key(key):
    return lambda h: h.pop(key)


def set_encoder_key(key, value):
    return lambda h: h["encoder"].__setitem__(key, value)
