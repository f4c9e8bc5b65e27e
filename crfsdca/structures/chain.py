"""The oracle: from (sequence i, weights w) to log Z_i and the marginals nu_i = p(. | x_i; w).

p(y | x; w) is proportional to exp(w^T F(x, y)) with F the feature map of
:mod:`crfsdca.features.feature_map`;
the oracle marginals nu_i(w) are the node and edge marginals of that chain ([LPL] section 2).
The batch methods give f(w) = sum_i [log Z_i(w) - w^T F(x_i, y_i)] and its gradient
sum_i (E_{nu_i}[F(x_i, .)] - F(x_i, y_i)) ([LPL] eq. 2; no regularisation, sums not means).

All numerical work happens in :mod:`crfsdca.kernels`; this module checks the inputs once, owns the
buffers and turns the kernels' non-finite flags into FloatingPointError.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from crfsdca._dtypes import FLOAT, INDEX
from crfsdca.features.feature_map import FeatureMap
from crfsdca.features.layout import max_unique, sequence_layout
from crfsdca.features.sequences import SequenceData
from crfsdca.kernels.numerics import threads
from crfsdca.kernels.primitives import RunTable
from crfsdca.kernels.solvers import sag_epoch, sdca_epoch
from crfsdca.kernels.structures import chain, chain_blocks, chain_eg
from crfsdca.kernels.structures import chain_batch as batch
from crfsdca.structures.dual import DualState, dual_state_bytes, gibbs_start, smoothed_empirical
from crfsdca.structures.objectives import dot, lambda_n, weights_from_expectations

__all__ = ["Oracle", "Workspace"]


@dataclass(frozen=True, eq=False)
class Workspace:
    """Buffers for one sequence of up to ``max_length`` items and ``n_labels`` labels.

    ``unary``, ``exp_unary``, ``alpha``, ``beta``, ``log_node``: (max_length, K) float64;
    ``inv_scale``, ``log_scale``: (max_length,) float64; ``exp_trans``: (K, K) float64;
    ``log_edge``: (max_length - 1, K, K) float64. ``kernel_tuple`` is the ``ws`` argument of
    :func:`crfsdca.kernels.structures.chain.sequence_marginals`, ``outputs`` its ``out`` argument.
    """

    max_length: int
    n_labels: int
    unary: NDArray[np.float64]
    exp_trans: NDArray[np.float64]
    exp_unary: NDArray[np.float64]
    alpha: NDArray[np.float64]
    beta: NDArray[np.float64]
    inv_scale: NDArray[np.float64]
    log_scale: NDArray[np.float64]
    log_node: NDArray[np.float64]
    log_edge: NDArray[np.float64]

    @classmethod
    def allocate(cls, max_length: int, n_labels: int) -> Workspace:
        """Allocate buffers for sequences of up to ``max_length`` (>= 1) items."""
        T, K = max(int(max_length), 1), int(n_labels)
        return cls(
            max_length=T,
            n_labels=K,
            unary=np.zeros((T, K), FLOAT),
            exp_trans=np.zeros((K, K), FLOAT),
            exp_unary=np.zeros((T, K), FLOAT),
            alpha=np.zeros((T, K), FLOAT),
            beta=np.zeros((T, K), FLOAT),
            inv_scale=np.zeros(T, FLOAT),
            log_scale=np.zeros(T, FLOAT),
            log_node=np.zeros((T, K), FLOAT),
            log_edge=np.zeros((T - 1, K, K), FLOAT),
        )

    @property
    def kernel_tuple(self) -> tuple[np.ndarray, ...]:
        """(unary, exp_trans, exp_unary, alpha, beta, inv_scale, log_scale)."""
        return (
            self.unary,
            self.exp_trans,
            self.exp_unary,
            self.alpha,
            self.beta,
            self.inv_scale,
            self.log_scale,
        )

    @property
    def outputs(self) -> tuple[np.ndarray, np.ndarray]:
        """(log_node, log_edge)."""
        return (self.log_node, self.log_edge)


class Oracle:
    """Marginalisation oracle of a linear-chain CRF over a fixed set of sequences.

    Parameters
    ----------
    data : SequenceData
        The sequences; attribute ids must lie in ``[0, feature_map.n_attributes)``.
    feature_map : FeatureMap
        Sizes of the model; ``feature_map.n_labels`` must equal ``data.n_labels``.
    n_threads : int or None
        Threads of the batch methods (``predict``, ``value_and_gradient``, ...), set with
        :func:`crfsdca.kernels.numerics.threads.set_threads` for the calling thread before
        each batch call; None keeps numba's current setting.

    Notes
    -----
    One :class:`Workspace` serves every per-sequence call, so an Oracle must not be shared by
    threads that call :meth:`marginals` or :meth:`log_partition` concurrently.
    """

    def __init__(
        self, data: SequenceData, feature_map: FeatureMap, *, n_threads: int | None = None
    ) -> None:
        if data.n_labels != feature_map.n_labels:
            raise ValueError(
                f"data has {data.n_labels} labels but the feature map {feature_map.n_labels}"
            )
        if data.attr_ids.size and int(data.attr_ids.max()) >= feature_map.n_attributes:
            raise ValueError(
                f"attribute id {int(data.attr_ids.max())} out of range for a feature map of "
                f"{feature_map.n_attributes} attributes"
            )
        if n_threads is not None and not 1 <= n_threads <= threads.max_threads():
            raise ValueError(f"n_threads must lie in [1, {threads.max_threads()}]; got {n_threads}")
        self.data = data
        self.feature_map = feature_map
        self.n_threads = n_threads
        self.workspace = Workspace.allocate(data.max_length, feature_map.n_labels)
        self._arrays = data.arrays()
        fm = feature_map
        self._dims = (fm.n_attributes, fm.n_labels, fm.n_bias_rows)
        self._batch_dims = (*self._dims, max(data.max_length, 1))
        self._ws = self.workspace.kernel_tuple
        self._out = self.workspace.outputs
        self._n_features = fm.n_features
        self._lengths: list[int] = data.lengths.tolist()
        self._extra = np.empty((0, fm.n_features), FLOAT)  # per-thread gradient accumulators
        self._gold: NDArray[np.float64] | None = None
        self._labels_checked = False

    @property
    def n_sequences(self) -> int:
        return self.data.n_sequences

    def _weights(self, w: NDArray[np.float64]) -> NDArray[np.float64]:
        if (
            type(w) is np.ndarray
            and w.dtype == FLOAT
            and w.shape == (self._n_features,)
            and w.flags.c_contiguous
        ):
            return w
        return self.feature_map.check_weights(w)

    def _index(self, i: int) -> int:
        i = operator.index(i)
        if not 0 <= i < len(self._lengths):
            raise IndexError(f"sequence index {i} out of range [0, {len(self._lengths)})")
        return i

    def _batch_args(self, w: NDArray[np.float64]) -> tuple:
        if self.n_threads is not None:
            threads.set_threads(self.n_threads)
        return (self._arrays, self._weights(w), self._batch_dims, threads.get_threads())

    def marginals(
        self, i: int, w: NDArray[np.float64]
    ) -> tuple[float, NDArray[np.float64], NDArray[np.float64]]:
        """Log partition and log marginals of sequence ``i`` under weights ``w``.

        Returns
        -------
        log_z : float
        log_node : ndarray (T, K) float64
            log p(y_t = k | x_i; w), at most 0.
        log_edge : ndarray (T - 1, K, K) float64
            log p(y_t = k, y_{t+1} = l | x_i; w), at most 0.

        The arrays are views into the workspace, overwritten by the next call.
        """
        i = self._index(i)
        log_z = chain.sequence_marginals(
            self._arrays, i, self._weights(w), self._dims, self._ws, self._out
        )
        if not math.isfinite(log_z):
            raise self._non_finite(i, log_z)
        T = self._lengths[i]
        return log_z, self.workspace.log_node[:T], self.workspace.log_edge[: T - 1]

    def log_partition(self, i: int, w: NDArray[np.float64]) -> float:
        """log Z_i(w) of sequence ``i`` (one forward pass)."""
        i = self._index(i)
        log_z = chain.sequence_log_partition(
            self._arrays, i, self._weights(w), self._dims, self._ws
        )
        if not math.isfinite(log_z):
            raise self._non_finite(i, log_z)
        return log_z

    def log_partitions(self, w: NDArray[np.float64]) -> NDArray[np.float64]:
        """(n_sequences,) float64 array of every log Z_i(w) (parallel)."""
        out = np.empty(self.data.n_sequences, FLOAT)
        batch.batch_log_partition(*self._batch_args(w), out)
        bad = np.flatnonzero(~np.isfinite(out))
        if bad.size:
            raise self._non_finite(int(bad[0]), float(out[bad[0]]))
        return out

    def value_and_gradient(self, w: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        """Sum over sequences of the loss log Z_i - w^T F(x_i, y_i) and of its gradient.

        Returns
        -------
        loss_sum : float
        grad_sum : ndarray (n_features,) float64
            sum_i E_{nu_i(w)}[F(x_i, .)] - F(x_i, y_i).
        """
        self._check_labels()
        arrays, w, dims, n_threads = self._batch_args(w)
        if self._extra.shape[0] != n_threads - 1:
            self._extra = np.empty((n_threads - 1, self._n_features), FLOAT)
        loss, grad, bad = batch.batch_value_and_gradient(arrays, w, dims, self._extra)
        if bad >= 0:
            raise self._non_finite(int(bad), math.nan)
        return float(loss), grad

    def loss_sum(self, w: NDArray[np.float64]) -> float:
        """Sum over sequences of the loss log Z_i - w^T F(x_i, y_i) (forward passes only): the
        value of :meth:`value_and_gradient` without the gradient."""
        self._check_labels()
        loss, bad = batch.batch_loss(*self._batch_args(w))
        if bad >= 0:
            raise self._non_finite(int(bad), math.nan)
        return float(loss)

    def gold_features(self) -> NDArray[np.float64]:
        """Read-only (n_features,) float64 sum_i F(x_i, y_i); tokens labelled -1 add nothing."""
        if self._gold is None:
            gold = self.feature_map.zeros()
            batch.batch_gold_features(self._arrays, self._batch_dims, gold)
            gold.setflags(write=False)
            self._gold = gold
        return self._gold

    def predict(self, w: NDArray[np.float64]) -> NDArray[np.int64]:
        """(n_items,) int64 Viterbi labelling of every sequence (parallel)."""
        out = np.empty(self.data.n_items, INDEX)
        batch.batch_predict(*self._batch_args(w), out)
        return out

    def predict_marginals(self, w: NDArray[np.float64]) -> NDArray[np.float64]:
        """(n_items, K) float64 node marginals p(y_t = k | x; w) of every token (parallel)."""
        out = np.empty((self.data.n_items, self.feature_map.n_labels), FLOAT)
        bad = batch.batch_node_marginals(*self._batch_args(w), out)
        if bad >= 0:
            raise self._non_finite(int(bad), math.nan)
        return out

    def _check_labels(self) -> None:
        if self._labels_checked:
            return
        labels = self.data.labels
        if labels.size and labels.min() < 0:
            t = int(np.flatnonzero(labels < 0)[0])
            i = int(np.searchsorted(self.data.seq_offsets, t, side="right") - 1)
            raise ValueError(
                f"sequence {i}: token {t - int(self.data.seq_offsets[i])} has an unknown label "
                "(-1); training needs every label; drop or relabel such sequences"
            )
        self._labels_checked = True

    def _non_finite(self, i: int, log_z: float) -> FloatingPointError:
        return FloatingPointError(
            f"sequence {i}: log partition is {log_z}; non-finite or huge weights? "
            "check the weights or scale dense attribute values"
        )


class ChainStructure:
    """Linear chains (:class:`~crfsdca.structures.problem.Problem` over a ``SequenceData``)."""

    kind = "chain"

    def __init__(self, problem) -> None:
        self.problem = problem

    @cached_property
    def layout(self):
        return sequence_layout(self.problem.train)

    @cached_property
    def dims(self) -> tuple[int, int, int]:
        fm = self.problem.feature_map
        return (fm.n_attributes, fm.n_labels, fm.n_bias_rows)

    @cached_property
    def runs(self) -> RunTable:
        return chain_blocks.chain_run_table(self.problem.train.seq_offsets, self.dims[1])

    @cached_property
    def blocks(self) -> chain_blocks.ChainBlocks:
        data = self.problem.train
        return chain_blocks.ChainBlocks(
            layout=self.layout,
            dims=self.dims,
            runs=self.runs,
            max_T=max(int(data.max_length), 1),
            max_U=max_unique(self.layout),
            max_block=int(self.runs.hi.max(initial=1)),
        )

    def entropies(self, log_node, log_edge) -> NDArray[np.float64]:
        return sdca_epoch.all_entropies(self.runs, log_edge, log_node)

    def weights_from_dual(self, log_node, log_edge, edge_sums=None) -> NDArray[np.float64]:
        """w_hat(mu); ``edge_sums``: sum_e mu_e (K, K) over every edge when known in closed
        form (the smoothed start), which spares the pass over ``log_edge`` (not read then)."""
        problem = self.problem
        expected = problem.feature_map.zeros()
        edges = log_edge if edge_sums is None else log_edge[:0]
        chain_blocks.expected_features(
            problem.train.arrays()[:4], log_node, edges, self.dims, expected
        )
        if edge_sums is not None:
            A, K, n_bias = self.dims
            trans = (A + n_bias) * K  # the transition rows (crfsdca.features.feature_map)
            expected[trans : trans + K * K] += edge_sums.reshape(-1)
        gold = problem.oracle.gold_features()
        return weights_from_expectations(gold, expected, lambda_n(problem))

    def loss(self, w: NDArray[np.float64]) -> float:
        """sum_i -log p(y_i | x_i; w)."""
        oracle = self.problem.oracle
        return float(oracle.log_partitions(w).sum() - dot(w, oracle.gold_features()))

    def importance_weights(self) -> NDArray[np.float64]:
        from crfsdca.structures.radii import importance_weights

        return importance_weights(self.problem)

    def sag_sums_shape(self) -> tuple[int, ...]:
        """The shape of one example's summed clique marginals in SAG's gradient memory."""
        K = self.dims[1]
        return (K, K)

    def sag_workspace(self) -> tuple:
        """The workspace of ``sag_epoch.run_steps`` on this structure."""
        A, K, nb = self.dims
        sws = chain_blocks.sag_workspace(self.blocks.max_T, self.dims, self.blocks.max_U)
        return sag_epoch.make_workspace(A + nb + K, sws)

    def oeg_workspace(self) -> tuple:
        """The workspace of ``oeg_epoch.run_steps`` on this structure."""
        return chain_eg.make_workspace(self.blocks.max_T, self.dims, self.blocks.max_U)

    # -- the dual start: sized before it is allocated, then built with w = w_hat(mu) exactly
    def dual_size(self, dtype) -> tuple[int, str]:
        """Bytes of the dual state with log-marginals in ``dtype``, and what they hold."""
        data, d = self.problem.train, self.problem.feature_map.n_features
        return dual_state_bytes(data.n_items, data.n_sequences, self.dims[1], d, dtype), ""

    def smoothed_dual(self, epsilon: float, dtype=np.float64) -> DualState:
        """mu_c = epsilon / K^|c| + (1 - epsilon) 1[y_c = gold] on every clique."""
        return smoothed_empirical(self.problem, epsilon, dtype=dtype)

    def gibbs_dual(self, score: float, dtype=np.float64) -> DualState:
        """The authors' start: the marginals of exp(score (#gold labels + #gold cliques))."""
        return gibbs_start(self.problem, score, dtype=dtype)
