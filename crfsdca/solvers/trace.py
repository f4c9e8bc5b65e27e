"""The trace format shared by all solvers: one header, then one record per evaluation.

A trace file is JSON Lines (UTF-8). The first line is the header object::

    {"type": "header", "format": "crfsdca-trace", "version": 1, "solver": "sdca",
     "config": {...}, "regularization": 0.001, "dataset": "conll2000", "n_sequences": 8936,
     "seed": 0, ...}

and every further line one record::

    {"type": "record", "solver": "sdca", "epoch": 2.0, "oracle_calls": 17872, "updates": 17872,
     "seconds": 3.1, "primal": 1.93, "dual": 1.91, "gap": 0.02, "gap_estimate": 0.03,
     "test_error": 0.061, "extra": {"test_f1": 93.2}}

``epoch`` is ``oracle_calls / n_sequences``; ``oracle_calls`` counts every marginalisation
(line-search calls included) and ``updates`` every change of the weights, the paper's two cost
measures. A value that is not known (the dual of L-BFGS, the test error without a test set) is
``nan`` in memory and ``null`` in the file, never missing. Infinities are written as ``null``
too and read back as ``nan``. In the header, non-finite numbers are written as ``null`` and read
back as ``None``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from crfsdca.errors import DataFormatError
from crfsdca.io.modelfile import atomic_write_text

__all__ = ["FIELDS", "TRACE_FORMAT", "TRACE_VERSION", "Trace", "TraceRecord", "read_trace"]

TRACE_FORMAT = "crfsdca-trace"
TRACE_VERSION = 1
_INT_FIELDS = ("oracle_calls", "updates")
_FLOAT_FIELDS = ("epoch", "seconds", "primal", "dual", "gap", "gap_estimate", "test_error")
FIELDS = (
    "solver",
    "epoch",
    "oracle_calls",
    "updates",
    "seconds",
    "primal",
    "dual",
    "gap",
    "gap_estimate",
    "test_error",
)
_HEADER_KEYS = ("solver", "config", "regularization", "dataset", "n_sequences", "seed")
_NAN = float("nan")


def _as_float(name: str, value: Any) -> float:
    if value is None:
        return _NAN
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number or None; got {value!r}")
    return float(value)


def _as_count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer; got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0; got {value}")
    return int(value)


def _as_extra(extra: Mapping[str, Any]) -> dict[str, int | float]:
    out: dict[str, int | float] = {}
    for key, value in extra.items():
        if not isinstance(key, str) or key in FIELDS or key in ("type", "extra"):
            raise ValueError(f"extra key must be a string other than a record field; got {key!r}")
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            out[key] = int(value)
        else:
            out[key] = _as_float(f"extra[{key!r}]", value)
    return out


@dataclass(frozen=True, kw_only=True, slots=True)
class TraceRecord:
    """The state of a run at one evaluation point (see the module docstring).

    ``primal``, ``dual``, ``gap``, ``gap_estimate`` and ``test_error`` default to nan (unknown);
    ``extra`` holds solver-specific numbers (``newton_iterations``, ``line_search_seconds``,
    ``test_f1``, ...), ints or floats, None becoming nan.
    """

    solver: str
    epoch: float
    oracle_calls: int
    updates: int
    seconds: float
    primal: float = _NAN
    dual: float = _NAN
    gap: float = _NAN
    gap_estimate: float = _NAN
    test_error: float = _NAN
    extra: dict[str, int | float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Check and coerce the fields (numpy scalars become Python numbers)."""
        if not isinstance(self.solver, str) or not self.solver:
            raise ValueError(f"solver must be a non-empty string; got {self.solver!r}")
        for name in _FLOAT_FIELDS:
            object.__setattr__(self, name, _as_float(name, getattr(self, name)))
        for name in _INT_FIELDS:
            object.__setattr__(self, name, _as_count(name, getattr(self, name)))
        object.__setattr__(self, "extra", _as_extra(self.extra))

    def get(self, key: str) -> Any:
        """Return a field or an ``extra`` entry by name (nan for an absent extra entry)."""
        if key in FIELDS:
            return getattr(self, key)
        return self.extra.get(key, _NAN)

    def to_json(self) -> dict[str, Any]:
        """Return the JSON object of this record, non-finite floats as None."""
        out: dict[str, Any] = {"type": "record"}
        out.update((name, _finite_or_none(getattr(self, name))) for name in FIELDS)
        out["extra"] = {k: _finite_or_none(v) for k, v in self.extra.items()}
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> TraceRecord:
        """Inverse of :meth:`to_json`; None becomes nan. Raises ValueError/TypeError."""
        if obj.get("type") != "record":
            raise ValueError(f'expected an object with "type": "record"; got {obj.get("type")!r}')
        missing = [name for name in FIELDS if name not in obj]
        unknown = sorted(set(obj) - set(FIELDS) - {"type", "extra"})
        if missing or unknown:
            raise ValueError(f"record fields missing: {missing}; unknown: {unknown}")
        extra = obj.get("extra", {})
        if not isinstance(extra, Mapping):
            raise TypeError(f"extra must be an object; got {extra!r}")
        return cls(**{name: obj[name] for name in FIELDS}, extra=dict(extra))


