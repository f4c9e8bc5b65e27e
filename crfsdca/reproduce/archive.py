"""The traces behind a report, packed so that the report can be rebuilt without running anything.

``OUT/traces.tar.xz`` holds ``manifest.json`` (the budgets, the invocations that computed the
traces and their machine) and ``traces/<digest>.jsonl`` for every trace the report read, with
fixed file metadata, so the same traces pack to the same bytes. ``crfsdca reproduce
--from-archive FILE`` unpacks it into ``OUT/archive`` and rebuilds the figures, the CSVs and
REPORT.md from it: no solver runs and no corpus is read, whatever code made the traces (the
report names each trace's commit). ``OUT/traces.csv`` lists every trace the report read.
"""

from __future__ import annotations

import csv
import io
import json
import lzma
import tarfile
from pathlib import Path
from typing import Any

from crfsdca.io.modelfile import atomic_write_bytes, atomic_write_text
from crfsdca.reproduce.experiments import DATASETS, Budget

ARCHIVE = "traces.tar.xz"
MANIFEST = "manifest.json"
INDEX = "traces.csv"
UNPACKED = "archive"


def write_archive(out: Path, paths: list[Path], manifest: dict[str, Any]) -> Path:
    """Pack the trace files at ``paths`` (as they are) and ``manifest`` into
    ``OUT/traces.tar.xz``; returns its path."""
    files = {MANIFEST: json.dumps(manifest, indent=1, sort_keys=True).encode()}
    for path in paths:
        files[f"traces/{Path(path).name}"] = Path(path).read_bytes()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(files[name]), 0, 0o644
            tar.addfile(info, io.BytesIO(files[name]))
    packed = lzma.compress(raw.getvalue(), preset=9 | lzma.PRESET_EXTREME)
    path = Path(out) / ARCHIVE
    atomic_write_bytes(path, lambda f: f.write(packed))
    return path


def read_archive(path: Path, out: Path) -> dict[str, Any]:
    """Unpack the archive at ``path`` into ``OUT/archive`` (its traces/ and manifest only);
    returns the manifest. Raises ValueError naming the path when it is not such an archive."""
    folder = Path(out) / UNPACKED
    try:
        with tarfile.open(path, mode="r:xz") as tar:
            members = [m for m in tar.getmembers() if _wanted(m)]
            if not any(m.name == MANIFEST for m in members):
                raise ValueError(f"{path}: not a reproduction archive (no {MANIFEST})")
            tar.extractall(folder, members=members, filter="data")
    except (tarfile.TarError, lzma.LZMAError, EOFError) as err:
        raise ValueError(f"{path}: not a reproduction archive ({err})") from err
    return json.loads((folder / MANIFEST).read_text())


def _wanted(member: tarfile.TarInfo) -> bool:
    if not member.isfile():
        return False
    name = member.name
    return name == MANIFEST or (
        name.startswith("traces/") and name.endswith(".jsonl") and name.count("/") == 1
    )


def budgets_of(manifest: dict[str, Any]) -> dict[str, Budget]:
    """The manifest's budgets, in the order of DATASETS (the order of a run's report)."""
    budgets = manifest["budgets"]
    return {d: Budget(**budgets[d]) for d in DATASETS if d in budgets}


def write_index(out: Path, experiments: dict[str, str], traces: list) -> Path:
    """``OUT/traces.csv``: one row per trace read (experiment, digest, commit, code digest, wall
    and CPU seconds of the whole run, compile seconds during the timed run, warm-up seconds,
    and the solver's wall and CPU seconds at its last record)."""
    rows = [
        ("experiment", "digest", "commit", "code", "run_seconds", "run_cpu_seconds")
        + ("compile_seconds", "warmup", "solver_seconds", "solver_cpu_seconds")
    ]
    for trace in sorted(traces, key=lambda t: experiments.get(t.header["digest"], "")):
        h = trace.header
        prov = h.get("provenance", {})
        last = trace.records[-1] if trace.records else None
        cpu = last.extra.get("cpu_seconds", "") if last is not None else ""
        rows.append(
            (
                experiments.get(h["digest"], h["digest"]),
                h["digest"],
                prov.get("commit", "unknown"),
                prov.get("code", "unknown"),
                h.get("run_seconds", ""),
                h.get("run_cpu_seconds", ""),
                h.get("compile_seconds", ""),
                h.get("warmup_seconds", ""),
                "" if last is None else round(last.seconds, 3),
                cpu if cpu == "" else round(cpu, 3),
            )
        )
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    path = Path(out) / INDEX
    atomic_write_text(path, buf.getvalue())
    return path
