"""Compact vectors on an example's support: the sparse primal direction of an SDCA block, and
the scatter into w and inner products of any such vector (SAG's gradients, OEG's directions).

A compact vector holds rows of K entries: one per distinct attribute of the example
(``crfsdca.features.layout.SequenceLayout``), then the rows from A on (bias rows, transition or
factor blocks). A step on example i moves w along kappa u_i with u_i = E_{nu_i - mu_i}[F(x_i, .)]
(``docs/sdca.md`` section 3). The chain builds u_i with :func:`primal_direction`; the chain and
the tree scatter it with :func:`add_direction`. Loops are written so that LLVM vectorizes them
(flat unit-stride indexing, ``add_reassoc`` sums).
"""

import numpy as np

from crfsdca.kernels.jit import njit
from crfsdca.kernels.numerics.fastmath import add_reassoc
from crfsdca.kernels.numerics.rowops import scale_rows_into

VEC = {"cache": True, "nogil": True, "error_model": "numpy"}


@njit(**VEC)
def _edge_difference_sum(nu, mu, trans, n_edges, n):
    """trans[j] = sum_t (nu - mu)[t n + j] over the n_edges edges of n = K^2 entries each."""
    trans[:n] = 0.0
    for t in range(n_edges):
        _add_difference(nu, mu, t * n, trans, n)


@njit(**VEC)
def _add_difference(x, y, off, out, n):
    xs, ys = x[off : off + n], y[off : off + n]
    for j in range(n):
        out[j] += xs[j] - ys[j]


@njit(cache=True, nogil=True)
def primal_direction(seq, delta_src, dims, v_emit, v_rest):
    """Sparse primal direction v_i = kappa u_i with u_i = E_delta[F(x_i, .)]: fills u_i and
    returns ||v_i||^2 (the line search's b).

    seq = (t0, t1, attr_offsets, attr_ids, attr_values, entry_slot, slot_attrs): tokens
    [t0, t1); entry_slot maps each attribute entry to its row in v_emit; slot_attrs (U,) gives
    the attribute id of each row. delta_src = (mu, nu) flat buffers of ``block_gap``.
    dims = (A, K, n_bias, kappa) with kappa = -scale / (lambda n).
    v_emit (U, K) and v_rest (n_bias + K, K) are caller-owned; v_rest holds the bias rows, then
    the transition matrix, which must already hold sum_t (nu_t - mu_t) (``block_gap_given_nu``
    accumulates it). v_emit and the bias rows are overwritten. Nothing is scaled: the step adds
    gamma kappa u_i (``add_direction``), and <w, v_i> is not needed (the KL form of the line
    search carries it in f'(0)). The norm runs over the rows as one flat array each.
    """
    t0, t1, attr_offsets, attr_ids, attr_values, entry_slot, slot_attrs = seq
    mu, nu = delta_src
    A, K, n_bias, kappa = dims
    T = t1 - t0
    U = slot_attrs.shape[0]
    v_emit[:U] = 0.0
    v_rest[:n_bias] = 0.0
    node0 = (T - 1) * K * K
    d = np.empty(K)
    rows = v_emit.reshape(v_emit.shape[0] * K)
    for t in range(T):
        _difference(nu, mu, node0 + t * K, d, K)
        p0, p1 = attr_offsets[t0 + t], attr_offsets[t0 + t + 1]
        scale_rows_into(d, rows, entry_slot, attr_values, p0, p1, K)  # ``numerics.rowops``
        if n_bias > 0:
            _axpy(1.0, d, v_rest[0], K)
            if t == 0:
                _axpy(1.0, d, v_rest[1], K)
            if t == T - 1:
                _axpy(1.0, d, v_rest[2], K)
    norm = _squared_norm(v_emit[:U].reshape(U * K)) + _squared_norm(v_rest.reshape(-1))
    return kappa * kappa * norm


@njit(**VEC)
def _squared_norm(x):
    s = 0.0
    for p in range(x.shape[0]):
        s = add_reassoc(s, x[p] * x[p])
    return s


@njit(**VEC)
def _difference(x, y, off, out, K):
    xs, ys = x[off : off + K], y[off : off + K]
    for k in range(K):
        out[k] = xs[k] - ys[k]


@njit(**VEC)
def _axpy(a, x, y, K):
    """y[:K] += a x[:K]."""
    for k in range(K):
        y[k] += a * x[k]


@njit(cache=True, nogil=True)
def add_direction(gamma, slot_attrs, v_emit, v_rest, w, K, A):
    """w <- w + gamma u on the support of u (emission rows of slot_attrs, bias, transitions);
    the SDCA step passes gamma kappa (``primal_direction``)."""
    for s in range(slot_attrs.shape[0]):
        _axpy_at(gamma, v_emit[s], w, slot_attrs[s] * K, K)
    for r in range(v_rest.shape[0]):
        _axpy_at(gamma, v_rest[r], w, (A + r) * K, K)


@njit(**VEC)
def _axpy_at(a, x, y, off, K):
    """y[off:off+K] += a x[:K]."""
    ys = y[off : off + K]
    for k in range(K):
        ys[k] += a * x[k]


@njit(cache=True, nogil=True)
def direction_entries(slot_attrs, v_emit, v_rest, K, A, idx, val):
    """idx[:m], val[:m] = the flat indices and values of u on its support (the coordinates
    ``add_direction`` touches, in the same order); returns m."""
    m = 0
    for s in range(slot_attrs.shape[0]):
        base = slot_attrs[s] * K
        for k in range(K):
            idx[m] = base + k
            val[m] = v_emit[s, k]
            m += 1
    for r in range(v_rest.shape[0]):
        base = (A + r) * K
        for k in range(K):
            idx[m] = base + k
            val[m] = v_rest[r, k]
            m += 1
    return m


@njit(cache=True, nogil=True)
def scatter_rows(sa, A, emit, rest, out, K):
    """out += the compact vector (emit rows at attributes sa, rest rows from row A on)."""
    for s in range(sa.shape[0]):
        base = sa[s] * K
        for k in range(K):
            out[base + k] += emit[s, k]
    base = A * K
    for r in range(rest.shape[0]):
        for k in range(K):
            out[base + r * K + k] += rest[r, k]


@njit(cache=True, nogil=True)
def compact_dot(sa, A, w, emit, rest):
    """(<w, v>, ||v||^2) of the compact v = (emit rows at attributes sa, rest rows from A on)."""
    K = emit.shape[1]
    a, b = 0.0, 0.0
    for s in range(sa.shape[0]):
        for k in range(K):
            x = emit[s, k]
            a += w[sa[s] * K + k] * x
            b += x * x
    for r in range(rest.shape[0]):
        for k in range(K):
            x = rest[r, k]
            a += w[(A + r) * K + k] * x
            b += x * x
    return a, b
