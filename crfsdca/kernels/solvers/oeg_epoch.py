"""Compiled online exponentiated gradient (OEG) visits, written once for every structure.

One visit of example i (``baselines.md`` §6; the math is in
``crfsdca.kernels.structures.chain_eg``): the structure prepares the EG direction at w
(``crfsdca.kernels.primitives.oeg_prepare``), then trials at the example's learning rate eta_i (one
oracle call each, ``oeg_trial``) until the dual grows, halving eta_i after each failure (at most
``params.max_halvings`` times); an accepted trial replaces mu_i and moves w (``oeg_accept``) and
grows eta_i by ``params.growth`` (capped at 1). numba compiles one specialisation per structure
type.

Arrays: ``dual`` an ``oeg.OEGDual`` (log_node, log_edge, entropies, learning rates) in the
structure's layout, ``params`` an ``oeg.OEGParams``, ``ws`` the structure's buffers.
"""

import numpy as np

from crfsdca.kernels.jit import njit
from crfsdca.kernels.primitives import oeg_accept, oeg_prepare, oeg_trial
from crfsdca.kernels.solvers.oeg import N_STATS, OEGDual, OEGParams
from crfsdca.kernels.structures import chain_eg, junction_eg, tree_eg  # noqa: F401


@njit(cache=True, nogil=True)
def _step(i, structure, dual, w, params, ws):
    """One OEG visit of example i; returns (oracle calls, accepted, status)."""
    entropies, rates = dual.entropies, dual.learning_rates
    oeg_prepare(structure, i, dual, w, ws)
    eta = rates[i]
    for h in range(params.max_halvings + 1):
        log_z, h_new, gain = oeg_trial(structure, i, eta, w, params.lam_n, ws)
        if not np.isfinite(log_z):
            return h + 1, False, 1
        if gain - entropies[i] > 0.0:
            oeg_accept(structure, i, dual, w, ws)
            entropies[i] = h_new
            rates[i] = min(eta * params.growth, 1.0)
            return h + 1, True, 0
        eta *= 0.5
    return params.max_halvings + 1, False, 0


@njit(cache=True, nogil=True)
def _run_steps(structure, dual, w, params, indices, ws):
    """Visit indices[s] in turn until they run out or params.budget oracle calls are made.

    Returns (visits done, oracle calls, status, stats); status 0 = ok, i + 1 = non-finite
    log Z on example i (the state is that before the visit); stats = (accepted steps,
    halvings, visits that reached the halving cap).
    """
    stats = np.zeros(N_STATS)
    done, calls = 0, 0
    for s in range(indices.shape[0]):
        if calls >= params.budget:
            break
        c, accepted, status = _step(indices[s], structure, dual, w, params, ws)
        calls += c
        if status != 0:
            return done, calls, indices[s] + 1, stats
        done += 1
        stats[0] += 1.0 if accepted else 0.0
        stats[1] += c - 1 if accepted else c
        stats[2] += 0.0 if accepted else 1.0
    return done, calls, 0, stats


def run_steps(structure, dual, w, params, indices, ws):
    """Run OEG visits (see ``_run_steps``); returns (done, calls, status, stats)."""
    if not isinstance(params, OEGParams) or not isinstance(dual, OEGDual):
        raise ValueError(
            f"expected OEGParams and OEGDual; got {type(params).__name__} and {type(dual).__name__}"
        )
    indices = np.ascontiguousarray(indices, dtype=np.int64)
    done, calls, status, stats = _run_steps(structure, dual, w, params, indices, ws)
    return int(done), int(calls), int(status), stats
