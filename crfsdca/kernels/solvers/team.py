"""A thread's part in a burst of multi-threaded SDCA (``crfsdca.solvers.threads``), and how a
step's change of w is written with or without one (:func:`move`): the one place every block step
(the CRF's, ``sdca_epoch``; the structured SVM's, ``hinge``) writes w."""

from typing import NamedTuple

import numpy as np

from crfsdca.kernels.jit import njit
from crfsdca.kernels.primitives import add_block_direction
from crfsdca.kernels.solvers.prox import apply_step, record_step


class Team(NamedTuple):
    """One thread's part in a burst of multi-threaded SDCA (``crfsdca.solvers.threads``).

    The threads step at once on their own examples, on one shared w, without locks (Hsieh, Yu
    and Dhillon's PASSCoDe-Wild): a thread's update of an entry of w may be lost to another's
    write of it. So each thread also adds its changes of w to its own row of ``deltas``, which
    no other thread writes: w at the start of the stretch plus the rows is w_hat(mu) of the dual
    state (up to rounding) at any time, and the caller makes it w at the end of the stretch,
    whatever the threads raced on.

    ``examples``: the thread's examples (global indices; the sampler tree's leaf j and the
    multipliers' entry j are ``examples[j]``); ``done`` and ``gap_sums`` (one entry per thread,
    each written by its own thread and read by all): steps taken in this burst and the sum of
    the thread's gap estimates. A thread stops once it has taken its ``quota`` of steps and the
    team's sum to ``target`` (so every thread steps on its examples, and one that is ahead keeps
    stepping while another finishes its quota), or once the gap sums fall to ``stop_gap * n``.
    ``drop`` >= 0 keeps the change of the thread's step number ``drop`` (of the burst) out of
    the shared w (only its row of ``deltas`` has it): a lost update on purpose, for tests (-1:
    none). A team steps with ``scale`` 1 (each step moves w by its own change, as serial SDCA).
    With the elastic net the steps move v, and w = S_tau(v) (``prox``): ``deltas`` are v's.
    """

    examples: np.ndarray
    rank: int
    done: np.ndarray
    gap_sums: np.ndarray
    quota: int
    target: int
    deltas: np.ndarray
    drop: int


@njit(cache=True, nogil=True, inline="always")
def move(structure, i, gamma, kappa, sws, w, prox, m, team, s):
    """w += gamma kappa u_i, the step's change of w (with the elastic net's ``prox``: v +=
    gamma a on its m support entries, w = S_tau(v) there); a :class:`Team` member also records
    it in its row of ``deltas`` and leaves its step number ``drop`` out of the shared w."""
    if prox is None:
        if team is None:
            add_block_direction(structure, i, gamma * kappa, sws, w)
        else:
            add_block_direction(structure, i, gamma * kappa, sws, team.deltas[team.rank])
            if s != team.drop:
                add_block_direction(structure, i, gamma * kappa, sws, w)
    elif team is None:
        apply_step(gamma, prox, m, w)
    else:
        record_step(gamma, prox, m, team.deltas[team.rank])
        if s != team.drop:
            apply_step(gamma, prox, m, w)
