"""Epoch kernel of CRFsuite's ``l2sgd``: SGD on the L2-regularised log-loss, one sequence a step.

CRFsuite (``train_l2sgd.c``) keeps the weights as ``decay * w``: step s (t = s-th step since the
start, t0 from the calibration) uses eta = 1 / (lambda (t0 + t)), multiplies decay by
(1 - eta lambda) (the L2 shrink of every weight at once), and adds
gain (F(x_i, y_i) - E_{p(.|x_i; decay w)} F(x_i, .)) with gain = eta / decay to the weights of
sequence i only (``free`` coordinates: the model's features). The caller folds decay into w at
the end of each epoch.

``bufs`` = (potentials workspace of :func:`crfsdca.kernels.structures.chain.sequence_potentials`,
log_node (>=T, K), log_edge (>=T-1, K, K), trans (K, K)) float64; ``data`` is
:meth:`SequenceData.arrays`; ``dims`` = (A, K, n_bias).
"""

from __future__ import annotations

import math

from crfsdca.kernels.jit import njit
from crfsdca.kernels.structures.chain import (
    forward_backward,
    gold_score,
    sequence_potentials,
    transition_exp,
)


@njit(cache=True, nogil=True)
def scaled_loss(data, i, w, scale, dims, bufs):
    """log Z - s(y_i) of sequence i under the weights ``scale * w``; fills the log marginals."""
    pot, log_node, log_edge, trans = bufs
    T, log_trans, _ = sequence_potentials(data, i, w, dims, pot)
    if T == 0:
        return 0.0
    unary = pot[0][:T]
    unary *= scale
    K = trans.shape[0]
    for k in range(K):
        for l in range(K):
            trans[k, l] = scale * log_trans[k, l]
    trans_max = transition_exp(trans, pot[1])
    log_z = forward_backward(
        unary, trans, pot[1], trans_max, pot[2:], log_node[:T], log_edge[: T - 1]
    )
    gold = data[4][data[0][i] : data[0][i + 1]]
    return log_z - gold_score(unary, trans, gold)


@njit(cache=True, nogil=True)
def add_gradient_step(data, i, w, gain, free, dims, bufs):
    """w += gain (F(x_i, y_i) - E[F]) on the free coordinates, from the marginals in bufs.

    Every (attribute, label) weight of an attribute of the sequence gets value * (1[y_t = k]
    - p(y_t = k)); bias rows likewise on their items; every transition 1[y_t, y_t+1 = k, l]
    - p(y_t = k, y_t+1 = l).
    """
    seq_offsets, attr_offsets, attr_ids, attr_values, labels = data
    A, K, n_bias = dims
    log_node, log_edge = bufs[1], bufs[2]
    start, T = seq_offsets[i], seq_offsets[i + 1] - seq_offsets[i]
    off = (A + n_bias) * K
    for t in range(T):
        y = labels[start + t]
        for p in range(attr_offsets[start + t], attr_offsets[start + t + 1]):
            row, v = attr_ids[p] * K, gain * attr_values[p]
            for k in range(K):
                if free[row + k]:
                    w[row + k] += v * ((1.0 if k == y else 0.0) - math.exp(log_node[t, k]))
        for r in range(n_bias):
            if r == 0 or (r == 1 and t == 0) or (r == 2 and t == T - 1):
                for k in range(K):
                    if free[(A + r) * K + k]:
                        w[(A + r) * K + k] += gain * (
                            (1.0 if k == y else 0.0) - math.exp(log_node[t, k])
                        )
        if t + 1 < T:
            z = labels[start + t + 1]
            for k in range(K):
                for l in range(K):
                    if free[off + k * K + l]:
                        gold = 1.0 if (k == y and l == z) else 0.0
                        w[off + k * K + l] += gain * (gold - math.exp(log_edge[t, k, l]))


@njit(cache=True, nogil=True)
def sgd_epoch(data, order, w, free, dims, schedule, bufs):
    """SGD steps on the sequences ``order`` (in order); schedule = (lambda, t0, t).

    Return (summed losses, last loss, t after the epoch, decay): the weights are
    ``decay * w`` afterwards (the caller rescales). A non-finite loss stops the epoch and is
    returned as both losses.
    """
    lam, t0, t = schedule
    decay, total, loss = 1.0, 0.0, 0.0
    for i in order:
        eta = 1.0 / (lam * (t0 + t))
        decay *= 1.0 - eta * lam
        gain = eta / decay
        loss = scaled_loss(data, i, w, decay, dims, bufs)
        if not math.isfinite(loss):  # diverged: the caller reports it
            return loss, loss, t, decay
        add_gradient_step(data, i, w, gain, free, dims, bufs)
        total += loss
        t += 1.0
    return total, loss, t, decay
