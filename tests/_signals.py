"""Ctrl-C in tests, whatever SIGINT disposition pytest itself was started with.

A shell without job control starts a background job (``pytest ... &`` in a script) with SIGINT
ignored; Python keeps that disposition and every process it starts inherits it across exec, and
crfsdca keeps an inherited SIG_IGN too (crfsdca/solvers/interrupts.py). A test that sends or raises
SIGINT therefore sets the disposition it means around what it starts or raises.
"""

import signal
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def sigint(handler=signal.default_int_handler) -> Iterator[None]:
    """SIGINT unblocked and set to ``handler`` in this thread for the block, restored after.

    With Python's handler (the default) a child started in the block gets SIGINT at its default
    disposition (exec resets caught signals), as from an interactive shell; with
    ``signal.SIG_IGN`` it starts with SIGINT ignored, as a background job of a script.
    """
    previous = signal.signal(signal.SIGINT, handler)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)
