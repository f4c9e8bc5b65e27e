"""Defer Ctrl-C while a compiled kernel and its bookkeeping run, so state stays consistent."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Hold SIGINT inside the block and raise KeyboardInterrupt once it has finished."""
    if threading.current_thread() is not threading.main_thread():
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
