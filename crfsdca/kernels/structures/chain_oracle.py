"""Oracle marginals for the dual solvers: log-marginals and probabilities in one pass.

Dual methods (SDCA) compare the oracle's marginals nu_i with their dual variable mu_i entry by
entry and need both nu and log nu. From the scaled messages of ``crfsdca.kernels.structures.chain``
the probabilities are products, with no ``exp`` per entry:

    nu_t(k) = alpha[t, k] beta[t, k],   nu_t(k, l) = alpha[t, k] E[k, l] v[t+1, l],

and the logs come from :func:`crfsdca.kernels.structures.chain.scaled_log_marginals` (K logs per
position, additions per entry). Both are clipped (probabilities at 1, logs at 0). When the scaled
messages leave their safe range the sequence is redone exactly in log space and nu = exp(log nu).
"""

from __future__ import annotations

from crfsdca.kernels.jit import njit
from crfsdca.kernels.numerics.fastmath import exp_into
from crfsdca.kernels.structures.chain import (
    log_space_forward_backward,
    scaled_backward,
    scaled_forward,
    scaled_log_marginals,
    sequence_potentials,
)

VEC = {"cache": True, "nogil": True, "error_model": "numpy"}


@njit(**VEC)
def _edge_products(a, e_row, v, out, K):
    for l in range(K):
        out[l] = min(a * e_row[l] * v[l], 1.0)


@njit(cache=True, nogil=True)
def scaled_probabilities(exp_trans, ws, node, edge):
    """node (T, K) and edge (T-1, K, K) probabilities from the scaled messages (both passes)."""
    exp_unary, alpha, beta = ws[0], ws[1], ws[2]
    T, K = node.shape
    for t in range(T):
        for k in range(K):
            node[t, k] = min(alpha[t, k] * beta[t, k], 1.0)
    for t in range(T - 1):
        v = exp_unary[t + 1]
        for k in range(K):
            _edge_products(alpha[t, k], exp_trans[k], v, edge[t, k], K)


@njit(cache=True, nogil=True, inline="always")
def block_forward_backward(unary, log_trans, exp_trans, trans_max, ws, logs, probs):
    """Return log Z; fill logs = (log_node, log_edge) and probs = (node, edge) of one sequence.

    Arguments as :func:`crfsdca.kernels.structures.chain.forward_backward`; the four outputs are
    C-contiguous (T, K) and (T-1, K, K) arrays.
    """
    T, K = unary.shape
    log_node, log_edge = logs
    node, edge = probs
    log_z, ok = scaled_forward(unary, exp_trans, trans_max, ws)
    if ok and scaled_backward(exp_trans, ws, T):
        scaled_probabilities(exp_trans, ws, node, edge)
        scaled_log_marginals(unary, log_trans, trans_max, ws, log_node, log_edge)
        return log_z
    log_z = log_space_forward_backward(unary, log_trans, ws, log_node, log_edge)
    for t in range(T):
        exp_into(log_node[t], 0.0, node[t], 0, K)
    for t in range(T - 1):
        for k in range(K):
            exp_into(log_edge[t, k], 0.0, edge[t, k], 0, K)
    return log_z


@njit(cache=True, nogil=True, inline="always")
def sequence_block_marginals(data, i, w, dims, ws, logs, probs):
    """:func:`crfsdca.kernels.structures.chain.sequence_marginals` that also fills probabilities
    ``probs``.

    logs and probs hold exactly T and T - 1 rows (node, edge).
    """
    T, log_trans, trans_max = sequence_potentials(data, i, w, dims, ws)
    return block_forward_backward(ws[0][:T], log_trans, ws[1], trans_max, ws[2:], logs, probs)
