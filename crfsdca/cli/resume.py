"""``crfsdca train --resume DIR``: the checkpointed run, compared with what the user typed.

A resumed run is the saved run: a typed value that differs from the saved one is a usage error
naming the flag, except the solver options of :data:`RESUME_OVERRIDES` (a longer or shorter
budget). The checkpoint's solver state and trace records continue the run.
"""

from __future__ import annotations

import os
from typing import Any

import click

from crfsdca.cli.options import config_default, flag_text

#: solver options a resumed run may change
RESUME_OVERRIDES = ("max_epochs", "time_limit", "tol", "eval_every", "threads")
_RUN_FLAGS = {
    "dataset": "DATASET",
    "fmt": "--format",
    "regularization": "--lambda",
    "l1": "--l1",
    "loss": "--loss",
    "bias": "--bias/--no-bias",
}


def typed_keys(ctx: click.Context, run: dict[str, Any]) -> set[str]:
    """The run keys and solver options the user typed (not left at their defaults)."""
    typed = {
        name
        for name in run
        if name != "options"
        and ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT
    }
    return typed | set(run["options"])


def _same(key: str, saved: Any, given: Any) -> bool:
    if saved == given:
        return True
    paths = key in ("dataset", "test", "data_dir") and isinstance(saved, str)
    if paths and isinstance(given, str) and os.path.exists(saved) and os.path.exists(given):
        return os.path.samefile(saved, given)
    return False


def load_resume(resume_dir: str, run: dict[str, Any], typed: set[str]) -> dict[str, Any]:
    """The saved run (with allowed overrides), solver state and trace records.

    What the user typed must equal the saved run, except the options in RESUME_OVERRIDES.
    """
    from crfsdca.solvers.checkpoint import load_checkpoint
    from crfsdca.solvers.sdca import SDCAState

    arrays, header = load_checkpoint(resume_dir)
    saved = dict(header["run"])
    for key in sorted(typed):
        option = key in run["options"]
        if option:
            old = saved.get("options", {}).get(key, config_default(saved["solver"], key))
        else:
            old = saved.get(key)
        new = run["options"][key] if option else run[key]
        if option and key in RESUME_OVERRIDES or _same(key, old, new):
            continue
        flag = flag_text(key) if option else _RUN_FLAGS.get(key, "--" + key.replace("_", "-"))
        raise click.UsageError(
            f"{flag}: the run saved in {resume_dir} has {_shown(old)}, this command"
            f" {_shown(new)}; --resume continues the saved run: only --epochs, --time-limit,"
            " --tol, --eval-every and --threads may change"
        )
    overrides = {k: v for k, v in run["options"].items() if k in RESUME_OVERRIDES}
    saved["options"] = {**saved["options"], **overrides}
    state = SDCAState.from_checkpoint(arrays, header["state"])
    return {"run": saved, "state": state, "records": header["records"]}


def _shown(value: Any) -> str:
    return "(not set)" if value is None else str(value)
