"""The primitives a structure gives the solvers' kernels, dispatched by the structure's type.

A structure (chain, tree or forest, junction tree) is one NamedTuple type of packed arrays
(``crfsdca.kernels.structures.chain_blocks``, ``tree_blocks``, ``junction_blocks``); each implements
the stubs below for its type with ``numba.extending.overload``. A solver kernel is written once
against the stubs, and numba compiles one specialisation per structure type (in the machine
code of the kernels that call it, :func:`implements`):

======================================  ==================================================
primitive                               what it does for example i
======================================  ==================================================
``block_oracle(s, i, w, sws, bufs)``    nu_i = the clique marginals at w, as probabilities
                                        (bufs.nu) and logs (bufs.log_nu) in the block layout of
                                        its runs; returns log Z_i (non-finite: failure)
``block_direction(s, i, bufs, sws, k)`` the primal direction u_i = E_{nu - mu}[F(x_i, .)]
                                        (mu in bufs.mu) on the example's support in sws;
                                        returns |k u_i|^2
``add_block_direction(s, i, c, sws, w)`` w += c u_i
``block_direction_entries(s, i, sws,    the flat indices and values of u_i (Prox-SDCA's
idx, val)``                             step reads v and w there); returns their number
``direction_capacity(s, sws)``          the most entries a block's u_i can have
``loss_augmented_map(s, i, w, sws,      the structured hinge loss's oracle: nu_i = the 0/1
bufs, hws)``                            marginals of y* = argmax_y Hamming(y, y_i) + w F(x_i,
                                        y) (and their logs, 0 and -inf) in the block layout;
                                        returns (Hamming(y*, y_i), the hinge loss H_i(w))
                                        (``crfsdca.kernels.solvers.hinge``; non-finite H_i: failure)
``smoothed_oracle(s, i, w, sws, bufs,   the smoothed hinge loss's oracle: nu_i = the clique
hws)``                                  marginals of exp([Hamming(y, y_i) + w F(x_i, y)] / g),
                                        g = hws.temp[0], as ``block_oracle`` writes them;
                                        hws.out[0] = E_nu_i Hamming(., y_i); returns log Z
                                        (``crfsdca.kernels.solvers.smooth``; chains only)
======================================  ==================================================

The buffers of one step (``sws``) are built in Python, outside the kernels, by
:func:`step_workspace`, which each structure implements with :func:`builds_workspace`.

SAG-NUS (``crfsdca.kernels.solvers.sag_epoch``) reads an example through five more, on w = c z, and
a workspace with the named fields ``node``, ``sums``, ``g_emit``, ``g_rest``, ``d_emit``,
``d_rest`` (the visit's marginals, the compact gradient and change of d):

==========================================  ==============================================
``sag_rest_rows(s)``                        rows of w after the attribute rows (bias rows,
                                            then transition or factor blocks)
``sag_oracle(s, i, z, c, sws)``             scores at c z, log Z_i and the marginals the
                                            gradient needs; returns (log Z_i, f_i(w))
``sag_add_features(s, i, node, sums, c,     emit, rest += c E[F(x_i, .)] - g F(x_i, y_i)
g, emit, rest)``                            on the example's support
``sag_prepare_trials(s, i, sws)``           the scores of g_i (for the line search)
``sag_trial(s, i, inv, sws)``               f_i(w - g_i inv): one oracle call
==========================================  ==============================================

OEG (``crfsdca.kernels.solvers.oeg_epoch``) reads an example through three, on the dual state
``dual`` (``oeg.OEGDual``: log_node, log_edge, entropies, learning rates):

==========================================  ==============================================
``oeg_prepare(s, i, dual, w, sws)``         scores at w, the EG direction s(w) - theta(mu_i)
                                            and mu_i's statistics
``oeg_trial(s, i, eta, w, lam_n, sws)``     mu' at rate eta (one oracle call); returns
                                            (log Z, H~(mu'), the dual gain)
``oeg_accept(s, i, dual, w, sws)``          mu_i <- mu' and w += its primal change
``oeg_change(s, i, sws)``                   the last trial's primal change v, as rows of K:
                                            (attribute rows (U, K), the other rows)
==========================================  ==============================================

The adaptive primal-dual method (``crfsdca.kernels.solvers.spdc_epoch``) takes its dual step
through the same three at the rate sigma / (1 + sigma), and moves its own primal iterate along
``oeg_change``.

Every block is read through its runs (:class:`RunTable`, :class:`BlockRuns`): where its entries
live in the dual state and with which entropy coefficient. The types here (runs, block buffers,
a SAG visit's buffers) are what structures and solvers exchange.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba.extending import overload

from crfsdca.kernels.jit import CalleeCompiler, njit


class BlockRuns(NamedTuple):
    """The runs of one dual block: entries [lo[r], hi[r]) of the flat block buffers carry the
    coefficient coef[r] of the junction-tree entropy and live in the dual state's array dst[r]
    (0: the clique array ``log_edge``, 1: the node array ``log_node``, both flat) from off[r].

    Each structure writes its blocks as such runs (``crfsdca.structures``); every SDCA kernel
    reads a block through them alone. Runs of coefficient 0 are updated but not summed.
    """

    lo: np.ndarray
    hi: np.ndarray
    coef: np.ndarray
    dst: np.ndarray
    off: np.ndarray


class RunTable(NamedTuple):
    """The runs of every block: block i's are rows start[i] to start[i + 1] (``BlockRuns``)."""

    start: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    coef: np.ndarray
    dst: np.ndarray
    off: np.ndarray


