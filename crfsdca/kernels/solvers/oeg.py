"""What every structure's OEG shares: the parameters of a call (``OEGParams``), the dual state it
updates (``OEGDual``) and its statistics. The dual gain's inner products on a compact direction
are ``crfsdca.kernels.structures.direction.compact_dot``.

The visit and its loop are ``crfsdca.kernels.solvers.oeg_epoch``; each structure's
exponentiated-gradient primitives (``crfsdca.kernels.primitives``: the reparameterisation theta(mu),
the trial's marginals, the accepted step) are ``chain_eg``, ``tree_eg`` and ``junction_eg``.
"""

from typing import NamedTuple


class OEGParams(NamedTuple):
    """What an OEG call is told."""

    lam_n: float  # lambda n
    max_halvings: int  # halvings of eta_i per visit at most
    growth: float  # eta_i <- min(growth eta_i, 1) after an accepted trial
    budget: int  # oracle calls at most


class OEGDual(NamedTuple):
    """The dual state an OEG call updates, in the structure's layout (as SDCA's ``DualState``):
    log-marginals, the blocks' entropies and their learning rates eta_i."""

    log_node: object
    log_edge: object
    entropies: object
    learning_rates: object


# stats: accepted steps, halvings, visits that reached the halving cap (no update)
N_STATS = 3
