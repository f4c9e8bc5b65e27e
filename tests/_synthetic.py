"""Tiny, seeded, deliberately awkward synthetic problems (no data files needed)."""

import numpy as np

from crfsdca.features.feature_map import FeatureMap
from crfsdca.features.sequences import SequenceData
from crfsdca.structures.problem import Problem


def random_sequences(seed, n=10, max_T=4, K=3, A=6, max_attrs=3, binary=False):
    """n sequences of lengths 1..max_T (both ends included), random CSR attributes and labels.

    Some tokens have no attributes, some repeat an attribute id; values are non-binary unless
    ``binary``.
    """
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, max_T + 1, size=n)
    lengths[0] = 1
    lengths[-1] = max_T
    N = int(lengths.sum())
    counts = rng.integers(0, max_attrs + 1, size=N)
    ids = rng.integers(0, A, size=int(counts.sum()))
    if ids.size > 1:
        ids[1] = ids[0]
    values = np.ones(ids.size) if binary else rng.uniform(0.2, 2.0, size=ids.size)
    labels = rng.integers(0, K, size=N)
    return SequenceData(
        seq_offsets=np.concatenate([[0], np.cumsum(lengths)]),
        attr_offsets=np.concatenate([[0], np.cumsum(counts)]),
        attr_ids=ids,
        attr_values=values,
        labels=labels,
        n_attributes=A,
        label_names=tuple(f"L{k}" for k in range(K)),
        name="synthetic",
    )


def random_problem(seed=0, n=10, max_T=4, K=3, A=6, n_bias_rows=3, regularization=None, **kw):
    data = random_sequences(seed, n=n, max_T=max_T, K=K, A=A, **kw)
    return Problem(
        train=data,
        feature_map=FeatureMap(A, K, n_bias_rows),
        regularization=regularization,
        name="synthetic",
    )
