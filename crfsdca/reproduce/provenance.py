"""What produced a trace: a digest of the code and the library versions (both part of every
trace's cache key) and the git commit (recorded in the trace, named by the report).

The code digest hashes every Python file of ``crfsdca`` and ``data_loaders`` (the corpora's
readers and encoders), in every subfolder (the kernels' ``numerics``, ``structures`` and
``solvers`` too), except those that only read traces: the reproduction's plan, claims,
figures and report (``READERS``) and the command line. A change to a kernel, a solver, a
structure, the data loading or the runner gives every trace a new key, so a cached trace of
other code is never reused; a change to how the report judges or draws does not.
"""

from __future__ import annotations

import functools
import hashlib
import platform
import subprocess
from pathlib import Path

#: modules of crfsdca/reproduce that read traces and never make them (outside the code digest)
READERS = frozenset(
    {
        "__init__.py",
        "archive.py",
        "claims.py",
        "claims_data.py",
        "claims_figures.py",
        "claims_linesearch.py",
        "claims_text.py",
        "experiments.py",
        "figures.py",
        "notes.py",
        "pipeline.py",
        "plan.py",
        "provenance.py",
        "registry.py",
        "report.py",
        "verdicts.py",
    }
)
#: libraries whose version can change a trace's numbers
LIBRARIES = ("numpy", "scipy", "numba", "pycrfsuite")


def source_roots() -> tuple[Path, ...]:
    """The folders of the packages whose code makes traces: crfsdca and data_loaders."""
    import crfsdca
    import data_loaders

    return Path(crfsdca.__file__).parent, Path(data_loaders.__file__).parent


def code_files(roots: tuple[Path, ...] | None = None) -> list[tuple[str, Path]]:
    """(name relative to the root's parent, path) of every file the code digest covers."""
    out = []
    for root in roots or source_roots():
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root.parent).as_posix()
            parts = rel.split("/")
            if parts[:2] == ["crfsdca", "cli"]:
                continue
            if parts[:2] == ["crfsdca", "reproduce"] and parts[-1] in READERS:
                continue
            out.append((rel, path))
    return out


def code_digest(roots: tuple[Path, ...] | None = None) -> str:
    """16 hex digits of SHA-256 over the names and bytes of ``code_files``."""
    h = hashlib.sha256()
    for rel, path in code_files(roots):
        h.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def environment() -> dict[str, str]:
    """Python's and the libraries' versions (a library that is not installed: "absent")."""
    import importlib.metadata as md

    env = {"python": platform.python_version()}
    for name in LIBRARIES:
        dist = "python-crfsuite" if name == "pycrfsuite" else name
        try:
            env[name] = md.version(dist)
        except md.PackageNotFoundError:
            env[name] = "absent"
    return env


def git_commit(roots: tuple[Path, ...] | None = None) -> str:
    """The checkout's commit (12 hex digits), with "+modified" when a file of the code digest
    differs from it; "unknown" outside a git checkout."""
    roots = roots or source_roots()
    top = roots[0].parent
    try:
        head = _git(top, "rev-parse", "--short=12", "HEAD")
        status = _git(top, "status", "--porcelain", "--untracked-files=all", "--", *map(str, roots))
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    covered = {rel for rel, _ in code_files(roots)}
    changed = {line[3:].strip().split(" -> ")[-1] for line in status.splitlines() if line}
    return head + ("+modified" if changed & covered else "")


def _git(top: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-C", str(top), *args], capture_output=True, text=True, check=True, timeout=30
    )
    return out.stdout.strip()


@functools.lru_cache(maxsize=1)
def cache_key() -> dict[str, object]:
    """The part of every experiment's cache key that names the code: digest and libraries."""
    return {"code": code_digest(), "environment": environment()}


@functools.lru_cache(maxsize=1)
def provenance() -> dict[str, object]:
    """``cache_key`` and the git commit, as recorded in a trace's header."""
    return {**cache_key(), "commit": git_commit()}
