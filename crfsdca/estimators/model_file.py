"""The file of ``crfsdca.CRF(model_filename=...)``: crfsdca's .npz, or CRFsuite's format when
the name says so, and never over another program's file.

sklearn-crfsuite writes CRFsuite's binary format to ``model_filename`` (``model.crfsuite`` in
its documentation) and reads it back when a CRF is given an existing one. A user moving to
crfsdca keeps that: a name ending in ``.crfsuite`` gets CRFsuite's format (the export of
:mod:`crfsdca.estimators.crfsuite_format`), and an existing CRFsuite model file (by its bytes,
whatever its name) is read as ``crfsdca import-crfsuite`` reads it. Any other name gets
crfsdca's .npz.

- :func:`check_model_filename`, before any work: the file can be written where named (its
  folder exists), a ``.crfsuite`` name holds a chain model, and what the path holds now is
  nothing, an empty file, a crfsdca model or a CRFsuite model: another program's file (an .npz
  of something else, a text file, ...) is refused, naming it, never replaced.
- :func:`save_model_file` and :func:`load_model_file`: the write and the read.
- :func:`check_output_file`: the same check for any file the estimator writes
  (:meth:`crfsdca.CRF.export_crfsuite`), as one ``ValueError`` naming the parameter.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from crfsdca.io.atomicfile import check_writable
from crfsdca.io.modelfile import file_format

if TYPE_CHECKING:
    from crfsdca.estimators.model import SequenceCRF

__all__ = [
    "check_model_filename",
    "check_output_file",
    "is_crfsuite_name",
    "load_model_file",
    "save_model_file",
]

CRFSUITE_SUFFIX = ".crfsuite"


def is_crfsuite_name(path: str | os.PathLike) -> bool:
    """Whether the name asks for CRFsuite's format (ends in ``.crfsuite``, any case)."""
    return os.fspath(path).lower().endswith(CRFSUITE_SUFFIX)


def check_output_file(path: str | os.PathLike, what: str) -> None:
    """ValueError (TypeError for a non-path) naming ``what`` unless a regular file can be
    written at ``path``, whose folder must exist (:func:`crfsdca.io.atomicfile.check_writable`)."""
    try:
        check_writable(path, make_folders=False)
    except TypeError as err:
        raise TypeError(f"{what}: {err}") from None
    except OSError as err:
        raise ValueError(f"{what}: {err}") from None


def check_model_filename(path: str | os.PathLike, kind: str | None = None) -> None:
    """ValueError naming ``model_filename`` unless a fit may write its model at ``path``.

    ``kind``: ``"tree-structured"`` or ``"second-order"`` for models CRFsuite's format cannot
    hold (None: a chain).
    """
    check_output_file(path, "model_filename")
    name = os.fspath(path)
    if is_crfsuite_name(name) and kind is not None:
        raise ValueError(
            f"model_filename {name!r}: CRFsuite's format (a .crfsuite name) holds linear-chain"
            f" models; this CRF is {kind}: give a .npz name"
        )
    if not os.path.exists(name):
        return
    try:
        held = file_format(name)
    except OSError as err:
        raise ValueError(f"model_filename {name!r}: cannot read it ({err.strerror})") from None
    if held == "other":
        raise ValueError(
            f"model_filename {name!r} holds a file that is neither a crfsdca model nor a"
            " CRFsuite model; not replacing it: remove it or give another name"
        )


def save_model_file(model: SequenceCRF, path: str | os.PathLike, names: list[str]) -> None:
    """Write ``model`` at ``path``: CRFsuite's format for a ``.crfsuite`` name (attribute
    names ``names``), else crfsdca's .npz; OSError naming ``model_filename``."""
    from crfsdca.estimators.crfsuite_format import export_crfsuite

    try:
        if is_crfsuite_name(path):
            export_crfsuite(model, path, names)
        else:
            model.save(path)
    except OSError as err:
        reason = err.strerror or str(err)
        raise OSError(f"model_filename {os.fspath(path)!r}: {reason}") from None


def load_model_file(path: str | os.PathLike) -> SequenceCRF:
    """The model at ``path``: a CRFsuite model file (by its bytes) imported, else crfsdca's."""
    from crfsdca.estimators.model import SequenceCRF

    if os.path.isfile(path) and file_format(path) == "crfsuite":
        from crfsdca.estimators.crfsuite_format import import_crfsuite

        return import_crfsuite(path)
    return SequenceCRF.load(os.fspath(path))
