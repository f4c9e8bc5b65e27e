"""Reference optimum P* by a long L-BFGS run, cached on disk (data, template, lambda, version).

Every comparison (tests, benchmarks, the figure script) measures sub-optimality against this P*.
The L-BFGS run stops when the certified gap ||grad P||^2 / (2 lambda) <= tol, so P* is exact to
``tol``. Cache: ``$CRFSDCA_CACHE_DIR`` or ``~/.cache/crfsdca``, under ``optima/``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from crfsdca import __version__
from crfsdca.errors import ModelFormatError
from crfsdca.io.modelfile import load_model, save_model
from crfsdca.solvers.lbfgs import LBFGS, LBFGSConfig
from crfsdca.solvers.monitor import Monitor
from crfsdca.structures.problem import Problem


def cache_dir() -> Path:
    root = os.environ.get("CRFSDCA_CACHE_DIR") or Path.home() / ".cache" / "crfsdca"
    return Path(root) / "optima"


def problem_key(problem: Problem, **labels: Any) -> str:
    """A digest of the data arrays, the feature map, lambda, crfsdca's version and the labels."""
    h = hashlib.sha256()
    for array in problem.train.arrays():
        h.update(np.ascontiguousarray(array).tobytes())
    fm = problem.feature_map
    meta = {
        "A": fm.n_attributes,
        "K": fm.n_labels,
        "R": fm.n_bias_rows,
        "lambda": repr(problem.regularization),
        "version": __version__,  # a new release recomputes P* rather than trusting an old one
        **labels,
    }
    h.update(json.dumps(meta, sort_keys=True).encode())
    return h.hexdigest()[:24]


def reference_optimum(
    problem: Problem, *, tol: float = 1e-10, use_cache: bool = True, **labels: Any
) -> tuple[float, NDArray[np.float64]]:
    """(P*, w*) of ``problem``; read from the cache when present, else computed and stored."""
    path = cache_dir() / f"{problem.name or 'problem'}-{problem_key(problem, **labels)}.npz"
    if use_cache and path.exists():
        try:
            arrays, header = load_model(path)
            if header.get("tol", 1.0) <= tol:
                return float(header["p_star"]), arrays["weights"]
        except ModelFormatError:
            pass
    config = LBFGSConfig(tol=tol, max_epochs=20000, eval_every=10**9)
    monitor = Monitor(problem, "lbfgs", config, evaluate_test=False)
    result = LBFGS(config).solve(problem, monitor)
    p_star = problem.primal(result.weights)
    if use_cache and result.stop_reason == "tol":  # only a certified optimum is stored
        path.parent.mkdir(parents=True, exist_ok=True)
        save_model(
            path,
            {"weights": result.weights},
            {"p_star": p_star, "tol": tol, "labels": labels, "stop": result.stop_reason},
        )
    return p_star, result.weights
