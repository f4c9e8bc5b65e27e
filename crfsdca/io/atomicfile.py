"""Atomic writes: the one way crfsdca writes a file (models, traces, checkpoints, figures, ...).

A write goes to a temporary file ``.<name>.<pid>-<host>.<random>.tmp`` in the target's folder,
is flushed and fsync'ed, and is moved over the target with :func:`os.replace`: a crash or an
error leaves either the previous file or the new one, never half of one.

Rules every writer inherits from here:

- Only regular files are replaced. A target that exists and is anything else (a named pipe, a
  character or block device such as ``/dev/null``, a socket, a folder) is refused with an
  :class:`~crfsdca.errors.OutputPathError` naming the path as the user gave it; nothing is
  written. A symbolic link is written through: the file it points to is replaced, the link stays.
- Errors name the user's path, never the temporary file (``cannot write /proc/x.npz: ...``).
- Temporaries of dead writers are removed. A process killed while writing (``kill -9``, a power
  cut) cannot remove its temporary file, so the next write to the same target removes every
  temporary of that target whose process id, on this host, no longer runs. A temporary of a live
  process (or of a process on another host sharing the folder) is left alone. Temporaries in the
  older ``.<name>.<random>.tmp`` form, which carry no process id, are removed once older than
  :data:`LEGACY_TMP_AGE` seconds.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import secrets
import socket
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Literal

from crfsdca.errors import OutputPathError

__all__ = [
    "LEGACY_TMP_AGE",
    "atomic_open",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_writable",
    "remove_stale_temporaries",
]

#: temporaries without a process id in their name are removed after this many seconds
LEGACY_TMP_AGE = 24 * 3600.0
_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:6]
_KINDS = (
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)


def _kind(mode: int) -> str:
    return next((text for test, text in _KINDS if test(mode)), "not a regular file")


def _target(path: str | os.PathLike) -> Path:
    """The file a write to ``path`` replaces (symbolic links followed)."""
    return Path(os.path.realpath(os.fspath(path)))


def _refuse_special(user: str | os.PathLike, target: Path) -> None:
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return
    except OSError as err:
        raise _unwritable(user, err) from None
    if not stat.S_ISREG(mode):
        raise OutputPathError(
            f"{os.fspath(user)}: is {_kind(mode)}, not a regular file; crfsdca writes only"
            " regular files: give a file name"
        )


def _unwritable(user: str | os.PathLike, err: OSError) -> OutputPathError:
    """``err`` (about a temporary file or a folder) told about the user's path."""
    reason = (err.strerror or str(err)).lower()
    folder = os.path.dirname(os.path.abspath(os.fspath(user)))
    if err.errno == errno.ENOENT and os.path.isdir(folder):
        reason = f"the folder {folder} does not accept new files"
    elif err.errno == errno.ENOENT:
        reason = f"the folder {folder} does not exist"
    return OutputPathError(f"cannot write {os.fspath(user)}: {reason}")


def _tmp_name(target: Path) -> Path:
    return target.with_name(f".{target.name}.{os.getpid()}-{_HOST}.{secrets.token_hex(6)}.tmp")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it runs, under another user
        return True
    return True


def remove_stale_temporaries(path: str | os.PathLike) -> list[Path]:
    """Remove the temporaries that dead writers left next to ``path``; return them.

    See the module's notes for which ones count as stale. Never raises on a folder that cannot be
    listed or a file that vanished meanwhile.
    """
    target = _target(path)
    name = re.escape(target.name)
    with_pid = re.compile(rf"^\.{name}\.(\d+)-([0-9a-f]{{6}})\.[0-9a-f]+\.tmp$")
    legacy = re.compile(rf"^\.{name}\.[0-9a-f]{{12}}\.tmp$")
    removed = []
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        if not entry.name.startswith(f".{target.name}.") or not entry.name.endswith(".tmp"):
            continue
        match = with_pid.match(entry.name)
        try:
            if match:
                pid = int(match[1])
                stale = match[2] == _HOST and pid != os.getpid() and not _alive(pid)
            else:
                stale = bool(legacy.match(entry.name)) and (
                    now - entry.stat(follow_symlinks=False).st_mtime > LEGACY_TMP_AGE
                )
            if stale and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            continue
    return removed


