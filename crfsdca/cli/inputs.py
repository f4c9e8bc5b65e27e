"""The train (and test) data a ``crfsdca train`` run names, loaded the same way on every path
(chains, ``--order 2``, ``--workers``)."""

from __future__ import annotations

from typing import Any


def load_run_inputs(run: dict[str, Any], quiet: bool):
    """``load_inputs`` of the run's dataset, test set and options; a test set whose gold labels
    the training data does not know is refused (all unknown) or warned about (some)."""
    from crfsdca.cli.predict import check_labels
    from crfsdca.features.sources import load_inputs

    inputs = load_inputs(
        run["dataset"],
        fmt=run["fmt"],
        template=run["template"],
        test=run["test"],
        data_dir=run["data_dir"],
        max_sequences=run["max_sequences"],
        label=run.get("label"),
    )
    if run["test"] is not None and inputs.test is not None:
        check_labels(inputs.test, f"--test {run['test']}", inputs.train.label_names, quiet)
    return inputs


def bias_rows(inputs, run: dict[str, Any]) -> int:
    """The bias rows of the run: ``--bias`` 3, ``--no-bias`` 0, else the encoder's default."""
    bias = run["bias"]
    return inputs.encoder.default_bias_rows if bias is None else (3 if bias else 0)


def model_meta(inputs, run: dict[str, Any]) -> dict[str, Any]:
    """The ``meta`` a model file records: data set, template, format, CoNLL-U label column."""
    return {
        "dataset": inputs.name,
        "template": run["template"],
        "format": inputs.fmt,
        "label": run.get("label") or ("xpos" if inputs.fmt == "conllu" else None),
    }
