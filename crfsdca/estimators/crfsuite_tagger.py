"""``CRF.tagger_``: python-crfsuite's ``Tagger`` methods on a crfsdca model.

sklearn-crfsuite exposes the ``pycrfsuite.Tagger`` of a fitted model as ``crf.tagger_``; code
written for it calls ``labels()``, ``tag(xseq)``, ``set(xseq)``, ``marginal(y, t)``,
``probability(yseq)`` and ``info()``. :class:`Tagger` gives the same methods with the same
semantics (``chokkan/crfsuite`` ``include/crfsuite.hpp``), computed by crfsdca's oracle:

- ``set(xseq)`` makes ``xseq`` (feature dicts, python-crfsuite's item format) the current
  instance; attributes unknown to the model are ignored, as CRFsuite does;
- ``tag(xseq=None)``: the Viterbi labels of ``xseq`` (which becomes the current instance) or
  of the current instance; ``[]`` for an empty one;
- ``probability(yseq)``: ``p(yseq | x)`` of the current instance (0.0 for an empty one);
  ValueError if the lengths differ or a label is unknown;
- ``marginal(y, t)``: ``p(y_t = y | x)``; ValueError for a position out of range or an
  unknown label (0.0 for an empty instance);
- ``info()``: a :class:`ParsedDump` (``labels``, ``attributes``, ``state_features``,
  ``transitions``, ``header``) as python-crfsuite parses ``crfsuite dump``: features of weight
  exactly 0 are left out, as CRFsuite does not store them; weights are exact (the dump
  rounds them to 6 decimals).

CRFsuite raises RuntimeError for an unknown label; crfsdca raises ValueError (bad input).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from crfsdca.estimators.model import SequenceCRF
    from crfsdca.features.featuredicts import FeatureDictEncoder

__all__ = ["ParsedDump", "Tagger"]


class ParsedDump:
    """What ``Tagger.info()`` returns (python-crfsuite's ``ParsedDump`` fields).

    Attributes
    ----------
    header : dict
        The model file's header fields (``num_labels``, ``num_attrs``, ``size``, ...), as
        strings, as ``crfsuite dump`` prints them.
    labels, attributes : dict
        ``{name: id}``, ids as strings (as python-crfsuite parses them).
    transitions : dict
        ``{(label_from, label_to): weight}``, non-zero weights only.
    state_features : dict
        ``{(attribute, label): weight}``, non-zero weights only.
    """

    def __init__(self) -> None:
        self.header: dict[str, str] = {}
        self.labels: dict[str, int] = {}
        self.attributes: dict[str, int] = {}
        self.transitions: dict[tuple[str, str], float] = {}
        self.state_features: dict[tuple[str, str], float] = {}


_HEADER_FIELDS = (
    "magic", "size", "type", "version", "num_features", "num_labels", "num_attrs",
    "off_features", "off_labels", "off_attrs", "off_labelrefs", "off_attrrefs",
)  # fmt: skip


def _file_header(buffer: bytes) -> dict[str, str]:
    """The FILEHEADER block of ``crfsuite dump`` (offsets in hex), as python-crfsuite parses it."""
    values = struct.unpack_from("<4sI4sIIIIIIIII", buffer)
    header = {}
    for name, value in zip(_HEADER_FIELDS, values, strict=True):
        if isinstance(value, bytes):
            header[name] = value.decode("ascii")
        else:
            header[name] = f"0x{value:X}" if name.startswith("off_") else str(value)
    return header


class Tagger:
    """python-crfsuite's Tagger interface on a trained crfsdca chain model."""

    def __init__(self, model: SequenceCRF, encoder: FeatureDictEncoder) -> None:
        if model.graph_ != "chain":
            raise ValueError(
                f"tagger_ tags linear chains; this model is a {model.graph_} model"
                " (use predict / predict_marginals with its graphs)"
            )
        self._model = model
        self._encoder = encoder
        self._labels = list(model.label_names_)
        self._index = {name: k for k, name in enumerate(self._labels)}
        self._length = 0
        self._log_z = 0.0
        self._log_node: np.ndarray = np.empty((0, len(self._labels)))
        self._unary: np.ndarray = np.empty((0, len(self._labels)))
        self._viterbi: list[str] = []

    def labels(self) -> list[str]:
        """The model's labels, in id order."""
        return list(self._labels)

    def set(self, xseq: Sequence[Any]) -> None:
        """Make ``xseq`` the current instance of ``tag()``, ``probability()``, ``marginal()``."""
        xseq = list(xseq)
        self._length = len(xseq)
        if not xseq:
            self._viterbi = []
            return
        model = self._model
        data = self._encoder.transform([xseq], name="xseq")
        oracle = model._oracle(data)
        w = model.weights_
        log_z, log_node, _ = oracle.marginals(0, w)
        self._log_z, self._log_node = float(log_z), log_node.copy()
        self._viterbi = [self._labels[k] for k in oracle.predict(w).tolist()]
        fm = model.feature_map_
        emission = fm.emission(w)
        unary = np.zeros((self._length, fm.n_labels))
        offsets = data.attr_offsets
        for t in range(self._length):  # one short sequence: a few dot products
            span = slice(offsets[t], offsets[t + 1])
            unary[t] = data.attr_values[span] @ emission[data.attr_ids[span]]
        if fm.n_bias_rows:
            bias = fm.bias(w)
            unary += bias[0]
            unary[0] += bias[1]
            unary[-1] += bias[2]
        self._unary = unary

    def tag(self, xseq: Sequence[Any] | None = None) -> list[str]:
        """Viterbi labels of ``xseq`` (then the current instance) or of the current instance."""
        if xseq is not None:
            self.set(xseq)
        return list(self._viterbi)

    def _label_id(self, y: str) -> int:
        k = self._index.get(y)
        if k is None:
            raise ValueError(f"unknown label {y!r}; the model's labels are {self._labels}")
        return k

    def probability(self, yseq: Sequence[str]) -> float:
        """``p(yseq | x)`` of the current instance."""
        if self._length == 0:
            return 0.0
        if isinstance(yseq, str) or len(yseq) != self._length:
            n = 1 if isinstance(yseq, str) else len(yseq)
            raise ValueError(
                f"The numbers of items and labels differ: |x| = {self._length}, |y| = {n}"
            )
        path = [self._label_id(y) for y in yseq]
        trans = self._model.feature_map_.transition(self._model.weights_)
        score = float(self._unary[np.arange(self._length), path].sum())
        score += float(sum(trans[a, b] for a, b in zip(path[:-1], path[1:], strict=True)))
        return math.exp(score - self._log_z)

    def marginal(self, y: str, t: int) -> float:
        """``p(y_t = y | x)`` of the current instance."""
        if self._length == 0:
            return 0.0
        if not 0 <= t < self._length:
            raise ValueError(f"The position {t} is out of range of {self._length}")
        return float(math.exp(self._log_node[t, self._label_id(y)]))

    def info(self) -> ParsedDump:
        """Labels, attributes and non-zero weights of the model."""
        from crfsdca.estimators.crfsuite_format import to_crfsuite_model
        from crfsdca.io.crfsuite_file import crfsuite_model_bytes

        cm = to_crfsuite_model(self._model, self._encoder.attribute_names)
        dump = ParsedDump()
        dump.header = _file_header(crfsuite_model_bytes(cm))
        dump.labels = {name: str(k) for k, name in enumerate(cm.labels)}
        dump.attributes = {name: str(j) for j, name in enumerate(cm.attributes)}
        rows, cols = np.nonzero(cm.transition)
        dump.transitions = {
            (cm.labels[a], cm.labels[b]): float(cm.transition[a, b])
            for a, b in zip(rows.tolist(), cols.tolist(), strict=True)
        }
        rows, cols = np.nonzero(cm.state)
        dump.state_features = {
            (cm.attributes[j], cm.labels[k]): float(cm.state[j, k])
            for j, k in zip(rows.tolist(), cols.tolist(), strict=True)
        }
        return dump

    def close(self) -> None:
        """Nothing to release (python-crfsuite closes its model file)."""
