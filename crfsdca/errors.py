"""Exceptions and warnings raised by crfsdca."""

from __future__ import annotations


class DataFormatError(ValueError):
    """Malformed input data; carries the file path and 1-based line number.

    The message reads ``path:line: what was expected, what arrived``.
    """

    def __init__(self, path: object, line: int | None, message: str) -> None:
        self.path = str(path)
        self.line = line
        self.reason = message
        where = self.path if line is None else f"{self.path}:{line}"
        super().__init__(f"{where}: {message}")


class NotFittedError(ValueError, AttributeError):
    """A model was used before it was trained.

    ValueError and AttributeError, as scikit-learn's ``NotFittedError``; not a subclass of it,
    so that the CLI and the core never import scikit-learn (seconds of start-up).
    """


class ConvergenceWarning(UserWarning):
    """A solver stopped (epochs or time limit) before reaching its tolerance."""


class OptionError(ValueError):
    """An option that does not fit the data it was given with (``--label`` on a CoNLL file, a
    ``--template`` for another kind of data, a format that needs ``--template``); the message
    names the flag. The command line reports it as a usage error (exit status 2)."""


class ModelFormatError(ValueError):
    """A model file is truncated, corrupted, foreign or of an unsupported version."""


class OutputPathError(OSError):
    """An output path crfsdca will not or cannot write: not a regular file (a pipe, a device, a
    folder), or a folder that does not take new files; the message names the path as given."""


class GraphError(ValueError):
    """A graph that is not a tree or forest (or not a junction tree), or that does not fit its
    example; the message names the example, the node and what was expected."""


class WorkerLostError(RuntimeError):
    """A partition's worker died or stopped answering within the round timeout."""

    def __init__(self, partition: int, detail: str) -> None:
        super().__init__(
            f"partition {partition} was lost ({detail}); its dual state is gone. Re-run with"
            " checkpoint_dir=... and resume=True (CLI: --checkpoint DIR, then --resume DIR) to"
            " rebuild it from its last checkpoint"
        )
        self.partition = partition
