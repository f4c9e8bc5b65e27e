"""sklearn-crfsuite's parameters in crfsdca's terms, and how ``crfsdca.CRF.fit`` runs.

- :func:`solver_name`: the solver of an ``algorithm`` name (None: ``lbfgs``, as sklearn-crfsuite);
- :func:`solver_options`: the estimator's parameters as solver config options, with CRFsuite's
  L-BFGS defaults (iteration counting, epsilon, delta/period stopping, 6 correction pairs);
- :func:`regularization`: CRFsuite's ``c2`` as lambda = 2 c2 / n; :func:`l1_weight`: ``c1`` as
  sigma = c1 / n;
- :func:`model_flags`: ``all_possible_states`` / ``all_possible_transitions`` (CRFsuite's
  sparse model with CRFsuite's algorithms, the dense model otherwise);
- :func:`fit_threads`, :func:`one_blas_thread`, :func:`log_line`: cores and progress of a fit.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import numpy as np

from crfsdca.solvers import SOLVERS
from crfsdca.solvers.blas import one_blas_thread
from crfsdca.solvers.trace import TraceRecord

__all__ = [
    "CRFSUITE_ALGORITHMS",
    "CRFSUITE_LBFGS",
    "check_random_state",
    "PARAM_NAMES",
    "fit_threads",
    "log_line",
    "model_flags",
    "one_blas_thread",
    "regularization",
    "solver_name",
    "solver_options",
]

PARAM_NAMES = (
    "algorithm", "c1", "c2", "max_iterations", "tol", "sampling", "non_uniformity",
    "all_possible_states", "all_possible_transitions", "epsilon", "period", "delta",
    "num_memories", "verbose", "random_state", "model_filename", "n_jobs", "order",
    "min_freq", "linesearch", "max_linesearch", "calibration_eta", "calibration_rate",
    "calibration_samples", "calibration_candidates", "calibration_max_trials", "pa_type", "c",
    "error_sensitive", "averaging", "variance", "gamma", "keep_tempfiles", "loss",
)  # fmt: skip
#: the algorithms CRFsuite has (trained on its sparse model by default, as CRFsuite does)
CRFSUITE_ALGORITHMS = ("lbfgs", "l2sgd", "ap", "pa", "arow")
#: CRFsuite's line searches; crfsdca's L-BFGS always uses SciPy's (a no-op choice)
LINESEARCHES = ("MoreThuente", "Backtracking", "StrongBacktracking")
_SEED_MAX = 2**32 - 1


def solver_name(algorithm: str | None) -> str:
    """The crfsdca solver for an sklearn-crfsuite ``algorithm`` name (None: ``lbfgs``, as
    sklearn-crfsuite); ValueError if none."""
    if algorithm is None:
        return "lbfgs"
    if isinstance(algorithm, str) and algorithm in SOLVERS:
        return algorithm
    raise ValueError(f"algorithm must be one of {sorted(SOLVERS)} or None; got {algorithm!r}")


#: CRFsuite's L-BFGS defaults, used by ``algorithm="lbfgs"`` for what is not given: no
#: iteration limit (nor evaluation limit: 1e9, finite for the model file's JSON), epsilon 1e-5,
#: period 10, delta 1e-5, 6 correction pairs.
CRFSUITE_LBFGS = {
    "max_epochs": 1e9,
    "epsilon": 1e-5,
    "period": 10,
    "delta": 1e-5,
    "history": 6,
}
#: ``tol`` of ``CRF(algorithm="sdca")`` when not given: a certified duality gap of 1e-4 on the
#: mean objective. The solver's own default (1e-7, for the CLI's and the paper's runs) made a
#: first fit run to max_iterations: on 300 CoNLL-2000 sentences with c2=0.1 it took 2.5x
#: sklearn-crfsuite's L-BFGS (whose stop is a 1e-5 relative improvement over 10 iterations);
#: at 1e-4 it takes 0.8x with the same test accuracy (BENCHMARKS.md section 7).
ESTIMATOR_SDCA_TOL = 1e-4
#: estimator parameters passed to the solver's config, under these names when they differ
_OPTIONS = (
    "tol", "sampling", "non_uniformity", "epsilon", "period", "delta", "num_memories",
    "calibration_eta", "calibration_rate", "calibration_samples", "calibration_candidates",
    "calibration_max_trials", "pa_type", "c", "error_sensitive", "averaging", "variance", "gamma",
)  # fmt: skip
_RENAMED = {"num_memories": "history", "c": "aggressiveness", "gamma": "tradeoff"}


def check_random_state(seed: Any) -> int:
    """The seed of ``random_state`` (None: 0), or scikit-learn's kind of message."""
    if seed is None:
        return 0
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(
            f"The 'random_state' parameter of CRF must be an int in the range [0, {_SEED_MAX}]"
            f" or None. Got {seed!r} instead."
        )
    if not 0 <= seed <= _SEED_MAX:
        raise ValueError(
            f"The 'random_state' parameter of CRF must be an int in the range [0, {_SEED_MAX}]"
            f" or None. Got {seed!r} instead."
        )
    return int(seed)


