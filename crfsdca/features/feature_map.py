"""Feature map of a linear-chain CRF and the flat weight layout.

F(x, y) = sum_t F_t(x, y_t) + sum_{t<T} F_{t,t+1}(y_t, y_{t+1}) (Le Priol et al. 2018, App. B).

The weights are one dense float64 vector ``w`` of length
``n_features = (n_attributes + n_bias_rows) * n_labels + n_labels**2`` laid out as three blocks:

========== ============================== ==========================================
block      shape                          flat index of entry
========== ============================== ==========================================
emission   (n_attributes, n_labels)       ``j * K + k``  (attribute-major)
bias       (n_bias_rows, n_labels)        ``A * K + r * K + k``  (rows: count, first, last)
transition (n_labels, n_labels)           ``(A + R) * K + k * K + l``  (label at t, label at t+1)
========== ============================== ==========================================

The node score of label ``k`` at position ``t`` of a sequence of length ``T`` is
``sum_j phi_j(x, t) E[j, k] + B[0, k] + [t = 0] B[1, k] + [t = T-1] B[2, k]`` (bias rows only
when ``n_bias_rows == 3``); the edge score of ``(k, l)`` is ``W[k, l]`` at every position.
With ``n_bias_rows == 0`` the model is exactly CRFsuite's dense first-order CRF.

Tree-structured models (:mod:`crfsdca.structures.tree`) have ``n_edge_types`` transition blocks
laid end to end, entry ``(A + R) * K + e * K * K + j * K + k`` for an edge of type ``e`` with
label ``j`` at the parent and ``k`` at the child, and read the bias rows as (count, root, leaf).

Junction-tree models (:mod:`crfsdca.structures.junction`) add one block of K^a entries per factor
type of arity a (``factor_arities``), laid end to end after the transition blocks (they
usually have ``n_edge_types = 0``); entry ``factor_offset(t) + sum_p y_p K^(a-1-p)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from crfsdca._dtypes import FLOAT

BIAS_ROWS = ("count", "first", "last")


@dataclass(frozen=True)
class FeatureMap:
    """Dimensions of the feature map; views into a flat weight vector."""

    n_attributes: int
    n_labels: int
    n_bias_rows: int = 3
    n_edge_types: int = 1  # transition blocks (trees: one per edge type; chains: 1)
    factor_arities: tuple[int, ...] = ()  # junction trees: one K^a block per factor type

    def __post_init__(self) -> None:
        if self.n_attributes < 0:
            raise ValueError(f"n_attributes must be >= 0; got {self.n_attributes}")
        if self.n_labels < 1:
            raise ValueError(f"n_labels must be >= 1; got {self.n_labels}")
        if self.n_bias_rows not in (0, 3):
            raise ValueError(f"n_bias_rows must be 0 or 3; got {self.n_bias_rows}")
        if self.n_edge_types < (0 if self.factor_arities else 1):
            raise ValueError(f"n_edge_types must be >= 1; got {self.n_edge_types}")
        object.__setattr__(self, "factor_arities", tuple(int(a) for a in self.factor_arities))
        if any(a < 1 for a in self.factor_arities):
            raise ValueError(f"factor arities must be >= 1; got {self.factor_arities}")

    @property
    def n_features(self) -> int:
        K = self.n_labels
        factors = sum(K**a for a in self.factor_arities)
        return (self.n_attributes + self.n_bias_rows) * K + self.n_edge_types * K * K + factors

    def factor_offset(self, t: int) -> int:
        """Flat index of the first entry of factor type t's block."""
        K = self.n_labels
        before = sum(K**a for a in self.factor_arities[:t])
        return self.transition_offset + self.n_edge_types * K * K + before

    def factor(self, w: NDArray[np.float64], t: int) -> NDArray[np.float64]:
        """View (K,) * arity of factor type t's block."""
        off, a = self.factor_offset(t), self.factor_arities[t]
        return w[off : off + self.n_labels**a].reshape((self.n_labels,) * a)

    @property
    def transition_offset(self) -> int:
        return (self.n_attributes + self.n_bias_rows) * self.n_labels

    def zeros(self) -> NDArray[np.float64]:
        return np.zeros(self.n_features, FLOAT)

    def emission(self, w: NDArray[np.float64]) -> NDArray[np.float64]:
        """View (n_attributes, n_labels) of the emission block."""
        A, K = self.n_attributes, self.n_labels
        return w[: A * K].reshape(A, K)

    def bias(self, w: NDArray[np.float64]) -> NDArray[np.float64]:
        """View (n_bias_rows, n_labels) of the bias block."""
        A, K = self.n_attributes, self.n_labels
        return w[A * K : self.transition_offset].reshape(self.n_bias_rows, K)

    def transition(self, w: NDArray[np.float64]) -> NDArray[np.float64]:
        """View (n_labels, n_labels) of the transition block (of edge type 0)."""
        K = self.n_labels
        off = self.transition_offset
        return w[off : off + K * K].reshape(K, K)

    def transitions(self, w: NDArray[np.float64]) -> NDArray[np.float64]:
        """View (n_edge_types, n_labels, n_labels): one transition block per edge type."""
        K = self.n_labels
        off = self.transition_offset
        return w[off : off + self.n_edge_types * K * K].reshape(self.n_edge_types, K, K)

    def check_weights(self, w: NDArray[np.float64]) -> NDArray[np.float64]:
        w = np.ascontiguousarray(w, FLOAT)
        if w.shape != (self.n_features,):
            raise ValueError(f"weights must have shape ({self.n_features},); got {w.shape}")
        return w


