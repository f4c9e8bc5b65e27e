"""What every crfsdca command shares: expected errors as one line on stderr, JSON values."""

from __future__ import annotations

import math
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from crfsdca.errors import DataFormatError, ModelFormatError

EXPECTED_ERRORS = (
    DataFormatError,
    ModelFormatError,
    ValueError,
    OSError,
    MemoryError,
    FloatingPointError,
    KeyError,
)


@contextmanager
def errors_to_exit(verbose: int) -> Iterator[None]:
    """Turn expected failures into one line on stderr and exit status 1."""
    try:
        yield
    except click.ClickException:
        raise
    except EXPECTED_ERRORS as err:
        if verbose:
            traceback.print_exc()
        message = str(err) or type(err).__name__
        if isinstance(err, KeyError):
            message = f"missing key {message}"
        click.echo(f"crfsdca: error: {message}", err=True)
        sys.exit(1)


def json_value(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x
