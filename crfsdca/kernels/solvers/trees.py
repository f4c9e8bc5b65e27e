"""Flat binary sum- and max-trees over n scores: O(log n) update and draw.

Layout: ``tree`` has length 2 * cap (cap = next power of two >= n); leaf i sits at cap + i,
node j holds the sum (or max) of its children 2j and 2j + 1; tree[1] is the root.
"""

import numpy as np

from crfsdca.kernels.jit import njit


@njit(cache=True, nogil=True)
def build(tree, scores, use_max):
    """Fill tree from scores (n,) f8; unused leaves are 0 (sum) or -inf (max)."""
    cap = tree.shape[0] // 2
    fill = -np.inf if use_max else 0.0
    for j in range(cap):
        tree[cap + j] = scores[j] if j < scores.shape[0] else fill
    for j in range(cap - 1, 0, -1):
        if use_max:
            tree[j] = max(tree[2 * j], tree[2 * j + 1])
        else:
            tree[j] = tree[2 * j] + tree[2 * j + 1]


@njit(cache=True, nogil=True)
def update(tree, i, value, use_max):
    """Set leaf i to value and repair its ancestors."""
    j = tree.shape[0] // 2 + i
    tree[j] = value
    j //= 2
    while j >= 1:
        if use_max:
            tree[j] = max(tree[2 * j], tree[2 * j + 1])
        else:
            tree[j] = tree[2 * j] + tree[2 * j + 1]
        j //= 2


@njit(cache=True, nogil=True)
def draw(tree, u, n):
    """Leaf index i with probability tree[leaf i] / tree[1], given u uniform in [0, 1)."""
    cap = tree.shape[0] // 2
    target = u * tree[1]
    j = 1
    while j < cap:
        left = tree[2 * j]
        if target < left or tree[2 * j + 1] <= 0.0:
            j = 2 * j
        else:
            target -= left
            j = 2 * j + 1
    return min(j - cap, n - 1)


@njit(cache=True, nogil=True)
def argmax(tree):
    """Index of a largest leaf of a max-tree (the leftmost on ties)."""
    cap = tree.shape[0] // 2
    j = 1
    while j < cap:
        j = 2 * j if tree[2 * j] >= tree[2 * j + 1] else 2 * j + 1
    return j - cap
