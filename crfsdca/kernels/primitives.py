"""The primitives a structure gives the solvers' kernels, dispatched by the structure's type.

A structure (chain, tree or forest, junction tree) is one NamedTuple type of packed arrays
(``crfsdca.kernels.chain_blocks``, ``tree_blocks``, ``junction_blocks``); each implements the
stubs below for its type with ``numba.extending.overload``. A solver kernel is written once
against the stubs, and numba compiles (and caches) one specialisation per structure type:

======================================  ==================================================
primitive                               what it does for example i
======================================  ==================================================
``block_oracle(s, i, w, sws, bufs)``    nu_i = the clique marginals at w, as probabilities
                                        (bufs[1]) and logs (bufs[2]) in the block layout of
                                        its runs; returns log Z_i (non-finite: failure)
``block_direction(s, i, bufs, sws, k)`` the primal direction u_i = E_{nu - mu}[F(x_i, .)]
                                        (mu in bufs[0]) on the example's support in sws;
                                        returns |k u_i|^2
``add_block_direction(s, i, c, sws, w)`` w += c u_i
``step_workspace(s)``                   the structure's buffers of one step (sws)
======================================  ==================================================

Every block is read through its runs (``RunTable``, ``crfsdca.kernels.sdca.BlockRuns``):
where its entries live in the dual state and with which entropy coefficient.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from crfsdca.kernels.sdca import BlockRuns


class RunTable(NamedTuple):
    """The runs of every block: block i's are rows start[i] to start[i + 1] (``BlockRuns``)."""

    start: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    coef: np.ndarray
    dst: np.ndarray
    off: np.ndarray


@njit(cache=True, nogil=True)
def block_runs(table, i):
    """The :class:`~crfsdca.kernels.sdca.BlockRuns` of block i (views)."""
    a, b = table.start[i], table.start[i + 1]
    return BlockRuns(table.lo[a:b], table.hi[a:b], table.coef[a:b], table.dst[a:b], table.off[a:b])


def block_oracle(structure, i, w, sws, bufs):
    """Fill bufs' nu (bufs[1]) and log nu (bufs[2]) of block i at w; returns log Z_i."""
    raise NotImplementedError  # implemented per structure type (overload)


def block_direction(structure, i, bufs, sws, kappa):
    """u_i = E_{nu - mu}[F(x_i, .)] into sws; returns kappa^2 |u_i|^2."""
    raise NotImplementedError


def add_block_direction(structure, i, coef, sws, w):
    """w += coef u_i on the support of u_i."""
    raise NotImplementedError


def step_workspace(structure):
    """The structure's buffers of one step."""
    raise NotImplementedError


def is_structure(typ, cls) -> bool:
    """Whether the numba type ``typ`` is the NamedTuple type ``cls`` (for the overloads)."""
    return getattr(typ, "instance_class", None) is cls
