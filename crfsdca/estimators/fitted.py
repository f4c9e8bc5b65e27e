"""The fitted attributes of ``crfsdca.CRF``, as sklearn-crfsuite names them.

``classes_``, ``state_features_``, ``transition_features_``, ``attributes_``,
``num_attributes_``, ``size_`` (the CRFsuite model's bytes), ``tagger_`` (python-crfsuite's
Tagger methods, :mod:`crfsdca.estimators.crfsuite_tagger`) are None before ``fit`` (and before a
``model_filename`` exists), as in sklearn-crfsuite; ``export_crfsuite(path)`` writes the model in
CRFsuite's format. The estimator provides ``__sklearn_is_fitted__`` and ``_fitted()``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

from crfsdca.estimators.crfsuite_tagger import Tagger
from crfsdca.estimators.graphs import transition_blocks
from crfsdca.estimators.model_file import check_output_file

if TYPE_CHECKING:
    from crfsdca.estimators.model import SequenceCRF
    from crfsdca.features.featuredicts import FeatureDictEncoder

__all__ = ["FittedAttributes"]


class FittedAttributes:
    """The inspection side of ``crfsdca.CRF``."""

    def __sklearn_is_fitted__(self) -> bool:  # pragma: no cover - the estimator's
        raise NotImplementedError

    def _fitted(self) -> tuple[SequenceCRF, FeatureDictEncoder]:  # pragma: no cover
        raise NotImplementedError

    def _maybe_fitted(self) -> tuple[SequenceCRF, FeatureDictEncoder] | None:
        if not self.__sklearn_is_fitted__():
            return None
        return self._fitted()

    @property
    def classes_(self) -> list[str] | None:
        fitted = self._maybe_fitted()
        return None if fitted is None else list(fitted[0].label_names_)

    @property
    def graph_(self) -> str:
        """``"tree"`` for a CRF fitted with graphs (it predicts with graphs only),
        ``"junction"`` for ``order=2``, else ``"chain"``."""
        return self._fitted()[0].graph_

    @property
    def n_edge_types_(self) -> int:
        """Transition blocks: 1 + the largest edge type of the training trees (1 for chains)."""
        return self._fitted()[0].feature_map_.n_edge_types

    @property
    def state_features_(self) -> dict[tuple[str, str], float] | None:
        fitted = self._maybe_fitted()
        if fitted is None:
            return None
        model, encoder = fitted
        emission = model.feature_map_.emission(model.weights_)
        names, labels = encoder.attribute_names, model.label_names_
        rows, cols = np.nonzero(emission)
        return {
            (names[j], labels[k]): float(emission[j, k])
            for j, k in zip(rows.tolist(), cols.tolist(), strict=True)
        }

    @property
    def transition_features_(self) -> dict[tuple, float] | None:
        """``{(label_from, label_to): weight}``; with several edge types (trees),
        ``{(parent label, child label, edge type): weight}``; with ``order=2`` the bigram block."""
        fitted = self._maybe_fitted()
        if fitted is None:
            return None
        model = fitted[0]
        trans = transition_blocks(model)
        labels, typed = model.label_names_, trans.shape[0] > 1
        return {
            (labels[a], labels[b], e) if typed else (labels[a], labels[b]): float(trans[e, a, b])
            for e, a, b in zip(*(idx.tolist() for idx in np.nonzero(trans)), strict=True)
        }

    @property
    def attributes_(self) -> list[str] | None:
        fitted = self._maybe_fitted()
        if fitted is None:
            return None
        model, encoder = fitted
        used = np.any(model.feature_map_.emission(model.weights_) != 0, axis=1)
        names = encoder.attribute_names
        return [names[j] for j in np.flatnonzero(used).tolist()]

    @property
    def num_attributes_(self) -> int | None:
        attributes = self.attributes_
        return None if attributes is None else len(attributes)

    @property
    def size_(self) -> int | None:
        """Bytes of the model as a CRFsuite model file (:meth:`export_crfsuite`), as
        sklearn-crfsuite reports it; for tree and second-order models (which CRFsuite's format
        cannot hold), bytes of the weight vector."""
        fitted = self._maybe_fitted()
        if fitted is None:
            return None
        if getattr(self, "_size", None) is None:
            model, encoder = fitted
            if model.graph_ != "chain":
                self._size = int(model.weights_.nbytes)
            else:
                from crfsdca.estimators.crfsuite_format import to_crfsuite_model
                from crfsdca.io.crfsuite_file import crfsuite_model_bytes

                cm = to_crfsuite_model(model, encoder.attribute_names)
                self._size = len(crfsuite_model_bytes(cm))
        return self._size

    @property
    def tagger_(self) -> Tagger | None:
        """python-crfsuite's Tagger methods on this model
        (:mod:`crfsdca.estimators.crfsuite_tagger`);
        None before fit."""
        fitted = self._maybe_fitted()
        if fitted is None:
            return None
        if getattr(self, "_tagger", None) is None:
            self._tagger = Tagger(*fitted)
        return self._tagger

    def export_crfsuite(self, path: str | os.PathLike) -> None:
        """Write the fitted chain model as a CRFsuite model file (atomically) that
        ``pycrfsuite.Tagger().open(path)`` loads and that tags as :meth:`predict` does when
        fed the same feature dicts (:mod:`crfsdca.estimators.crfsuite_format`). ``path`` must not
        be a
        folder, a device or a pipe, and its folder must exist."""
        from crfsdca.estimators.crfsuite_format import export_crfsuite

        model, encoder = self._fitted()
        check_output_file(path, "path")
        try:
            export_crfsuite(model, path, encoder.attribute_names)
        except OSError as err:
            reason = err.strerror or str(err)
            raise OSError(f"{os.fspath(path)!r}: {reason}") from None
