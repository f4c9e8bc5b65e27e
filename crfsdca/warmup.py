"""Compile the numba kernels ahead of the first real run by training tiny models.

Every kernel is ``cache=True``: numba compiles it on its first call and stores the machine code
in its cache (next to the package, or the folder chosen in :mod:`crfsdca.kernels`), keyed by
the argument types and the CPU. A first ``crfsdca train`` on a fresh install therefore spends
about a minute of CPU time compiling before it does any work. :func:`warm_up` makes those first
calls on a two-sentence corpus, through the same path as ``crfsdca train`` (file reader,
attribute template, :class:`crfsdca.CRF` fit with a test set, scoring, prediction, marginals),
so the argument types, and hence the cache entries, are the ones real runs look up.
"""

from __future__ import annotations

import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from crfsdca.estimators.compile_ahead import TINY_SENTENCES, tiny_inputs

__all__ = ["WARMUP_SENTENCES", "warm_up"]

#: the corpus the kernels are compiled on (CoNLL-2000's columns: word, POS tag, chunk tag)
WARMUP_SENTENCES = TINY_SENTENCES


def _train_once(solver: str, inputs) -> None:
    from crfsdca.errors import ConvergenceWarning
    from crfsdca.estimators.model import SequenceCRF
    from crfsdca.kernels.numerics.threads import get_threads

    # SDCA steps on several threads too where the machine has them (a large training set)
    teams = [1, 2] if solver == "sdca" and get_threads() > 1 else [None]
    for threads in teams:
        options = {} if threads is None else {"threads": threads}
        model = SequenceCRF(
            solver=solver,
            n_bias_rows=inputs.encoder.default_bias_rows,
            max_epochs=2.0,
            seed=0,
            **options,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(inputs.train, inputs.test, encoder=inputs.encoder.to_dict(), name="warmup")
    model.score(inputs.test)
    model.predict_marginals(inputs.test, 0)


def warm_up(
    solvers: Sequence[str] | None = None,
    progress: Callable[[str, float], None] | None = None,
) -> dict[str, float]:
    """Compile and cache the kernels that ``solvers`` (default: all registered) use.

    Parameters
    ----------
    solvers : sequence of str, optional
        Names from :data:`crfsdca.SOLVERS`; the kernels shared by all (scoring, prediction,
        marginals) are compiled with the first.
    progress : callable, optional
        Called as ``progress(solver, seconds)`` after each solver.

    Returns
    -------
    dict
        Seconds spent per solver (compiling, or loading the cache when already warm).
    """
    from crfsdca.solvers import SOLVERS

    names = list(SOLVERS) if solvers is None else list(dict.fromkeys(solvers))
    unknown = [name for name in names if name not in SOLVERS]
    if unknown:
        raise ValueError(f"unknown solver {unknown[0]!r}; known: {', '.join(sorted(SOLVERS))}")
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="crfsdca-warmup-") as folder:
        inputs = tiny_inputs(Path(folder))
        for name in names:
            start = time.perf_counter()
            _train_once(name, inputs)
            seconds[name] = time.perf_counter() - start
            if progress is not None:
                progress(name, seconds[name])
    return seconds
