"""The prediction side of ``crfsdca.CRF``: Viterbi labels, marginals and token accuracy.

Every method takes feature-dict sequences ``X`` (and, for a tree model, ``graphs``: one tree
per sequence), as sklearn-crfsuite's: ``predict``, ``predict_single``, ``predict_marginals``,
``predict_marginals_single``, ``score``. Empty sequences get empty predictions. The estimator
provides ``_fitted()`` (the model and its encoder, loading ``model_filename`` on first use).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from crfsdca.estimators.graphs import check_graphs, check_kind, with_graphs
from crfsdca.features.sequences import SequenceData

if TYPE_CHECKING:
    from crfsdca.estimators.model import SequenceCRF
    from crfsdca.features.featuredicts import FeatureDictEncoder

__all__ = ["Predictions"]


class Predictions:
    """What a fitted ``crfsdca.CRF`` predicts."""

    _model: SequenceCRF

    def _fitted(self) -> tuple[SequenceCRF, FeatureDictEncoder]:  # pragma: no cover
        raise NotImplementedError

    def _encode(
        self, X: Sequence[Sequence[Any]], graphs: Sequence[Any] | None = None
    ) -> tuple[SequenceData | None, list[int]]:
        """Pack the non-empty sequences of ``X`` (with their trees, for a tree model); also
        return every sequence's length."""
        model, encoder = self._fitted()
        check_kind(model.graph_, graphs)
        if isinstance(X, (str, dict)):
            raise TypeError(f"X: expected a list of sequences; got {type(X).__name__}")
        X = list(X)
        lengths = [len(seq) for seq in X]
        trees = None if graphs is None else check_graphs(graphs, lengths)
        kept = [seq for seq, n in zip(X, lengths, strict=True) if n > 0]
        data = encoder.transform(kept) if kept else None
        if data is not None and trees is not None:
            data = with_graphs(data, trees)
        return data, lengths

    def predict(
        self, X: Sequence[Sequence[Any]], graphs: Sequence[Any] | None = None
    ) -> list[list[str]]:
        """MAP label sequence of every sequence of ``X`` (Viterbi; on ``graphs``, one tree per
        sequence, for a tree model)."""
        data, lengths = self._encode(X, graphs)
        names = self._model.label_names_
        flat = [] if data is None else [names[k] for k in self._model.predict(data).tolist()]
        out, start = [], 0
        for n in lengths:
            out.append(flat[start : start + n])
            start += n
        return out

    def predict_single(self, xseq: Sequence[Any], graph: Any = None) -> list[str]:
        """MAP labels of one sequence (and its tree, for a tree model)."""
        return self.predict([xseq], None if graph is None else [graph])[0]

    def predict_marginals(
        self, X: Sequence[Sequence[Any]], graphs: Sequence[Any] | None = None
    ) -> list[list[dict[str, float]]]:
        """``p(y_t = label | x)`` as ``{label: probability}`` for every token of ``X``."""
        data, lengths = self._encode(X, graphs)
        names = self._model.label_names_
        probs: NDArray[np.float64] = (
            np.empty((0, len(names))) if data is None else self._model.node_marginals(data)
        )
        rows = [dict(zip(names, row, strict=True)) for row in probs.tolist()]
        out, start = [], 0
        for n in lengths:
            out.append(rows[start : start + n])
            start += n
        return out

    def predict_marginals_single(
        self, xseq: Sequence[Any], graph: Any = None
    ) -> list[dict[str, float]]:
        """Marginals of one sequence (and its tree, for a tree model)."""
        return self.predict_marginals([xseq], None if graph is None else [graph])[0]

    def score(
        self,
        X: Sequence[Sequence[Any]],
        y: Sequence[Sequence[str]],
        graphs: Sequence[Any] | None = None,
    ) -> float:
        """Token accuracy of ``predict(X, graphs)`` against ``y`` (as sklearn-crfsuite)."""
        from crfsdca.metrics import flat_accuracy

        return flat_accuracy(y, self.predict(X, graphs))
