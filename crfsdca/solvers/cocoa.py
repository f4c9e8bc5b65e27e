"""The per-attribute sigma' of CoCoA+ ("sparse" aggregation of distributed SDCA).

CoCoA+ (Ma, Smith, Jaggi et al. 2015) adds the partitions' updates and has each partition
maximise its local subproblem with the quadratic term scaled by sigma'. The scalar sigma' = P
(DisDCA's practical variant) is safe for any data because ``|sum_k dv_k|^2 <= P sum_k
|dv_k|^2``. Coordinate by coordinate, Cauchy-Schwarz gives the tighter bound

    (sum_k dv_kj)^2 <= s_j sum_k dv_kj^2,   s_j = number of partitions whose shard has feature j,

so the local quadratic ``(lambda n / 2) dv^T S dv`` with S = diag(s_j) keeps every round's dual
ascent guaranteed (the sum of the local subproblems' increases is a lower bound of the dual's
increase), for any number of local steps. On sentence shards most attributes occur in few
partitions, so s_j is far below P for most rows; the bias rows and the label transitions occur
everywhere (s_j = P).

The SDCA kernels take one scalar scale. A partition runs them unchanged on a change of
variables: attribute j's values are multiplied by c_j = sqrt(s_j / P) and the kernels use the
scale P, so the kernel's coordinates are w'_j = w_j / c_j (rows after the attributes: c = 1).
A step then moves the true w_j by s_j times its unscaled increment, and the kernel's quadratic
is (lambda n / P) sum_j c_j^2 P b_j^2 = lambda n b^T S b. With ``u'`` the kernel's local copy,
the partition's Delta w is (u' - w') / (P c).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray


def sequences_of(train: Any) -> Any:
    """The :class:`~crfsdca.features.sequences.SequenceData` of the items (chains, trees,
    junctions)."""
    return getattr(train, "nodes", train)


def attribute_counts(shards: list[NDArray[np.integer]], n_attributes: int) -> NDArray[np.int64]:
    """s_j: for each attribute, the number of shards (arrays of attribute ids) holding it."""
    counts = np.zeros(n_attributes, np.int64)
    for ids in shards:
        present = np.zeros(n_attributes, bool)
        present[ids] = True
        counts += present
    return counts


def coordinate_scale(
    counts: NDArray[np.integer], n_partitions: int, n_labels: int, n_features: int
) -> NDArray[np.float64]:
    """c over the whole weight vector: sqrt(s_j / P) on attribute j's K weights, 1 after them.

    An attribute that no shard holds gets c = 1 (its weights never move)."""
    s = np.maximum(np.asarray(counts, np.float64), 1.0)
    c = np.ones(n_features)
    c[: s.size * n_labels] = np.repeat(np.sqrt(s / n_partitions), n_labels)
    return c


def scaled_train(train: Any, counts: NDArray[np.integer], n_partitions: int) -> Any:
    """``train`` with attribute j's values multiplied by sqrt(s_j / P) (a new object)."""
    seqs = sequences_of(train)
    c_attr = np.sqrt(np.maximum(np.asarray(counts, np.float64), 1.0) / n_partitions)
    scaled = replace(seqs, attr_values=seqs.attr_values * c_attr[seqs.attr_ids])
    return scaled if seqs is train else replace(train, nodes=scaled)
