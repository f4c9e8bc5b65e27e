"""Worker side of distributed SDCA: one partition's shard and its :class:`LocalSDCA`.

This module never imports dask: a :class:`PartitionSolver` is a plain object that the driver
(``crfsdca.distributed``) runs as a Dask actor on a worker, or in-process for the simulation
that the tests compare with. It lives in an importable module so that numba's cache and the
scheduler's unpickling work on every worker.

A shard comes from a spec: :class:`ArrayShard` carries the shard's encoded arrays and the
global feature map (the driver encodes the data once; the CLI and ``fit(problem, ...)`` do
this, and a worker's memory is then its shard, duals and w). :class:`DatasetShard` names a
dataset that every worker loads and encodes whole, keeping its block (only strings cross the
wire, but every worker holds the whole corpus while it encodes). Either way feature numbering
is global, and block ``index`` of ``np.array_split(range(n), n_partitions)`` is the
partition's. Between rounds a partition keeps a replica of w and exchanges sparse updates
(``crfsdca.solvers.sparse_update``).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from crfsdca.features.feature_map import FeatureMap
from crfsdca.features.sequences import SequenceData
from crfsdca.io.modelfile import load_model, save_model
from crfsdca.kernels.solvers import sparse_rows
from crfsdca.solvers.adaptive import Snapshot, dot_and_square
from crfsdca.solvers.cocoa import coordinate_scale, scaled_train, sequences_of
from crfsdca.solvers.local import LocalSDCA, shard_problem
from crfsdca.solvers.marginal_update import AttributeTable, MarginalLedger
from crfsdca.solvers.sdca import SDCA, SDCAConfig, SDCAState
from crfsdca.solvers.sparse_update import Update, aggregate, apply, attribute_block, touched_rows
from crfsdca.structures.objectives import squared_norm
from crfsdca.structures.problem import Problem


def shard_indices(n: int, n_partitions: int, index: int) -> NDArray[np.int64]:
    """The sequences of partition ``index``: contiguous, sizes differing by at most one."""
    return np.array_split(np.arange(n), n_partitions)[index]


def subset_train(train: Any, indices: NDArray[np.integer]) -> Any:
    """The examples at ``indices`` of chain (:class:`SequenceData`), tree or junction data."""
    if isinstance(train, SequenceData):
        return train.subset(indices)
    graphs = tuple(train.graphs[int(i)] for i in indices)
    return replace(train, nodes=train.nodes.subset(indices), graphs=graphs)


@dataclass(frozen=True)
class ArrayShard:
    """A shard shipped as arrays: its encoded examples, the global feature map (hence the
    attribute count), the global n and lambda, and the problem type (chain, tree, junction)."""

    train: Any  # SequenceData, TreeData or JunctionData
    feature_map: FeatureMap
    n_total: int
    regularization: float
    name: str = ""
    kind: str = "chain"
    loss: str = "log"  # the CRF's log-loss, or the structured SVM's hinge loss
    table: AttributeTable | None = None  # every sequence's attributes (marginal messages)
    first: int = 0  # the global id of the shard's first sequence

    @classmethod
    def of(
        cls, problem: Problem, indices: NDArray[np.integer], table: AttributeTable | None = None
    ) -> ArrayShard:
        """Shard ``indices`` (contiguous) of ``problem`` (the driver encodes once; workers
        get arrays); ``table``: :func:`attribute_table` of the problem, shared by the shards."""
        return cls(
            subset_train(problem.train, indices),
            problem.feature_map,
            problem.n_sequences,
            float(problem.regularization),
            problem.name,
            _kind(problem),
            problem.loss,
            table,
            int(indices[0]) if len(indices) else 0,
        )

    def load_parts(self) -> tuple[Problem, AttributeTable | None, int]:
        """(the shard's problem, the attribute table, the shard's first global id)."""
        return self.load(), self.table, self.first

    def load(self) -> Problem:
        lam_n = self.regularization * self.n_total
        n = sequences_of(self.train).n_sequences
        cls = _problem_class(self.kind)
        return cls(
            train=self.train,
            feature_map=self.feature_map,
            regularization=lam_n / n,
            name=self.name,
            loss=self.loss,
        )


def _kind(problem: Problem) -> str:
    return problem.structure.kind


def attribute_table(problem: Problem) -> AttributeTable | None:
    """The table marginal messages need (chains and trees), None for other structures."""
    if _kind(problem) not in MARGINAL_KINDS:
        return None
    return AttributeTable.of(sequences_of(problem.train))


#: structures whose rounds ship per-token marginal changes (w's attribute rows come from the
#: node marginals); the others ship the rows they moved
MARGINAL_KINDS = ("chain", "tree")
#: aggregations that ship marginal changes (the others step from a scaled or fresh copy of w)
MARGINAL_VARIANTS = ("practical", "adaptive")


def _problem_class(kind: str) -> type:
    if kind == "junction":
        from crfsdca.structures.junction import JunctionProblem

        return JunctionProblem
    if kind == "tree":
        from crfsdca.structures.tree import TreeProblem

        return TreeProblem
    return Problem


@dataclass(frozen=True)
class DatasetShard:
    """A shard named by a dataset (registered name or file), loaded on the worker."""

    dataset: str
    index: int
    n_partitions: int
    fmt: str | None = None
    template: str | None = None
    data_dir: str | None = None
    max_sequences: int | None = None
    n_bias_rows: int | None = None
    regularization: float | None = None  # None: 1/n
    label: str | None = None  # CoNLL-U column (xpos, upos)

    def load(self) -> Problem:
        return self.load_parts()[0]

    def load_parts(self) -> tuple[Problem, AttributeTable | None, int]:
        """(the shard's problem, the whole data's attribute table, the shard's first id)."""
        from crfsdca.features.sources import load_inputs

        inputs = load_inputs(
            self.dataset,
            fmt=self.fmt,
            template=self.template,
            test=None,
            data_dir=self.data_dir,
            max_sequences=self.max_sequences,
            label=self.label,
            with_test=False,
        )
        train = inputs.train
        bias = inputs.encoder.default_bias_rows if self.n_bias_rows is None else self.n_bias_rows
        fm = FeatureMap(train.n_attributes, train.n_labels, bias)
        whole = Problem(
            train=train, feature_map=fm, regularization=self.regularization, name=inputs.name
        )
        indices = shard_indices(train.n_sequences, self.n_partitions, self.index)
        first = int(indices[0]) if indices.size else 0
        return shard_problem(whole, indices), attribute_table(whole), first


class PartitionSolver:
    """One partition: its shard, dual state, gap estimates and RNG (see the module docstring).

    A round is one call, :meth:`local_round`: first *settle* the last round (apply every
    partition's message, in partition order, to this replica of w; with "adaptive", keep it
    only when the exact dual did not fall, else report the rejection and step no further),
    then run the steps and return this partition's message. Messages are per-token
    node-marginal changes (``crfsdca.solvers.marginal_update``) for chains and trees with the
    "practical" and "adaptive" aggregations, else the rows of w the steps moved
    (``crfsdca.solvers.sparse_update``). Every replica applies the same messages in the same
    order, so the replicas are equal bit for bit, and the driver holds no w of its own.
    """

    def __init__(
        self,
        spec: ArrayShard | DatasetShard,
        *,
        index: int,
        n_partitions: int,
        config: dict[str, Any],
        seed: np.random.SeedSequence,
        variant: str = "practical",
        checkpoint_dir: str | None = None,
        resume: int | None = None,
        attribute_counts: NDArray[np.int64] | None = None,
    ) -> None:
        self.index, self.variant = index, variant
        problem, table, first = spec.load_parts()
        self.coords = None  # "sparse": c of crfsdca.solvers.cocoa (kernel coordinates w / c)
        if variant == "sparse":
            if attribute_counts is None:
                raise ValueError("the sparse aggregation needs the attribute counts s_j")
            fm = problem.feature_map
            self.coords = coordinate_scale(
                attribute_counts, n_partitions, fm.n_labels, fm.n_features
            )
            train = scaled_train(problem.train, attribute_counts, n_partitions)
            problem = replace(problem, train=train)
        self.problem = problem
        self.config = SDCAConfig(**config)
        self.checkpoint_dir = None if checkpoint_dir is None else Path(checkpoint_dir)
        self._writer: threading.Thread | None = None
        self._written: int | None = None  # round of the last complete checkpoint write
        self._write_error: BaseException | None = None
        if resume is not None and self.checkpoint_dir is not None:
            path = partition_file(self.checkpoint_dir, index, resume)
            arrays, header = load_model(str(path))
            state = SDCAState.from_checkpoint(arrays, header["state"])
        else:
            state = SDCA(self.config).initial_state(self.problem)
            state.rng_state = np.random.default_rng(seed).bit_generator.state
        self.local = LocalSDCA(self.problem, self.config, state, scale=n_partitions)
        fm = self.problem.feature_map
        self.shape = (fm.n_attributes, fm.n_labels)  # the attribute rows of w
        self.w = np.zeros(0)  # the replica of the global w (set_weights)
        self._saved: Snapshot | None = None  # "adaptive": the blocks before the last round
        self._rows = np.zeros(0, np.int64)  # the attribute rows the last round moved
        self._mark = np.zeros(fm.n_attributes, np.bool_)  # scratch of touched_rows
        self.ledger: MarginalLedger | None = None
        # one partition: its replica of w takes the steps' w on the rows they moved, so the run
        # is serial SDCA bit for bit (with the same draws); nothing is sent anywhere
        self.alone = n_partitions == 1 and variant in MARGINAL_VARIANTS
        marginal = variant in MARGINAL_VARIANTS and _kind(problem) in MARGINAL_KINDS
        log_loss = getattr(problem, "loss", "log") == "log"
        if table is not None and marginal and log_loss and not self.alone:
            seqs = sequences_of(problem.train)
            self.ledger = MarginalLedger(
                table, first, seqs, state.dual.log_node, self.shape, self.local.lam_n
            )
        self._held: Update | None = None  # rows form: the summed update not yet committed
        self._message: Any = None  # this partition's last message (the driver sends None)

    def info(self) -> dict[str, Any]:
        fm = self.problem.feature_map
        return {
            "n": self.problem.n_sequences,
            "n_items": self.problem.train.n_items,
            "n_features": fm.n_features,
            "lambda_n": self.local.lam_n,
            "pid": os.getpid(),
            "dual_bytes": self.local.state.dual.nbytes,
            "n_attributes": fm.n_attributes,
            "n_labels": fm.n_labels,
            "form": "rows" if self.ledger is None else "marginals",
        }

    def set_weights(self, w: NDArray[np.float64]) -> None:
        """Start this partition's replica of the global w (a copy; ``w`` is never written).
        One partition keeps the w of its dual state (serial SDCA's, bit for bit)."""
        d = self.local.state.dual
        if self.alone:
            w = d.weights
        self.w = np.array(w, dtype=np.float64, copy=True)
        d.weights = self.w.copy() if self.coords is None else self.w / self.coords

    def weights(self) -> NDArray[np.float64]:
        """This replica of the global w (a copy)."""
        return self.w.copy()

    def local_round(
        self, pending: dict[str, Any] | None, n_steps: int, sigma: float | None = None
    ) -> tuple[Any, ...]:
        """Settle ``pending`` (the last round's messages, see the class docstring), then run
        ``n_steps`` steps with the scale sigma' (default P); returns (this partition's
        message, seconds spent computing it, and for "adaptive" the entropy change of the
        blocks stepped on). A rejected last round returns ``("rejected", w . Delta w,
        |Delta w|^2)`` instead, and nothing is stepped.

        The steps move the kernel's local copy u (= w, or w / c for "sparse"); the message is
        the change of this shard's w_hat: the node-marginal changes, or (u - w) / sigma' on
        the rows the steps moved (divided by c for "sparse")."""
        rejected = self._settle(pending)
        if rejected is not None:
            return rejected
        return self._steps(n_steps, sigma)

    def redo(self, n_steps: int, sigma: float) -> tuple[Any, ...]:
        """Put back the blocks of the last round, which the driver rejected
        (``crfsdca.solvers.adaptive``), drop its messages, and run the round again with
        ``sigma`` (the safe P)."""
        if self._saved is None:
            raise RuntimeError("no round to undo")
        self._saved.restore(self.local.state.dual)
        self._saved = None
        self._commit(0.0)
        return self._steps(n_steps, sigma)

    def _steps(self, n_steps: int, sigma: float | None) -> tuple[Any, ...]:
        start = _clock()
        if self.variant not in ("practical", "sparse", "adaptive"):  # comparison: dense
            delta = self.local.local_round(self.w, n_steps, self.variant)
            self._rows = np.zeros(0, np.int64)
            self._message = (None, delta, None)
            return self._message, _clock() - start
        A, K = self.shape
        scale = self.local.scale if sigma is None else float(sigma)
        dual = self.local.state.dual
        trial = False  # a round at the safe sigma' = P is never checked: nothing to save
        if self.variant == "adaptive":
            examples = self.local.draw_examples(n_steps)
            trial = scale < self.local.scale
            runs = self.problem.structure.blocks.runs
            self._saved = Snapshot(dual, runs, examples) if trial else None
            self.local.take_steps(n_steps, scale=scale, examples=examples)
        else:
            self.local.take_steps(n_steps, scale=scale)
        u, w = dual.weights, self.w
        tail = (u[A * K :] - w[A * K :]) / scale
        if self.ledger is not None:
            message = self.ledger.message(self.local.visited, dual.log_node, tail)
        else:
            rows = touched_rows(sequences_of(self.problem.train), self.local.visited, self._mark)
            self._rows = rows
            values = None  # alone: the rows w takes from u (_commit)
            if self.alone:
                tail = None
            elif self.coords is None:
                values = sparse_rows.row_increments(u, w, rows, K, scale)
            else:
                u_rows, w_rows = attribute_block(u, A, K)[rows], attribute_block(w, A, K)[rows]
                c = attribute_block(self.coords, A, K)[rows]
                values = (u_rows - w_rows / c) / scale / c
            message = (rows, values, tail)
        self._message = message
        seconds = _clock() - start
        if self.variant == "adaptive":  # the entropy change matters to a trial only
            return message, seconds, self._saved.entropy_change(dual) if trial else 0.0
        return message, seconds

    # -- settling a round: apply the messages, keep or reject ---------------------------------
    def _settle(self, pending: dict[str, Any] | None) -> tuple[str, float, float] | None:
        """Apply ``pending["messages"]`` to the replica; with ``pending["check"]`` only when
        the exact dual did not fall (``crfsdca.solvers.adaptive``): D changes by
        Delta H / n - lambda (w . Delta w + |Delta w|^2 / 2). Returns None when applied, else
        ``("rejected", w . Delta w, |Delta w|^2)`` (the update is held for
        :meth:`mix_last_round` or :meth:`redo`)."""
        if pending is None:
            return None
        self._accumulate(pending["messages"])
        if pending["check"]:
            dot, sq = self._dot_and_square()
            change = pending["entropy"] / pending["n"] - pending["lam"] * (dot + 0.5 * sq)
            if change < 0.0:
                return "rejected", dot, sq
        self._commit(1.0)
        self._saved = None
        return None

    def _accumulate(self, messages: list[Any]) -> None:
        messages = [self._message if m is None else m for m in messages]  # None: our own
        if self.ledger is not None:
            self.ledger.accumulate(self.w, messages)
        elif not self.alone:
            self._held = aggregate(messages)

    def _dot_and_square(self) -> tuple[float, float]:
        if self.ledger is not None:
            return self.ledger.dot_and_square(self.w, self.local.state.dual.weights)
        A, K = self.shape
        return dot_and_square(self.w, self._held, A, K)

    def _commit(self, t: float) -> None:
        """w += t * the held update (t = 0: dropped), and the kernel's u reset to w on the
        rows it moved and the rows this partition stepped on."""
        if self.ledger is not None:
            self.ledger.commit(self.w, self.local.state.dual.weights, t)
            if t != 1.0:
                self.ledger.take_back(t)
            return
        held, self._held = self._held, None
        if self.alone:  # w = u on the rows moved (t = 0: u = w), bit for bit
            A, K = self.shape
            u, w = self.local.state.dual.weights, self.w
            if t not in (0.0, 1.0):
                raise RuntimeError("one partition keeps or drops its round, never mixes it")
            src, dst = (u, w) if t == 1.0 else (w, u)
            sparse_rows.copy_rows(dst, src, self._rows, K)
            dst[A * K :] = src[A * K :]
            return
        if t != 1.0 and held is not None:
            rows, values, tail = held
            held = (rows, values * t, None if tail is None else tail * t)
        if t == 0.0:  # "adaptive" only: u is w
            A, K = self.shape
            u, w = self.local.state.dual.weights, self.w
            sparse_rows.copy_rows(u, w, self._rows, K)
            u[A * K :] = w[A * K :]
            return
        self._apply(held)

    def mixed_entropy_changes(self, ts: NDArray[np.float64]) -> NDArray[np.float64]:
        """The entropy change of the last round's blocks at each mix ``ts`` of their state
        before and after it ("adaptive", a rejected round: ``crfsdca.solvers.adaptive``)."""
        if self._saved is None:
            raise RuntimeError("no round to mix")
        return self._saved.mixed_entropy_changes(self.local.state.dual, np.asarray(ts))

    def mix_last_round(self, t: float) -> None:
        """Keep the last round at the mix t: its blocks, and t times the held update."""
        if self._saved is None:
            raise RuntimeError("no round to mix")
        self._saved.mix(self.local.state.dual, float(t))
        self._saved = None
        self._commit(float(t))

    def _apply(self, update: Update | None) -> None:
        """w += update on the replica, and the kernel's copy u reset to w on those rows."""
        if update is None:
            return
        A, K = self.shape
        apply(self.w, update, A, K)
        rows, _, _ = update
        u, w = self.local.state.dual.weights, self.w
        if rows is None:
            u[:] = w if self.coords is None else w / self.coords
            return
        if self.coords is None:
            sparse_rows.copy_rows(u, w, rows, K)
        else:
            w_rows = attribute_block(w, A, K)[rows] / attribute_block(self.coords, A, K)[rows]
            attribute_block(u, A, K)[rows] = w_rows
        u[A * K :] = w[A * K :]

    def objective_terms(self, pending: dict[str, Any] | None) -> dict[str, Any]:
        """Shard sums at the global w (this replica after settling ``pending``; a rejection
        as in :meth:`local_round`), with |w|^2 and the residual terms of the certificate
        (``crfsdca.solvers.marginal_update``)."""
        rejected = self._settle(pending)
        if rejected is not None:
            return {"rejected": rejected}
        st = self.local.state
        w = self.w if self.coords is None else self.w / self.coords
        terms = {
            **self.local.objective_terms(w),
            "oracle_calls": float(st.oracle_calls),
            "updates": float(st.updates),
            "wsq": squared_norm(self.w),
            "residual_dot": 0.0,
            "residual_bound": 0.0,
        }
        if self.ledger is not None:
            terms.update(self.ledger.residual_terms(self.w, st.dual.log_node))
        return terms

    def committed_contribution(self) -> NDArray[np.float64]:
        """What w holds of this shard: :meth:`primal_contribution` of the committed marginals
        nu (``crfsdca.solvers.marginal_update``; equal to it in the rows form)."""
        return self.primal_contribution() - self.residual_vector()

    def residual_vector(self) -> NDArray[np.float64]:
        """w_hat(mu) - w_hat(nu) of this shard, dense (zero in the rows form): a check."""
        out = np.zeros_like(self.w)
        if self.ledger is not None:
            log_node = self.local.state.dual.log_node
            out[: self.ledger.n_attributes * self.ledger.K] = self.ledger.residual_vector(log_node)
        return out

    def primal_contribution(self) -> NDArray[np.float64]:
        v = self.local.primal_contribution()
        return v if self.coords is None else v / self.coords

    def checkpoint(self, round_: int) -> None:
        """Start writing this partition's state at round ``round_`` (.npz + JSON, no pickle,
        atomic) from a copy, in a background thread: the next round need not wait."""
        if self.checkpoint_dir is None:
            return
        self.checkpoint_done()
        self.local.state.counters = dict(self.local.counters)
        arrays, header = self.local.state.to_checkpoint()
        arrays = {k: np.array(v, copy=True) for k, v in arrays.items()}
        header = {"state": header, "index": self.index, "round": round_}
        path = partition_file(self.checkpoint_dir, self.index, round_)
        self._writer = threading.Thread(
            target=self._write, args=(path, arrays, header, round_), name="crfsdca-checkpoint"
        )
        self._writer.start()

    def checkpoint_done(self, wait: bool = True) -> int | None:
        """The round of the last complete write (None: none yet, or one under way and not
        ``wait``); raises the write's error."""
        if self._writer is not None:
            if not wait and self._writer.is_alive():
                return None
            self._writer.join()
            self._writer = None
        if self._write_error is not None:
            error, self._write_error = self._write_error, None
            raise error
        return self._written

    def prune(self, keep: int) -> None:
        """Delete this partition's checkpoint files other than round ``keep``'s."""
        if self.checkpoint_dir is None:
            return
        for path in self.checkpoint_dir.glob(f"partition-{self.index}-r*.npz"):
            if path != partition_file(self.checkpoint_dir, self.index, keep):
                path.unlink(missing_ok=True)

    def _write(self, path: Path, arrays: dict, header: dict, round_: int) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            save_model(str(path), arrays, header)
            self._written = round_
        except BaseException as err:  # noqa: BLE001 - raised by checkpoint_done()
            self._write_error = err


def partition_file(directory: Path, index: int, round_: int) -> Path:
    """Partition ``index``'s checkpoint at round ``round_``."""
    return Path(directory, f"partition-{index}-r{round_}.npz")


def _clock() -> float:
    import time

    return time.perf_counter()
