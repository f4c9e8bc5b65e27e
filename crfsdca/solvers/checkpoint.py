"""Checkpoints of a training run: solver state, trace so far and the run's arguments.

One file ``DIR/checkpoint.npz`` (arrays + JSON header, no pickle) written atomically: a process
killed while writing leaves the previous checkpoint intact and loadable. Runs write one every
few minutes of wall time by default (``DEFAULT_SECONDS``), from a copy in a background thread
(:class:`CheckpointWriter`), so a checkpoint costs a copy of the state on the critical path.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from crfsdca.errors import ModelFormatError
from crfsdca.io.modelfile import load_model, save_model
from crfsdca.solvers.trace import Trace, TraceRecord

FILE = "checkpoint.npz"


def checkpoint_path(directory: str | os.PathLike) -> Path:
    return Path(directory) / FILE


def save_checkpoint(
    directory: str | os.PathLike, state: Any, trace: Trace, run: dict[str, Any]
) -> Path:
    """Write ``state`` (with ``to_checkpoint()``), the trace and the run arguments."""
    path = checkpoint_path(directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays, state_header = state.to_checkpoint()
    save_model(path, arrays, _header(run, state_header, trace))
    return path


def load_checkpoint(directory: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """(arrays, header) of the checkpoint in ``directory``; ModelFormatError if unusable."""
    path = checkpoint_path(directory)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no checkpoint to resume from")
    arrays, header = load_model(path)
    if header.get("kind") != "crfsdca-checkpoint":
        raise ModelFormatError(f"{path}: not a crfsdca checkpoint (a model file?)")
    return arrays, header


def restore_trace(trace: Trace, header: dict[str, Any]) -> None:
    """Put the records saved in a checkpoint back into ``trace``."""
    trace.records[:] = [TraceRecord.from_json(r) for r in header["records"]]


#: default wall-time cadence of checkpoints (seconds), as training frameworks do
DEFAULT_SECONDS = 300.0


class CheckpointWriter:
    """Checkpoints of one run written off the critical path.

    ``writer(state, trace)`` copies the state's arrays (the solver goes on changing the live
    ones) and the trace, and writes them atomically in a background thread; a new call first
    waits for the write before it. ``writer.now(state, trace)`` writes in the calling thread (on
    Ctrl-C: nothing runs meanwhile). ``wait()`` joins the pending write and raises its error,
    if any. The thread is not a daemon: the interpreter finishes a write before it exits.
    """

    def __init__(self, directory: str | os.PathLike, run: dict[str, Any]) -> None:
        self.directory, self.run = directory, run
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def __call__(self, state: Any, trace: Trace) -> None:
        self.wait()
        arrays, state_header = state.to_checkpoint()
        arrays = {k: np.array(v, copy=True) for k, v in arrays.items()}
        header = _header(self.run, state_header, trace)
        self._thread = threading.Thread(
            target=self._write, args=(arrays, header), name="crfsdca-checkpoint"
        )
        self._thread.start()

    def now(self, state: Any, trace: Trace) -> Path:
        self.wait()
        return save_checkpoint(self.directory, state, trace, self.run)

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _write(self, arrays: dict[str, np.ndarray], header: dict[str, Any]) -> None:
        try:
            path = checkpoint_path(self.directory)
            path.parent.mkdir(parents=True, exist_ok=True)
            save_model(path, arrays, header)
        except BaseException as err:  # noqa: BLE001 - re-raised by wait()
            self._error = err


def _header(run: dict[str, Any], state_header: dict[str, Any], trace: Trace) -> dict[str, Any]:
    return {
        "kind": "crfsdca-checkpoint",
        "run": run,
        "state": state_header,
        "trace_header": trace.header,
        "records": [r.to_json() for r in trace.records],
    }
