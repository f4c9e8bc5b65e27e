"""BLAS on one thread while L-BFGS runs (``crfsdca.solvers.blas``)."""

import dataclasses

import pytest
from _synthetic import random_problem
from threadpoolctl import threadpool_info, threadpool_limits

from crfsdca.solvers.lbfgs import LBFGS, LBFGSConfig
from crfsdca.solvers.monitor import Monitor


def blas_threads() -> set[int]:
    return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


@pytest.mark.parametrize("l1", [0.0, 1e-3])  # SciPy's L-BFGS-B; crfsdca's OWL-QN
def test_lbfgs_evaluates_its_objective_with_blas_on_one_thread(monkeypatch, l1):
    problem = random_problem(seed=2, n=8, max_T=4)
    if l1:
        problem = dataclasses.replace(problem, l1=l1)
    seen = []
    evaluate = type(problem).primal_and_gradient

    def recording(self, w):
        seen.append(blas_threads())
        return evaluate(self, w)

    monkeypatch.setattr(type(problem), "primal_and_gradient", recording)
    config = LBFGSConfig(tol=1e-8, max_epochs=50)
    with threadpool_limits(limits=2, user_api="blas"):  # two outside the solver
        assert blas_threads() == {2}
        LBFGS(config).solve(problem, Monitor(problem, "lbfgs", config))
    assert seen and all(threads == {1} for threads in seen)
