"""Defer Ctrl-C while a compiled kernel and its bookkeeping run, so state stays consistent.

An inherited ``SIG_IGN`` is kept: a shell starts a background job (``crfsdca train ... &`` in a
script) with SIGINT ignored so that the Ctrl-C typed for the foreground job does not reach it,
and Python itself keeps that disposition. crfsdca therefore never installs a handler over it, in
any phase of a run (reading, compiling, training); such a run is stopped with SIGTERM (``kill``),
and ``--checkpoint`` keeps the last complete epoch (files are replaced atomically).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Hold SIGINT inside the block and raise KeyboardInterrupt once it has finished.

    Outside the main thread, or when SIGINT is ignored (the process was started that way), the
    block runs as it is.
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    ):
        yield
        return
    received: list[object] = []
    previous = signal.signal(signal.SIGINT, lambda *args: received.append(args))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        raise KeyboardInterrupt