def _check_max_iterations(value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"max_iterations must be a number > 0 or None; got {value!r}")
    if not value > 0:
        raise ValueError(f"max_iterations must be > 0 (or None); got {value!r}")


def _check_lbfgs_extras(est, name: str) -> None:
    """``linesearch`` / ``max_linesearch``: CRFsuite's L-BFGS line search options; accepted and
    checked, but crfsdca's L-BFGS always runs SciPy's L-BFGS-B line search."""
    for param in ("linesearch", "max_linesearch"):
        if getattr(est, param, None) is not None and name != "lbfgs":
            raise ValueError(
                f"{param} is not an option of algorithm={est.algorithm!r};"
                f" leave it None or use algorithm='lbfgs'"
            )
    if getattr(est, "linesearch", None) is not None and est.linesearch not in LINESEARCHES:
        raise ValueError(f"linesearch must be one of {LINESEARCHES}; got {est.linesearch!r}")
    value = getattr(est, "max_linesearch", None)
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1
    ):
        raise ValueError(f"max_linesearch must be an int >= 1; got {value!r}")


def solver_options(est) -> dict[str, Any]:
    """The solver config options of an estimator's parameters (CRFsuite's L-BFGS defaults for
    ``lbfgs``)."""
    name = solver_name(est.algorithm)
    fields = set(SOLVERS[name].config_class.__dataclass_fields__)
    lbfgs = name == "lbfgs"
    options: dict[str, Any] = dict(CRFSUITE_LBFGS) if lbfgs else {}
    if est.max_iterations is not None:
        _check_max_iterations(est.max_iterations)
        options["max_iterations" if lbfgs else "max_epochs"] = est.max_iterations
    _check_lbfgs_extras(est, name)
    for param in _OPTIONS:
        value, field_name = getattr(est, param, None), _RENAMED.get(param, param)
        if value is None:
            continue
        if field_name not in fields:
            raise ValueError(
                f"{param} is not an option of algorithm={est.algorithm!r};"
                f" leave it None or choose an algorithm that has it"
            )
        options[field_name] = value
    if name == "sdca" and est.tol is None:
        options["tol"] = ESTIMATOR_SDCA_TOL
    if name == "sdca" and getattr(est, "n_jobs", None) is not None:
        options["threads"] = check_n_jobs(est.n_jobs)
    options["seed"] = check_random_state(est.random_state)
    return options


def l1_weight(c1, n_sequences: int, solver: str) -> float:
    """sigma = c1 / n (0 for None): CRFsuite's sum_i loss_i + c1 |w|_1 over n sequences is n
    times crfsdca's mean loss + sigma |w|_1. c1 > 0 needs a solver with an l1 term."""
    if c1 is None:
        return 0.0
    if isinstance(c1, bool) or not isinstance(c1, (int, float, np.integer, np.floating)):
        raise TypeError(f"c1 must be a number or None; got {c1!r}")
    if not (np.isfinite(c1) and c1 >= 0):
        raise ValueError(f"c1 must be a finite number >= 0; got {c1!r}")
    if c1 > 0 and solver not in ("sdca", "lbfgs"):
        raise ValueError(
            f"c1={c1!r}: algorithm {solver!r} has no L1 term; the elastic net (c1 > 0) is"
            " trained by algorithm='lbfgs' (OWL-QN, as CRFsuite) and algorithm='sdca'"
            " (Prox-SDCA, certified)"
        )
    return float(c1) / n_sequences


