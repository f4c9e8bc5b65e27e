"""The SDCA local step: one shard's dual state, gap estimates and RNG, and its steps.

:class:`LocalSDCA` is the only implementation of the SDCA step in Python. Serial SDCA is one
shard holding every sequence with ``scale = 1`` (``SDCA.solve`` runs it through the shared
evaluation loop); a DisDCA partition is a shard with ``scale = P``, the number of partitions
whose updates are summed (Yang 2013, practical variant; ``docs/sdca.md`` section 11).

A shard's :class:`~crfsdca.structures.problem.Problem` holds its own sequences, with the
regularization
rescaled so that ``regularization * n_shard`` is the *global* lambda n (:func:`shard_problem`):
then ``w_hat`` of the shard's marginals is exactly its contribution to the global
``w = (1 / (lambda n)) sum_i [F(x_i, y_i) - E_mu_i F]``, and the kernels' line search uses the
global lambda n. The kernel's own stop test (running gap estimate <= tol) only makes sense on
the whole data set: serial SDCA uses it, partitions never do (the driver decides).
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from crfsdca.kernels.solvers import hinge, sdca_epoch, trees
from crfsdca.kernels.solvers.prox import make_prox, soft_threshold
from crfsdca.solvers.loop import Runner
from crfsdca.solvers.samplers import TreeSampler
from crfsdca.solvers.sdca_config import (
    LINE_SEARCH_STARTS,
    NON_UNIFORMITY,
    SDCAConfig,
    SDCAState,
)
from crfsdca.structures.hinge import exact as hinge_exact
from crfsdca.structures.objectives import dual_value, lambda_n, squared_norm
from crfsdca.structures.problem import Problem

if TYPE_CHECKING:
    from crfsdca.solvers.monitor import Monitor

# trace counters of the steps' wall time per phase, from the kernel's cycle counts (its stats)
PHASE_SECONDS = {"oracle_seconds": 5, "block_gap_seconds": 6, "line_search_seconds": 3}
COUNTERS = ("newton_iterations", "line_searches", "line_search_failures", "exact_passes")
VARIANTS = ("practical", "naive", "unscaled")


def shard_problem(problem: Problem, indices: NDArray[np.integer] | slice) -> Problem:
    """The sequences at ``indices`` as a problem of their own with the global lambda n."""
    train = problem.train.subset(indices)
    lam_n = lambda_n(problem)
    return type(problem)(
        train=train,
        feature_map=problem.feature_map,
        regularization=lam_n / train.n_sequences,
        name=problem.name,
        loss=problem.loss,
    )


class LocalSDCA(Runner):
    """SDCA steps on one shard of any structure (see the module docstring)."""

    counter_names = COUNTERS
    #: the fraction of draws from the sampling law where ``SDCAConfig.non_uniformity`` is None
    default_non_uniformity: ClassVar[float] = NON_UNIFORMITY

    def __init__(
        self, problem: Problem, cfg: SDCAConfig, state: SDCAState, *, scale: float = 1.0
    ) -> None:
        if not scale >= 1.0:
            raise ValueError(f"scale must be >= 1 (the number of partitions); got {scale}")
        super().__init__(problem, cfg, state)
        self.scale = float(scale)
        self.lam_n = lambda_n(problem)  # the global lambda n (see shard_problem)
        importance = None
        if cfg.sampling.replace("_", "-") in ("importance", "gap-importance"):
            importance = self.structure.importance_weights()
        self.sampler = TreeSampler(cfg.sampling, state.dual.gap_estimates, importance)
        #: the fraction of draws from the sampling law (``SDCAConfig.non_uniformity``)
        self.non_uniformity = (
            self.default_non_uniformity if cfg.non_uniformity is None else float(cfg.non_uniformity)
        )
        self.workspace = sdca_epoch.make_workspace(self.structure.blocks)
        self.prox = self._elastic_net(state.dual)
        # the line search, a type: the loop compiles the one the run takes
        self.search = sdca_epoch.PaperSearch() if cfg.line_search_method == "paper" else None
        self.smooth = problem.loss == "hinge" and cfg.hinge_step == "smooth"
        if self.smooth:
            if self.prox is not None:
                raise ValueError(
                    "hinge_step='smooth' does not train the elastic net (l1 > 0) yet; use"
                    " 'fw' or 'pairwise'"
                )
            self.counters.setdefault("temperature", float(cfg.smooth_temperature))
        # the smoothed hinge loss's temperature, shared by every workspace's HingeArrays
        self.temperature = np.array([self.counters.get("temperature", 1.0)])
        self.atoms = self._atoms()
        self.hinge = self.hinge_arrays(self.workspace)
        for key in ("predictor_evaluations", "step_seconds", *PHASE_SECONDS):
            self.counters.setdefault(key, 0.0)
        self.certified = False
        self.visited = np.zeros(0, np.int64)
        self._epochs_done = state.oracle_calls / self.n

    def hinge_arrays(self, workspace: tuple) -> Any:
        """The hinge loss's buffers of a step in ``workspace`` (the structured SVM), else
        None."""
        if self.problem.loss != "hinge":
            return None
        steps = {"pairwise": hinge.PAIRWISE, "smooth": hinge.SMOOTH, "active": hinge.ACTIVE}
        step = steps.get(self.cfg.hinge_step, hinge.FW)
        arrays = hinge.make_hinge(self.structure.blocks, workspace[2], step)
        atoms, alpha, count = self.atoms
        return arrays._replace(temp=self.temperature, atoms=atoms, alpha=alpha, count=count)

    def _atoms(self) -> tuple:
        """The stored labellings of the ACTIVE hinge step (``hinge.make_atoms``; empty for the
        other steps): at the gold corner every block holds its gold labelling with weight 1;
        a resumed state starts with none (its mass untracked: Frank-Wolfe steps move it)."""
        if self.problem.loss != "hinge" or self.cfg.hinge_step != "active":
            return hinge.make_atoms(0, 0, 0)[:3]
        if self.structure.kind != "chain":
            raise ValueError(
                f"hinge_step='active' trains chains; a {self.structure.kind} takes 'fw' or"
                " 'pairwise'"
            )
        labels = self.problem.train.labels
        atoms, alpha, count, _ = hinge.make_atoms(self.n, labels.size, self.cfg.hinge_atoms)
        if self.state.oracle_calls == 0:  # the gold corner (``structures.hinge.gold_corner``)
            atoms[0] = labels
            alpha[:, 0] = 1.0
            count[:] = 1
        return atoms, alpha, count

    def _elastic_net(self, dual) -> Any:
        """Prox-SDCA's arrays when the problem has an l1 term (else None), with dual.weights
        made S_tau(v) of the dual-average vector v (kept as ``dual.dual_average``: w_hat(mu),
        which is the weights of a state trained without l1)."""
        sigma = float(getattr(self.problem, "l1", 0.0))
        if sigma <= 0.0:
            if dual.dual_average is not None:  # a state of an l1 run continued without it
                dual.weights, dual.dual_average = dual.dual_average, None
            return None
        if dual.dual_average is None:
            dual.dual_average = np.array(dual.weights, dtype=np.float64, copy=True)
        tau = sigma / self.problem.regularization
        dual.weights = soft_threshold(dual.dual_average, tau)
        size = sdca_epoch.direction_size(self.structure.blocks, self.workspace)
        return make_prox(dual.dual_average, tau, size)

    @property
    def weights(self) -> NDArray[np.float64]:
        return self.state.dual.weights

    def params(self, stop_gap: float, scale: float | None = None) -> sdca_epoch.StepParams:
        cfg = self.cfg
        return sdca_epoch.StepParams(
            lam_n=float(self.lam_n),
            scale=self.scale if scale is None else float(scale),
            tol=float(cfg.line_search_tol),
            max_newton=int(cfg.max_newton_iterations),
            fixed_step=float(cfg.fixed_step) if cfg.fixed_step > 0 else -1.0,
            non_uniformity=float(self.non_uniformity),
            stop_gap=float(stop_gap),
            line_search_start=LINE_SEARCH_STARTS.index(cfg.line_search_start),
        )

    def kernel_args(
        self, draws: np.ndarray, stop_gap: float, scale: float | None = None
    ) -> sdca_epoch.EpochArgs:
        d, s = self.state.dual, self.sampler
        return sdca_epoch.EpochArgs(
            structure=self.structure.blocks,
            dual=sdca_epoch.DualArrays(
                _flat(d.log_edge), _flat(d.log_node), d.entropies, d.gap_estimates, d.step_sizes
            ),
            w=d.weights,
            sampler=sdca_epoch.Sampler(int(s.code), s.tree, s.multipliers),
            params=self.params(stop_gap, scale),
            draws=draws,
            ws=self.workspace,
            prox=self.prox,
            loss=self.hinge,
            search=self.search,
        )

    # -- steps -------------------------------------------------------------------------------
    def compile_kernels(self) -> None:
        """The step loop's kernel for this run's types (dual dtype, elastic net), on no draws:
        nothing moves, the RNG is not drawn from."""
        sdca_epoch.run_steps(self.kernel_args(np.zeros((0, 2)), -1.0))

    def take_steps(
        self,
        n_steps: int,
        stop_gap: float = -1.0,
        scale: float | None = None,
        examples: NDArray[np.int64] | None = None,
    ) -> int:
        """Draw and run ``n_steps`` steps on ``state.dual.weights`` (fewer when the running gap
        estimate falls to ``stop_gap``); returns the number of steps run. ``examples`` (from
        :meth:`draw_examples`): step on these, in order, instead of drawing."""
        st = self.state
        if examples is None:
            self.sampler.rebuild(st.dual.gap_estimates)  # fresh sums: a resume draws the same
            draws = self.rng.random((n_steps, 2))
            st.rng_state = self.rng.bit_generator.state
            args = self.kernel_args(draws, stop_gap, scale)
        else:  # the uniform law reads example i from draws[s, 1] = (i + 1/2) / n
            draws = np.zeros((len(examples), 2))
            draws[:, 1] = (np.asarray(examples, np.float64) + 0.5) / self.n
            args = self.kernel_args(draws, stop_gap, scale)
            args = args._replace(sampler=args.sampler._replace(code=sdca_epoch.UNIFORM))
        start = time.perf_counter()
        done, status, stats = sdca_epoch.run_steps(args)
        elapsed = time.perf_counter() - start
        self.visited = draws[:done, 0].astype(np.int64)  # the examples stepped on
        self._check_status(status)
        st.oracle_calls += done
        st.updates += done
        self.counters["newton_iterations"] += stats[0]
        self.counters["line_searches"] += stats[1]
        self.counters["line_search_failures"] += stats[2]
        self.counters["predictor_evaluations"] += stats[7]
        # wall time of the steps, split by the kernel's cycle counts (timing, not state)
        self.counters["step_seconds"] += elapsed
        if stats[4] > 0:
            for key, k in PHASE_SECONDS.items():
                self.counters[key] += elapsed * min(stats[k] / stats[4], 1.0)
        return done

    def draw_examples(self, n_steps: int) -> NDArray[np.int64]:
        """``n_steps`` examples drawn from the sampling law of the current gap estimates (with
        probability ``non_uniformity``, else uniformly), the law's draws without replacement:
        a drawn example's score is set to 0 until the next rebuild."""
        s = self.sampler
        s.rebuild(self.state.dual.gap_estimates)
        u = self.rng.random((n_steps, 2))
        self.state.rng_state = self.rng.bit_generator.state
        out = np.empty(n_steps, np.int64)
        for k in range(n_steps):
            i = -1
            if s.scheme != "uniform" and u[k, 0] < self.non_uniformity and s.tree[1] > 0.0:
                i = s.draw(float(u[k, 1]), self.n)
                trees.update(s.tree, i, -np.inf if s.use_max else 0.0, s.use_max)
            out[k] = i if i >= 0 else min(int(u[k, 1] * self.n), self.n - 1)
        return out

    def run_until_eval(self) -> bool:
        """Serial SDCA: steps up to the next evaluation point; True after an exact gap pass."""
        steps = self.stretch_steps()
        if self.smooth:  # the estimates are the smoothed loss's: the monitor certifies
            self.take_steps(steps)
            self.anneal()
            return False
        done = self.take_steps(steps, stop_gap=self.stop_gap())
        refresh = self.refresh_due()
        if done < steps or refresh:
            self.exact_pass(check=done < steps)
            return True
        return False

    def stretch_steps(self) -> int:
        """The steps to the next evaluation point (``eval_every`` epochs, at least 1, capped by
        the epoch budget)."""
        cfg = self.cfg
        steps = max(1, int(round(cfg.eval_every * self.n)))
        steps = min(steps, int(math.ceil(cfg.max_epochs * self.n)) - self.state.oracle_calls)
        return max(steps, 1)

    def refresh_due(self) -> bool:
        """Whether the steps since the last call crossed a multiple of ``refresh_every`` epochs
        (an exact pass is due)."""
        epoch, k = self.state.oracle_calls / self.n, self.cfg.refresh_every
        due = k > 0 and int(epoch) // k > int(self._epochs_done) // k
        self._epochs_done = epoch
        return due

    def anneal(self) -> None:
        """Lower the smoothed hinge loss's temperature g by ``smooth_decay`` when the running
        estimate of its gap, mean_i g KL~(mu_i || nu_i), falls below g mean_i H~(mu_i): the
        hinge gap is at most their sum, and then the smoothing's term bounds it. mu carries
        over; the gap estimates of the old g stay until their examples are visited."""
        d, g = self.state.dual, float(self.temperature[0])
        table = self.structure.blocks.runs
        entropy = float(sdca_epoch.all_entropies(table, d.log_edge, d.log_node).mean())
        self.counters["smoothing_term"] = g * entropy
        if float(d.gap_estimates.mean()) <= g * entropy:
            self.temperature[0] = g * self.cfg.smooth_decay
            self.counters["temperature"] = float(self.temperature[0])

    def stop_gap(self) -> float:
        """The running gap estimate at which the steps stop for an exact check: ``tol``."""
        return self.cfg.tol

    def local_round(
        self, w: NDArray[np.float64], n_steps: int, variant: str = "practical"
    ) -> NDArray[np.float64]:
        """DisDCA: ``n_steps`` steps from the global ``w``; returns this shard's Delta w.

        ``practical``: the steps move a local copy u of w with the scale P, and Delta w =
        (u - w) / P. ``naive``: every step starts from w itself with the scale m P (Yang 2013,
        eq. 6). ``unscaled``: a local copy with scale 1, Delta w = u - w (plain summing, which
        can overshoot). In every variant Delta w is the change of this shard's w_hat(mu), so
        the driver's sum keeps w = w_hat(mu). ``w`` itself is never written.
        """
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {', '.join(VARIANTS)}; got {variant!r}")
        if self.prox is not None:
            raise ValueError(
                "the distributed solver does not train the elastic net (l1 > 0) yet; use the"
                " serial sdca solver (or lbfgs, OWL-QN)"
            )
        d = self.state.dual
        if variant != "naive":
            d.weights = np.array(w, dtype=np.float64, copy=True)
            scale = self.scale if variant == "practical" else 1.0
            self.take_steps(n_steps, scale=scale)
            return (d.weights - w) / scale
        scale, delta = n_steps * self.scale, np.zeros_like(w)
        for _ in range(n_steps):
            d.weights = np.array(w, dtype=np.float64, copy=True)
            self.take_steps(1, scale=scale)
            delta += (d.weights - w) / scale
        return delta

    def exact_pass(self, check: bool) -> None:
        """Recompute every g_i exactly (n oracle calls) and rebuild the sampler."""
        d = self.state.dual
        blocks = self.structure.blocks
        if self.hinge is not None:
            _, gaps = hinge_exact(blocks, d.log_edge, d.log_node, d.weights)
        else:
            gaps = sdca_epoch.exact_gaps(
                blocks, d.log_edge, d.log_node, d.weights, self.prox, self.search
            )
        self._check_status(0 if np.all(np.isfinite(gaps)) else -1)
        d.gap_estimates[:] = gaps
        self.sampler.rebuild(gaps)
        self.state.oracle_calls += self.n
        self.counters["exact_passes"] += 1
        if check and gaps.mean() <= self.cfg.tol:
            self.certified = True

    def _check_status(self, status: int) -> None:
        if status != 0:
            epoch = self.state.oracle_calls / self.n
            where = f"sequence {status - 1}" if status > 0 else "the exact gap pass"
            raise FloatingPointError(
                f"non-finite values in SDCA at epoch {epoch:.3g}, {where}; attributes with huge"
                " values? scale dense features"
            )

    # -- reports -----------------------------------------------------------------------------
    def report(self, monitor: Monitor | None = None) -> dict[str, Any]:
        """Counters and the dual D(mu) for the monitor (serial: w is w_hat(mu))."""
        d, st = self.state.dual, self.state
        lam = self.problem.regularization
        wsq = squared_norm(d.weights)
        dual = dual_value(lam, wsq, float(d.entropies.sum()), self.n)
        return {
            "oracle_calls": st.oracle_calls,
            "updates": st.updates,
            "dual": dual,
            "gap_estimate": float(d.gap_estimates.mean()),
            "extra": {k: float(v) for k, v in self.counters.items()},
        }

    def objective_terms(self, w: NDArray[np.float64]) -> dict[str, float]:
        """Shard sums at the global w: sum_i loss_i(w), sum_i H~(mu_i), sum_i g_i (estimates).

        With w = w_hat(mu): P(w) = lambda/2 |w|^2 + L / n, D(mu) = H / n - lambda/2 |w|^2.
        """
        d = self.state.dual
        loss = self.problem.loss_sum(w) if self.hinge is not None else self.structure.loss(w)
        return {
            "loss": loss,
            "entropy": float(d.entropies.sum()),
            "gap_estimate": float(d.gap_estimates.sum()),
            "n": float(self.n),
        }

    def primal_contribution(self) -> NDArray[np.float64]:
        """(1 / (lambda n)) sum_{i in shard} [F(x_i, y_i) - E_mu_i F] (global lambda n)."""
        d = self.state.dual
        return self.structure.weights_from_dual(d.log_node, d.log_edge)


def _flat(a: np.ndarray) -> np.ndarray:
    """A flat view (never a copy: the kernels update the dual state in place)."""
    if not a.flags.c_contiguous:
        raise ValueError("the dual state arrays must be C-contiguous")
    return a.reshape(-1)
