"""Run experiments into ``OUT/traces/<digest>.jsonl``: cached, resumable, crash-isolated.

A trace is written (atomically) only when its run has finished, so an interrupted run leaves
the finished traces in place and a re-run computes only the missing ones. The digest includes
the code's (``provenance``), and a trace counts as cached only when its header names the
experiment and the code of today's digest: a trace of other code is run again, never reused.
A run that raises leaves ``OUT/failed/<digest>.txt`` (one line) and no trace; the others go on.

Wall times exclude numba's compilation: before the timed run, the same solver and options run
untimed for the whole budget on the first ``WARM_SEQUENCES`` sequences of the problem (the
same argument types, so every kernel the run calls is compiled or loaded from the cache
first), and the header records how long numba's compiler still held its lock during the timed
run (``compile_seconds``, expected 0) and how many kernels it compiled then.

Every record holds the solver's wall time (``seconds``) and the process's CPU time over the same
span (``cpu_seconds`` in its extra: ``Monitor(cpu_clock=True)``; CRFsuite's from the same log
lines). The runs are single-threaded, so CPU time is their solver time without the time the
process was stopped or waited for a core on a shared machine: the report's time figures and
claims use it.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import math
import multiprocessing
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from crfsdca.reproduce.experiments import Experiment
from crfsdca.reproduce.provenance import provenance

TRACES, FAILED = "traces", "failed"
WARM_SEQUENCES = 8  # the untimed warm-up run's training (and test) sequences


class _Reached(Exception):
    """Raised from the monitor callback once P - P* <= the budget's stop_below."""


def trace_path(out: Path, exp: Experiment) -> Path:
    return Path(out) / TRACES / f"{exp.digest}.jsonl"


def failure_path(out: Path, exp: Experiment) -> Path:
    return Path(out) / FAILED / f"{exp.digest}.txt"


def is_cached(out: Path, exp: Experiment) -> bool:
    """Whether ``exp``'s trace exists and was made by this code for this experiment."""
    from crfsdca.solvers.trace import read_trace

    path = trace_path(out, exp)
    if not path.exists():
        return False
    try:
        header = read_trace(path).header
    except (OSError, ValueError, TypeError):
        return False
    return header.get("experiment") == exp.inputs() and header.get("digest") == exp.digest


def read_p_star(out: Path, exp: Experiment) -> float:
    from crfsdca.solvers.trace import read_trace

    return float(read_trace(trace_path(out, exp.reference)).header["p_star"])


def run_experiment(exp: Experiment, out: Path, data_dir: str | None = None) -> Path:
    """Compute ``exp``'s trace unless this code has (``is_cached``); returns its path."""
    path = trace_path(out, exp)
    if is_cached(out, exp):
        return path
    from crfsdca.reproduce.problems import load_default_problem, load_problem

    opts = exp.opts
    if exp.solver == "measure" and opts.get("model") == "default":
        problem = load_default_problem(exp.dataset, exp.budget.max_sequences, data_dir)
    else:
        problem = load_problem(exp.dataset, exp.budget.max_sequences, data_dir)
    start, cpu_start = time.perf_counter(), time.process_time()
    if exp.solver == "reference":
        trace = _reference_trace(exp, problem)
    elif exp.solver == "measure":
        from crfsdca.reproduce.measurements import measurement_trace

        trace = measurement_trace(opts.pop("kind"), problem, opts)
    elif exp.solver == "crfsuite":
        from crfsdca.reproduce.crfsuite_run import crfsuite_trace

        trace = crfsuite_trace(problem, exp.budget.max_epochs)
    else:
        trace = _solver_trace(exp, problem, read_p_star(out, exp))
    trace.header["experiment"] = exp.inputs()
    trace.header["digest"] = exp.digest
    trace.header["provenance"] = provenance()
    trace.header["run_seconds"] = round(time.perf_counter() - start, 2)
    trace.header["run_cpu_seconds"] = round(time.process_time() - cpu_start, 2)
    path.parent.mkdir(parents=True, exist_ok=True)
    trace.to_jsonl(path)
    return path


def _reference_trace(exp: Experiment, problem):
    from crfsdca.solvers.reference import reference_optimum
    from crfsdca.solvers.trace import Trace, TraceRecord

    tol = exp.opts["tol"]
    start = time.perf_counter()
    p_star, w = reference_optimum(
        problem,
        tol=tol,
        dataset=exp.dataset,
        max_sequences=exp.budget.max_sequences,
        n_bias_rows=0,
        support="train",
    )
    grad = problem.primal_and_gradient(w)[1]
    certificate = float(grad @ grad) / (2 * problem.regularization)
    trace = Trace.create(
        solver="reference",
        config={"tol": tol},
        regularization=problem.regularization,
        dataset=exp.dataset,
        n_sequences=problem.n_sequences,
        seed=None,
        p_star=p_star,
        certificate=certificate,
        seconds=time.perf_counter() - start,
    )
    trace.append(
        TraceRecord(
            solver="reference",
            epoch=0.0,
            oracle_calls=0,
            updates=0,
            seconds=0.0,
            primal=p_star,
            gap=certificate,
        )
    )
    return trace