def regularization(c1, c2, n_sequences: int, zero_ok: bool = False) -> float | None:
    """lambda = 2 c2 / n (None: crfsdca's default 1/n); c1 is checked (``l1_weight``);
    ``c2 = 0`` (no regularization) only when ``zero_ok`` (L-BFGS, as CRFsuite)."""
    l1_weight(c1, n_sequences, "sdca")  # checks c1
    if c2 is None:
        return None
    if isinstance(c2, bool) or not isinstance(c2, (int, float, np.integer, np.floating)):
        raise TypeError(f"c2 must be a number or None; got {c2!r}")
    if zero_ok and c2 == 0:
        return 0.0
    if not np.isfinite(c2) or c2 <= 0:
        hint = "" if zero_ok else "; c2=0 (no L2 term) is trained by algorithm='lbfgs' only"
        raise ValueError(f"c2 must be > 0 (crfsdca needs an L2 term); got {c2!r}{hint}")
    return 2.0 * float(c2) / n_sequences


def model_flags(est, dense: str | None = None) -> dict[str, bool]:
    """``all_possible_states`` and ``all_possible_transitions`` as SequenceCRF takes them
    (``dense``: the kind of CRF, tree-structured or second-order, that trains the dense
    model only)."""
    lbfgs = solver_name(est.algorithm) in CRFSUITE_ALGORITHMS and dense is None
    flags = {}
    for name in ("all_possible_states", "all_possible_transitions"):
        value = getattr(est, name)
        if value is None:
            value = not lbfgs  # CRFsuite's default with lbfgs; the dense model otherwise
        elif not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{name} must be True, False or None; got {value!r}")
        elif not value and dense is not None:
            raise ValueError(f"{name}=False: {dense} CRFs train the dense model")
        elif not value and not lbfgs:
            raise ValueError(
                f"{name}=False (CRFsuite's sparse model) is trained by algorithm='lbfgs'"
                f" only (and CRFsuite's other algorithms); algorithm={est.algorithm!r} trains"
                f" the dense model: leave {name} None (or True), or use algorithm='lbfgs'"
            )
        flags[name] = bool(value)
    return flags


def check_n_jobs(n_jobs: int) -> int:
    """The number of cores ``n_jobs`` asks for (-1: all of numba's), capped at numba's."""
    from crfsdca.kernels.numerics.threads import max_threads

    if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs == 0:
        raise ValueError(f"n_jobs must be a positive int, -1 (all cores) or None; got {n_jobs!r}")
    return max_threads() if n_jobs < 0 else min(int(n_jobs), max_threads())


@contextlib.contextmanager
def fit_threads(n_jobs: int | None):
    """Threads of the parallel kernels during a fit: the full-batch passes (every L-BFGS
    evaluation; the exact primal and test scores of the other solvers) run on ``n_jobs`` cores,
    -1 for all; None leaves numba's setting. (SDCA's steps take ``n_jobs`` threads through
    :func:`solver_options`.)"""
    if n_jobs is None:
        yield
        return
    from crfsdca.kernels.numerics.threads import get_threads, set_threads

    wanted = check_n_jobs(n_jobs)
    before = get_threads()
    set_threads(wanted)
    try:
        yield
    finally:
        set_threads(before)


def log_line(record: TraceRecord) -> None:
    """One progress line on stderr (``verbose=True``)."""
    line = f"epoch {record.epoch:7.2f}  {record.seconds:8.2f}s  primal {record.primal:.6g}"
    if np.isfinite(record.gap):
        line += f"  gap {record.gap:.3g}"
    if np.isfinite(record.test_error):
        line += f"  dev accuracy {1.0 - record.test_error:.4f}"
    sys.stderr.write(line + "\n")
