"""The training problem of an experiment, and the starting points of the dual methods."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from crfsdca.features.feature_map import FeatureMap
from crfsdca.features.sequences import SequenceData
from crfsdca.structures.problem import Problem

GIBBS_SCORE = 10.0  # the authors' smoothing of the empirical marginals (sdca4crf)


@functools.lru_cache(maxsize=2)
def load_problem(dataset: str, max_sequences: int | None, data_dir: str | None) -> Problem:
    """Default template, first ``max_sequences`` sequences, no bias rows, training support."""
    import data_loaders

    _, train, test = data_loaders.load_encoded(
        dataset, data_dir=data_dir, max_sequences=max_sequences
    )
    n_labels, n_attributes = train.n_labels, train.n_attributes
    train, test = restrict_to_training_support(train, test)
    fm = FeatureMap(train.n_attributes, train.n_labels, n_bias_rows=0)
    meta = {"labels_before": n_labels, "attributes_before": n_attributes}
    return Problem(train=train, feature_map=fm, test=test, name=dataset, meta=meta)


def load_default_problem(dataset: str, max_sequences: int | None, data_dir: str | None) -> Problem:
    """crfsdca's default model of a dataset (3 bias rows, every attribute the encoder knows),
    as ``crfsdca train`` builds it."""
    import data_loaders

    _, train, test = data_loaders.load_encoded(
        dataset, data_dir=data_dir, max_sequences=max_sequences
    )
    fm = FeatureMap(train.n_attributes, train.n_labels)
    return Problem(train=train, feature_map=fm, test=test, name=dataset)


def restrict_to_training_support(
    train: SequenceData, test: SequenceData
) -> tuple[SequenceData, SequenceData]:
    """Drop labels and attributes absent from ``train`` (CRFsuite's model has none of them).

    A label absent from a subset still enters every partition function, which would make the
    objective differ from CRFsuite's. Test tokens with a dropped label get label -1 (an error).
    """
    labels, attributes = np.unique(train.labels), np.unique(train.attr_ids)
    if labels.size == train.n_labels and attributes.size == train.n_attributes:
        return train, test
    label_map = np.full(train.n_labels, -1)
    label_map[labels] = np.arange(labels.size)
    attr_map = np.full(train.n_attributes, -1)
    attr_map[attributes] = np.arange(attributes.size)

    def remap(data: SequenceData) -> SequenceData:
        ids = attr_map[data.attr_ids]
        keep = ids >= 0
        item_of_entry = np.repeat(np.arange(data.n_items), np.diff(data.attr_offsets))
        counts = np.bincount(item_of_entry[keep], minlength=data.n_items)
        return SequenceData(
            seq_offsets=data.seq_offsets,
            attr_offsets=np.concatenate([[0], np.cumsum(counts)]),
            attr_ids=ids[keep],
            attr_values=data.attr_values[keep],
            labels=np.where(data.labels >= 0, label_map[np.maximum(data.labels, 0)], -1),
            n_attributes=attributes.size,
            label_names=tuple(data.label_names[k] for k in labels),
            name=data.name,
            meta=dict(data.meta),
        )

    return remap(train), remap(test)


def dual_start(problem: Problem, start: str, epsilon: float = 1e-3) -> Any:
    """DualState of a starting point: ``gibbs`` (the authors'), ``epsilon`` (crfsdca's mix) or
    ``uniform`` (the uniform law on every block: egstra's OEG start, App. A.1)."""
    from crfsdca.structures.dual import gibbs_start, smoothed_empirical

    if start == "gibbs":
        return gibbs_start(problem, GIBBS_SCORE)
    if start == "epsilon":
        return smoothed_empirical(problem, epsilon)
    if start == "uniform":
        return smoothed_empirical(problem, 1.0)
    raise ValueError(f"start must be gibbs, epsilon or uniform; got {start!r}")


def table1_row(problem: Problem) -> dict[str, Any]:
    """d, n, N, K, A, a and the memory of the float64 edge marginals of a problem."""
    train, fm = problem.train, problem.feature_map
    n, N, K = train.n_sequences, train.n_items, fm.n_labels
    return {
        "d": fm.n_features,
        "n": n,
        "N": N,
        "K": K,
        "A": fm.n_attributes,
        "a": train.attr_ids.size / max(N, 1),
        "mem_gib": (N - n) * K * K * 8 / 2**30,
    }
