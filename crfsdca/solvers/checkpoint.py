"""Checkpoints of a training run: solver state, trace so far and the run's arguments.

One file ``DIR/checkpoint.npz`` (arrays + JSON header, no pickle) written atomically: a process
killed while writing leaves the previous checkpoint intact and loadable.
"""

from __future__ import annotations

import os
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
    header = {
        "kind": "crfsdca-checkpoint",
        "run": run,
        "state": state_header,
        "trace_header": trace.header,
        "records": [r.to_json() for r in trace.records],
    }
    save_model(path, arrays, header)
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