def _finite_or_none(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _json_safe(obj: Any) -> Any:
    """Header values for strict JSON: non-finite -> None, numpy -> Python, tuple -> list."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = dataclasses.asdict(obj)
    if isinstance(obj, Mapping):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _json_safe(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    return _finite_or_none(obj)


@dataclass(slots=True)
class Trace:
    """A header dict and the records of one run.

    The header holds ``format`` and ``version`` (filled in), ``solver``, ``config`` (a dict),
    ``regularization``, ``dataset``, ``n_sequences`` and ``seed``, plus any other JSON-able key.
    Build one with :meth:`create`.
    """

    header: dict[str, Any]
    records: list[TraceRecord] = field(default_factory=list)

    def __post_init__(self) -> None:
        """Fill in format and version, check the header, and check the records."""
        header = dict(self.header)
        if header.setdefault("format", TRACE_FORMAT) != TRACE_FORMAT:
            raise ValueError(f"header format must be {TRACE_FORMAT!r}; got {header['format']!r}")
        header.setdefault("version", TRACE_VERSION)
        missing = [k for k in _HEADER_KEYS if k not in header]
        if missing:
            raise ValueError(f"trace header is missing {missing}")
        self.header = _json_safe(header)
        try:
            json.dumps(self.header, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"trace header must be JSON-able: {exc}") from exc
        records, self.records = list(self.records), []
        for record in records:
            self.append(record)

    @classmethod
    def create(
        cls,
        *,
        solver: str,
        config: Any,
        regularization: float,
        dataset: str,
        n_sequences: int,
        seed: int | None,
        **more: Any,
    ) -> Trace:
        """Make an empty trace; ``config`` is a dict or a config dataclass (stored as a dict)."""
        header = {"solver": solver, "config": config, "regularization": regularization}
        return cls({**header, "dataset": dataset, "n_sequences": n_sequences, "seed": seed, **more})

    @property
    def solver(self) -> str:
        """The solver name of the header."""
        return self.header["solver"]

    def append(self, record: TraceRecord) -> None:
        """Add a record of this trace's solver."""
        if not isinstance(record, TraceRecord):
            raise TypeError(f"expected a TraceRecord; got {type(record).__name__}")
        if record.solver != self.solver:
            raise ValueError(f"record of solver {record.solver!r} in a {self.solver!r} trace")
        self.records.append(record)

    def __len__(self) -> int:
        """Return the number of records."""
        return len(self.records)

    def __iter__(self) -> Iterator[TraceRecord]:
        """Iterate over the records."""
        return iter(self.records)

    @property
    def last(self) -> TraceRecord | None:
        """The latest record, or None for an empty trace."""
        return self.records[-1] if self.records else None

    def best(self, key: str = "primal", *, minimize: bool = True) -> TraceRecord | None:
        """Return the record with the smallest (or largest) finite ``key``; None if none.

        ``key`` is a record field or an ``extra`` entry (e.g. ``"test_f1"``, ``minimize=False``).
        Ties go to the earliest record.
        """
        best, best_value = None, math.inf
        sign = 1.0 if minimize else -1.0
        for record in self.records:
            value = record.get(key)
            finite = isinstance(value, numbers.Real) and math.isfinite(value)
            if finite and sign * value < best_value:
                best, best_value = record, sign * value
        return best

    def as_arrays(self) -> dict[str, NDArray[Any]]:
        """One array per field: ``solver`` str, counts int64, the rest float64.

        Every ``extra`` key that occurs in some record becomes a float64 array, nan where absent.
        """
        arrays: dict[str, NDArray[Any]] = {
            "solver": np.array([r.solver for r in self.records], dtype=str)
        }
        for name in _INT_FIELDS:
            arrays[name] = np.array([getattr(r, name) for r in self.records], dtype=np.int64)
        for name in _FLOAT_FIELDS:
            arrays[name] = np.array([getattr(r, name) for r in self.records], dtype=np.float64)
        keys = dict.fromkeys(k for r in self.records for k in r.extra)
        for key in keys:
            arrays[key] = np.array([r.extra.get(key, _NAN) for r in self.records], np.float64)
        return arrays

    def to_jsonl(self, path: str | os.PathLike) -> None:
        """Write the trace as JSON Lines, atomically (a failed write keeps the old file)."""
        lines = [{"type": "header", **self.header}] + [r.to_json() for r in self.records]
        text = "".join(json.dumps(obj, allow_nan=False) + "\n" for obj in lines)
        atomic_write_text(path, text)


def _parse_line(path: str | os.PathLike, number: int, line: str) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DataFormatError(
            path, number, f"invalid JSON ({exc.msg} at column {exc.colno})"
        ) from None
    if not isinstance(obj, dict):
        raise DataFormatError(path, number, f"expected a JSON object; got {type(obj).__name__}")
    return obj


def _decode(path: str | os.PathLike, number: int, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataFormatError(path, number, f"not UTF-8 text ({exc.reason})") from None


def _read_header(path: str | os.PathLike, number: int, obj: dict[str, Any]) -> dict[str, Any]:
    if obj.get("type") != "header" or obj.get("format") != TRACE_FORMAT:
        raise DataFormatError(
            path, number, f'expected a header with "format": "{TRACE_FORMAT}"; not a crfsdca trace'
        )
    version = obj.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise DataFormatError(path, number, f"version must be an integer; got {version!r}")
    if version > TRACE_VERSION:
        raise DataFormatError(
            path,
            number,
            f"trace version {version} is newer than this crfsdca "
            f"({TRACE_VERSION}); upgrade crfsdca",
        )
    obj.pop("type")
    return obj


def read_trace(path: str | os.PathLike) -> Trace:
    """Read a JSON Lines trace written by :meth:`Trace.to_jsonl`.

    Blank lines are skipped; ``null`` record values become nan.

    Raises
    ------
    DataFormatError
        With the 1-based line number of the first malformed line.
    """
    with open(path, "rb") as f:
        numbered = [(i, _decode(path, i, raw)) for i, raw in enumerate(f, start=1) if raw.strip()]
    if not numbered:
        raise DataFormatError(path, None, "empty file; expected a crfsdca trace header line")
    number, first = numbered[0]
    header = _read_header(path, number, _parse_line(path, number, first))
    try:
        trace = Trace(header)
    except (TypeError, ValueError) as exc:
        raise DataFormatError(path, number, str(exc)) from exc
    for number, line in numbered[1:]:
        try:
            trace.append(TraceRecord.from_json(_parse_line(path, number, line)))
        except DataFormatError:
            raise
        except (TypeError, ValueError) as exc:
            raise DataFormatError(path, number, str(exc)) from exc
    return trace
