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
the round is kept. Otherwise, for a trial sigma' >= 1, the round is kept at the mix
mu + t Delta mu, t in {1/P, ..., (P-1)/P}, that raises the exact dual most: each partition
sends the entropy change of its blocks at every t (from their logs before and after the round,
``Snapshot``), the driver evaluates Delta D(t) = Delta H(t) / n - lambda (t w . Delta w +
t^2 |Delta w|^2 / 2) and sends back t; at t = 1/P (the average) the dual cannot fall, since with
sigma' >= 1 each partition's steps alone raise it and the dual is concave. Trials below 1 (or no
t raising the dual) are undone instead: every partition restores the blocks it stepped on
(their log-marginals, entropies, gap estimates and step sizes) and the round is run again with
the safe sigma' = P, whose ascent CoCoA+ guarantees. So the dual never decreases, whatever
sigma' is tried, and the run is deterministic (cluster = simulation bit for bit): the decisions
depend on sums taken in partition order only.

An undone round's oracle calls count in the epochs (they were spent). After a rejection the
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

from crfsdca.features.sequences import _ranges
from crfsdca.kernels.solvers import sparse_rows
from crfsdca.solvers.sparse_update import Update, attribute_block
from crfsdca.structures.objectives import dot, squared_norm

#: the smallest trial sigma' for some numbers of partitions; the others: a quarter of the safe
#: value P, at least 1.5 (:func:`sigma_min`). Measured on CoNLL-2000 (BENCHMARKS.md section 9),
#: epochs to a gap of 1e-3: P = 2 (m = 50) 21.9 at sigma' >= 1 and 15.9 at >= 1.5 (trials at 1
#: are kept, the dual rises faster, but the exact gap, which the primal at w sets, closes later);
#: P = 4 (m = 50) 24.2 at 1, 23.2 at 1.5 and 2.5; P = 8 (m = 5, seed 0) 28.9 at 1, 28.0 at 1.5,
#: 26.0 at 2, 31.9 at 3, 29.0 at 4 (seed 1: 26.0 at 1 and 2).
SIGMA_MIN: dict[int, float] = {}


def sigma_min(n_partitions: int) -> float:
    """The smallest trial sigma' for ``n_partitions`` partitions: ``SIGMA_MIN``, else
    max(1.5, P / 4)."""
    return float(SIGMA_MIN.get(n_partitions, max(1.5, n_partitions / 4.0)))


#: rounds kept in a row before the trial sigma' halves
SHRINK_AFTER = 4


class Snapshot:
    """The dual state of some blocks of one shard, to put back after a rejected round.

    A block's entries are runs of its flat log-marginal arrays (``runs``: the structure's run
    table); the saved entries of each array are kept run after run in one buffer."""

    def __init__(self, dual: Any, runs: Any, blocks: NDArray[np.int64]) -> None:
        self.blocks = np.unique(blocks)
        first, last = runs.start[self.blocks], runs.start[self.blocks + 1]
        picked = _ranges(first, last - first)
        self.run_block = np.repeat(np.arange(self.blocks.size), last - first)
        self.src = runs.dst[picked].astype(np.int64)
        self.off = runs.off[picked].astype(np.int64)
        self.length = (runs.hi[picked] - runs.lo[picked]).astype(np.int64)
        self.coef = runs.coef[picked]
        self.saved = [
            sparse_rows.gather_runs(flat, self.off[self.src == a], self.length[self.src == a])
            for a, flat in enumerate(_flat_arrays(dual))
        ]
        self.entropies = dual.entropies[self.blocks].copy()
        self.gaps = dual.gap_estimates[self.blocks].copy()
        self.steps = dual.step_sizes[self.blocks].copy()

    @property
    def segments(self):
        """(block's position in self.blocks, array, start, stop, coef, saved logs) per run."""
        used = [0, 0]  # entries of each buffer yielded so far
        for j, a, off, size, coef in zip(
            self.run_block, self.src, self.off, self.length, self.coef, strict=True
        ):
            saved = self.saved[a][used[a] : used[a] + size]
            used[a] += size
            yield int(j), int(a), int(off), int(off + size), float(coef), saved

    def entropy_change(self, dual: Any) -> float:
        """sum over the saved blocks of H~(mu_i) now minus H~(mu_i) when saved."""
        return float(np.sum(dual.entropies[self.blocks] - self.entropies))

    def restore(self, dual: Any) -> None:
        for a, flat in enumerate(_flat_arrays(dual)):
            mine = self.src == a
            sparse_rows.scatter_runs(flat, self.off[mine], self.length[mine], self.saved[a])
        dual.entropies[self.blocks] = self.entropies
        dual.gap_estimates[self.blocks] = self.gaps
        dual.step_sizes[self.blocks] = self.steps

    def _mixed(self, dual: Any, t: float):
        """Per segment: (block position, array, start, stop, coefficient, log((1 - t) mu_saved
        + t mu_now) rounded to the state's dtype, as float64)."""
        arrays = _flat_arrays(dual)
        a, b = np.log1p(-t) if t < 1.0 else -np.inf, np.log(t)
        for j, src, off, stop, coef, old in self.segments:
            now = arrays[src][off:stop].astype(np.float64)
            logs = np.logaddexp(a + old.astype(np.float64), b + now)
            yield j, src, off, stop, coef, logs.astype(arrays[src].dtype).astype(np.float64)

    def mixed_entropies(self, dual: Any, t: float) -> NDArray[np.float64]:
        """H~ of each saved block at (1 - t) mu_saved + t mu_now (0 log 0 = 0)."""
        out = np.zeros(self.blocks.size)
        for j, _, _, _, coef, logs in self._mixed(dual, t):
            if coef != 0.0:
                p = np.exp(logs)
                out[j] -= coef * float(np.sum(np.where(p > 0.0, p * logs, 0.0)))
        return out

    def mixed_entropy_changes(self, dual: Any, ts: NDArray[np.float64]) -> NDArray[np.float64]:
        """sum over the saved blocks of H~ at each mix ``ts`` minus H~ when saved."""
        return np.array([float(np.sum(self.mixed_entropies(dual, t) - self.entropies)) for t in ts])

    def mix(self, dual: Any, t: float) -> None:
        """Move the saved blocks to (1 - t) mu_saved + t mu_now (entropies recomputed; gap
        estimates and step sizes stay those of the round)."""
        entropies = self.mixed_entropies(dual, t)
        arrays = _flat_arrays(dual)
        for _, src, off, stop, _, logs in self._mixed(dual, t):
            arrays[src][off:stop] = logs
        dual.entropies[self.blocks] = entropies


