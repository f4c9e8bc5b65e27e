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


class ModelFormatError(ValueError):
    """A model file is truncated, corrupted, foreign or of an unsupported version."""
