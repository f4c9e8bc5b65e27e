"""Compiled steps of the dual-free SPDC (Wang & Xiao 2017, Algorithm 7), written once for every
structure.

One step on example k (the math is in ``crfsdca.kernels.solvers.spdc``): the extrapolated point
x~ on the rows the example reads, the dual step at x~ through the structure's
exponentiated-gradient primitives at the rate eta = sigma / (1 + sigma) (``oeg_prepare``,
``oeg_trial``: one oracle call; ``oeg_accept``: mu_k and w_hat(mu)), then the primal step on
x = w_hat + beta z along the step's primal change v (``oeg_change``). numba compiles one
specialisation per structure type (``ChainBlocks``, ``TreeBlocks``, ``JunctionBlocks``).

Arrays: ``dual`` an ``spdc.SPDCDual``, ``w_hat`` the (d,) w_hat(mu), ``primal`` an
``spdc.SPDCPrimal``, ``params`` an ``spdc.SPDCParams``, ``ws`` the structure's OEG buffers.
"""

import numpy as np

from crfsdca.kernels.jit import njit
from crfsdca.kernels.primitives import (
    oeg_accept,
    oeg_change,
    oeg_prepare,
    oeg_trial,
    sag_rest_rows,
)
from crfsdca.kernels.solvers.spdc import (
    BETA,
    LAST_PULL,
    SPDCDual,
    SPDCParams,
    SPDCPrimal,
    clear_rows,
    extrapolate,
)
from crfsdca.kernels.structures import chain_eg, junction_eg, tree_eg  # noqa: F401
from crfsdca.kernels.structures.direction import add_direction


@njit(cache=True, nogil=True)
def _attribute_rows(structure, i):
    lay = structure.layout
    return lay.slot_attrs[lay.uattr_offsets[i] : lay.uattr_offsets[i + 1]]


@njit(cache=True, nogil=True)
def _primal_step(structure, k, primal, params, ws):
    """e <- rho e + z_coef v (beta <- rho beta, z += (z_coef / beta) v); prev <- theta tau
    lambda (n - 1) v on k's support, after clearing the last step's."""
    A, K, R = structure.dims[0], structure.dims[1], sag_rest_rows(structure)
    sa = _attribute_rows(structure, k)
    emit, rest = oeg_change(structure, k, ws)
    scalars = primal.scalars
    beta = scalars[BETA] * params.rho
    add_direction(params.z_coef / beta, sa, emit, rest, primal.z, K, A)
    if primal.last[0] >= 0:
        clear_rows(_attribute_rows(structure, primal.last[0]), A, R, K, primal.prev)
    pull = params.theta * params.tau_lam
    add_direction(pull * (params.n - 1), sa, emit, rest, primal.prev, K, A)
    primal.last[0] = k
    scalars[LAST_PULL] = pull
    if beta < params.rescale:  # fold beta into z (x unchanged)
        primal.z[:] *= beta
        beta = 1.0
    scalars[BETA] = beta


@njit(cache=True, nogil=True)
def _step(k, structure, dual, w_hat, primal, params, ws):
    """One step on example k; returns 0, or 1 when log Z of the dual step is not finite (the
    state is then that before the step)."""
    A, K, R = structure.dims[0], structure.dims[1], sag_rest_rows(structure)
    extrapolate(_attribute_rows(structure, k), A, R, K, w_hat, primal)
    oeg_prepare(structure, k, dual, primal.point, ws)
    log_z, h_new, _ = oeg_trial(structure, k, params.eta, primal.point, params.lam_n, ws)
    if not np.isfinite(log_z):
        return 1
    oeg_accept(structure, k, dual, w_hat, ws)
    dual.entropies[k] = h_new
    _primal_step(structure, k, primal, params, ws)
    return 0


@njit(cache=True, nogil=True)
def _run_steps(structure, dual, w_hat, primal, params, indices, ws):
    """Steps on indices[s] in turn until they run out or params.budget oracle calls are made.

    Returns (steps done, status); status 0 = ok, k + 1 = non-finite log Z on example k.
    """
    done = 0
    for s in range(min(indices.shape[0], params.budget)):
        if _step(indices[s], structure, dual, w_hat, primal, params, ws) != 0:
            return done, indices[s] + 1
        done += 1
    return done, 0


def run_steps(structure, dual, w_hat, primal, params, indices, ws):
    """Run SPDC steps (see ``_run_steps``); returns (steps done, status). Each step is one
    oracle call and one update."""
    if not isinstance(params, SPDCParams) or not isinstance(primal, SPDCPrimal):
        raise ValueError(
            f"expected SPDCParams and SPDCPrimal; got {type(params).__name__} and"
            f" {type(primal).__name__}"
        )
    if not isinstance(dual, SPDCDual):
        raise ValueError(f"expected SPDCDual; got {type(dual).__name__}")
    indices = np.ascontiguousarray(indices, dtype=np.int64)
    done, status = _run_steps(structure, dual, w_hat, primal, params, indices, ws)
    return int(done), int(status)
