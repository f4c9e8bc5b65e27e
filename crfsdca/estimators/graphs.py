"""The ``graphs=`` argument of :class:`crfsdca.estimators.crf.CRF`: one tree per sequence.

A tree-structured example is a feature-dict sequence (its nodes, in order) with a tree or
forest over them: a :class:`~crfsdca.structures.graphs.Tree` (parents and per-edge types) or just
its
parent array (``-1`` for roots; every edge of type 0). :func:`check_graphs` turns the argument
into Trees, one per sequence, checking that they fit (an empty sequence takes an empty parent
array, as a Tree has at least one node); errors name ``graphs[i]`` and the node.

``order=2`` (:func:`fit_order`) trains second-order chains on plain sequences, without graphs;
the fitted model (graph kind ``"junction"``) turns sequences into second-order chains itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from crfsdca._dtypes import INDEX
from crfsdca.errors import GraphError
from crfsdca.estimators.model_junction import check_order
from crfsdca.features.sequences import SequenceData
from crfsdca.structures.graphs import Tree
from crfsdca.structures.tree import TreeData

__all__ = [
    "check_graphs",
    "check_kind",
    "fit_graphs",
    "fit_order",
    "transition_blocks",
    "with_graphs",
]


def _tree(graph: Any, i: int, name: str) -> Tree | None:
    """A Tree from a Tree or a parent array; None for an empty parent array."""
    if isinstance(graph, Tree):
        return graph
    if isinstance(graph, (str, bytes, dict)) or graph is None:
        raise GraphError(
            f"{name}[{i}]: expected a Tree or a parent array (-1 for roots); got"
            f" {type(graph).__name__}"
        )
    parents = np.asarray(graph)
    if parents.size == 0:
        return None
    if parents.ndim != 1 or not np.issubdtype(parents.dtype, np.integer):
        raise GraphError(
            f"{name}[{i}]: a parent array holds one integer per node (-1 for roots); got"
            f" shape {parents.shape} {parents.dtype}"
        )
    return Tree(parents.astype(INDEX), example=i)


def check_graphs(
    graphs: Sequence[Any], lengths: Sequence[int], name: str = "graphs", x_name: str = "X"
) -> list[Tree | None]:
    """One Tree (None for an empty sequence) per sequence of lengths ``lengths``."""
    if isinstance(graphs, (Tree, np.ndarray, str, dict)):
        raise GraphError(
            f"{name}: expected a list with one Tree or parent array per sequence; got"
            f" {type(graphs).__name__}"
        )
    graphs = list(graphs)
    if len(graphs) != len(lengths):
        raise GraphError(
            f"{name} has {len(graphs)} trees for {len(lengths)} sequences of {x_name};"
            " expected one per sequence"
        )
    trees = []
    for i, (graph, n) in enumerate(zip(graphs, lengths, strict=True)):
        tree = _tree(graph, i, name)
        n_nodes = 0 if tree is None else tree.n_nodes
        if n_nodes != n:
            raise GraphError(
                f"{name}[{i}]: the tree has {n_nodes} nodes but {x_name}[{i}] has {n} tokens;"
                " expected one node per token"
            )
        trees.append(tree)
    return trees


def check_kind(model_graph: str, graphs: Any, name: str = "graphs") -> None:
    """One clear line when trees are missing for a tree model or given to a chain model."""
    if model_graph == "tree" and graphs is None:
        raise GraphError(
            f"this CRF was trained on trees; pass {name}=[one Tree or parent array per sequence]"
        )
    if model_graph == "junction" and graphs is not None:
        raise GraphError(
            f"this CRF was trained on second-order chains (order=2); it predicts plain sequences:"
            f" drop {name}="
        )
    if model_graph == "chain" and graphs is not None:
        raise GraphError(
            f"this CRF was trained on linear chains; {name}= applies to a CRF fitted with graphs"
        )


def with_graphs(data: SequenceData, trees: list[Tree | None]) -> TreeData:
    """TreeData of the packed non-empty sequences ``data`` and the trees of all sequences."""
    return TreeData(data, tuple(t for t in trees if t is not None))


def fit_graphs(
    train: SequenceData, dev: SequenceData | None, graphs: Any, graphs_dev: Any
) -> tuple[SequenceData | TreeData, SequenceData | TreeData | None]:
    """The training (and dev) data of ``fit``: TreeData when ``graphs`` are given."""
    if graphs is None:
        if graphs_dev is not None:
            raise GraphError("graphs_dev needs graphs: give the training trees too, or neither")
        return train, dev
    if dev is not None and graphs_dev is None:
        raise GraphError("a CRF fitted with graphs needs graphs_dev for X_dev (one per sequence)")
    if dev is None and graphs_dev is not None:
        raise GraphError("graphs_dev was given without X_dev and y_dev")
    lengths = train.lengths.tolist()
    train = with_graphs(train, check_graphs(graphs, lengths))
    if dev is not None:
        trees = check_graphs(graphs_dev, dev.lengths.tolist(), "graphs_dev", "X_dev")
        dev = with_graphs(dev, trees)
    return train, dev


def fit_order(order: Any, graphs: Any) -> int:
    """The CRF's ``order`` (1 or 2), checked; order 2 takes no graphs."""
    order = check_order(order)
    if order == 2 and graphs is not None:
        raise GraphError(
            "order=2 trains second-order chains of the sequences; drop graphs= (or use order=1"
            " for trees)"
        )
    return order


def transition_blocks(model: Any) -> Any:
    """(edge types, K, K) transition blocks of a SequenceCRF; a second-order model's bigram
    factor block as the one block."""
    fm = model.feature_map_
    if model.graph_ == "junction":
        if fm.factor_arities[0] != 2:  # a custom junction model without a pairwise type 0
            return np.zeros((0, fm.n_labels, fm.n_labels))
        return fm.factor(model.weights_, 0)[None]
    return fm.transitions(model.weights_)
