"""The second process of :mod:`crfsdca.estimators.compile_ahead` (``python -m
crfsdca.estimators.compile_worker DTYPE [test|no-test]``): compiles the SDCA loop's parts and a
chain run's evaluation kernels on :data:`~crfsdca.estimators.compile_ahead.TINY_SENTENCES`, then
writes the :data:`~crfsdca.estimators.compile_ahead.READY` line the fit waits for."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path

from crfsdca.estimators.compile_ahead import READY, same_sources, tiny_inputs


def _tiny_problem():
    """The chain SDCA problem of ``compile_ahead.TINY_SENTENCES`` (train and test)."""
    from crfsdca.estimators.model import SequenceCRF

    with tempfile.TemporaryDirectory(prefix="crfsdca-compile-") as folder:
        inputs = tiny_inputs(Path(folder))
    model = SequenceCRF(solver="sdca", n_bias_rows=inputs.encoder.default_bias_rows)
    return model._problem(inputs.train, inputs.test, "tiny")


def compile_loop_parts(dual_dtype: str) -> None:
    """Compile the parts of the SDCA step that follow the block oracle
    (``sdca_epoch.compile_parts``), for a chain run on ``dual_dtype`` duals."""
    from crfsdca.kernels.solvers import sdca_epoch

    sdca_epoch.compile_parts(_tiny_problem().structure.blocks, dual_dtype)


def compile_evaluation(dual_dtype: str, test: bool = True) -> None:
    """Call the kernels a chain SDCA run calls outside its loop once, on ``TINY_SENTENCES``:
    those of the dual start (on ``dual_dtype`` duals) and of its sampler, which the run calls
    after compiling its loop (``LoopSolver.solve``), the exact primal and the test set's
    Viterbi (if ``test``). The exact gap pass runs the loop's own kernel
    (``sdca_epoch.exact_gaps``)."""
    from crfsdca.solvers.sdca import SDCA, SDCAConfig

    problem = _tiny_problem()
    solver = SDCA(SDCAConfig(dual_dtype=dual_dtype))
    state = solver.initial_state(problem)  # the kernels of the dual start
    solver.runner(problem, state)  # its sampler's
    dual = state.dual
    problem.primal(dual.weights)
    if test:
        problem.test_oracle.predict(dual.weights)


def compile_prediction() -> None:
    """Call the Viterbi once on ``TINY_SENTENCES`` (what a fitted model's ``predict``
    calls)."""
    problem = _tiny_problem()
    problem.test_oracle.predict(problem.feature_map.zeros())


if __name__ == "__main__":
    if not same_sources():
        sys.exit(1)  # no ready line: the fit compiles its kernels itself
    dtype = sys.argv[1] if len(sys.argv) > 1 else "float64"
    test = sys.argv[2:3] != ["no-test"]
    compile_loop_parts(dtype)
    compile_evaluation(dtype, test=test)
    # the run goes on from here; a fit that stopped listening (it failed before its loop)
    # closed the pipe: the kernels are cached all the same
    with contextlib.suppress(BrokenPipeError):
        os.write(sys.stdout.fileno(), READY)
    if not test:  # the run scores no test set: the Viterbi for its model's first predict
        compile_prediction()
    # end without the interpreter's teardown (about 0.3 s of unloading numba and LLVM)
    os._exit(0)
