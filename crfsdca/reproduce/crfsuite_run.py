"""CRFsuite's L-BFGS (python-crfsuite) on an experiment's problem, as a crfsdca trace.

Same features and objective: the problem has no bias rows and only its training support, so
CRFsuite's dense first-order model (possible states and transitions on) has the same d, and
``c2 = n lambda / 2`` makes CRFsuite minimise sum NLL + c2 ||w||^2 = n P(w). P after each
iteration is CRFsuite's logged loss / n; seconds are the wall time between the log lines that
open its iterations (feature generation excluded), as ``scripts/bench_vs_crfsuite.py`` does,
and ``cpu_seconds`` (extra) the process's CPU time between the same lines.
"""

from __future__ import annotations

import time

import numpy as np

from crfsdca.solvers.trace import Trace, TraceRecord
from crfsdca.structures.problem import Problem


def crfsuite_items(problem: Problem) -> tuple[list[list], list[list[str]]]:
    """Item sequences (attribute j named str(j)) and label sequences of the training data."""
    data = problem.train
    binary = bool(np.all(data.attr_values == 1.0))
    ao, ids, values = data.attr_offsets, data.attr_ids, data.attr_values
    names = np.array([str(j) for j in range(data.n_attributes)], dtype=object)
    items, labels = [], []
    for i in range(data.n_sequences):
        seq = []
        for t in range(data.seq_offsets[i], data.seq_offsets[i + 1]):
            row = names[ids[ao[t] : ao[t + 1]]].tolist()
            seq.append(
                row if binary else dict(zip(row, values[ao[t] : ao[t + 1]].tolist(), strict=True))
            )
        items.append(seq)
        labels.append([data.label_names[y] for y in data.sequence_labels(i)])
    return items, labels


def crfsuite_trace(problem: Problem, max_iterations: float) -> Trace:
    """Train with CRFsuite's L-BFGS (c1 = 0) and record P and the time of every iteration."""
    import pycrfsuite

    class TimedTrainer(pycrfsuite.Trainer):
        def message(self, message: str) -> None:
            self.stamps.append((time.perf_counter(), time.process_time(), message))
            super().message(message)

    n = problem.n_sequences
    c2 = n * problem.regularization / 2
    trainer = TimedTrainer(verbose=False)
    trainer.stamps = []
    for xseq, yseq in zip(*crfsuite_items(problem), strict=True):
        trainer.append(xseq, yseq)
    trainer.select("lbfgs")
    params = {
        "c1": 0.0,
        "c2": c2,
        "max_iterations": int(max_iterations),
        "epsilon": 1e-12,
        "delta": 1e-9,
        "period": 10,
    }
    trainer.set_params(
        {**params, "feature.possible_states": True, "feature.possible_transitions": True}
    )
    trainer.train("")  # empty name: no model file
    log = trainer.logparser
    if log.featgen_num_features != problem.feature_map.n_features:
        raise RuntimeError(
            f"CRFsuite generated {log.featgen_num_features} features;"
            f" crfsdca's problem has {problem.feature_map.n_features}"
        )
    heads = [k for k, (*_, m) in enumerate(trainer.stamps) if m.startswith("***** Iteration #")]
    starts = np.array([trainer.stamps[heads[0] - 1][:2]] + [trainer.stamps[k][:2] for k in heads])
    seconds, cpu_seconds = np.cumsum(np.diff(starts, axis=0), axis=0).T
    trace = Trace.create(
        solver="crfsuite",
        config=params,
        regularization=problem.regularization,
        dataset=problem.name,
        n_sequences=n,
        seed=None,
        n_features=int(log.featgen_num_features),
    )
    evaluations = 0
    for k, it in enumerate(log.iterations):
        evaluations += it["linesearch_trials"] + (k == 0)
        trace.append(
            TraceRecord(
                solver="crfsuite",
                epoch=float(evaluations),
                oracle_calls=evaluations * n,
                updates=(k + 1) * n,
                seconds=float(seconds[k]),
                primal=it["loss"] / n,
                extra={"cpu_seconds": float(cpu_seconds[k])},
            )
        )
    return trace
