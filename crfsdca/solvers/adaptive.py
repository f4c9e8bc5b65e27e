"""The adaptive sigma' of distributed SDCA ("adaptive" aggregation): try, check, fall back.

CoCoA+ adding (Ma, Smith, Jaggi et al. 2015) has every partition maximise its local
subproblem with the quadratic term scaled by sigma'; sigma' = P is safe for any data (the dual
ascends every round), but on sentence shards, which share few attributes, it makes every local
step several times too short. Here a round is first tried with a smaller sigma' (the local steps
see less curvature and go further). The driver knows the round's exact change of the dual

    D(mu) = (1/n) sum_i H~(mu_i) - (lambda/2) |w|^2,
    Delta D = (1/n) sum_k Delta H_k - lambda (w . Delta w + |Delta w|^2 / 2),

from the partitions' entropy changes on the blocks they stepped on (a scalar each, sent with
their updates) and the summed update Delta w (sparse, known to the driver). When Delta D >= 0
the round is kept; otherwise every partition restores the blocks it stepped on (their
log-marginals, entropies, gap estimates and step sizes, saved before the round: ``Snapshot``)
and the round is run again with the safe sigma' = P, whose ascent CoCoA+ guarantees. So the dual
never decreases, whatever sigma' is tried, and the run is deterministic (cluster = simulation
bit for bit): the decisions depend on sums taken in partition order only.

A rejected round's oracle calls count in the epochs (they were spent). After a rejection the
next trial sigma' doubles (up to P); after ``SHRINK_AFTER`` rounds kept in a row it halves (down
to ``sigma_min(P)``).

To save and restore blocks, a round steps on examples drawn before it starts (the sampling law
of the shard, gap sampling by default, without replacement within the round): the law's tree
is not updated between the steps of one round, as a serial epoch would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from crfsdca.solvers.sparse_update import Update, attribute_block

#: the smallest trial sigma' by number of partitions (1: plain adding of the local steps).
#: Measured on CoNLL-2000 (BENCHMARKS.md section 9), epochs to a gap of 1e-3 at sigma' >= 1 and
#: >= 1.5: P = 2 21.9 and 15.9 (trials at 1 are kept, the dual rises faster, but the exact gap,
#: which the primal at w sets, closes later), P = 4 24.2 and 26.2, P = 8 38.4 and 39.4.
SIGMA_MIN = {2: 1.5}


def sigma_min(n_partitions: int) -> float:
    """The smallest trial sigma' for ``n_partitions`` partitions (``SIGMA_MIN``, else 1)."""
    return float(SIGMA_MIN.get(n_partitions, 1.0))


#: rounds kept in a row before the trial sigma' halves
SHRINK_AFTER = 4


class Snapshot:
    """The dual state of some blocks of one shard, to put back after a rejected round."""

    def __init__(self, dual: Any, runs: Any, blocks: NDArray[np.int64]) -> None:
        self.blocks = np.unique(blocks)
        arrays = (dual.log_edge.reshape(-1), dual.log_node.reshape(-1))
        self.segments = []
        for i in self.blocks:
            a, b = runs.start[i], runs.start[i + 1]
            for r in range(a, b):
                src, off = int(runs.dst[r]), int(runs.off[r])
                stop = off + int(runs.hi[r] - runs.lo[r])
                self.segments.append((src, off, stop, arrays[src][off:stop].copy()))
        self.entropies = dual.entropies[self.blocks].copy()
        self.gaps = dual.gap_estimates[self.blocks].copy()
        self.steps = dual.step_sizes[self.blocks].copy()

    def entropy_change(self, dual: Any) -> float:
        """sum over the saved blocks of H~(mu_i) now minus H~(mu_i) when saved."""
        return float(np.sum(dual.entropies[self.blocks] - self.entropies))

    def restore(self, dual: Any) -> None:
        arrays = (dual.log_edge.reshape(-1), dual.log_node.reshape(-1))
        for src, off, stop, values in self.segments:
            arrays[src][off:stop] = values
        dual.entropies[self.blocks] = self.entropies
        dual.gap_estimates[self.blocks] = self.gaps
        dual.step_sizes[self.blocks] = self.steps


def dual_change(
    w: NDArray[np.float64],
    update: Update,
    entropy_change: float,
    lam: float,
    n: int,
    n_attributes: int,
    n_labels: int,
) -> float:
    """D(w + Delta w) - D(w) of a round: ``entropy_change`` the partitions' summed Delta H,
    ``update`` the summed Delta w (w is the driver's, before the round)."""
    rows, values, tail = update
    if rows is None:
        dot, sq = float(w @ values), float(values @ values)
    else:
        w_rows = attribute_block(w, n_attributes, n_labels)[rows]
        w_tail = w[n_attributes * n_labels :]
        dot = float(np.sum(w_rows * values)) + float(w_tail @ tail)
        sq = float(np.sum(values * values)) + float(tail @ tail)
    return entropy_change / n - lam * (dot + 0.5 * sq)


@dataclass
class SigmaSchedule:
    """The driver's trial sigma' (P: the safe value, no trial)."""

    n_partitions: int
    sigma: float = 0.0  # the first trial: sigma_min(P) (at most P)
    kept: int = 0  # rounds kept in a row at the current sigma'
    rejected: int = 0  # rounds rejected so far

    def __post_init__(self) -> None:
        self.floor = min(sigma_min(self.n_partitions), float(self.n_partitions))
        self.sigma = min(max(self.sigma, self.floor), float(self.n_partitions))

    @property
    def safe(self) -> float:
        return float(self.n_partitions)

    def keep(self) -> None:
        self.kept += 1
        if self.kept >= SHRINK_AFTER:
            self.sigma, self.kept = max(self.floor, self.sigma / 2.0), 0

    def reject(self) -> None:
        self.rejected += 1
        self.sigma, self.kept = min(self.safe, self.sigma * 2.0), 0

    def to_json(self) -> dict[str, Any]:
        return {"sigma": self.sigma, "kept": self.kept, "rejected": self.rejected}

    @classmethod
    def from_json(cls, n_partitions: int, saved: dict[str, Any] | None) -> SigmaSchedule:
        out = cls(n_partitions)
        if saved:
            out.sigma, out.kept, out.rejected = saved["sigma"], saved["kept"], saved["rejected"]
        return out