def observed_features(
    data,
    feature_map: FeatureMap,
    *,
    all_states: bool,
    all_transitions: bool,
    dropped: tuple[NDArray[np.int64], NDArray[np.int64]] | None = None,
) -> NDArray[np.int64] | None:
    """Flat indices of the weights of CRFsuite's model of ``data`` (a ``SequenceData``).

    CRFsuite (``crf1df_generate`` in crf1d_feature.c) creates a state feature (attribute, label)
    for every attribute of every training token with that token's label, its frequency being
    the sum of the attribute's values there, and a transition feature (label at t, label at
    t+1) for every label bigram inside a sequence (no start or end transitions); it keeps the
    features of frequency >= ``feature.minfreq`` (0 by default: an (attribute, label) pair
    whose values sum to a negative number is dropped). ``all_states`` (CRFsuite's
    ``feature.possible_states``) adds every label for every attribute, ``all_transitions``
    (``feature.possible_transitions``) every label pair. Every other weight of the dense
    layout is structurally zero. Bias rows, which CRFsuite has not, are always free.
    One deviation: with ``all_states`` every state weight is free, where CRFsuite still drops
    the pairs of negative frequency (only possible with negative attribute values), so that
    the dense model stays the one every solver trains.

    ``dropped`` = (token, attribute id) of attribute occurrences the packed data left out
    because their values summed to 0 on the token (a bool feature that is False): CRFsuite
    still creates their features, of frequency 0.

    Returns the sorted free indices, or None when both flags are set (every weight is free).
    """
    if all_states and all_transitions:
        return None
    if feature_map.n_edge_types != 1:
        raise ValueError("CRFsuite's sparse model is defined for chains (one transition block)")
    A, K = feature_map.n_attributes, feature_map.n_labels
    labels = data.labels
    if all_states:
        states = np.ones(A * K, bool)
    else:
        per_token = np.diff(data.attr_offsets)
        keys = data.attr_ids * K + np.repeat(labels, per_token)
        seen = np.bincount(keys, minlength=A * K) > 0
        if dropped is not None and dropped[0].size:
            seen[dropped[1] * K + labels[dropped[0]]] = True
        frequency = np.bincount(keys, weights=data.attr_values, minlength=A * K)
        states = seen & (frequency >= 0.0)
    if all_transitions:
        trans = np.ones(K * K, bool)
    else:
        inside = np.ones(max(labels.size - 1, 0), bool)
        inside[data.seq_offsets[1:-1] - 1] = False  # no bigram across a sequence boundary
        trans = np.zeros(K * K, bool)
        trans[labels[:-1][inside] * K + labels[1:][inside]] = True
    bias = np.ones(feature_map.n_bias_rows * K, bool)
    return np.flatnonzero(np.concatenate([states, bias, trans])).astype(np.int64)
