"""One item's rows (a token, a tree or junction-tree node): its scores at w and its part of a
compact vector on the example's distinct attributes (SAG's gradients, OEG's directions); and an
example's scores at SAG's lazily scaled weights w = c z (:func:`scale_scores`).

An item g has the attribute entries ``attr_offsets[g]:attr_offsets[g + 1]`` (ids, values, and
slots among the example's distinct attributes: ``crfsdca.features.layout.SequenceLayout``).
"""

from crfsdca.kernels.jit import njit


@njit(cache=True, nogil=True)
def item_scores(attr_offsets, attr_ids, attr_values, g, w, dims, first, last, out):
    """out (K,) = the scores of item g at w: the bias rows (count on every item, ``first`` on a
    first item or root, ``last`` on a last item or leaf; none without bias rows) plus
    sum_j value_j w[attribute j]."""
    A, K, n_bias = dims[:3]  # (A, K, n_bias, ...) of any structure
    b = A * K
    for k in range(K):
        u = 0.0
        if n_bias:
            u = w[b + k]
            if first:
                u += w[b + K + k]
            if last:
                u += w[b + 2 * K + k]
        out[k] = u
    for q in range(attr_offsets[g], attr_offsets[g + 1]):
        row = attr_ids[q] * K
        x = attr_values[q]
        for k in range(K):
            out[k] += x * w[row + k]


@njit(cache=True, nogil=True)
def add_item_rows(attr_offsets, attr_values, entry_slot, g, node, y, coef, gold_coef, emit):
    """emit[s] += x (coef node - gold_coef e_y) for every attribute entry (slot s, value x) of
    item g: the attribute rows of coef E[F] - gold_coef F(x, y) of one node (SAG, OEG)."""
    for q in range(attr_offsets[g], attr_offsets[g + 1]):
        s, x = entry_slot[q], attr_values[q]
        for k in range(node.shape[0]):
            emit[s, k] += coef * x * node[k]
        emit[s, y] -= gold_coef * x


@njit(cache=True, nogil=True)
def add_item_scores(attr_offsets, attr_values, entry_slot, g, emit, out):
    """out += the scores of item g under the attribute rows emit (slot order)."""
    for q in range(attr_offsets[g], attr_offsets[g + 1]):
        s, x = entry_slot[q], attr_values[q]
        for k in range(out.shape[0]):
            out[k] += x * emit[s, k]


@njit(cache=True, nogil=True)
def scale_scores(c, n, K, unary, z, off, tables):
    """The scores at w = c z from those of z: unary[:n, :K] *= c, and the transition tables
    (any shape, C order) = c z[off : off + their size]."""
    for t in range(n):
        for k in range(K):
            unary[t, k] *= c
    flat = tables.reshape(-1)
    for j in range(flat.size):
        flat[j] = c * z[off + j]
