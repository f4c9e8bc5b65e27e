"""The structured hinge loss on every structure: its dual start (the gold corner) and its
summed loss (``crfsdca.kernels.solvers.hinge`` holds the step, the block gaps and the losses)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numpy.typing import NDArray

from crfsdca.kernels.numerics.threads import get_threads
from crfsdca.kernels.solvers import hinge
from crfsdca.kernels.solvers.sdca_epoch import make_workspace
from crfsdca.kernels.structures import junction_batch
from crfsdca.kernels.structures.hamming import MAP_ONLY, WITH_LINEAR
from crfsdca.structures.dual import INITIAL_GAP, DualState


def exact(structure, log_edge, log_node, w, with_gaps=True):
    """(hinge losses H_i(w), exact block gaps) of every example of ``structure`` (a structure's
    kernel type), in chunks on numba's number of threads (each example alone: the result does
    not depend on the threads). Without gaps the dual state is not read (``log_edge``,
    ``log_node`` may be empty)."""
    n = structure.runs.start.size - 1
    losses = np.empty(n)
    gaps = np.empty(n if with_gaps else 0)
    mu_arrays = (_flat(log_edge), _flat(log_node))
    threads = max(1, min(n, get_threads()))
    bounds = [n * c // threads for c in range(threads + 1)]

    def run(lo, hi):
        ws = make_workspace(structure)
        hws = hinge.make_hinge(structure, ws[2], what=WITH_LINEAR if with_gaps else MAP_ONLY)
        hinge.exact_blocks(structure, mu_arrays, w, lo, hi, gaps, losses, ws, hws)

    if threads == 1:
        run(0, n)
    else:
        with ThreadPoolExecutor(threads) as pool:
            jobs = [pool.submit(run, a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
            for job in jobs:
                job.result()
    return losses, gaps


def _flat(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(-1)


def hinge_losses(problem, w: NDArray[np.float64]) -> NDArray[np.float64]:
    """H_i(w) of every training example (one loss-augmented MAP each)."""
    empty = np.zeros(0)
    w = problem.feature_map.check_weights(w)
    losses, _ = exact(problem.structure.blocks, empty, empty, w, with_gaps=False)
    bad = np.flatnonzero(~np.isfinite(losses))
    if bad.size:
        raise FloatingPointError(
            f"sequence {int(bad[0])}: the loss-augmented MAP score is not finite; non-finite or"
            " huge weights?"
        )
    return losses


def hinge_sum(problem, w: NDArray[np.float64]) -> float:
    """sum_i H_i(w)."""
    return float(hinge_losses(problem, w).sum())


def gold_corner(problem, dtype=np.float64) -> DualState:
    """The hinge loss's dual start: every mu_i the gold labelling (logs 0 there, -inf
    elsewhere), so l_i = 0 and w = w_hat(mu) = 0 exactly (BCFW's start)."""
    structure, data = problem.structure, problem.train
    K, n = problem.feature_map.n_labels, problem.n_sequences
    if structure.kind == "junction":
        oracle = problem.oracle
        tables = np.empty(data.n_table_entries, dtype)
        junction_batch.empirical_tables(oracle._data, oracle._jt, K, 0.0, tables)
        log_node, log_edge = np.empty((0, K), dtype), tables
    else:
        labels = data.labels
        N = labels.size
        log_node = np.full((N, K), -np.inf, dtype)
        log_node[np.arange(N), labels] = 0.0
        if structure.kind == "chain":
            is_edge = np.ones(N, bool)
            is_edge[data.seq_offsets[1:] - 1] = False  # a sequence's last token starts none
            src = np.flatnonzero(is_edge)
            log_edge = np.full((N - n, K, K), -np.inf, dtype)
            log_edge[np.arange(N - n), labels[src], labels[src + 1]] = 0.0
        else:  # trees: row v is the edge parent(v)-v
            parents = data.packed[0]
            starts = np.repeat(data.seq_offsets[:-1], data.lengths)
            child = np.flatnonzero(parents >= 0)
            log_edge = np.full((N, K, K), -np.inf, dtype)
            log_edge[child, labels[starts[child] + parents[child]], labels[child]] = 0.0
    return DualState(
        log_node=log_node,
        log_edge=log_edge,
        entropies=np.zeros(n),  # l_i = E_mu_i[Hamming(., y_i)] = 0
        gap_estimates=np.full(n, INITIAL_GAP),
        weights=np.zeros(problem.feature_map.n_features),
        step_sizes=np.full(n, 0.5),
    )


def smoothed_start(problem, epsilon: float, dtype=np.float64) -> DualState:
    """The dual start of the smoothed hinge loss (``kernels.solvers.smooth``): the CRF's
    smoothed start (every mu_i an epsilon-mix of the gold labelling and the uniform law,
    inside the polytope, where the entropy's step is defined) with l_i = E_mu_i[Hamming(.,
    y_i)] in ``entropies`` (from the node marginals; chains only: the other structures have
    no smoothed oracle yet)."""
    if problem.structure.kind != "chain":
        raise ValueError(
            f"hinge_step='smooth' trains chains; a {problem.structure.kind} takes 'fw' or"
            " 'pairwise'"
        )
    dual = problem.structure.smoothed_dual(epsilon, dtype)
    data = problem.train
    gold = np.exp(dual.log_node[np.arange(data.labels.size), data.labels].astype(np.float64))
    dual.entropies = np.add.reduceat(1.0 - gold, data.seq_offsets[:-1])
    return dual
