"""Distributed SDCA rounds that ship what the steps produced: per-token node-marginal changes.

A round of SDCA steps on chains or trees moves w's attribute rows by
``-(1 / (lambda n)) sum_t x_t (mu_t' - mu_t)``: the node marginals of the tokens stepped on,
spread over the token's attributes. Sending the K-vector ``mu_t' - mu_t`` of every token
(float32) and the ids of the sequences stepped on is far smaller than the K-dense rows of every
attribute those tokens have (CoNLL-2000: 88 bytes a token against about 17.6 rows of 176 bytes;
BENCHMARKS.md section 9). Whoever holds a replica of w applies it with an
:class:`AttributeTable` of every sequence's attributes. The rows after the attributes (bias,
transition and factor blocks: small) travel as the step's dense float64 increment.

Exactness. The rounding to float32 must not make w drift from the duals. Every partition keeps,
per token of its shard, the *committed* marginal nu_t: the sum of what it has sent (float64,
advanced by exactly the rounded change). A token's next message sends ``mu_t - nu_t`` (what
the rounding kept back included), so nu_t stays within one float32 rounding of mu_t and every
replica of w is exactly (to float64 summation) ``w_hat(nu)`` on the attribute rows. The
certificate then takes the difference into account instead of ignoring it: with
``c = w_hat(mu) - w = -(1 / (lambda n)) sum_t x_t (mu_t - nu_t)`` the dual is

    D(mu) = H(mu) / n - (lambda / 2) |w + c|^2
          >= H / n - (lambda / 2) (|w|^2 + 2 w . c + B^2),   |c| <= B,

with ``w . c`` computed exactly from the residuals and the token scores and ``B = (1 /
(lambda n)) sum_t |x_t| |mu_t - nu_t|`` (:meth:`MarginalLedger.residual_terms`). The reported
dual is this lower bound, so the reported gap P(w) - D is never below the true gap P(w) - D(mu)
and is a valid certificate for the returned w; it exceeds the true gap by at most
(lambda / 2) |c|^2, float32 rounding squared (below 1e-15 on CoNLL-2000).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from crfsdca.kernels.solvers import sparse_rows

#: a partition's message: (global ids of the sequences stepped on, int32; their tokens' rounded
#: node-marginal changes, (tokens, K) float32; the increment of the rows after the attributes)
Message = tuple[NDArray[np.int32], NDArray[np.float32], NDArray[np.float64]]


@dataclass(frozen=True)
class AttributeTable:
    """Every sequence's attributes, compact (int32 ids; no values when all are 1): what a
    replica of w needs to apply any partition's :data:`Message`."""

    seq_offsets: NDArray[np.int64]
    attr_offsets: NDArray[np.int64]
    attr_ids: NDArray[np.int32]
    attr_values: NDArray[np.float64]  # empty: every value is 1

    @classmethod
    def of(cls, seqs: Any) -> AttributeTable:
        """The table of a SequenceData (the items of chains or trees)."""
        values = seqs.attr_values
        return cls(
            np.ascontiguousarray(seqs.seq_offsets, np.int64),
            np.ascontiguousarray(seqs.attr_offsets, np.int64),
            np.ascontiguousarray(seqs.attr_ids, np.int32),
            np.zeros(0) if np.all(values == 1.0) else np.ascontiguousarray(values, np.float64),
        )

    def arrays(self) -> tuple[np.ndarray, ...]:
        return self.seq_offsets, self.attr_offsets, self.attr_ids, self.attr_values

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays())


def message_bytes(message: Any) -> int:
    """The bytes of a message's arrays (either form: marginal or row update)."""
    return sum(a.nbytes for a in message if isinstance(a, np.ndarray))


