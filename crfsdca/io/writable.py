"""Check, before any work, that a file can be written where the user asked.

The estimator's ``model_filename`` and :meth:`crfsdca.CRF.export_crfsuite` call
:func:`check_writable` first, so that a long fit does not end on an unwritable path, and a
device or pipe (``/dev/null``, a FIFO) is never replaced by a regular file. Errors name the
user's path, never a temporary file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["check_writable"]


def check_writable(path: str | os.PathLike, what: str) -> None:
    """ValueError naming ``path`` (and ``what`` it is for) unless a file can be written there.

    The folder of ``path`` must exist and be writable; ``path`` must not be a folder, a device
    or a pipe (an atomic write would replace it by a regular file).
    """
    if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{what} must be a path (str); got {type(path).__name__} {path!r}")
    target = Path(path)
    if target.is_dir():
        raise ValueError(f"{what} {os.fspath(path)!r} is a directory; expected a file name")
    if target.exists() and not target.is_file():
        raise ValueError(
            f"{what} {os.fspath(path)!r} is a device or pipe; expected a regular file name"
        )
    folder = Path(os.path.abspath(target)).parent
    if not folder.is_dir():
        raise ValueError(f"{what} {os.fspath(path)!r}: folder {str(folder)!r} does not exist")
    try:  # os.access says yes to root on read-only file systems (/proc): try for real
        fd, probe = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".check", dir=folder)
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise ValueError(f"{what} {os.fspath(path)!r}: cannot write there ({reason})") from None
    os.close(fd)
    os.unlink(probe)
