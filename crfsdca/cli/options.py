"""Click options generated from the solver config dataclasses (name, default, help in one place).

Every field of every registered solver config becomes one option (kebab-case); its default is
``None`` on the command line so that only what the user typed reaches the chosen solver's config,
whose own dataclass default applies otherwise. An option typed for a solver that has no such
field is a usage error.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from typing import Any

import click

from crfsdca.solvers import SOLVERS

#: CLI spellings that differ from the field name (the issue's and users' vocabulary).
RENAMED = {"max_epochs": "epochs"}
#: Fields set by the command itself, not by an option.
HIDDEN = {"seed", "threads"}
#: Names in the library's messages for values the train command's own options set.
OWN_FLAGS = {"regularization": "--lambda", "seed": "--seed", "threads": "--threads"}


def _option_name(field_name: str) -> str:
    return RENAMED.get(field_name, field_name).replace("_", "-")


def solver_fields() -> dict[str, tuple[dataclasses.Field, list[str]]]:
    """field name -> (a representative field, names of the solvers that have it)."""
    fields: dict[str, tuple[dataclasses.Field, list[str]]] = {}
    for name, cls in SOLVERS.items():
        for f in dataclasses.fields(cls.config_class):
            if f.name in HIDDEN:
                continue
            if f.name in fields:
                fields[f.name][1].append(name)
            else:
                fields[f.name] = (f, [name])
    return fields


def _defaults_text(field_name: str, solvers: list[str]) -> str:
    parts = []
    for s in solvers:
        default = config_default(s, field_name)
        if default is None:  # the help text says what applies
            parts.append(f"{s}: see above")
        elif isinstance(default, float) and math.isfinite(default):
            parts.append(f"{s}: {default:g}")
        else:
            parts.append(f"{s}: {default}")
    return "; ".join(parts)


def config_fields(solver: str) -> set[str]:
    """The names of the fields of ``solver``'s config."""
    return {f.name for f in dataclasses.fields(SOLVERS[solver].config_class)}


def config_default(solver: str, field_name: str) -> Any:
    """The default of ``field_name`` in ``solver``'s config; None for a field it has not."""
    fields = dataclasses.fields(SOLVERS[solver].config_class)
    return next((f.default for f in fields if f.name == field_name), None)


def solver_options(func: Callable) -> Callable:
    """Decorate a click command with one option per solver-config field."""
    for field_name, (f, solvers) in sorted(solver_fields().items(), reverse=True):
        help_text = f"{f.metadata.get('help', '')} [{_defaults_text(field_name, solvers)}]"
        opt = "--" + _option_name(field_name)
        if f.type in (bool, "bool"):
            decl = [f"{opt}/--no-{opt[2:]}"]
            func = click.option(*decl, field_name, default=None, help=help_text)(func)
            continue
        kind = {"int": int, "float": float, "float | None": float, "str": str}.get(str(f.type))
        kind = kind or type(f.default)
        func = click.option(opt, field_name, type=kind, default=None, help=help_text)(func)
    return func


def config_options(solver: str, given: dict[str, Any]) -> dict[str, Any]:
    """The typed options that apply to ``solver``; UsageError for one that does not."""
    fields = config_fields(solver)
    options: dict[str, Any] = {}
    for name, value in given.items():
        if value is None:
            continue
        if name not in fields:
            raise click.UsageError(f"--{_option_name(name)} does not apply to --solver {solver}")
        options[name] = value
    return options


def flag_text(message: str) -> str:
    """``message`` with config field names replaced by the flags that set them.

    The library checks ``max_epochs`` or ``fixed_step``; the user typed ``--epochs`` and
    ``--fixed-step``, and an error must name what they typed.
    """
    flags = {name: "--" + _option_name(name) for name in solver_fields()} | OWN_FLAGS
    words = "|".join(sorted(map(re.escape, flags), key=len, reverse=True))
    return re.sub(rf"(?<![\w-])({words})\b", lambda m: flags[m[1]], message)
