"""Block oracle: probabilities and logs in one pass equal chain.forward_backward's log-marginals."""

import numpy as np
import pytest
from test_kernels_chain import potentials, run_forward_backward, workspace

from crfsdca.kernels.structures import chain
from crfsdca.kernels.structures import chain_oracle as block_oracle


def run_block(u, trans):
    T, K = u.shape
    exp_trans = np.empty((K, K))
    trans_max = chain.transition_exp(trans, exp_trans)
    logs = (np.empty((T, K)), np.empty((T - 1, K, K)))
    probs = (np.empty((T, K)), np.empty((T - 1, K, K)))
    log_z = block_oracle.block_forward_backward(
        u, trans, exp_trans, trans_max, workspace(T, K), logs, probs
    )
    return log_z, logs, probs


# scale 1: scaled messages; scale 2000: messages leave their range, exact log-space fallback
@pytest.mark.parametrize("T,K,scale", [(1, 3, 1.0), (2, 4, 1.0), (9, 5, 3.0), (7, 4, 2000.0)])
def test_block_marginals_equal_the_chain_log_marginals(T, K, scale):
    rng = np.random.default_rng(T * 100 + K)
    u, trans = potentials(rng, T, K, scale)
    log_z, log_node, log_edge = run_forward_backward(u, trans)
    b_log_z, (b_log_node, b_log_edge), (node, edge) = run_block(u, trans)
    assert b_log_z == log_z
    np.testing.assert_array_equal(b_log_node, log_node)
    np.testing.assert_array_equal(b_log_edge, log_edge)
    # products of scaled messages vs exp of the log-marginals: a few roundings apart
    np.testing.assert_allclose(node, np.exp(log_node), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(edge, np.exp(log_edge), rtol=1e-12, atol=1e-300)
    assert np.all(node <= 1.0) and np.all(edge <= 1.0)
    np.testing.assert_allclose(node.sum(axis=1), 1.0, rtol=1e-12)
    if T > 1:
        np.testing.assert_allclose(edge.sum(axis=2), node[:-1], rtol=1e-10, atol=1e-300)
