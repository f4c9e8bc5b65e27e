"""The first SDCA run on a cold numba cache compiles on both cores.

On an empty cache a first chain SDCA fit spends most of its time in numba's compiler, one
kernel after the other, on one core: the solver loop (``kernels.solvers.sdca_epoch._run_steps`` with
its block oracle, line search and block update, which also runs the exact gap passes) and,
apart from it, the kernels of the dual start and of the evaluations the monitor calls (the
exact primal, the test set's Viterbi). When the evaluation kernels are not in the cache,
:func:`start` runs a second process (``python -m crfsdca.estimators.compile_worker``), before
the fit reads and encodes its data (``crfsdca train``, ``CRF.fit``), that compiles into the
shared cache, for a chain run's argument types, the parts of the step after the block oracle
in the reverse of the order the loop's typing reaches them (the update of w, the block
update, the line search, the primal direction, the block gap: ``compile_loop_parts``), so
that the two processes meet in the middle and the loop loads what it has not reached yet
(in the loop's order, both compiled the first parts at once: BENCHMARKS.md section 7); then on
a three-sentence corpus the kernels of the dual start and of the sampler, the exact primal
and, when the fit scores a test set, its Viterbi (``compile_evaluation``).
The fit compiles its loop before its dual start (``LoopSolver.solve``: ``compile_loop``), then
loads the start's kernels and waits for that process's :data:`READY` line before its first
evaluation; a fit with no test set goes on while the process compiles the Viterbi for the
fitted model's first ``predict`` (``compile_prediction``). The results are those of a run
without it, bit for bit, whichever process gets to a shared callee first (only the order of
compilation changes; the structure primitives, which the loop's typing meets on its way, are
compiled in both processes and never read from the cache:
``kernels.primitives.implements``); a warm cache starts no process. The process is told the
digest of the fit's kernel sources (:data:`DIGEST_ENV`, ``crfsdca.kernels.cache``) and ends
at once, without its ready line, when the sources were edited since the fit imported them.

``CRFSDCA_COMPILE_AHEAD=0`` turns it off (the test suite does, to keep its processes to its
workers).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

__all__ = [
    "ENV",
    "READY",
    "CompileAhead",
    "TINY_SENTENCES",
    "read_until_ready",
    "same_sources",
    "start",
    "tiny_inputs",
]

ENV = "CRFSDCA_COMPILE_AHEAD"
#: the digest of the kernel sources the fit runs (``crfsdca.kernels.cache``), told to the process
DIGEST_ENV = "CRFSDCA_KERNELS_DIGEST"

#: a corpus small enough to compile on (CoNLL-2000's columns: word, POS tag, chunk tag)
TINY_SENTENCES = (
    (("The", "DT", "B-NP"), ("cat", "NN", "I-NP"), ("sat", "VBD", "B-VP"), (".", ".", "O")),
    (("Dogs", "NNS", "B-NP"), ("bark", "VBP", "B-VP"), ("loudly", "RB", "B-ADVP")),
    (("A", "DT", "B-NP"), ("dog", "NN", "I-NP"), ("ran", "VBD", "B-VP")),
)


def tiny_inputs(folder: Path):
    """The run inputs of :data:`TINY_SENTENCES` (train and test), read as ``crfsdca train``
    reads a CoNLL file with the ``conll`` template (not kept in the encoded-corpus cache)."""
    from crfsdca.features.sources import load_inputs

    path = folder / "tiny.txt"
    text = "\n\n".join("\n".join(" ".join(t) for t in s) for s in TINY_SENTENCES)
    path.write_text(text + "\n", encoding="utf-8")
    return load_inputs(
        str(path),
        fmt="conll",
        template="conll",
        test=str(path),
        data_dir=None,
        max_sequences=None,
        cache=False,
    )


def _cached(dispatcher: Any) -> bool:
    """Whether numba's cache holds a compiled version of ``dispatcher`` (any signature); True
    when that cannot be told (no second process then)."""
    try:
        return bool(dispatcher._cache._cache_file._load_index())
    except Exception:  # noqa: BLE001 - numba's cache layout is not public: assume warm
        return True


#: the line the process writes once the kernels the run needs are in the cache
READY = b"ready\n"


def read_until_ready(stream) -> bool:
    """Read ``stream`` up to and including its :data:`READY` line (other lines are skipped);
    False if it ended without one."""
    return any(line == READY for line in iter(stream.readline, b""))


class CompileAhead:
    """The process compiling the evaluation kernels; :meth:`wait` returns once they are in the
    cache (its :data:`READY` line on its stdout) or it has ended."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self._released = False

    def wait(self) -> None:
        """Wait for the run's kernels (a failure there only means they compile here), then
        :meth:`release` the process (once waited, this returns at once)."""
        if self._released:
            return
        try:
            read_until_ready(self.process.stdout)
        except BaseException:  # interrupted while waiting
            self.process.kill()
            self.process.wait()
            raise
        finally:
            self.release()

    def release(self) -> None:
        """Stop listening to the process: it may go on compiling (the Viterbi for a later
        prediction, or all of it when the fit failed before its loop), a daemon thread reaps
        it, and it is left to end on its own."""
        if self._released:
            return
        self._released = True
        self.process.stdout.close()
        threading.Thread(target=self.process.wait, daemon=True).start()


def start(
    solver: str,
    graph: str,
    order: int,
    dual_dtype: str = "float64",
    test: bool = True,
    loss: str = "log",
) -> CompileAhead | None:
    """Start compiling the evaluation kernels of a chain SDCA run in a second process, when
    they are not cached yet (else, for other solvers, structures and losses, or with ``ENV`` =
    0: None); ``test``: whether the run scores a test set (else its Viterbi is left to the first
    prediction). Called before the run reads and encodes its data (``crfsdca train``,
    ``CRF.fit``), so that the process starts meanwhile; the fit waits for it
    (``SequenceCRF.fit``'s ``ahead``)."""
    if os.environ.get(ENV, "1") == "0" or (solver, graph, order, loss) != (
        "sdca",
        "chain",
        1,
        "log",
    ):
        return None
    from crfsdca.kernels import cache
    from crfsdca.kernels.structures import chain_batch as batch

    if _cached(batch._chunk_loss):
        return None
    command = [sys.executable, "-m", "crfsdca.estimators.compile_worker", dual_dtype]
    command.append("test" if test else "no-test")
    env = dict(os.environ, **{DIGEST_ENV: cache.current().digest})
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
    except OSError:  # no process to be had (limits, no interpreter path): compile here
        return None
    return CompileAhead(process)


def same_sources() -> bool:
    """Whether this process compiles the kernel sources the fit that started it runs (they
    were not edited in between; else its cache folder is another one, of no use to the fit)."""
    from crfsdca.kernels import cache

    expected = os.environ.get(DIGEST_ENV)
    return expected is None or expected == cache.current().digest
