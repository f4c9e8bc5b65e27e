"""The front door (issue 24), one clear line: corrupt model files blamed on the file in words,
CoNLL-U trees with file:line, the scheduler, downloads, huge and non-finite values, options that
do not fit the data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _front_door import (
    CONLLU_WORDS,
    conllu_text,
    del_key,
    make_work,
    rewrite_model,
    set_encoder_key,
    set_key,
)
from test_cli_errors import cli, one_error_line, usage_error


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return make_work(tmp_path_factory)


# ------------------------------------------------------------------ 3. corrupt model files


HEADER = "corrupt model header: "
CORRUPT_HEADERS = {
    "n_labels too big": (
        set_key("n_labels", 99),
        "the label list has 3 names for 99 labels (n_labels)",
    ),
    "n_labels a string": (
        set_key("n_labels", "3"),
        "the number of labels (n_labels) must be an integer >= 1; got '3'",
    ),
    "n_labels missing": (del_key("n_labels"), "the number of labels (n_labels) is missing"),
    "n_attributes negative": (
        set_key("n_attributes", -1),
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
    "labels missing": (del_key("labels"), "the label list (labels) is missing"),
    "labels not names": (
        set_key("labels", [1, 2, 3]),
        "the label list (labels) must be a list of names; got [1, 2, 3]",
    ),
    "solver unknown": (
        set_key("solver", "x"),
        "the solver name (solver) is 'x', not one of crfsdca's",
    ),
    "regularization text": (
        set_key("regularization", "a"),
        "the regularization must be a number > 0; got 'a'",
    ),
    "regularization negative": (
        set_key("regularization", -1.0),
        "the regularization must be a number > 0; got -1.0",
    ),
    "bias rows": (
        set_key("n_bias_rows", 2),
        "the number of bias rows (n_bias_rows) must be 0 or 3; got 2",
    ),
    "bias rows bool": (
        set_key("n_bias_rows", True),
        "the number of bias rows (n_bias_rows) must be 0 or 3; got True",
    ),
    "solver option unknown": (
        set_key("solver_options", {"foo": 1}),
        "the solver options name 'foo', which sdca does not have",
    ),
    "solver option value": (
        set_key("solver_options", {"tol": -1}),
        "the solver options: tol must be >= 0; got -1",
    ),
    "solver options a list": (
        set_key("solver_options", []),
        "the solver options (solver_options) must be a JSON object",
    ),
    "graph": (
        set_key("graph", "star"),
        "the graph kind (graph) must be one of chain, tree, junction; got 'star'",
    ),
    "edge types": (
        set_key("n_edge_types", 0),
        "the number of edge types (n_edge_types) must be an integer >= 1; got 0",
    ),
    "order": (set_key("order", 3), "a chain model has order 1; got order 3"),
    "meta": (set_key("meta", []), "the training data's description (meta) must be a JSON object"),
    "encoder vocabulary": (
        set_encoder_key("vocabulary", 5),
        "the attribute encoder (encoder) is damaged or was not written by crfsdca",
    ),
    "encoder kind": (
        set_encoder_key("kind", "x"),
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
    from crfsdca.io.readers import read_conllu

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

    from crfsdca.cli.distributed import check_scheduler

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