class MarginalLedger:
    """One partition's side of marginal messages: its committed marginals nu (see the module
    docstring), and the accumulated update of a round's messages until it is committed."""

    def __init__(
        self,
        table: AttributeTable,
        first: int,
        seqs: Any,
        log_node: NDArray[Any],
        shape: tuple[int, int],
        lam_n: float,
    ) -> None:
        self.table, self.first, self.seqs = table, int(first), seqs
        self.n_attributes, self.K = int(shape[0]), int(shape[1])
        self.lam_n = float(lam_n)
        self.committed = np.exp(np.asarray(log_node, np.float64))
        self.slot = np.full(self.n_attributes, -1, np.int64)  # a moved row's position
        self.buffer = np.empty(self.n_attributes, np.int64)  # the rows the messages move
        self.saved = np.empty((self.n_attributes, self.K))  # their values before (by slot)
        self.n_rows = 0
        self.copied = False  # u = w on the rows already (dot_and_square)
        self.tail: NDArray[np.float64] | None = None  # the messages' summed tail
        self.sent: tuple[NDArray[np.int64], NDArray[np.float32]] | None = None

    def reset(self, log_node: NDArray[Any]) -> None:
        """Commit the marginals as they are (w is then rebuilt from the duals)."""
        self.committed[:] = np.exp(np.asarray(log_node, np.float64))

    def message(
        self, examples: NDArray[np.int64], log_node: NDArray[Any], tail: NDArray[np.float64]
    ) -> Message:
        """The message of a round that stepped on ``examples`` (local ids); commits it."""
        examples = np.unique(np.asarray(examples, np.int64))
        offsets = self.seqs.seq_offsets
        out = np.empty((int(np.sum(offsets[examples + 1] - offsets[examples])), self.K), np.float32)
        deltas = sparse_rows.node_deltas(offsets, examples, log_node, self.committed, out)
        self.sent = (examples, deltas)
        return (examples + self.first).astype(np.int32), deltas, tail

    def accumulate(self, w: NDArray[np.float64], messages: list[Message]) -> None:
        """Add the messages to w (in their order: every replica adds alike), the rows they
        move saved first; :meth:`commit` keeps the change (or t times it)."""
        coef = -1.0 / self.lam_n
        table = self.table.arrays()
        tail = np.zeros_like(messages[0][2])
        for examples, deltas, t in messages:
            self.n_rows = sparse_rows.add_tokens(
                w, self.slot, self.buffer, self.n_rows, self.saved, table, examples, deltas,
                coef,
            )  # fmt: skip
            tail += t
        self.tail = tail

    @property
    def rows(self) -> NDArray[np.int64]:
        return self.buffer[: self.n_rows]

    def dot_and_square(self, w: NDArray[np.float64], u: NDArray[np.float64]) -> tuple[float, float]:
        """(w . Delta w, |Delta w|^2) of the accumulated update (attribute rows and tail; w
        before it: the saved rows); sets u = w on the rows, as :meth:`commit` would."""
        dot, sq = sparse_rows.row_changes(w, u, self.saved, self.rows)
        self.copied = True
        w_tail = w[self.n_attributes * self.K :]
        return dot + float(w_tail @ self.tail), sq + float(self.tail @ self.tail)

    def commit(self, w: NDArray[np.float64], u: NDArray[np.float64], t: float = 1.0) -> None:
        """Keep t times the accumulated update (t = 0: w as before it, bit for bit), and set
        u = w where it moved (which covers the rows this partition stepped on)."""
        sparse_rows.settle_rows(w, u, self.saved, self.slot, self.rows, float(t), self.copied)
        self.n_rows, self.copied = 0, False
        start = self.n_attributes * self.K
        w[start:] += t * self.tail
        u[start:] = w[start:]
        self.tail = None

    def take_back(self, t: float) -> None:
        """This partition's last message kept at the mix t only (t = 0: undone)."""
        if self.sent is not None:
            examples, deltas = self.sent
            sparse_rows.uncommit(self.seqs.seq_offsets, examples, self.committed, deltas, t)

    def residual_terms(self, w: NDArray[np.float64], log_node: NDArray[Any]) -> dict[str, float]:
        """``w . c`` and the bound on ``|c|`` of this shard's c = w_hat(mu) - w_hat(nu)."""
        s = self.seqs
        values = s.attr_values if self.table.attr_values.size else np.zeros(0)
        dot, bound = sparse_rows.residual_terms(
            s.attr_offsets, s.attr_ids, values, log_node, self.committed, w, self.K
        )
        return {"residual_dot": -dot / self.lam_n, "residual_bound": bound / self.lam_n}

    def residual_vector(self, log_node: NDArray[Any]) -> NDArray[np.float64]:
        """c on the attribute rows, dense (A * K): a check, not a hot path."""
        s = self.seqs
        r = np.exp(np.asarray(log_node, np.float64)) - self.committed
        tokens = np.repeat(np.arange(r.shape[0]), np.diff(s.attr_offsets))
        out = np.zeros((self.n_attributes, self.K))
        np.add.at(out, s.attr_ids, s.attr_values[:, None] * r[tokens])
        return -out.reshape(-1) / self.lam_n
