"""``crfsdca train DATASET --graph tree|chain``: CoNLL-U corpora with their dependency trees.

The examples are the sentences of a CoNLL-U file (or of the registered ``ewt-pos``), labelled by
``--label`` (xpos or upos), with the ``pos`` template by default. ``--graph tree`` links every
word to its syntactic head (HEAD column; edge types by direction: head left or right of the
word, one transition block each); ``--graph chain`` links consecutive words, the usual model.
Both go through the same solvers, monitor and trace.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click
import numpy as np


def conllu_paths(
    dataset: str, test: str | None, data_dir: str | None, fmt: str | None = None
) -> tuple[str, str | None]:
    """(train file, test file or None) of a registered CoNLL-U dataset or of files."""
    import data_loaders

    if dataset in data_loaders.DATASETS:
        spec = data_loaders.DATASETS[dataset]
        if spec.format != "conllu":
            from crfsdca.errors import OptionError

            raise OptionError(
                f"--graph needs CoNLL-U data (dependency trees); {dataset} is {spec.format}"
            )
        train = data_loaders.find_data_file(dataset, spec.splits["train"].relpath, data_dir)
        test_path = test or str(
            data_loaders.find_data_file(dataset, spec.splits["test"].relpath, data_dir)
        )
        return str(train), test_path
    for path in (dataset, test):
        check_conllu(path, fmt)
    return dataset, test


def check_conllu(path: str | None, fmt: str | None) -> None:
    """OptionError when --format or the file's name says it is not CoNLL-U."""
    from crfsdca.errors import OptionError
    from crfsdca.features.sources import guess_format

    named = fmt or (guess_format(path) if path not in (None, "-") else None)
    if path is not None and named not in (None, "conllu"):
        raise OptionError(
            f"--graph needs CoNLL-U data (dependency trees); {path} is a --format {named} file"
        )


def read_examples(path: str, label: str, max_sequences: int | None = None, *, trees: bool):
    """The sentences of a CoNLL-U file; with ``trees``, their HEAD column must give trees."""
    from crfsdca.io.readers import read_conllu

    corpus = read_conllu(path, label)
    if trees:
        require_heads(corpus, "--graph tree")
    if max_sequences is not None:
        corpus = corpus.head(max_sequences)
    return corpus


def require_heads(corpus, who: str) -> None:
    """DataFormatError (file:line) unless ``corpus`` has a tree on every sentence."""
    from crfsdca.errors import DataFormatError

    if corpus.heads:
        return
    line, message = corpus.head_problem or (None, "expected a HEAD column (column 7)")
    raise DataFormatError(corpus.path, line, f"{message}; {who} reads the trees of HEAD")


def tree_data(heads, nodes):
    """TreeData of encoded sentences whose parents (-1 at roots) are ``heads``, all sentences'
    one after the other (as ``flat_heads`` gives them): edge types by direction."""
    from crfsdca.structures.tree import TreeData, trees_from_parents

    cuts = nodes.seq_offsets[1:-1]
    parents = np.split(np.asarray(heads, np.int64), cuts)
    types = [(p > np.arange(p.size)).astype(np.int64) for p in parents]
    return TreeData(nodes, trees_from_parents(parents, types))


def flat_heads(corpus) -> np.ndarray:
    """Every sentence's parents (-1 at roots) of a corpus read with its trees, one after the
    other."""
    return np.fromiter((h for heads in corpus.heads for h in heads), np.int64)


def encoded_graph_inputs(run: dict[str, Any], graph: str, label: str, train_path, test_path):
    """(encoder, train nodes, test nodes or None, their heads or None): the CoNLL-U files read
    and encoded, or loaded from the encoded-corpus cache (``features.encoded_cache``, keyed on
    the files' bytes, the template, label, graph and ``max_sequences``)."""
    import data_loaders
    from crfsdca.features import encoded_cache
    from crfsdca.features.attributes import make_encoder

    trees = graph == "tree"
    template = run["template"] or "pos"

    def encode():
        corpus = read_examples(train_path, label, run["max_sequences"], trees=trees)
        encoder = make_encoder(template)
        nodes = encoder.fit_transform(corpus)
        test_nodes = test_corpus = None
        if test_path is not None:
            test_corpus = read_examples(test_path, label, trees=trees)
            test_nodes = encoder.transform(test_corpus)
        extras = {}
        if trees:
            extras["train_heads"] = flat_heads(corpus)
            if test_corpus is not None:
                extras["test_heads"] = flat_heads(test_corpus)
        return encoder, nodes, test_nodes, extras

    files = [p for p in (train_path, test_path) if p is not None]
    inputs = {"files": files, "template": template, "label": label, "graph": graph,
              "max_sequences": run["max_sequences"]}  # fmt: skip
    key = None if "-" in files else encoded_cache.key(inputs, [Path(f) for f in files])
    encoder, nodes, test_nodes, extras = encoded_cache.cached(
        data_loaders.default_cache_dir(), key, encode
    )
    return encoder, nodes, test_nodes, extras.get("train_heads"), extras.get("test_heads")


