"""The imports inside crfsdca flow one way: kernels -> structures/oracles -> solvers -> model/CLI.

Every module is given a layer below; a module may import modules of its own layer or of lower
ones only (lazy imports inside functions included), and kernels import only kernels. A module
that is not in the table fails the test, so a new module has to be placed deliberately.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "crfsdca"

KERNELS, BASE, STRUCTURES, SOLVERS, FRONT = 0, 1, 2, 3, 4
NAMES = {
    KERNELS: "kernels",
    BASE: "base",
    STRUCTURES: "structures/oracles",
    SOLVERS: "solvers",
    FRONT: "model/CLI",
}

#: the packages (and the few top-level modules) of each layer
LAYERS = {
    # plain data types, errors, files, corpora and scores: no solver or model knowledge
    BASE: "_dtypes errors evaluation metrics io",
    # data, feature layout and one module per structure kind: oracle, problem, objective
    STRUCTURES: "features structures",
    # solvers and what they share (dual states, samplers, the monitor, traces, checkpoints, Dask)
    SOLVERS: "solvers distributed",
    # the user's side: models and estimators, export, plots, the command line, the reproduction
    FRONT: "crfsdca estimators plotting warmup cli reproduce",
}


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    if parts[:2] == ["crfsdca", "kernels"]:
        return KERNELS
    name = parts[1] if len(parts) > 1 else "crfsdca"
    for layer, names in LAYERS.items():
        if name in names.split():
            return layer
    return None


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every crfsdca import; ``from crfsdca import __version__`` is exempt."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("crfsdca"):
            if node.module == "crfsdca":
                names = [a.name for a in node.names if a.name != "__version__"]
                found += [(node.lineno, f"crfsdca.{n}") for n in names]
            else:
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("crfsdca")]
    return found


def test_every_module_has_a_layer():
    missing = [name for name in modules() if layer_of(name) is None]
    assert not missing, f"place these modules in a layer of {__name__}: {missing}"


@pytest.mark.parametrize("name", sorted(modules()))
def test_imports_flow_one_way(name):
    layer = layer_of(name)
    path = modules()[name]
    for line, target in imports(path):
        to = layer_of(target)
        if layer == KERNELS:
            assert to == KERNELS, f"{path.name}:{line}: a kernel imports {target}"
        else:
            assert to is not None and to <= layer, (
                f"{path.name}:{line}: {name} ({NAMES[layer]}) imports {target}"
                f" ({NAMES.get(to, 'unknown')})"
            )
