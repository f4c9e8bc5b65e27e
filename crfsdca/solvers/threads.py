"""Multi-threaded SDCA on one machine: threads that step at once on one shared w.

Each thread owns a fixed share of the examples (a seeded random partition) with its own sampler
over their gap estimates, and steps on them with the one engine's step
(``crfsdca.kernels.solvers.sdca_epoch``, a
:class:`~crfsdca.kernels.solvers.team.Team` per thread),
reading and writing the shared w without locks, as PASSCoDe-Wild does (Hsieh, Yu & Dhillon,
ICML 2015). Every dual block belongs to one thread, so the dual state is always a valid point;
only w can be off, where two threads wrote one entry at the same moment and one update was
lost. So each thread also adds its changes of w to its own vector, which no other thread
writes, and at the end of every stretch (each evaluation) w is set to the last exact w plus
these changes: w is then w_hat(mu) of the dual state, as after a serial stretch, and the
duality gap the monitor reports is a true gap, whatever the threads raced on.

A stretch runs in bursts of about 1/8 of an epoch (``BURSTS_PER_EPOCH``): a burst ends once
every thread has taken its share of the burst's steps (in proportion to its examples) and their
steps sum to the burst's length (a thread that is ahead keeps stepping on its examples while
another finishes: no thread waits idle), so that no thread runs far ahead of the others when the
machine runs them unevenly (one thread stepping alone on its share for a whole stretch, as on a
loaded machine, pulls w towards its share's optimum and back: on 60 sequences beside a busy
core 38-57 epochs and once 200 without reaching 1e-4, against 19-28 in bursts and 17 on one
core). The steps stop early once the running gap estimate of all the examples falls to
``stop_gap``; the team then checks the duality gap itself, with one exact primal
(:meth:`TeamSDCA.run_until_eval`). The steps' order depends on the threads' timing: a run with
more than one thread is not reproducible bit for bit (``threads=1`` is serial SDCA).
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from numpy.typing import NDArray

from crfsdca.kernels.numerics.threads import get_threads
from crfsdca.kernels.solvers import sdca_epoch
from crfsdca.kernels.solvers.prox import soft_threshold
from crfsdca.kernels.solvers.team import Team
from crfsdca.solvers.local import PHASE_SECONDS, LocalSDCA
from crfsdca.solvers.samplers import TreeSampler
from crfsdca.solvers.sdca_config import TEAM_NON_UNIFORMITY

if TYPE_CHECKING:
    from crfsdca.solvers.sdca_config import SDCAConfig, SDCAState
    from crfsdca.structures.problem import Problem

#: the fewest examples per thread for which the automatic choice takes another thread
#: (``SDCAConfig.threads = 0``): below it, a stretch is too short to pay for the threads
MIN_EXAMPLES_PER_THREAD = 1000


#: the meetings of a team's threads per epoch: a thread takes at most about 2 / (this many) of
#: an epoch's steps before the others have taken their part (:meth:`TeamSDCA.take_steps`)
BURSTS_PER_EPOCH = 8


def step_threads(requested: int, n: int) -> int:
    """The number of threads that step: ``requested`` (capped at n), or with 0 numba's thread
    count when every thread gets at least ``MIN_EXAMPLES_PER_THREAD`` examples."""
    if requested > 0:
        return max(1, min(requested, n))
    return max(1, min(get_threads(), n // MIN_EXAMPLES_PER_THREAD))


def partition(n: int, parts: int, seed: int) -> list[NDArray[np.int64]]:
    """A seeded random partition of range(n) into ``parts`` sorted shares of sizes differing by
    at most one."""
    order = np.random.default_rng(seed).permutation(n)
    return [np.sort(order[t::parts]).astype(np.int64) for t in range(parts)]


class TeamSDCA(LocalSDCA):
    """SDCA steps on ``threads`` threads at once (see the module docstring)."""

    #: concurrent steps drawn from the gap law lag near the end: half the draws are uniform
    default_non_uniformity: ClassVar[float] = TEAM_NON_UNIFORMITY

    def __init__(self, problem: Problem, cfg: SDCAConfig, state: SDCAState, threads: int) -> None:
        super().__init__(problem, cfg, state)
        if threads < 2:
            raise ValueError(f"a team needs at least 2 threads; got {threads}")
        self.threads = threads
        d = state.dual
        importance = None if self.sampler.scheme in ("uniform", "gap", "max") else (
            self.sampler.multipliers
        )  # fmt: skip
        self.shares = partition(self.n, threads, cfg.seed)
        self.samplers = [
            TreeSampler(
                cfg.sampling, d.gap_estimates[e], None if importance is None else importance[e]
            )
            for e in self.shares
        ]
        self.workspaces = [self.workspace] + [
            sdca_epoch.make_workspace(self.structure.blocks) for _ in range(threads - 1)
        ]
        self.proxes = [self.prox] + [self._prox_copy() for _ in range(threads - 1)]
        self.hinges = [self.hinge] + [self.hinge_arrays(ws) for ws in self.workspaces[1:]]
        # the exact w (with the elastic net: the exact v) and each thread's changes of it
        self.exact = self._shared().copy()
        self.deltas = np.zeros((threads, self.exact.size))
        #: the running gap estimate stops the steps at tol * stop_scale (:meth:`stop_gap`)
        self.stop_scale = 1.0
        #: the team's steps between two meetings of the threads (:meth:`take_steps`)
        self.burst = max(threads, self.n // BURSTS_PER_EPOCH)
        self.counters.setdefault("gap_checks", 0.0)
        #: per thread, the number of its step in each burst whose change of w does not reach
        #: the shared w (a lost update on purpose, for tests; -1: none)
        self.drop = [-1] * threads

    def _shared(self) -> NDArray[np.float64]:
        """The vector the steps move: w, or v with the elastic net (w = S_tau(v))."""
        return self.state.dual.weights if self.prox is None else self.prox.v

    def _prox_copy(self):
        """Prox-SDCA's arrays for another thread: the same v and tau, buffers of its own."""
        if self.prox is None:
            return None
        p = self.prox
        return p._replace(
            idx=np.empty_like(p.idx), a=np.empty_like(p.a), vv=np.empty_like(p.vv),
            ww=np.empty_like(p.ww),
        )  # fmt: skip

    def _split(self, steps: int) -> NDArray[np.int64]:
        """``steps`` split among the threads in proportion to their shares (summing to it)."""
        sizes = np.array([share.size for share in self.shares], np.int64)
        parts = steps * sizes // self.n
        parts[: steps - int(parts.sum())] += 1  # the remainder, one step each
        return parts

    def _calls(self, draws: list[np.ndarray], target: int, stop_gap: float) -> list:
        """The kernel arguments of every thread (``draws[t]``: thread t's uniforms, one row per
        step it may take) for a stretch of ``target`` steps: every thread's quota is its share
        of the target, and a thread that is ahead keeps stepping until the team's steps reach
        the target."""
        quotas = self._split(target)
        done = np.zeros(self.threads, np.int64)
        # every thread's sum before any starts: a thread that starts first must not take the
        # others' for 0 in its stop test
        gaps = self.state.dual.gap_estimates
        gap_sums = np.array([gaps[share].sum() for share in self.shares])
        calls = []
        for t in range(self.threads):
            team = Team(
                self.shares[t], t, done, gap_sums, int(quotas[t]), int(target), self.deltas,
                self.drop[t],
            )  # fmt: skip
            s = self.samplers[t]
            calls.append(
                self.kernel_args(draws[t], stop_gap)._replace(
                    sampler=sdca_epoch.Sampler(int(s.code), s.tree, s.multipliers),
                    ws=self.workspaces[t],
                    prox=self.proxes[t],
                    loss=self.hinges[t],
                    team=team,
                )
            )
        return calls

    def compile_kernels(self) -> None:
        """The threads' step loop for this run's types, on no draws (nothing moves)."""
        empty = [np.zeros((0, 2)) for _ in range(self.threads)]
        sdca_epoch.run_steps(self._calls(empty, 0, -1.0)[0])

    def take_steps(
        self,
        n_steps: int,
        stop_gap: float = -1.0,
        scale: float | None = None,
        examples: NDArray[np.int64] | None = None,
    ) -> int:
        """About ``n_steps`` steps on the threads (fewer once the running gap estimate falls to
        ``stop_gap``; more when a thread that is ahead keeps stepping, never past the epoch
        budget), then
        w = the exact w plus every thread's changes; returns the number of steps run."""
        if scale is not None or examples is not None:
            raise ValueError("a team of threads runs serial SDCA only (no scale, no examples)")
        st, d = self.state, self.state.dual
        for sampler, share in zip(self.samplers, self.shares, strict=True):
            sampler.rebuild(d.gap_estimates[share])
        # a thread that is ahead may take up to all of the stretch's steps, but never more than
        # its share of what is left of the epoch budget (so the team never passes the budget)
        limits = self._split(max(math.ceil(self.cfg.max_epochs * self.n) - st.oracle_calls, 0))
        draws = [self.rng.random((min(n_steps, int(k)), 2)) for k in limits]
        st.rng_state = self.rng.bit_generator.state
        taken = np.zeros(self.threads, np.int64)
        results = []
        start = time.perf_counter()
        with ThreadPoolExecutor(self.threads) as pool:
            left = n_steps
            while left > 0:
                burst = min(left, self.burst)
                rest = [dr[k:] for dr, k in zip(draws, taken, strict=True)]
                batch = list(pool.map(sdca_epoch.run_steps, self._calls(rest, burst, stop_gap)))
                results += batch
                counts = np.array([r[0] for r in batch], np.int64)
                taken += counts
                left -= int(counts.sum())
                if int(counts.sum()) < burst or any(r[1] for r in batch):
                    break  # the stop gap, the epoch budget or a failed step
        elapsed = time.perf_counter() - start
        self._merge()
        self.visited = np.concatenate(
            [dr[:k, 0].astype(np.int64) for dr, k in zip(draws, taken, strict=True)]
        )
        for _, status, _ in results:
            self._check_status(status)
        total = int(taken.sum())
        st.oracle_calls += total
        st.updates += total
        stats = np.sum([r[2] for r in results], axis=0)
        self.counters["newton_iterations"] += stats[0]
        self.counters["line_searches"] += stats[1]
        self.counters["line_search_failures"] += stats[2]
        self.counters["predictor_evaluations"] += stats[7]
        self.counters["step_seconds"] += elapsed
        if stats[4] > 0:
            for key, k in PHASE_SECONDS.items():
                self.counters[key] += elapsed * min(stats[k] / stats[4], 1.0)
        return total

    def run_until_eval(self) -> bool:
        """Steps up to the next evaluation point. When the running gap estimate falls to
        :meth:`stop_gap`, the team checks the duality gap P(w) - D(mu) itself (one exact primal
        on the threads, where a serial runner makes an exact gap pass of n oracle calls: the
        pass's fresh estimates bought a team no fewer steps): at most tol, the run is certified
        (the loop records it); else the stop estimate is aimed lower by tol / gap and the
        stretch goes on. True when the run is certified or an exact pass ran
        (``refresh_every``)."""
        if self.smooth:  # the smoothed hinge loss: the monitor certifies
            return super().run_until_eval()
        cfg, st = self.cfg, self.state
        steps = self.stretch_steps()
        while steps > 0:
            stop_gap = self.stop_gap()
            done = self.take_steps(steps, stop_gap=stop_gap)
            steps -= done
            if done == 0 or float(st.dual.gap_estimates.sum()) > stop_gap * self.n:
                break  # the stretch is over (or the epoch budget is)
            gap = self.duality_gap()
            self.counters["gap_checks"] += 1
            if gap <= cfg.tol:
                self.certified = True
                return True
            self.stop_scale *= cfg.tol / gap
        refresh = self.refresh_due()
        if refresh:
            self.exact_pass(check=False)
        return refresh

    def duality_gap(self) -> float:
        """P(w) - D(mu) as the monitor computes it (w is w_hat(mu) after every stretch)."""
        return float(self.problem.primal(self.weights)) - float(self.report()["dual"])

    def stop_gap(self) -> float:
        """``tol``, aimed lower after a failed check: near the end a team's running gap
        estimates are optimistic (on CoNLL-2000 0.6-0.7x the exact gap when they reach tol,
        where a serial run's stand 1.3x above it: concurrent steps with gap sampling; uniform
        sampling shows no such lag, nor do the same two shares stepped in turns)."""
        return self.cfg.tol * self.stop_scale

    def report(self, monitor=None) -> dict:
        """The serial report, and the number of threads in ``extra``."""
        out = super().report(monitor)
        out["extra"]["threads"] = float(self.threads)
        return out

    def _merge(self) -> None:
        """w (or v, and w = S_tau(v)) = the exact vector plus every thread's changes; the
        changes start again from zero."""
        for delta in self.deltas:
            self.exact += delta
        self.deltas[:] = 0.0
        shared = self._shared()
        shared[:] = self.exact
        if self.prox is not None:
            self.state.dual.weights[:] = soft_threshold(shared, self.prox.tau)