class BlockBuffers(NamedTuple):
    """A step's flat block buffers (``bufs``): mu_i, nu_i and log nu_i in the block layout of
    its runs, and the log of a trial mixture (the line search's). ``BlockBuffers32``: float32
    copies of the first three, for the line-search predictor."""

    mu: np.ndarray
    nu: np.ndarray
    log_nu: np.ndarray
    log_mix: np.ndarray


class BlockBuffers32(NamedTuple):
    mu: np.ndarray
    nu: np.ndarray
    log_nu: np.ndarray


class SAGVisit(NamedTuple):
    """The buffers of one visit that every structure's SAG workspace holds (``visit``)."""

    node: object  # (n_i, K) the visit's node marginals
    sums: object  # its summed clique marginals (shape: the structure's, as SAGMemory.sums)
    g_emit: object  # (U, K) the compact gradient g_i: its attribute rows
    g_rest: object  # and its other rows (bias, transitions or factors)
    d_emit: object  # (U, K) the change of d: attribute rows
    d_rest: object  # and the other rows
    ug: object  # (n_i, K) the node scores of g_i


def make_visit(n, K, U, sums_shape, rest_shape) -> SAGVisit:
    """A :class:`SAGVisit` for examples of up to n nodes and U distinct attributes."""
    return SAGVisit(
        np.empty((n, K)), np.empty(sums_shape), np.empty((U, K)), np.empty(rest_shape),
        np.empty((U, K)), np.empty(rest_shape), np.empty((n, K)),
    )  # fmt: skip


@njit(cache=True, nogil=True)
def block_runs(table, i):
    """The :class:`BlockRuns` of block i (views)."""
    a, b = table.start[i], table.start[i + 1]
    return BlockRuns(table.lo[a:b], table.hi[a:b], table.coef[a:b], table.dst[a:b], table.off[a:b])


def block_oracle(structure, i, w, sws, bufs):
    """Fill bufs.nu and bufs.log_nu of block i at w; returns log Z_i."""
    raise NotImplementedError  # implemented per structure type (overload)


def block_direction(structure, i, bufs, sws, kappa):
    """u_i = E_{nu - mu}[F(x_i, .)] into sws; returns kappa^2 |u_i|^2."""
    raise NotImplementedError


def add_block_direction(structure, i, coef, sws, w):
    """w += coef u_i on the support of u_i."""
    raise NotImplementedError


