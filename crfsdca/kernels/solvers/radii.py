"""Radii R_i = ||F(x_i, y_i) - F(x_i, y~_i)||^2 of any structure (Le Priol et al. 2018, App. C),
written once against the primitives.

``sag_add_features(s, i, node, sums, 0, g, emit, rest)`` adds -g F(x_i, y_i) on the example's
support with the labels of ``s.layout``; called on the structure (g = 1) and on a copy whose
layout carries y~ (g = -1), it leaves F(x_i, y~_i) - F(x_i, y_i) in the visit's compact rows.
The chain's own ``chain_blocks.radii`` computes the same numbers with its formula.
"""

import numpy as np

from crfsdca.kernels.jit import njit
from crfsdca.kernels.primitives import sag_add_features
from crfsdca.kernels.solvers.sag_epoch import sag_buffers


@njit(cache=True, nogil=True)
def _radii(structure, relabelled, sws):
    n = structure.layout.seq_offsets.shape[0] - 1
    out = np.empty(n)
    v = sws.visit
    v.node[:] = 0.0
    v.sums[:] = 0.0
    lay = structure.layout
    for i in range(n):
        node, sums, emit, rest, _, _ = sag_buffers(structure, i, sws)
        U = lay.uattr_offsets[i + 1] - lay.uattr_offsets[i]
        emit[:U] = 0.0
        rest[:] = 0.0
        sag_add_features(structure, i, node, sums, 0.0, 1.0, emit, rest)
        sag_add_features(relabelled, i, node, sums, 0.0, -1.0, emit, rest)
        out[i] = np.sum(emit[:U] ** 2) + np.sum(rest**2)
    return out


def constant_labellings(seq_offsets: np.ndarray, labels: np.ndarray, K: int) -> np.ndarray:
    """y~: every item of example i labelled with the label least frequent in y_i (the first
    absent one when some label is absent), as ``chain_blocks.radii`` chooses it."""
    n = seq_offsets.shape[0] - 1
    example = np.repeat(np.arange(n), np.diff(seq_offsets))
    counts = np.bincount(example * K + labels, minlength=n * K).reshape(n, K)
    return np.repeat(np.argmin(counts, axis=1), np.diff(seq_offsets)).astype(labels.dtype)


def radii(structure, sws) -> np.ndarray:
    """R_i of every example of ``structure`` (a structure's blocks: ``ChainBlocks``, ...),
    with ``sws`` its SAG workspace's buffers."""
    lay = structure.layout
    tilde = constant_labellings(lay.seq_offsets, lay.labels, structure.dims[1])
    relabelled = structure._replace(layout=lay._replace(labels=tilde))
    return _radii(structure, relabelled, sws)
