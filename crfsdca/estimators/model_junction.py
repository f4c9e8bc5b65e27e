"""Junction-tree models in :class:`crfsdca.estimators.model.SequenceCRF`: second-order chains and
custom
junction trees.

A model fitted on :class:`~crfsdca.structures.junction.JunctionData` has graph kind ``"junction"``
and an order: 2 when every training example is
:func:`~crfsdca.structures.junction_tree.second_order_chain` of
its length (such a model also tags plain :class:`~crfsdca.features.sequences.SequenceData`, turned
into
second-order chains here), ``None`` for custom junction trees (it predicts JunctionData only).
The model file's header records ``graph: "junction"``, ``order`` (2 or null) and
``factor_arities``; files written by ``crfsdca train --order 2`` before this format
(``graph: "chain"``, ``order: 2``) read as second-order models.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from crfsdca.errors import GraphError
from crfsdca.features.sequences import SequenceData
from crfsdca.structures.junction import JunctionData, JunctionOracle, second_order_data
from crfsdca.structures.junction_tree import JunctionTree, second_order_chain
from crfsdca.structures.tree import TreeData

__all__ = [
    "ORDERS",
    "check_order",
    "data_order",
    "graph_of",
    "junction_node_marginals",
    "kind_name",
    "model_data",
]

ORDERS = (1, 2)


def check_order(order: Any) -> int:
    """``order`` as an int 1 or 2; ValueError otherwise."""
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order not in ORDERS:
        raise ValueError(f"order must be 1 (first-order) or 2 (second-order chains); got {order!r}")
    return int(order)


def graph_of(data: Any) -> str:
    """``"tree"``, ``"junction"`` or ``"chain"``: the graph kind of packed data."""
    if isinstance(data, TreeData):
        return "tree"
    return "junction" if isinstance(data, JunctionData) else "chain"


def _is_second_order(g: JunctionTree) -> bool:
    ref = second_order_chain(g.n_nodes)
    return (
        g.cliques == ref.cliques
        and g.factors == ref.factors
        and np.array_equal(g.clique_parents, ref.clique_parents)
    )


def data_order(data: Any) -> int | None:
    """1 for chains and trees, 2 for JunctionData of second-order chains, None for other
    junction trees."""
    if not isinstance(data, JunctionData):
        return 1
    if data.factor_arities == (2, 3) and all(_is_second_order(g) for g in data.graphs):
        return 2
    return None


def kind_name(graph: str, order: int | None) -> str:
    """How errors name a graph kind (plural)."""
    if graph == "junction":
        return "second-order chains" if order == 2 else "custom junction trees"
    return {"chain": "chains", "tree": "trees"}[graph]


def model_data(data: Any, graph: str, order: int | None) -> Any:
    """The data as a model of this kind reads it: plain sequences become second-order chains
    for a second-order model; a GraphError when the kind is not the model's."""
    given = graph_of(data)
    if graph == "junction" and order == 2 and given == "chain":
        return second_order_data(data)
    if given == graph:
        return data
    hints = {
        "tree": " (give a TreeData: one tree per example)",
        "chain": " (give a SequenceData, without trees)",
    }
    if graph == "junction":
        hint = (
            " (give a SequenceData or a JunctionData of second-order chains)"
            if order == 2
            else " (give a JunctionData, e.g. from junctions_from_cliques, one per example)"
        )
    else:
        hint = hints[graph]
    what = "junction trees" if given == "junction" else kind_name(given, 1)
    raise GraphError(f"this model was trained on {kind_name(graph, order)}; got {what}{hint}")


def fit_data(train: Any, test: Any, order: int) -> tuple[Any, Any]:
    """Training (and test) data of ``fit``: second-order chains of SequenceData for order 2."""
    if order == 1:
        return train, test
    if isinstance(train, TreeData) or isinstance(test, TreeData):
        raise GraphError("order=2 trains second-order chains; got trees (give a SequenceData)")
    train = second_order_data(train) if isinstance(train, SequenceData) else train
    test = second_order_data(test) if isinstance(test, SequenceData) else test
    return train, test


def junction_node_marginals(
    oracle: JunctionOracle, i: int, w: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Node marginals (T, K) of example i, each node's summed from its first clique's table."""
    _, cliques, _ = oracle.marginals(i, w)
    g = oracle.data.graphs[i]
    out = np.empty((g.n_nodes, oracle.feature_map.n_labels))
    done = np.zeros(g.n_nodes, bool)
    for nodes, table in zip(g.cliques, cliques, strict=True):
        probs = np.exp(table)
        for p, v in enumerate(nodes):
            if not done[v]:
                axes = tuple(a for a in range(len(nodes)) if a != p)
                out[v] = probs.sum(axis=axes) if axes else probs
                done[v] = True
    return out


def header_fields(order: int | None, factor_arities: tuple[int, ...]) -> dict[str, Any]:
    """The header keys of a junction model (besides the common ones)."""
    return {"graph": "junction", "order": order, "factor_arities": list(factor_arities)}


def read_header(header: dict[str, Any]) -> tuple[str, int | None, tuple[int, ...]]:
    """(graph kind, order, factor arities) of a model header; ValueError when inconsistent."""
    graph = header.get("graph", "chain")
    order = header.get("order", 1)
    if graph == "chain" and order == 2:  # crfsdca train --order 2 files of the first format
        graph = "junction"
    if graph != "junction":
        if order != 1:
            raise ValueError(f"a {graph} model has order 1; got order {order!r}")
        return graph, 1, ()
    if order not in (2, None):
        raise ValueError(f"a junction model has order 2 or null; got {order!r}")
    arities = header.get("factor_arities")
    if not isinstance(arities, list) or not arities:
        raise ValueError(f"factor_arities must be a non-empty list; got {arities!r}")
    if any(isinstance(a, bool) or not isinstance(a, int) or a < 1 for a in arities):
        raise ValueError(f"factor_arities must be integers >= 1; got {arities!r}")
    if order == 2 and arities != [2, 3]:
        raise ValueError(f"a second-order model has factor_arities [2, 3]; got {arities}")
    if header.get("n_edge_types", 0) != 0:
        raise ValueError(f"a junction model has n_edge_types 0; got {header['n_edge_types']!r}")
    return graph, order, tuple(arities)
