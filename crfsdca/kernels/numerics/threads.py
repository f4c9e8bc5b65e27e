"""The number of threads of the kernels that run on a thread pool (the batch passes over all
sequences, ``crfsdca.kernels.structures.chain_batch``, ``tree_scaled``), and of everything else
that sizes its work by it: numba's thread count, set per calling thread; and how such a pass
cuts the sequences into chunks (:func:`chunk_bounds`) and runs one serial ``nogil`` kernel call
per chunk on threads (:func:`map_chunks`), so that its results do not depend on the scheduling.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np


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


def chunk_bounds(seq_offsets: np.ndarray, n_chunks: int) -> np.ndarray:
    """Sequence boundaries of at most ``n_chunks`` chunks (at least one, none empty unless
    there are no sequences) with about equal item counts: (chunks + 1,) int64."""
    n = seq_offsets.shape[0] - 1
    n_chunks = max(min(n_chunks, n), 1)
    n_items = int(seq_offsets[n])
    bounds = np.empty(n_chunks + 1, np.int64)
    bounds[0] = 0
    for c in range(1, n_chunks):
        bounds[c] = max(int(np.searchsorted(seq_offsets, c * n_items // n_chunks)), bounds[c - 1])
    bounds[n_chunks] = n
    return bounds


def map_chunks(kernel, calls: list[tuple]) -> list:
    """[kernel(*args) for args in calls], one call per chunk, on threads (the kernels release
    the GIL); the results in chunk order."""
    if len(calls) == 1:
        return [kernel(*calls[0])]
    with ThreadPoolExecutor(len(calls)) as pool:
        jobs = [pool.submit(kernel, *args) for args in calls]
        return [job.result() for job in jobs]
