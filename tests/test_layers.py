"""The imports inside crfsdca flow one way: kernels -> structures/oracles -> solvers -> model/CLI,
and no module imports itself back through others.

Every module is given a layer below; a module may import modules of its own layer or of lower
ones only (lazy imports inside functions and imports for type checking included), and kernels
import only kernels. The kernels have layers of their own: numerics (with ``jit``) ->
``primitives`` -> structures -> solvers. A module that is not in the tables fails the test, so a
new module has to be placed deliberately. Within a layer the imports form no circle: a module
that reaches itself through its imports (lazy ones too) fails, naming the modules on the way.
"""

from __future__ import annotations

import ast
from functools import cache
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

#: the layers inside crfsdca.kernels, lowest first: what every kernel is compiled with (and
#: cached by) and the numerics under all of them; the primitives (the interface between
#: structures and solvers and the types they exchange); each structure's kernels and
#: primitives; the solvers' kernels
KERNEL_LAYERS = ("kernels kernels.jit kernels.cache kernels.compile_clock kernels.numerics",
                 "kernels.primitives", "kernels.structures", "kernels.solvers")  # fmt: skip


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    if parts[:2] == ["crfsdca", "kernels"]:
        return KERNELS
    name = parts[1] if len(parts) > 1 else "crfsdca"
    for layer, names in LAYERS.items():
        if name in names.split():
            return layer
    return None


def kernel_layer_of(module: str) -> int | None:
    """The layer of a kernel module among :data:`KERNEL_LAYERS` (None: not placed)."""
    parts = module.split(".")[1:]
    for layer, names in enumerate(KERNEL_LAYERS):
        for name in names.split():
            prefix = name.split(".")
            package = name != "kernels"  # a subpackage holds its modules; kernels/ only itself
            if parts == prefix or (package and parts[: len(prefix)] == prefix):
                return layer
    return None


@cache
def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def imported_modules(path: Path, known: set[str]) -> dict[str, int]:
    """{module: first line} that ``path`` imports: ``from P import x`` imports the module P.x
    when there is one, else P; ``from crfsdca import __version__`` is exempt (crfsdca is the
    parent package of every module: it runs first whatever a module imports)."""
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        targets = []
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("crfsdca"):
            for alias in node.names:
                if node.module == "crfsdca" and alias.name == "__version__":
                    continue
                sub = f"{node.module}.{alias.name}"
                targets.append(sub if sub in known else node.module)
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names if a.name.startswith("crfsdca")]
        for target in targets:
            found.setdefault(target, node.lineno)
    return found


def import_graph() -> dict[str, dict[str, int]]:
    """{module: {module it imports: line}} over crfsdca, every import statement included."""
    found = modules()
    known = set(found)
    return {name: imported_modules(path, known) for name, path in found.items()}


def circles(graph: dict[str, dict[str, int]]) -> list[tuple[list[str], list[str]]]:
    """(group, circle) per strongly connected group of modules that import each other (Tarjan's
    algorithm, iterative): its modules, sorted, and the shortest circle [a, b, ..., a] through
    its first one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next((t for t in edges if t in graph), None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1 or node in graph[node]:
                    groups.append(group)
    return [(sorted(group), _shortest_circle(graph, group)) for group in groups]


def _shortest_circle(graph: dict[str, dict[str, int]], group: set[str]) -> list[str]:
    """The shortest path from the group's first module back to itself, inside the group."""
    start = min(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node]):
                if target == start:
                    path = [start]
                    while node != start:
                        path.append(node)
                        node = came_from[node]
                    return [start, *reversed(path[1:]), start]
                if target in group and target not in came_from:
                    came_from[target] = node
                    following.append(target)
        frontier = following
    raise AssertionError(f"no circle through {start}")  # a group always has one


def describe(graph: dict[str, dict[str, int]], group: list[str], circle: list[str]) -> str:
    """``a (a.py:3) -> b (b.py:7) -> a``: each module and the line that imports the next; then
    the other modules of the group, if any."""
    steps = [
        f"{name} ({modules()[name].relative_to(ROOT.parent)}:{graph[name][nxt]})"
        for name, nxt in zip(circle[:-1], circle[1:], strict=True)
    ]
    others = sorted(set(group) - set(circle))
    also = f"\n  (and through them: {', '.join(others)})" if others else ""
    return " -> ".join([*steps, circle[-1]]) + also


def test_every_module_has_a_layer():
    missing = [name for name in modules() if layer_of(name) is None]
    assert not missing, f"place these modules in a layer of {__name__}: {missing}"
    kernels = [name for name in modules() if layer_of(name) == KERNELS]
    unplaced = [name for name in kernels if kernel_layer_of(name) is None]
    assert not unplaced, f"place these kernels in KERNEL_LAYERS of {__name__}: {unplaced}"


@pytest.mark.parametrize("name", sorted(modules()))
def test_imports_flow_one_way(name):
    layer = layer_of(name)
    path = modules()[name]
    for target, line in imported_modules(path, set(modules())).items():
        to = layer_of(target)
        if layer == KERNELS:
            assert to == KERNELS, f"{path.name}:{line}: a kernel imports {target}"
            here, there = kernel_layer_of(name), kernel_layer_of(target)
            assert there is not None and there <= here, (
                f"{path.name}:{line}: {name} ({KERNEL_LAYERS[here]}) imports {target}"
                f" ({KERNEL_LAYERS[there] if there is not None else 'unknown'})"
            )
        else:
            assert to is not None and to <= layer, (
                f"{path.name}:{line}: {name} ({NAMES[layer]}) imports {target}"
                f" ({NAMES.get(to, 'unknown')})"
            )


def test_no_import_circle():
    graph = import_graph()
    found = [describe(graph, group, circle) for group, circle in circles(graph)]
    assert not found, "import circles (move code to where it belongs):\n" + "\n".join(found)


def test_circles_are_found_and_named():
    """The circle finder on a made-up graph: a lazy import closing a circle of three modules,
    a module importing itself, and a diamond (two paths, no circle)."""
    graph = {
        "a": {"b": 1},
        "b": {"c": 2, "d": 3},
        "c": {"a": 4},
        "d": {"e": 5},
        "e": {},
        "f": {"f": 6},
        "g": {"d": 7, "e": 8},
    }
    assert sorted(circles(graph)) == [(["a", "b", "c"], ["a", "b", "c", "a"]), (["f"], ["f", "f"])]
    graph["c"] = {}
    assert circles(graph) == [(["f"], ["f", "f"])]
    graph["e"] = {"b": 9}  # b -> d -> e -> b, with g outside the circle
    assert circles(graph) == [(["b", "d", "e"], ["b", "d", "e", "b"]), (["f"], ["f", "f"])]
