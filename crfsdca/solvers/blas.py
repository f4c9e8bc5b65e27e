"""BLAS on one thread while a solver runs (:func:`one_blas_thread`)."""

from __future__ import annotations

import contextlib

__all__ = ["one_blas_thread"]


def one_blas_thread() -> contextlib.AbstractContextManager:
    """Limit the BLAS libraries numpy and SciPy have loaded to one thread (threadpoolctl)
    inside the block (a library loaded inside it, as by a first ``import scipy.optimize``, is
    not limited: import first).

    The solvers' BLAS calls are dot products and L-BFGS-B's updates on weight-sized vectors: a
    second BLAS thread gains nothing at these sizes, and OpenBLAS's threads keep spinning after
    a call, on the cores the batch oracle and the SDCA threads then run on. Measured: on a loaded
    machine SciPy's L-BFGS-B took 0.25 s instead of 0.016 s a call for 62k weights (a whole
    L-BFGS fit 5 times slower); idle, 40 L-BFGS iterations on CoNLL-2000 (1.6 M weights)
    8.6-8.8 s of solver against 10.2-15.1 s. The weight-sized dots of crfsdca's own code run
    on the calling thread anyway (``crfsdca.structures.objectives.dot``).
    """
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")