def _flat_arrays(dual: Any) -> tuple[NDArray[Any], NDArray[Any]]:
    """The dual state's log-marginal arrays, flat (the run table's ``dst`` 0 and 1)."""
    return dual.log_edge.reshape(-1), dual.log_node.reshape(-1)


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
    dot, sq = dot_and_square(w, update, n_attributes, n_labels)
    return entropy_change / n - lam * (dot + 0.5 * sq)


def dot_and_square(
    w: NDArray[np.float64], update: Update, n_attributes: int, n_labels: int
) -> tuple[float, float]:
    """(w . Delta w, |Delta w|^2) of a summed update."""
    rows, values, tail = update
    if rows is None:
        return dot(w, values), squared_norm(values)
    w_rows = attribute_block(w, n_attributes, n_labels)[rows]
    w_tail = w[n_attributes * n_labels :]
    rows_dot = float(np.sum(w_rows * values)) + float(w_tail @ tail)
    return rows_dot, float(np.sum(values * values)) + float(tail @ tail)


def damped_steps(n_partitions: int) -> NDArray[np.float64]:
    """The mixes t = 1/P, 2/P, ..., (P-1)/P tried on a rejected round."""
    return np.arange(1, n_partitions) / n_partitions


def best_damping(
    ts: NDArray[np.float64],
    entropy_changes: NDArray[np.float64],
    dot: float,
    sq: float,
    lam: float,
    n: int,
) -> float | None:
    """The t of ``ts`` with the largest D(mu + t Delta mu) - D(mu) >= 0 (None: none):
    Delta D(t) = Delta H(t) / n - lambda (t w . Delta w + t^2 |Delta w|^2 / 2)."""
    change = entropy_changes / n - lam * (ts * dot + 0.5 * ts**2 * sq)
    if not np.any(change >= 0.0):
        return None
    return float(ts[int(np.argmax(np.where(change >= 0.0, change, -np.inf)))])


@dataclass
class SigmaSchedule:
    """The driver's trial sigma' (P: the safe value, no trial)."""

    n_partitions: int
    sigma: float = 0.0  # the first trial: sigma_min(P) (at most P)
    kept: int = 0  # rounds kept in a row at the current sigma'
    rejected: int = 0  # rounds rejected so far
    damped: int = 0  # of which kept at a mix t < 1 (the others undone and run again)

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
        return {
            "sigma": self.sigma,
            "kept": self.kept,
            "rejected": self.rejected,
            "damped": self.damped,
        }

    @classmethod
    def from_json(cls, n_partitions: int, saved: dict[str, Any] | None) -> SigmaSchedule:
        out = cls(n_partitions)
        if saved:
            out.sigma, out.kept, out.rejected = saved["sigma"], saved["kept"], saved["rejected"]
            out.damped = saved.get("damped", 0)  # absent from checkpoints before damping
        return out
