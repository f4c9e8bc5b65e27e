"""Tests of crfsdca.solvers.trace: records, JSONL round trip, atomic writes and malformed files."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

import crfsdca.io.modelfile
from crfsdca.errors import DataFormatError
from crfsdca.solvers.trace import (
    FIELDS,
    TRACE_FORMAT,
    TRACE_VERSION,
    Trace,
    TraceRecord,
    read_trace,
)

NAN = float("nan")


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class FakeConfig:
    max_epochs: int = 10
    tol: float = 1e-3
    time_limit: float = math.inf
    sampling: str = "gap"


def make_trace() -> Trace:
    trace = Trace.create(
        solver="sdca",
        config=FakeConfig(),
        regularization=1e-3,
        dataset="conll2000",
        n_sequences=4,
        seed=np.int64(0),
        note="ü",
    )
    trace.append(TraceRecord(solver="sdca", epoch=0.0, oracle_calls=0, updates=0, seconds=0.0))
    trace.append(
        TraceRecord(
            solver="sdca",
            epoch=1.0,
            oracle_calls=4,
            updates=4,
            seconds=0.5,
            primal=1.5,
            dual=1.25,
            gap=0.25,
            gap_estimate=0.3,
            test_error=0.2,
            extra={"newton_iterations": 7, "test_f1": 80.5},
        )
    )
    trace.append(
        TraceRecord(
            solver="sdca",
            epoch=2.5,
            oracle_calls=np.int64(10),
            updates=9,
            seconds=1.0,
            primal=1.4,
            dual=math.inf,
            gap=0.05,
            gap_estimate=np.float64(0.1),
            test_error=0.1,
            extra={"line_search_seconds": np.float32(0.25), "test_f1": None},
        )
    )
    return trace


def same(a: object, b: object) -> bool:
    both_nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return both_nan or (a == b and type(a) is type(b))


def test_record_defaults_are_nan_and_values_are_coerced():
    record = TraceRecord(solver="lbfgs", epoch=1, oracle_calls=3, updates=np.int32(1), seconds=2)
    assert all(math.isnan(getattr(record, f)) for f in ("primal", "dual", "gap", "test_error"))
    assert isinstance(record.epoch, float) and type(record.updates) is int
    assert record.extra == {}
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.epoch = 2.0
    with pytest.raises(TypeError):
        TraceRecord(solver="x", epoch=0, oracle_calls=1, updates=1, seconds=0, primal="1.0")
    with pytest.raises(TypeError, match="oracle_calls must be an integer"):
        TraceRecord(solver="x", epoch=0, oracle_calls=1.5, updates=1, seconds=0)
    with pytest.raises(ValueError, match="updates must be >= 0"):
        TraceRecord(solver="x", epoch=0, oracle_calls=1, updates=-1, seconds=0)
    with pytest.raises(ValueError, match="extra key"):
        TraceRecord(solver="x", epoch=0, oracle_calls=1, updates=1, seconds=0, extra={"gap": 1})
    with pytest.raises(TypeError):
        TraceRecord(solver="x", epoch=0)  # the cost counters are required


def test_roundtrip_with_nans(tmp_path):
    trace = make_trace()
    path = tmp_path / "trace.jsonl"
    trace.to_jsonl(path)
    lines = path.read_text("utf-8").splitlines()
    assert len(lines) == 4
    header = json.loads(lines[0])
    assert header["type"] == "header" and header["format"] == TRACE_FORMAT
    assert header["version"] == TRACE_VERSION
    assert header["config"] == {
        "max_epochs": 10,
        "tol": 1e-3,
        "time_limit": None,
        "sampling": "gap",
    }
    assert header["seed"] == 0 and header["note"] == "ü"
    first = json.loads(lines[1])
    assert first["type"] == "record" and first["primal"] is None and first["extra"] == {}
    assert json.loads(lines[3])["dual"] is None  # inf is written as null
    assert "NaN" not in path.read_text("utf-8") and "Infinity" not in path.read_text("utf-8")

    back = read_trace(path)
    assert back.header == trace.header
    assert len(back) == len(trace) == 3
    for a, b in zip(trace, back, strict=True):
        for name in FIELDS:
            if name == "dual" and math.isinf(a.dual):
                assert math.isnan(b.dual)
            else:
                assert same(a.get(name), b.get(name)), name
        assert a.extra.keys() == b.extra.keys()
        assert all(same(a.extra[k], b.extra[k]) for k in a.extra)
    assert type(back.records[1].extra["newton_iterations"]) is int


def test_as_arrays_best_and_last():
    trace = make_trace()
    arrays = trace.as_arrays()
    assert arrays["oracle_calls"].dtype == np.int64
    np.testing.assert_array_equal(arrays["oracle_calls"], [0, 4, 10])
    np.testing.assert_array_equal(arrays["epoch"], [0.0, 1.0, 2.5])
    assert arrays["solver"].tolist() == ["sdca"] * 3
    assert np.isnan(arrays["primal"][0]) and arrays["primal"][2] == 1.4
    np.testing.assert_array_equal(arrays["newton_iterations"], [NAN, 7.0, NAN])
    np.testing.assert_array_equal(arrays["test_f1"], [NAN, 80.5, NAN])
    assert set(arrays) == set(FIELDS) | {"newton_iterations", "test_f1", "line_search_seconds"}
    assert trace.last is trace.records[-1]
    assert trace.best("primal").epoch == 2.5
    assert trace.best("test_f1", minimize=False).epoch == 1.0
    assert trace.best("dual", minimize=False).epoch == 1.0  # inf is not finite
    assert trace.best("no_such_counter") is None
    empty = Trace.create(
        solver="oeg", config={}, regularization=1.0, dataset="ocr", n_sequences=1, seed=None
    )
    assert empty.last is None and empty.best() is None
    assert all(a.size == 0 for a in empty.as_arrays().values())


def test_trace_checks_header_and_solver():
    with pytest.raises(ValueError, match="missing"):
        Trace({"solver": "sdca"})
    with pytest.raises(ValueError, match="format must be"):
        Trace(
            {
                "format": "other",
                "solver": "s",
                "config": {},
                "regularization": 1,
                "dataset": "d",
                "n_sequences": 1,
                "seed": 0,
            }
        )
    trace = make_trace()
    with pytest.raises(ValueError, match="record of solver 'oeg' in a 'sdca' trace"):
        trace.append(TraceRecord(solver="oeg", epoch=0, oracle_calls=0, updates=0, seconds=0))
    with pytest.raises(TypeError, match="trace header must be JSON-able"):
        Trace.create(
            solver="s", config={"x": object()}, regularization=1, dataset="d", n_sequences=1, seed=0
        )


def test_to_jsonl_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "trace.jsonl"
    make_trace().to_jsonl(path)
    before = path.read_bytes()

    def fail(path, text, encoding="utf-8"):
        def write(f):
            f.write(text.encode(encoding)[:10])
            raise OSError("disk full")

        crfsdca.io.modelfile.atomic_write_bytes(path, write)

    monkeypatch.setattr("crfsdca.solvers.trace.atomic_write_text", fail)
    trace = make_trace()
    trace.append(TraceRecord(solver="sdca", epoch=3, oracle_calls=12, updates=12, seconds=2))
    with pytest.raises(OSError, match="disk full"):
        trace.to_jsonl(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["trace.jsonl"]


def write_lines(tmp_path, lines):
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(line + "\n" for line in lines), "utf-8")
    return path


def good_lines():
    trace = make_trace()
    header = json.dumps({"type": "header", **trace.header})
    return [header] + [json.dumps(r.to_json()) for r in trace]


@pytest.mark.parametrize(
    ("edit", "line", "message"),
    [
        (lambda ls: ls[:2] + ["{broken"] + ls[3:], 3, "invalid JSON"),
        (lambda ls: ls[:3] + ["[1, 2]"], 4, "expected a JSON object"),
        (lambda ls: [ls[0], ls[1].replace('"epoch": 0.0, ', "")], 2, "missing: \\['epoch'\\]"),
        (lambda ls: [ls[0], ls[2].replace('"updates": 4', '"updates": "4"')], 2, "updates"),
        (lambda ls: [ls[0], ls[2].replace('"record"', '"header"')], 2, '"type": "record"'),
        (lambda ls: [ls[0], ls[1].replace('"extra": {}', '"extra": {}, "x": 1')], 2, "unknown"),
        (lambda ls: [ls[0], ls[1].replace('"sdca"', '"oeg"')], 2, "record of solver 'oeg'"),
        (lambda ls: ls[1:], 1, "expected a header"),
        (lambda ls: [ls[0].replace(f'"version": {TRACE_VERSION}', '"version": 9')], 1, "newer"),
        (lambda ls: [ls[0].replace('"seed": 0, ', "")], 1, "missing \\['seed'\\]"),
    ],
)
def test_malformed_file_names_the_line(tmp_path, edit, line, message):
    path = write_lines(tmp_path, edit(good_lines()))
    with pytest.raises(DataFormatError, match=message) as info:
        read_trace(path)
    assert info.value.line == line
    assert str(info.value).startswith(f"{path}:{line}: ")


def test_empty_and_blank_lines(tmp_path):
    with pytest.raises(DataFormatError, match="empty file"):
        read_trace(write_lines(tmp_path, []))
    lines = good_lines()
    trace = read_trace(write_lines(tmp_path, [lines[0], "", lines[1], "  ", lines[2]]))
    assert len(trace) == 2


def test_non_utf8_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(good_lines()[0].encode() + b"\n\xff\xfe\n")
    with pytest.raises(DataFormatError, match="not UTF-8") as info:
        read_trace(path)
    assert info.value.line == 2
