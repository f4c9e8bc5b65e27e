"""Declarative description of a dataset: files, checksums, download sources, splits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Source:
    """Where a file can be downloaded: a URL, plus the member name if the URL is a zip."""

    url: str
    member: str | None = None


@dataclass(frozen=True)
class DataFile:
    """One file of a dataset, stored gzipped at ``relpath`` under a data folder.

    ``sha256`` is the digest of the *uncompressed* content; ``sources`` are tried in order.
    """

    relpath: str
    sha256: str
    sources: tuple[Source, ...]


@dataclass(frozen=True)
class SplitInfo:
    """A split: the file it is read from and its expected size (for checks and ``info``)."""

    relpath: str
    n_sequences: int
    n_tokens: int
    n_labels: int


@dataclass(frozen=True)
class Dataset:
    """A registered dataset.

    ``reader(path, split)`` turns the located file of ``split`` into a raw corpus
    (:class:`crfsdca.io.TokenCorpus` or :class:`crfsdca.io.DenseCorpus`).
    """

    name: str
    description: str
    format: str
    default_template: str
    files: tuple[DataFile, ...]
    splits: dict[str, SplitInfo]
    reader: Callable[[Path, str], Any]
    license: str = ""
    notes: str = ""
    aliases: dict[str, str] = field(default_factory=dict)

    def file(self, relpath: str) -> DataFile:
        """The :class:`DataFile` stored at ``relpath``."""
        for f in self.files:
            if f.relpath == relpath:
                return f
        known = ", ".join(f.relpath for f in self.files)
        raise ValueError(f"dataset {self.name!r} has no file {relpath!r}; expected one of {known}")

    def split(self, split: str) -> tuple[str, SplitInfo]:
        """Canonical split name (aliases resolved) and its :class:`SplitInfo`."""
        canonical = self.aliases.get(split, split)
        if canonical not in self.splits:
            known = ", ".join([*self.splits, *self.aliases])
            raise ValueError(
                f"dataset {self.name!r} has no split {split!r}; expected one of {known}"
            )
        return canonical, self.splits[canonical]
