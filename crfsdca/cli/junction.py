"""``crfsdca train DATASET --order 2``: second-order chains, trained as junction trees.

Every sequence of T items becomes :func:`~crfsdca.structures.junction_tree.second_order_chain`
(cliques of three
consecutive labels, separators of two): its nodes keep their attributes (and bias rows), every
pair of consecutive labels shares one K x K bigram block (factor type 0) and every triple one
K x K x K trigram block (factor type 1). The data, templates, test set and summary are those of
the chain path; the model file is :meth:`crfsdca.estimators.model.SequenceCRF.save`'s (``graph:
"junction"``, ``order: 2``), so ``crfsdca evaluate`` / ``tag`` and ``SequenceCRF.load`` read it.

SDCA stores one log-table per clique and separator: (T - 2) K^3 + (T - 3) K^2 entries per
sequence, 2.15e9 on CoNLL-2000's training set (16.06 GiB in float64). The solver's memory
guard refuses before allocating and names the fixes (``--dual-dtype float32``,
``--max-sequences``); L-BFGS keeps no dual.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

#: solvers that train junction-tree problems
#: solver options junction trees do not take: (option, refused values, what to use instead)
ORDER2_REFUSED = (
    ("init", ("gibbs",), "smoothed (or uniform for oeg)"),
    ("sampling", ("importance", "gap-importance", "gap_importance"), "uniform, gap or max"),
)


def check_order(order: int, run: dict[str, Any], *, graph, cluster, checkpoint, resume) -> None:
    """Usage errors of ``--order 2``, before any data is read (``--workers`` and
    ``--scheduler`` train it by DisDCA, as chains; checkpoints stay serial-chain only)."""
    if order == 1:
        return
    if graph is not None:
        raise click.UsageError(
            f"--order 2 trains second-order chains of DATASET's sequences; drop --graph {graph}"
            " (CoNLL-U files train as chains without it)"
        )
    if checkpoint or resume:
        raise click.UsageError("--order 2 runs without checkpoints (no --checkpoint or --resume)")
    if cluster and run["solver"] != "sdca":
        raise click.UsageError("--workers and --scheduler run --solver sdca (DisDCA)")
    options = run["options"]
    for name, refused, instead in ORDER2_REFUSED:
        if str(options.get(name, "")) in refused:
            flag = "--" + name.replace("_", "-")
            raise click.UsageError(f"--order 2 takes {flag} {instead}; got {options[name]}")
    if run["solver"] == "sdca" and options.get("fixed_step", 0) > 0:
        raise click.UsageError("--order 2 runs SDCA with its line search; drop --fixed-step")


def second_order_problem(inputs, run: dict[str, Any]):
    """The JunctionProblem of encoded train (and test) data as second-order chains."""
    from crfsdca.cli.inputs import bias_rows
    from crfsdca.structures.junction import junction_problem, second_order_data

    test = second_order_data(inputs.test) if inputs.test is not None else None
    problem = junction_problem(
        second_order_data(inputs.train),
        n_bias_rows=bias_rows(inputs, run),
        regularization=run["regularization"],
        test=test,
        name=inputs.name,
    )
    problem.l1 = run.get("l1", 0.0)
    problem.loss = run.get("loss", "log")
    return problem


def train_second_order(
    run: dict[str, Any], *, model_path, trace_path, as_json, quiet, cluster=None
) -> None:
    """``train --order 2``: load, train, save, print the summary as the chain path does;
    ``cluster``: the options of ``crfsdca.cli.distributed.fit_on_cluster`` (DisDCA on Dask)."""
    from crfsdca.cli import report as out
    from crfsdca.cli.common import json_value
    from crfsdca.cli.inputs import load_run_inputs

    inputs = load_run_inputs(run, quiet)
    problem = second_order_problem(inputs, run)
    extra: dict[str, Any] = {}
    if cluster:
        result, extra, scores = _solve_on_cluster(problem, run, cluster, quiet)
    else:
        bar, callback = out.progress(out.run_config(run).max_epochs, quiet)
        try:
            result, scores = _solve(problem, run, callback)
        finally:
            bar.close()
    out.write_outputs(result.trace, trace_path)
    if model_path:
        save_second_order(model_path, problem, result, inputs, run)
    report = out.problem_summary(
        problem, result, solver=run["solver"], dataset=inputs.name, scores=scores,
        model_path=model_path, order=2,
    )  # fmt: skip
    report.update(extra)
    if as_json:
        click.echo(json.dumps({k: json_value(v) for k, v in report.items()}))
    else:
        out.print_summary(report)
    out.warn_stopped_early(result, out.run_config(run), quiet, extra.get("rounds"))


def _solve(problem, run: dict[str, Any], callback):
    """(result, test scores of the returned weights): the monitor's scores of its last record,
    the returned state, are reused (a second-order Viterbi pass is costly)."""
    from crfsdca.cli.report import run_config
    from crfsdca.solvers import SOLVERS
    from crfsdca.solvers.monitor import Monitor

    cls = SOLVERS[run["solver"]]
    config = run_config(run)
    monitor = Monitor(problem, run["solver"], config, callback=callback, header={"order": 2})
    result = cls(config).solve(problem, monitor)
    return result, monitor.final_test_scores() or {}


def _solve_on_cluster(problem, run: dict[str, Any], cluster: dict[str, Any], quiet: bool):
    """(result, the summary's distributed fields, test scores of the returned weights)."""
    from crfsdca.cli.distributed import fit_on_cluster, progress
    from crfsdca.evaluation import evaluate_data

    result, extra = fit_on_cluster(
        problem, run, **cluster, callback_factory=lambda total: progress(total, quiet)
    )
    scores = {}
    if problem.test is not None:
        scores = evaluate_data(problem.test, problem.test_oracle.predict(result.weights))
    return result, extra, scores


def save_second_order(model_path: str, problem, result, inputs, run: dict[str, Any]) -> None:
    """The model file, written by :meth:`SequenceCRF.save`: weights and a header recording
    the order and the factor blocks."""
    from crfsdca.cli.inputs import model_meta
    from crfsdca.estimators.model import SequenceCRF

    Path(model_path).parent.mkdir(parents=True, exist_ok=True)
    model = SequenceCRF(
        solver=run["solver"],
        regularization=problem.regularization,
        l1=problem.l1,
        loss=problem.loss,
        n_bias_rows=problem.feature_map.n_bias_rows,
        order=2,
        **run["options"],
    )
    model.adopt(problem, result, encoder=inputs.encoder.to_dict())
    model.meta = model_meta(inputs, run)
    model.save(model_path)
