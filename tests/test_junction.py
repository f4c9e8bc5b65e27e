"""Junction trees: construction, inferred clique trees and the errors on bad input."""

from __future__ import annotations

import numpy as np
import pytest
from _synthetic import random_sequences

from crfsdca.errors import GraphError
from crfsdca.features.feature_map import FeatureMap
from crfsdca.structures.graphs import chain_graph
from crfsdca.structures.junction import JunctionData, junctions_from_cliques, second_order_data
from crfsdca.structures.junction_tree import JunctionTree, junction_from_tree, second_order_chain


def test_second_order_chain_cliques_separators_and_factors():
    g = second_order_chain(5)
    assert g.cliques == ((0, 1, 2), (1, 2, 3), (2, 3, 4))
    assert g.clique_parents.tolist() == [-1, 0, 1]
    assert [g.separator(c) for c in range(3)] == [(), (1, 2), (2, 3)]
    assert g.factor_arities == {0: 2, 1: 3}
    assert sorted(s for s, t in g.factors if t == 0) == [(t, t + 1) for t in range(4)]
    assert second_order_chain(1).cliques == ((0,),) and second_order_chain(1).factors == ()
    assert second_order_chain(2).cliques == ((0, 1),)
    assert second_order_chain(2).factors == (((0, 1), 0),)


def test_inferred_clique_tree_is_a_maximum_weight_spanning_forest():
    g = JunctionTree(6, ((0, 1), (2, 3, 4), (1, 2, 3), (5,)))
    assert g.clique_parents.tolist() == [-1, 2, 0, -1]  # (1,2,3) joins both; (5,) alone
    assert junction_from_tree(chain_graph(4)).clique_parents.tolist() == [-1, 0, 1]
    joined = JunctionTree(4, ((0, 1), (2, 3)), np.array([-1, 0]))  # an empty separator is valid
    assert joined.separator(1) == ()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_nodes": 3, "cliques": ((0, 3),)}, r"example 7: clique 0: node 3 is out of range"),
        ({"n_nodes": 3, "cliques": ((0, 1),)}, r"example 7: node 2: is in no clique"),
        ({"n_nodes": 3, "cliques": ((0, 1, 1), (2,))}, r"clique 0: node 1 appears twice"),
        ({"n_nodes": 5, "cliques": ((0, 1, 2, 3, 4),)}, r"clique 0: has 5 nodes; at most 4"),
        (
            {"n_nodes": 4, "cliques": ((0, 1), (1, 2), (2, 3), (3, 0))},
            r"node 3: the cliques holding it \(2, 3\) are not connected .*running intersection",
        ),
        (
            {"n_nodes": 3, "cliques": ((0, 1), (1, 2)), "clique_parents": np.array([1, 0])},
            r"clique 0: lies on a cycle of clique parents",
        ),
        (
            {"n_nodes": 3, "cliques": ((0, 1), (1, 2)), "clique_parents": np.array([-1, 5])},
            r"clique 1: parent 5 is invalid",
        ),
        (
            {"n_nodes": 3, "cliques": ((0, 1), (1, 2)), "factors": (((0, 2), 0),)},
            r"factor 0: scope \(0, 2\) lies in no clique",
        ),
        (
            {"n_nodes": 3, "cliques": ((0, 1, 2),), "factors": (((0, 1), 0), ((0, 1, 2), 0))},
            r"factor 1: type 0 has arity 3 here but 2",
        ),
        (
            {"n_nodes": 3, "cliques": ((0, 1, 2),), "factors": (((0, 4), 0),)},
            r"factor 0: node 4 is out of range",
        ),
    ],
)
def test_bad_junction_trees_name_the_example_and_what_was_expected(kwargs, message):
    with pytest.raises(GraphError, match=message):
        JunctionTree(**kwargs, example=7)


def test_bad_junction_data_names_the_example():
    nodes = random_sequences(0, n=3, max_T=4, K=3)
    lengths = nodes.lengths.tolist()
    graphs = [second_order_chain(T) for T in lengths]
    with pytest.raises(GraphError, match=r"2 junction trees for 3 examples"):
        JunctionData(nodes, tuple(graphs[:2]))
    wrong = list(graphs)
    wrong[2] = second_order_chain(lengths[2] + 1)
    with pytest.raises(GraphError, match=r"example 2: the junction tree has \d+ nodes"):
        JunctionData(nodes, tuple(wrong))
    with pytest.raises(GraphError, match=r"example 1: factor type 1 has arity 3; expected 1"):
        JunctionData(nodes, tuple(graphs), factor_arities=(2, 1))
    with pytest.raises(GraphError, match=r"example 1: factor type 1 is not declared"):
        JunctionData(nodes, tuple(graphs), factor_arities=(2,))
    cliques = [[(v,) for v in range(T)] for T in lengths]
    from crfsdca.structures.junction import junction_problem

    with pytest.raises(GraphError, match=r"the junction trees have no factors"):
        junction_problem(junctions_from_cliques(nodes, cliques, [[] for _ in lengths]))
    factors = [[((0,), 1)] for _ in lengths]
    with pytest.raises(GraphError, match=r"factor type 0 is used by no example"):
        junctions_from_cliques(nodes, cliques, factors)
    with pytest.raises(GraphError, match=r"example 1: clique 0: node 9 is out of range"):
        junctions_from_cliques(nodes, [[(0,)], [(9,)], [(0,)]], [[], [], []])
    big = random_sequences(0, n=3, max_T=4, K=70)
    with pytest.raises(GraphError, match=r"clique 0 has 70\^4 = 24010000 table entries"):
        junctions_from_cliques(big, [[tuple(range(T))] for T in big.lengths.tolist()], [[], [], []])


def test_unknown_training_labels_name_the_example_and_node():
    from dataclasses import replace

    from crfsdca.structures.junction import JunctionOracle, junction_problem

    nodes = random_sequences(0, n=4, max_T=4, K=3)
    labels = nodes.labels.copy()
    labels[int(nodes.seq_offsets[2]) + 1] = -1
    data = second_order_data(replace(nodes, labels=labels))
    with pytest.raises(GraphError, match=r"example 2: node 1: label -1 is out of range"):
        junction_problem(data)
    with pytest.raises(GraphError, match=r"expected a known label in \[0, 3\)"):
        JunctionOracle(data, FeatureMap(6, 3, 3, 0, (2, 3))).gold_features()


def test_feature_map_factor_blocks_follow_the_transition_blocks():
    chain, tree = FeatureMap(5, 3, 3), FeatureMap(5, 3, 0, 2)
    assert (chain.n_features, tree.n_features) == (33, 33)  # layouts unchanged
    fm = FeatureMap(5, 3, 3, 0, (2, 3))
    assert fm.n_features == 24 + 9 + 27
    assert fm.factor_offset(0) == chain.transition_offset and fm.factor_offset(1) == 33
    w = np.arange(fm.n_features, dtype=float)
    assert fm.factor(w, 1).shape == (3, 3, 3) and fm.factor(w, 1)[0, 0, 1] == 34
    np.testing.assert_array_equal(fm.factor(w, 0).ravel(), chain.transition(w[:33]).ravel())
    data = second_order_data(random_sequences(1, n=4, max_T=5, K=3))
    assert data.factor_arities == (2, 3)
    with pytest.raises(ValueError, match="n_edge_types must be >= 1"):
        FeatureMap(5, 3, 3, 0)
