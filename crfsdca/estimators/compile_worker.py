"""The second process of :mod:`crfsdca.estimators.compile_ahead` (``python -m
crfsdca.estimators.compile_worker DTYPE [test|no-test]``): compiles the SDCA loop's parts and a
chain run's evaluation kernels on :data:`~crfsdca.estimators.compile_ahead.TINY_SENTENCES`, then
writes the :data:`~crfsdca.estimators.compile_ahead.READY` line the fit waits for."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from crfsdca.estimators.compile_ahead import READY, tiny_inputs


def _tiny_problem():
    """The chain SDCA problem of ``compile_ahead.TINY_SENTENCES`` (train and test)."""
    from crfsdca.estimators.model import SequenceCRF

    with tempfile.TemporaryDirectory(prefix="crfsdca-compile-") as folder:
        inputs = tiny_inputs(Path(folder))
    model = SequenceCRF(solver="sdca", n_bias_rows=inputs.encoder.default_bias_rows)
    return model._problem(inputs.train, inputs.test, "tiny")


def compile_loop_parts(dual_dtype: str) -> None:
    """Compile the line search and the block update of the SDCA loop as the loop calls them
    (``sdca_epoch.compile_step_parts``), for a chain run's run table and ``dual_dtype``."""
    from crfsdca.kernels.solvers import sdca_epoch

    sdca_epoch.compile_step_parts(_tiny_problem().structure.blocks.runs, dual_dtype)


def compile_block_parts(dual_dtype: str) -> None:
    """Compile the block gap, the primal direction and its update of w as the SDCA step calls
    them (``sdca_epoch.compile_block_parts``), for a chain run on ``dual_dtype`` duals."""
    from crfsdca.kernels.solvers import sdca_epoch

    sdca_epoch.compile_block_parts(_tiny_problem().structure.blocks, dual_dtype)


def compile_evaluation(dual_dtype: str, test: bool = True) -> None:
    """Call the evaluation kernels of a chain SDCA run once, on ``TINY_SENTENCES``: the
    exact primal, the test set's Viterbi (if ``test``) and the exact gap pass (on
    ``dual_dtype`` duals)."""
    from crfsdca.kernels.solvers import sdca_epoch
    from crfsdca.solvers.sdca import SDCA, SDCAConfig

    problem = _tiny_problem()
    dual = SDCA(SDCAConfig(dual_dtype=dual_dtype)).initial_state(problem).dual
    problem.primal(dual.weights)
    if test:
        problem.test_oracle.predict(dual.weights)
    blocks = problem.structure.blocks
    sdca_epoch.exact_gaps(blocks, dual.log_edge, dual.log_node, dual.weights)


def compile_prediction() -> None:
    """Call the Viterbi once on ``TINY_SENTENCES`` (what a fitted model's ``predict``
    calls)."""
    problem = _tiny_problem()
    problem.test_oracle.predict(problem.feature_map.zeros())


if __name__ == "__main__":
    dtype = sys.argv[1] if len(sys.argv) > 1 else "float64"
    test = sys.argv[2:3] != ["no-test"]
    compile_block_parts(dtype)
    compile_loop_parts(dtype)
    compile_evaluation(dtype, test=test)
    sys.stdout.buffer.write(READY)  # the run goes on from here
    sys.stdout.flush()
    if not test:  # the run scores no test set: the Viterbi for its model's first predict
        compile_prediction()
    # end without the interpreter's teardown (about 0.3 s of unloading numba and LLVM)
    os._exit(0)