def block_direction_entries(structure, i, sws, idx, val):
    """idx[:m], val[:m] = the flat indices (distinct) and values of u_i; returns m."""
    raise NotImplementedError


def direction_capacity(structure, sws):
    """An upper bound on the number of entries of any block's u_i."""
    raise NotImplementedError


def loss_augmented_map(structure, i, w, sws, bufs, hws):
    """The corner nu_i of y* (loss-augmented MAP) into bufs; returns (Hamming loss, H_i(w))."""
    raise NotImplementedError


def smoothed_oracle(structure, i, w, sws, bufs, hws):
    """nu_i of the loss-augmented scores at temperature hws.temp[0] into bufs; returns log Z."""
    raise NotImplementedError


#: the step workspace's builder of each structure type (:func:`builds_workspace`)
_WORKSPACES: dict = {}


def step_workspace(structure):
    """The structure's buffers of one step (``sws``), as its kernels read them."""
    return _WORKSPACES[type(structure)](structure)


def sag_rest_rows(structure):
    """Rows of w after the attribute rows."""
    raise NotImplementedError


def sag_oracle(structure, i, z, c, sws):
    """(log Z_i, f_i) at w = c z; the marginals stay in sws."""
    raise NotImplementedError


def sag_add_features(structure, i, node, sums, coef, gold_coef, emit, rest):
    """emit, rest += coef E_marginals[F(x_i, .)] - gold_coef F(x_i, y_i) on i's support."""
    raise NotImplementedError


def sag_prepare_trials(structure, i, sws):
    """The scores of the compact gradient, read by ``sag_trial``."""
    raise NotImplementedError


def sag_trial(structure, i, inv, sws):
    """f_i(w - inv g_i) (one oracle call)."""
    raise NotImplementedError


def oeg_prepare(structure, i, dual, w, sws):
    """The EG direction at w and the statistics of mu_i, into sws."""
    raise NotImplementedError


def oeg_trial(structure, i, eta, w, lam_n, sws):
    """(log Z, H~(mu'), Delta(n D)) of the EG trial at rate eta."""
    raise NotImplementedError


def oeg_accept(structure, i, dual, w, sws):
    """Store the last trial's mu' as mu_i and add its primal change to w."""
    raise NotImplementedError


def oeg_change(structure, i, sws):
    """(emit (U, K), rest (R, K)): the compact v of the last trial, rows at the example's
    distinct attributes, then rows A to A + R - 1 of w (R = ``sag_rest_rows``)."""
    raise NotImplementedError


def is_structure(typ, cls) -> bool:
    """Whether the numba type ``typ`` is the NamedTuple type ``cls`` (for the overloads)."""
    return getattr(typ, "instance_class", None) is cls


def builds_workspace(cls):
    """Register the decorated function (plain Python, returned unchanged) as the builder of the
    step workspace of the structure type ``cls`` (:func:`step_workspace`)."""

    def register(build):
        _WORKSPACES[cls] = build
        return build

    return register


def implements(stub, cls):
    """Register the decorated function as primitive ``stub`` of the structure type ``cls`` (a
    NamedTuple): numba compiles it where a kernel calls ``stub`` on a ``cls``.

    The one place a primitive is dispatched by structure type; the function is returned
    unchanged (plain Python, compiled only through the stub).

    A primitive is compiled in each process that compiles a kernel calling it, and never read
    from numba's cache (the kernels and the callees under it are). numba reads an overload's
    cached code back as a library of its own, emits it, and links the IR that emitting changed
    into its callers, so a kernel compiled on a primitive from the cache computed other last
    bits than one compiled alone (``tests/test_warmup.py``: 7th digit of the primal after 4
    epochs on CoNLL-2000). A primitive is a few lines over its callees: compiling it again
    costs little.
    """

    def register(impl):
        def typer(structure, *args):
            if is_structure(structure, cls):
                return impl
            return None

        overload(stub, jit_options={"pipeline_class": CalleeCompiler}, strict=False)(typer)
        return impl

    return register