def train_graph(
    run: dict[str, Any], graph: str, *, model_path, trace_path, as_json, quiet, bar, cluster=None
):
    """Train on CoNLL-U data as trees or chains; print the summary (as ``train`` does).
    ``cluster``: the options of ``cli_distributed.fit_on_cluster`` (SDCA on Dask)."""
    from crfsdca.cli.report import problem_summary, run_config
    from crfsdca.evaluation import evaluate_data
    from crfsdca.features.feature_map import FeatureMap
    from crfsdca.io.modelfile import save_model
    from crfsdca.solvers import SOLVERS
    from crfsdca.solvers.monitor import Monitor
    from crfsdca.structures.problem import Problem
    from crfsdca.structures.tree import tree_problem

    solver_name = run["solver"]
    label = run.get("label") or "xpos"
    train_path, test_path = conllu_paths(run["dataset"], run["test"], run["data_dir"], run["fmt"])
    encoder, nodes, test_nodes, train_heads, test_heads = encoded_graph_inputs(
        run, graph, label, train_path, test_path
    )
    bias = 3 if run["bias"] in (None, True) else 0
    if graph == "tree":
        train = tree_data(train_heads, nodes)
        test = tree_data(test_heads, test_nodes) if test_nodes is not None else None
        problem = tree_problem(train, n_bias_rows=bias, regularization=run["regularization"],
                               test=test, name=Path(train_path).name)  # fmt: skip
        problem.l1 = run.get("l1", 0.0)
        problem.loss = run.get("loss", "log")
    else:
        fm = FeatureMap(nodes.n_attributes, nodes.n_labels, bias)
        problem = Problem(train=nodes, feature_map=fm, regularization=run["regularization"],
                          test=test_nodes, name=Path(train_path).name,
                          l1=run.get("l1", 0.0))  # fmt: skip
    cls = SOLVERS[solver_name]
    config = run_config(run)
    extra: dict[str, Any] = {}
    scores = None
    if cluster:
        from crfsdca.cli.distributed import fit_on_cluster

        result, extra = fit_on_cluster(problem, run, **cluster, callback_factory=bar)
    else:
        progress, callback = bar(config.max_epochs)
        # the test set scored at every evaluation only for the trace; else once, at the end
        monitor = Monitor(problem, solver_name, config, callback=callback, header={"graph": graph},
                          score_test="every" if trace_path else "end")  # fmt: skip
        try:
            result = cls(config).solve(problem, monitor)
        finally:
            progress.close()
        scores = monitor.final_test_scores()
    if scores is None:
        scores = {}
        if problem.test is not None:
            scores = evaluate_data(problem.test, problem.test_oracle.predict(result.weights))
    if trace_path:
        Path(trace_path).parent.mkdir(parents=True, exist_ok=True)
        result.trace.to_jsonl(trace_path)
    fm = problem.feature_map
    if model_path:
        Path(model_path).parent.mkdir(parents=True, exist_ok=True)
        header = {
            "n_attributes": fm.n_attributes,
            "n_labels": fm.n_labels,
            "n_bias_rows": fm.n_bias_rows,
            "n_edge_types": fm.n_edge_types,
            "graph": graph,
            "labels": list(nodes.label_names),
            "regularization": problem.regularization,
            "l1": problem.l1,
            "loss": problem.loss,
            "solver": solver_name,
            "encoder": encoder.to_dict(),
            "training": {k: _finite(v) for k, v in result.summary().items()},
            "meta": {"dataset": run["dataset"], "label": label, "format": "conllu"},
        }
        save_model(model_path, {"weights": result.weights}, header)
    report = problem_summary(
        problem,
        result,
        solver=solver_name,
        dataset=run["dataset"],
        scores=scores,
        model_path=model_path,
        graph=graph,
        **extra,
    )
    return result, report


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def dumps(summary: dict[str, Any]) -> str:
    return json.dumps({k: _finite(v) for k, v in summary.items()})


def train_on_graph(run, graph, model_path, trace_path, as_json, quiet, cluster=None) -> None:
    """``train --graph tree|chain`` (crfsdca.cli.graph), on Dask with ``cluster``."""
    from crfsdca.cli.report import (
        draw_plot,
        print_summary,
        progress,
        run_config,
        warn_stopped_early,
    )

    result, summary = train_graph(
        run,
        graph,
        model_path=model_path,
        trace_path=trace_path,
        as_json=as_json,
        quiet=quiet,
        bar=lambda total: progress(total, quiet),
        cluster=cluster,
    )
    draw_plot(result.trace)
    if as_json:
        click.echo(dumps(summary))
    else:
        print_summary(summary)
    warn_stopped_early(result, run_config(run), quiet, summary.get("rounds"))