def _solver_trace(exp: Experiment, problem, p_star: float):
    """The timed run, after an untimed one of the same solver on the problem's first
    ``WARM_SEQUENCES`` sequences (module docstring)."""
    from crfsdca.kernels.compile_clock import compile_clock

    warm_start = time.perf_counter()
    _run(exp, head_problem(problem, WARM_SEQUENCES), -math.inf)
    warm = time.perf_counter() - warm_start
    with compile_clock() as compiled:
        trace = _run(exp, problem, p_star)
    trace.header["p_star"] = p_star
    trace.header["warmup_seconds"] = round(warm, 2)
    trace.header["compile_seconds"] = round(compiled.seconds, 3)
    trace.header["compiled_kernels"] = compiled.compiles
    return trace


def head_problem(problem, k: int):
    """The problem on the first k training and test sequences (same model and types)."""
    from dataclasses import replace

    test = None if problem.test is None else problem.test.head(k)
    return replace(problem, train=problem.train.head(k), test=test, regularization=None)


def _run(exp: Experiment, problem, p_star: float):
    """Run ``exp``'s solver on ``problem`` until its budget ends or P - P* <= stop_below."""
    from crfsdca.errors import ConvergenceWarning
    from crfsdca.solvers import SOLVERS
    from crfsdca.solvers.monitor import Monitor

    cls = SOLVERS[exp.solver]
    options = exp.opts
    start = options.pop("start", None)
    seed = options.pop("seed", 0)
    budget = exp.budget
    config = cls.config_class(
        **options, max_epochs=budget.max_epochs, tol=0.0, eval_every=budget.eval_every, seed=seed
    )

    def stop_when_reached(record) -> None:
        if record.primal - p_star <= budget.stop_below:
            raise _Reached

    monitor = Monitor(problem, exp.solver, config, callback=stop_when_reached, cpu_clock=True)
    solver = cls(config)
    state = None
    if start is not None:
        from crfsdca.reproduce.problems import dual_start

        state = solver.initial_state(problem)
        state.dual = dual_start(problem, start, getattr(config, "init_epsilon", 1e-3))
    with warnings.catch_warnings(), contextlib.suppress(_Reached):
        warnings.simplefilter("ignore", ConvergenceWarning)
        with np.errstate(all="ignore"):
            solver.solve(problem, monitor, state)
    monitor.trace.header["start"] = start or "solver default"
    return monitor.trace


def _worker(exp: Experiment, out: str, data_dir: str | None) -> tuple[str, str | None, float]:
    """Run one experiment single-threaded; (digest, error line or None, seconds). Never raises.

    numba's thread count is lowered with ``set_num_threads(1)``, not NUMBA_NUM_THREADS: numba
    re-reads that variable at every compilation and refuses a change once its pool runs.
    """
    from crfsdca.kernels.numerics.threads import set_threads

    set_threads(1)
    start = time.perf_counter()
    try:
        run_experiment(exp, Path(out), data_dir)
    except (Exception, MemoryError) as err:  # noqa: BLE001 - reported, the others go on
        where = traceback.extract_tb(err.__traceback__)[-1]
        line = f"{type(err).__name__}: {err} ({Path(where.filename).name}:{where.lineno})"
        return exp.digest, line.replace("\n", " "), time.perf_counter() - start
    return exp.digest, None, time.perf_counter() - start


def run_all(
    experiments: Sequence[Experiment],
    out: Path,
    *,
    jobs: int = 1,
    data_dir: str | None = None,
    progress: Callable[[str], None] = lambda line: None,
) -> dict[str, str]:
    """Run the missing experiments (references first).

    Returns {digest: "<experiment>: <error>"} of the runs that failed.
    """
    out = Path(out)
    todo = [e for e in experiments if not is_cached(out, e)]
    progress(
        f"{len(experiments) - len(todo)} of {len(experiments)} traces cached; {len(todo)} to run"
    )
    failures: dict[str, str] = {}
    refs = [e for e in todo if e.solver == "reference"]
    rest = [e for e in todo if e.solver != "reference"]
    for batch in (refs, rest):
        ready = []
        for exp in batch:
            if exp.needs_reference and exp.reference.digest in failures:
                failures[exp.digest] = f"{exp.describe()}: its reference optimum P* failed"
                _record_failure(out, exp, "its reference optimum P* failed")
            else:
                ready.append(exp)
        for exp, error, seconds in _map(ready, out, jobs, data_dir):
            if error is None:
                failure_path(out, exp).unlink(missing_ok=True)
                progress(f"done   {seconds:7.1f} s  {exp.describe()}")
            else:
                failures[exp.digest] = f"{exp.describe()}: {error}"
                _record_failure(out, exp, error)
                progress(f"FAILED {seconds:7.1f} s  {exp.describe()}: {error}")
    return failures


def _record_failure(out: Path, exp: Experiment, error: str) -> None:
    from crfsdca.io.modelfile import atomic_write_text

    path = failure_path(out, exp)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, f"{exp.describe()}: {error}\n")


def _map(batch, out, jobs, data_dir):
    by_digest = {e.digest: e for e in batch}
    if jobs <= 1 or len(batch) <= 1:
        for exp in batch:
            yield exp, *_worker(exp, str(out), data_dir)[1:]
        return
    context = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(jobs, mp_context=context) as pool:
        futures = [pool.submit(_worker, e, str(out), data_dir) for e in batch]
        for future in cf.as_completed(futures):
            try:
                digest, error, seconds = future.result()
            except Exception as err:  # noqa: BLE001 - a worker process died
                index = futures.index(future)
                digest, error, seconds = batch[index].digest, f"worker died: {err}", 0.0
            yield by_digest[digest], error, seconds
