"""The number of threads of the kernels that run on a thread pool (the batch passes over all
sequences, ``crfsdca.kernels.structures.chain_batch``), and of everything else that sizes its
work by it: numba's thread count, set per calling thread."""

from __future__ import annotations

import numba


def set_threads(n_threads: int) -> None:
    """Set the number of threads of the batch kernels (for the calling thread)."""
    if not 1 <= n_threads <= numba.config.NUMBA_NUM_THREADS:
        raise ValueError(
            f"n_threads must lie in [1, {numba.config.NUMBA_NUM_THREADS}]; got {n_threads}"
        )
    numba.set_num_threads(n_threads)


def get_threads() -> int:
    """Number of threads the batch kernels use from the calling thread."""
    return numba.get_num_threads()


def max_threads() -> int:
    """Largest value accepted by :func:`set_threads`."""
    return numba.config.NUMBA_NUM_THREADS
