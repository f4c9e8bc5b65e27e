"""The error and warning policy every crfsdca command shares.

- An expected failure (bad data, a bad model file, a file that cannot be read or written) is one
  line ``crfsdca: error: ...`` on stderr and exit status 1; ``-v`` adds the traceback. Any other
  exception is a bug: one line ``crfsdca: internal error: ...``, status 1, the traceback with -v.
- A warning is one line ``crfsdca: warning: ...`` (no source line); ``--quiet`` drops them all.
- A closed stdout (``crfsdca tag ... | head -1``) ends the command silently with status 141,
  as a process killed by SIGPIPE would (see ``quiet_broken_pipe``); Ctrl-C outside a training
  loop prints ``crfsdca: interrupted`` and exits with 130.
"""

from __future__ import annotations

import math
import os
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from crfsdca.errors import (
    DataFormatError,
    GraphError,
    ModelFormatError,
    OptionError,
    WorkerLostError,
)

EXPECTED_ERRORS = (
    DataFormatError,
    ModelFormatError,
    GraphError,
    WorkerLostError,
    ImportError,
    ValueError,
    OSError,
    MemoryError,
    FloatingPointError,
    KeyError,
)
EXIT_BROKEN_PIPE = 128 + 13  # SIGPIPE
EXIT_INTERRUPTED = 128 + 2  # SIGINT


def describe_error(err: BaseException) -> str:
    """One line for ``err``: ``path: reason`` for OS errors, else the message."""
    if isinstance(err, OSError) and err.filename is not None and err.strerror:
        reason = err.strerror[0].lower() + err.strerror[1:]
        return f"{err.filename}: {reason}"
    if isinstance(err, OSError) and err.strerror:
        return err.strerror[0].lower() + err.strerror[1:]
    if isinstance(err, KeyError):
        return f"missing key {err}"
    return str(err) or type(err).__name__


@contextmanager
def errors_to_exit(verbose: int, translate: Callable[[str], str] | None = None) -> Iterator[None]:
    """Turn expected failures into one line on stderr and exit status 1.

    ``translate`` rewrites the message (e.g. config field names into the flags that set them).
    """
    try:
        yield
    except (click.ClickException, BrokenPipeError):
        raise
    except OptionError as err:  # an option that does not fit the data: a usage error
        if verbose:
            traceback.print_exc()
        message = str(err)
        raise click.UsageError(translate(message) if translate else message) from None
    except EXPECTED_ERRORS as err:
        if verbose:
            traceback.print_exc()
        message = describe_error(err)
        if translate is not None:
            message = translate(message)
        click.echo(f"crfsdca: error: {message}", err=True)
        sys.exit(1)
    except Exception as err:  # a bug: still one line, the traceback on request
        if verbose:
            traceback.print_exc()
        click.echo(
            f"crfsdca: internal error: {type(err).__name__}: {err} (a bug; please report it with"
            " the traceback that -v prints)",
            err=True,
        )
        sys.exit(1)


def warn(message: str) -> None:
    """One plain warning line on stderr."""
    click.echo(f"crfsdca: warning: {message}", err=True)


@contextmanager
def plain_warnings(quiet: bool) -> Iterator[None]:
    """Show every Python warning raised inside as one plain line, or none with ``quiet``."""
    with warnings.catch_warnings():
        if quiet:
            warnings.simplefilter("ignore")
        else:
            warnings.showwarning = lambda message, *args, **kwargs: warn(str(message))
        yield


def quiet_broken_pipe() -> None:
    """End the process silently after the reader of stdout went away (``| head``)."""
    try:
        # later flushes (at exit) must not hit the closed pipe again and print a traceback
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file descriptor (tests)
        pass
    sys.exit(EXIT_BROKEN_PIPE)


def interrupted() -> None:
    """End the process after Ctrl-C outside a training loop."""
    click.echo("crfsdca: interrupted", err=True)
    sys.exit(EXIT_INTERRUPTED)


def json_value(x: Any) -> Any:
    """``x`` with non-finite floats as None (JSON has no NaN)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def is_special(path: str | os.PathLike) -> bool:
    """True for an existing path that is neither a regular file nor a folder (/dev/stdout, a pipe).

    Such a path is written in place: an atomic write would rename a file over it.
    """
    target = Path(path)
    return target.exists() and not target.is_file() and not target.is_dir()


def check_output_path(
    path: str | None, flag: str, *, folder: bool = False, special_ok: bool = False
) -> None:
    """BadParameter (naming ``flag``) unless ``path`` can be written (missing folders are made).

    Checked before any work (:func:`crfsdca.io.atomicfile.check_writable`), so that a long run
    does not end on an unwritable path. A device or pipe is refused unless ``special_ok``
    (``tag --output``, which writes into it in place).
    """
    from crfsdca.io.atomicfile import check_writable

    if path is None or (special_ok and is_special(path)):
        return
    try:
        check_writable(path, folder=folder)
    except OSError as err:
        raise click.BadParameter(str(err), param_hint=flag) from None


def make_parent(path: str | os.PathLike) -> None:
    """Create the missing folders above the output file ``path``."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)


def check_input_file(path: str, what: str) -> None:
    """FileNotFoundError / IsADirectoryError naming ``path`` and what was expected there."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file; expected {what}")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path}: is a directory; expected {what}")
