"""Growing an SDCA run: new sequences and new attributes join a trained dual state.

With lambda n held fixed (lambda = 1/n, or CRFsuite's c2: lambda = 2 c2 / n), the primal-dual
map w = (1 / (lambda n)) sum_i [F(x_i, y_i) - E_mu_i F] is a sum over sequences, so adding
sequences adds their contributions: the old marginals and w stay as they are (w gains zero rows
for attributes first seen), the new sequences start from SDCA's configured dual start (the
smoothed empirical marginals by default) with their own contribution added to w, and w = w_hat(mu)
holds over all the data. The duality gap of the continued run then certifies the objective over
every sequence seen.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from crfsdca._dtypes import INDEX
from crfsdca.features.feature_map import FeatureMap
from crfsdca.features.sequences import SequenceData
from crfsdca.solvers.samplers import INITIAL_GAP
from crfsdca.solvers.sdca import SDCAConfig, SDCAState, initial_dual
from crfsdca.structures.dual import DualState
from crfsdca.structures.problem import Problem

__all__ = ["concatenate", "extend_weights", "grow_state", "with_attributes"]


def with_attributes(data: SequenceData, n_attributes: int) -> SequenceData:
    """The same sequences in a larger attribute space (ids unchanged)."""
    if n_attributes < data.n_attributes:
        raise ValueError(f"cannot shrink {data.n_attributes} attributes to {n_attributes}")
    return SequenceData(
        *data.arrays()[:5],
        n_attributes=n_attributes,
        label_names=data.label_names,
        name=data.name,
        meta=dict(data.meta),
    )


def concatenate(a: SequenceData, b: SequenceData) -> SequenceData:
    """The sequences of ``a`` then those of ``b`` (same labels; the larger attribute space)."""
    if tuple(a.label_names) != tuple(b.label_names):
        raise ValueError("the two sets of sequences have different label sets")
    return SequenceData(
        seq_offsets=np.concatenate([a.seq_offsets, b.seq_offsets[1:] + a.n_items]).astype(INDEX),
        attr_offsets=np.concatenate(
            [a.attr_offsets, b.attr_offsets[1:] + a.attr_offsets[-1]]
        ).astype(INDEX),
        attr_ids=np.concatenate([a.attr_ids, b.attr_ids]),
        attr_values=np.concatenate([a.attr_values, b.attr_values]),
        labels=np.concatenate([a.labels, b.labels]),
        n_attributes=max(a.n_attributes, b.n_attributes),
        label_names=a.label_names,
        name=a.name,
    )


def extend_weights(w: NDArray[np.float64], old: FeatureMap, new: FeatureMap) -> NDArray[np.float64]:
    """``w`` of feature map ``old`` in ``new`` (more attributes): zero rows for the new ones."""
    if (new.n_labels, new.n_bias_rows, new.n_edge_types) != (
        old.n_labels,
        old.n_bias_rows,
        old.n_edge_types,
    ):
        raise ValueError("only the number of attributes may grow")
    out = new.zeros()
    new.emission(out)[: old.n_attributes] = old.emission(w)
    new.bias(out)[:] = old.bias(w)
    out[new.transition_offset :] = w[old.transition_offset :]
    return out


def _dual_average(dual: DualState) -> NDArray[np.float64]:
    """w_hat(mu): the weights, or with an l1 term the dual-average vector they threshold."""
    return dual.weights if dual.dual_average is None else dual.dual_average


def grow_state(
    state: SDCAState,
    old_fm: FeatureMap,
    new_fm: FeatureMap,
    new_data: SequenceData,
    lam_n: float,
    config: SDCAConfig,
) -> SDCAState:
    """``state`` (float64 duals) with ``new_data`` appended at the configured start (gibbs or
    smoothed); w = w_hat(mu) over both, for a problem whose lambda times n is ``lam_n`` (with
    an l1 term the solver thresholds it again: ``LocalSDCA``)."""
    old = state.dual
    part = Problem(
        train=with_attributes(new_data, new_fm.n_attributes),
        feature_map=new_fm,
        regularization=lam_n / new_data.n_sequences,
    )
    fresh = initial_dual(part, config)
    dual = DualState(
        log_node=np.concatenate([old.log_node, fresh.log_node]),
        log_edge=np.concatenate([old.log_edge, fresh.log_edge]),
        entropies=np.concatenate([old.entropies, fresh.entropies]),
        gap_estimates=np.concatenate(
            [old.gap_estimates, np.full(new_data.n_sequences, INITIAL_GAP)]
        ),
        weights=extend_weights(_dual_average(old), old_fm, new_fm) + fresh.weights,
        step_sizes=np.concatenate([old.step_sizes, fresh.step_sizes]),
    )
    return SDCAState(dual=dual, rng_state=state.rng_state)
