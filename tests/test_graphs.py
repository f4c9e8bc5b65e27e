"""``crfsdca.structures.graphs.trees``: every example's Tree at once, the same as one by one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crfsdca.errors import GraphError
from crfsdca.structures import graphs
from crfsdca.structures.graphs import Tree

ARRAYS = ("parents", "edge_types", "order", "children_start", "children", "degrees")


def one_by_one(parents, types=None) -> list[Tree]:
    given_types = [None] * len(parents) if types is None else types
    return [
        Tree(np.asarray(p, np.int64), None if t is None else np.asarray(t, np.int64), example=i)
        for i, (p, t) in enumerate(zip(parents, given_types, strict=True))
    ]


def assert_same(built, expected) -> None:
    assert len(built) == len(expected)
    for a, b in zip(built, expected, strict=True):
        assert a.example == b.example
        for name in ARRAYS:
            x, y = getattr(a, name), getattr(b, name)
            assert x.dtype == y.dtype and np.array_equal(x, y), (a.example, name, x, y)


def random_forest(rng, n: int, p_root: float) -> np.ndarray:
    """A forest on n nodes: each node but the first of a random order is a root with
    probability p_root, else the child of a node before it in that order."""
    order = rng.permutation(n)
    parents = np.full(n, -1, np.int64)
    for k in range(1, n):
        if rng.random() >= p_root:
            parents[order[k]] = order[rng.integers(0, k)]
    return parents


@given(
    seed=st.integers(0, 2**32 - 1),
    m=st.integers(1, 12),
    p_root=st.sampled_from([0.0, 0.1, 0.5, 1.0]),
    typed=st.booleans(),
)
@settings(max_examples=80, deadline=None)
def test_trees_at_once_are_the_trees_built_one_by_one(seed, m, p_root, typed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 16, m)
    parents = [random_forest(rng, int(n), p_root) for n in sizes]
    types = [rng.integers(0, 3, n) for n in sizes] if typed else None
    at_once = graphs._forest(
        [np.asarray(p, np.int64) for p in parents],
        None if types is None else [np.asarray(t, np.int64) for t in types],
    )
    assert at_once is not None  # valid forests take the vectorised path
    assert_same(at_once, one_by_one(parents, types))
    assert_same(graphs.trees(parents, types), one_by_one(parents, types))


def test_chains_and_lists_and_deep_forests():
    """Lists of ints as parents; chains written backwards; a forest deeper than MAX_LEVELS is
    built one by one, with the same trees."""
    parents = [[-1], [1, -1, 1], list(range(1, 6)) + [-1], [2, 2, -1, 2]]
    assert_same(graphs.trees(parents), one_by_one(parents))
    deep = [np.arange(-1, graphs.MAX_LEVELS + 3), np.array([-1, 0])]
    assert graphs._forest([np.asarray(p) for p in deep], None) is None
    assert_same(graphs.trees(deep), one_by_one(deep))


BAD = {
    "parent out of range": ([[-1, 0], [-1, 5, 0]], None),
    "parent below -1": ([[-1, 0], [-2, 0]], None),
    "self-loop": ([[-1, 0], [-1, 1, 1]], None),
    "cycle": ([[-1, 0, 1], [2, 0, 1]], None),
    "below a cycle": ([[-1], [1, 2, 1, -1]], None),
    "negative edge type": ([[-1, 0], [-1, 0, 1]], [[0, 0], [0, -1, 0]]),
    "edge types too short": ([[-1, 0], [-1, 0]], [[0, 0], [0]]),
    "empty parents": ([[-1, 0], []], None),
    "2-d parents": ([[-1, 0], [[-1, 0]]], None),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_input_raises_the_error_of_the_tree_built_one_by_one(case):
    parents, types = BAD[case]
    with pytest.raises(GraphError) as expected:
        one_by_one(parents, types)
    with pytest.raises(GraphError) as raised:
        graphs.trees(parents, types)
    assert str(raised.value) == str(expected.value)
    assert str(raised.value).startswith("example 1: ")


def test_a_negative_type_on_a_root_is_ignored_as_one_by_one():
    parents, types = [[-1, 0, 0]], [[-5, 1, 0]]
    assert_same(graphs.trees(parents, types), one_by_one(parents, types))
