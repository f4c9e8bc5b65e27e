"""How long numba's compiler held its lock while a block of code ran: the wall time spent
compiling kernels or loading them from the cache, and how many kernels it compiled.

numba takes its global compiler lock (re-entrantly) for every compilation and cache load and
reports each acquisition as a ``numba:compiler_lock`` event, each compilation proper as a
``numba:compile`` event. :func:`compile_clock` sums the time between the outermost acquisition
and its release, so nested acquisitions are counted once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from numba.core import event


@dataclass
class CompileTime:
    seconds: float = 0.0  # inside the outermost compiler lock
    compiles: int = 0  # numba:compile events (kernels compiled, not loaded)


class _Listener(event.Listener):
    def __init__(self, out: CompileTime) -> None:
        self.out = out
        self.local = threading.local()

    def on_start(self, ev: event.Event) -> None:
        depth = getattr(self.local, "depth", 0)
        if ev.kind == "numba:compile":
            self.out.compiles += 1
            return
        if depth == 0:
            self.local.started = time.perf_counter()
        self.local.depth = depth + 1

    def on_end(self, ev: event.Event) -> None:
        if ev.kind == "numba:compile":
            return
        self.local.depth -= 1
        if self.local.depth == 0:
            self.out.seconds += time.perf_counter() - self.local.started


@contextmanager
def compile_clock() -> Iterator[CompileTime]:
    """Measure numba's compile and cache-load time while the block runs."""
    out = CompileTime()
    listener = _Listener(out)
    event.register("numba:compiler_lock", listener)
    event.register("numba:compile", listener)
    try:
        yield out
    finally:
        event.unregister("numba:compiler_lock", listener)
        event.unregister("numba:compile", listener)