@contextlib.contextmanager
def atomic_open(
    path: str | os.PathLike, mode: Literal["w", "wb"] = "w", encoding: str = "utf-8"
) -> Iterator[IO[Any]]:
    """Open a temporary file that replaces ``path`` when the ``with`` block ends without error.

    Parameters
    ----------
    path : str or PathLike
        Destination; its folder must exist. An existing target must be a regular file.
    mode : {"w", "wb"}
        Text (``newline=""``: what is written is what lands) or binary.
    encoding : str
        Text encoding for mode ``"w"``.

    Raises
    ------
    OutputPathError
        The target is not a regular file, or its folder does not take the file; the message
        names ``path`` as given.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb'; got {mode!r}")
    target = _target(path)
    _refuse_special(path, target)
    remove_stale_temporaries(target)
    tmp = _tmp_name(target)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    except OSError as err:
        raise _unwritable(path, err) from None
    try:
        kwargs = {"encoding": encoding, "newline": ""} if mode == "w" else {}
        with os.fdopen(fd, mode, **kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        _refuse_special(path, target)  # became a pipe or a folder meanwhile
        os.replace(tmp, target)
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if _about_tmp(err, tmp):
            raise _unwritable(path, err) from None
        raise


def _about_tmp(err: BaseException, tmp: Path) -> bool:
    """True for an OSError of the write itself: about the temporary file, or a full disk."""
    if not isinstance(err, OSError) or isinstance(err, OutputPathError):
        return False
    named = str(tmp) in (err.filename, err.filename2)
    return named or err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_open`)."""
    with atomic_open(path, "wb") as handle:
        handle.write(data)


def atomic_write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_open`)."""
    atomic_write_bytes(path, text.encode(encoding))


def check_writable(
    path: str | os.PathLike, *, folder: bool = False, make_folders: bool = True
) -> None:
    """OutputPathError naming ``path`` as given unless a write to it would succeed: the one
    check before long work (the command line's output flags, ``CRF(model_filename=...)``,
    :meth:`crfsdca.CRF.export_crfsuite`), so that a run does not end on an unwritable path.

    The target is a regular file or absent (a folder, with ``folder``): a device, a pipe or a
    folder is never replaced by a regular file. The nearest existing folder must take a new
    entry, tried for real (creating and removing a probe) rather than asked of
    :func:`os.access`, which says yes to root everywhere (``/proc``). Missing folders are
    not created here; with ``make_folders`` false they are refused (the writer will not make
    them).
    """
    if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"expected a path (str); got {type(path).__name__} {path!r}")
    user = os.fspath(path)
    target = _target(path)
    try:
        mode: int | None = os.stat(target).st_mode
    except (FileNotFoundError, NotADirectoryError):  # absent, or a file in its path (below)
        mode = None
    except OSError as err:
        raise _unwritable(user, err) from None
    expected = "a directory" if folder else "a file name"
    if mode is not None and not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
        raise OutputPathError(f"{user} is a device or pipe; expected {expected}")
    if mode is not None and stat.S_ISDIR(mode) != folder:
        kind = "a directory" if stat.S_ISDIR(mode) else "a file"
        raise OutputPathError(f"{user} is {kind}; expected {expected}")
    place = Path(os.path.abspath(user)) if folder else Path(os.path.abspath(user)).parent
    existing = place
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise OutputPathError(f"cannot create {user}: {existing} is a file, not a directory")
    if existing != place and not make_folders:
        raise OutputPathError(f"cannot write {user}: the folder {place} does not exist")
    probe = _tmp_name(target) if existing == place and not folder else None
    try:
        if probe is not None:
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            os.unlink(probe)
        else:
            os.rmdir(_mkdtemp(Path(os.path.realpath(existing))))
    except OSError as err:
        if existing != place and err.errno == errno.ENOENT:
            err = OSError(errno.EACCES, f"cannot create folders in {existing}")
        raise _unwritable(user, err) from None


def _mkdtemp(parent: Path) -> Path:
    probe = parent / f".crfsdca-probe.{os.getpid()}-{_HOST}.{secrets.token_hex(6)}"
    os.mkdir(probe)
    return probe
