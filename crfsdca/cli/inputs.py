"""The train (and test) data a ``crfsdca train`` run names, loaded the same way on every path
(chains, ``--order 2``, ``--workers``)."""

from __future__ import annotations

from typing import Any

from crfsdca.cli.common import warn

_SHOWN_LABELS = 5


def load_run_inputs(run: dict[str, Any], quiet: bool):
    """``load_inputs`` of the run's dataset, test set and options; a test set whose gold labels
    the training data does not know is refused (all unknown) or warned about (some)."""
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


def _label_list(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN_LABELS])
    return shown + (", ..." if len(names) > _SHOWN_LABELS else "")


def check_labels(data, what: str, model_labels: tuple[str, ...], quiet: bool = False) -> None:
    """Refuse data whose gold labels are all unknown to the model; warn when some are."""
    unknown: dict[str, int] = data.meta.get("unknown_labels", {})
    n_unknown, n_items = sum(unknown.values()), data.n_items
    if not n_unknown:
        return
    by_count = sorted(unknown, key=lambda k: (-unknown[k], k))
    if n_unknown == n_items:
        raise ValueError(
            f"{what}: none of its gold labels is a label of the model (data: "
            f"{_label_list(by_count)}; model: {_label_list(list(model_labels))}); a model"
            " for other data?"
        )
    if quiet:
        return
    warn(
        f"{what}: {n_unknown} of {n_items} tokens ({100 * n_unknown / n_items:.2f}%) have gold"
        f" labels the model does not know ({_label_list(by_count)}); they count as errors"
    )
