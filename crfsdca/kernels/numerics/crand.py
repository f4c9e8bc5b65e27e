"""C library ``rand()`` as glibc computes it, and CRFsuite's ``dataset_shuffle`` on top of it.

CRFsuite shuffles its training instances before every epoch of ``l2sgd``, ``ap``, ``pa`` and
``arow`` (``dataset_shuffle`` in dataset.c: for i in 0..n-1, swap perm[i] with
perm[rand() % n]) and draws its ``l2sgd`` calibration samples with ``rand()``; it never calls
``srand``, so a fresh process runs glibc's ``rand()`` seeded with 1. Reproducing that generator
gives crfsdca's versions of these algorithms CRFsuite's visiting order for the same seed.

glibc's ``rand()`` (``random_r``, TYPE_3) is an additive lagged Fibonacci generator on 32-bit
words, r[i] = r[i-3] + r[i-31] mod 2^32, whose first 31 words come from the seed by a
Lehmer step (16807 r mod 2^31 - 1, Schrage's decomposition, C's truncating division), words
31..33 repeat words 0..2, and outputs are r[i] >> 1 from i = 344 on (``srand(0)`` is
``srand(1)``). The state is a (35,) int64 array: the 34-word ring and the next index i.
"""

from __future__ import annotations

import numpy as np

from crfsdca.kernels.jit import njit

RING = 34


@njit(cache=True, nogil=True)
def rand_seed(seed, state):
    """Fill ``state`` (35,) int64 as glibc's ``srand(seed)`` does (seed: 0 <= seed < 2^32)."""
    s = seed if seed != 0 else 1
    if s >= 2**31:  # srand takes an unsigned int and stores it as a signed 32-bit word
        s -= 2**32
    state[0] = s
    for i in range(1, 31):  # Lehmer step with C's truncating division
        word = state[i - 1]
        hi = abs(word) // 127773
        if word < 0:
            hi = -hi
        lo = word - hi * 127773
        word = 16807 * lo - 2836 * hi
        if word < 0:
            word += 2147483647
        state[i] = word
    for i in range(31, RING):
        state[i] = state[i - 31]
    for i in range(RING):
        state[i] &= 0xFFFFFFFF
    state[RING] = RING
    for _ in range(310):  # glibc discards the first 310 outputs
        rand_next(state)


@njit(cache=True, nogil=True)
def rand_next(state):
    """The next ``rand()`` output, in [0, 2^31)."""
    i = state[RING]
    value = (state[(i - 3) % RING] + state[(i - 31) % RING]) & 0xFFFFFFFF
    state[i % RING] = value
    state[RING] = RING + (i + 1 - RING) % RING  # keep the index small; only i mod 34 matters
    return value >> 1


@njit(cache=True, nogil=True)
def crfsuite_shuffle(perm, state):
    """Shuffle ``perm`` (n,) int64 in place as CRFsuite's ``dataset_shuffle``."""
    n = perm.shape[0]
    for i in range(n):
        j = rand_next(state) % n
        tmp = perm[j]
        perm[j] = perm[i]
        perm[i] = tmp


def new_state(seed: int) -> np.ndarray:
    """A generator state seeded as ``srand(seed)``."""
    state = np.zeros(RING + 1, np.int64)
    rand_seed(int(seed) % 2**32, state)
    return state
