"""CRFsuite's ``feature.minfreq``: the features of a sparse model that training data use enough.

CRFsuite (``crf1df_generate`` in crf1d_feature.c) gives every feature a frequency: a state
feature (attribute, label) adds the attribute's value on every training token with that label,
a transition feature (label at t, label at t+1) adds 1 for every bigram inside a sequence, and
the features that ``feature.possible_states`` / ``feature.possible_transitions`` add have
frequency 0. It keeps the features whose frequency is >= ``minfreq``; the others are
structurally 0. :func:`frequent_features` applies that filter to the free coordinates of
:func:`crfsdca.features.observed_features`. Bias rows (which CRFsuite has not) stay free.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from crfsdca.features.feature_map import FeatureMap

__all__ = ["SPARSE_SOLVERS", "check_min_freq", "frequent_features"]

#: solvers that train CRFsuite's sparse model (``Problem.free``), as CRFsuite's algorithms do
SPARSE_SOLVERS = ("lbfgs", "l2sgd", "ap", "pa", "arow")


def check_min_freq(value: object) -> float:
    """``min_freq`` as a float >= 0 (None: 0), or one clear error naming it."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"min_freq must be a number >= 0 or None; got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"min_freq must be a finite number >= 0; got {value!r}")
    return float(value)


def feature_frequencies(data, feature_map: FeatureMap) -> NDArray[np.float64]:
    """CRFsuite's frequency of every weight of the dense layout (0 for bias rows)."""
    A, K = feature_map.n_attributes, feature_map.n_labels
    labels = data.labels
    per_token = np.diff(data.attr_offsets)
    keys = data.attr_ids * K + np.repeat(labels, per_token)
    states = np.bincount(keys, weights=data.attr_values, minlength=A * K)
    inside = np.ones(max(labels.size - 1, 0), bool)
    inside[data.seq_offsets[1:-1] - 1] = False  # no bigram across a sequence boundary
    bigrams = labels[:-1][inside] * K + labels[1:][inside]
    trans = np.bincount(bigrams, minlength=K * K).astype(np.float64)
    bias = np.full(feature_map.n_bias_rows * K, np.inf)
    return np.concatenate([states, bias, trans])


def frequent_features(
    data, feature_map: FeatureMap, free: NDArray[np.int64] | None, min_freq: float
) -> NDArray[np.int64]:
    """The indices of ``free`` (None: every weight) whose frequency is >= ``min_freq``."""
    if feature_map.n_edge_types != 1:
        raise ValueError("min_freq is defined for chains (CRFsuite's model)")
    frequency = feature_frequencies(data, feature_map)
    if free is None:
        free = np.arange(feature_map.n_features, dtype=np.int64)
    return free[frequency[free] >= min_freq]
