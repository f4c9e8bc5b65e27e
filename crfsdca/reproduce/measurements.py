"""Numbers that come from the data or from a solver's state rather than from a curve, written
as traces of solver ``measure`` (a header whose ``measurement`` holds them, no record), so that
they are cached, keyed by the code and archived like every run.

Kinds (``Experiment.opts["kind"]``):

- ``data``: Table 1 of a training set (d, n, N, K, A, a as the mean and the largest number of
  active attributes per token, the float64 edge marginals' GiB), P(0) computed and (N/n) log K
  (App. A.1), the distinct labels of each sequence against K (App. C), and the bytes of SDCA's
  dual state against SAG-NUS's gradient memory (App. A.2);
- ``start``: P, D and |w| at the epsilon-mix, the authors' and the uniform start on a training
  set with crfsdca's default model (3 bias rows, as ``crfsdca train``);
- ``difficulty``: uniform SDCA from the authors' start for ``epochs`` epochs, then every
  sequence's exact gap g_i, its radius R_i (App. C) and its length (§6.3: do the smoothness
  bounds tell which points are hard?).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from crfsdca.solvers.trace import Trace
from crfsdca.structures.problem import Problem

KINDS = ("data", "start", "difficulty")


def measurement_trace(kind: str, problem: Problem, options: dict[str, Any]) -> Trace:
    """The trace of one measurement on ``problem``."""
    if kind == "data":
        values = data_stats(problem)
    elif kind == "start":
        values = start_values(problem)
    elif kind == "difficulty":
        values = difficulty(problem, int(options.get("epochs", 5)))
    else:
        raise ValueError(f"measurement kind must be one of {', '.join(KINDS)}; got {kind!r}")
    return Trace.create(
        solver="measure",
        config={"kind": kind, **options},
        regularization=problem.regularization,
        dataset=problem.name,
        n_sequences=problem.n_sequences,
        seed=None,
        measurement=values,
    )


def data_stats(problem: Problem) -> dict[str, Any]:
    from crfsdca.reproduce.problems import table1_row
    from crfsdca.solvers.sag_nus import SAGMemory

    train, fm = problem.train, problem.feature_map
    n, N, K = train.n_sequences, train.n_items, fm.n_labels
    labels = [np.unique(train.sequence_labels(i)).size for i in range(n)]
    sdca_bytes, _ = problem.structure.dual_size(np.float64)
    sag = SAGMemory.zeros(problem, 1.0)
    return {
        **table1_row(problem),
        "a_max": int(np.diff(train.attr_offsets).max()),
        "p0": float(problem.primal(fm.zeros())),
        "p0_formula": N / n * math.log(K),
        "max_labels_in_a_sequence": int(max(labels)),
        "sequences_with_all_labels": int(sum(k == K for k in labels)),
        "sdca_bytes": int(sdca_bytes),
        "sag_bytes": int(sum(a.nbytes for a in sag.arrays().values())),
    }


def start_values(problem: Problem) -> dict[str, float]:
    """P(0), and P, D, |w| at the three starts (``problems.dual_start``)."""
    from crfsdca.reproduce.problems import dual_start
    from crfsdca.structures.objectives import dual_value

    row = {"P(0)": float(problem.primal(problem.feature_map.zeros()))}
    for start in ("epsilon", "gibbs", "uniform"):
        d = dual_start(problem, start)
        wsq = float(d.weights @ d.weights)
        row[f"P {start}"] = float(problem.primal(d.weights))
        row[f"D {start}"] = float(
            dual_value(problem.regularization, wsq, d.entropies.sum(), problem.n_sequences)
        )
        row[f"|w| {start}"] = float(np.linalg.norm(d.weights))
    return row


def difficulty(problem: Problem, epochs: int) -> dict[str, Any]:
    """g_i after ``epochs`` epochs of uniform SDCA from the authors' start, R_i and T_i."""
    from crfsdca.errors import ConvergenceWarning
    from crfsdca.kernels.solvers import sdca_epoch
    from crfsdca.reproduce.problems import dual_start
    from crfsdca.solvers.monitor import Monitor
    from crfsdca.solvers.sdca import SDCA, SDCAConfig
    from crfsdca.structures.radii import radii

    config = SDCAConfig(
        sampling="uniform", line_search_tol=1e-3, max_epochs=epochs, tol=0.0, seed=0
    )
    solver = SDCA(config)
    state = solver.initial_state(problem)
    state.dual = dual_start(problem, "gibbs")
    monitor = Monitor(problem, "sdca", config, evaluate_test=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # tol = 0: the budget stops it
        result = solver.solve(problem, monitor, state)
    d = result.state.dual
    gaps = sdca_epoch.exact_gaps(problem.structure.blocks, d.log_edge, d.log_node, d.weights)
    return {
        "epochs": epochs,
        "gap": [float(f"{g:.4g}") for g in gaps],
        "radius": [float(f"{r:.6g}") for r in radii(problem)],
        "length": problem.train.lengths.tolist(),
    }
