"""Junction-tree CRFs over a batch of examples: clique potentials from the weights, value and
gradient, MAP labels, expected features and the empirical (smoothed gold) tables.

``data = (seq_offsets, attr_offsets, attr_ids, attr_values, labels)`` as in SequenceData (an
example's nodes are its items); ``jt`` as in :mod:`crfsdca.kernels.structures.junction`;
``assign = (node_start, node_ids, node_pos, fac_start, fac_type, fac_pos_start, fac_pos,
node_pat, fac_pat)``: per clique, the nodes whose unary scores it carries (local index, position
in the clique) and the factors it carries (type, positions of the scope in the clique), with
their projection patterns (kernels.structures.junction.projection); ``feat = (woff, arity)``: the
offset in w of each factor type's block of K^arity entries; ``dims = (A, K, n_bias)``.

Node scores: sum_j value_j E[j] + bias rows read as (count, first node, last node) in node
index order (a chain's layout). The potential of clique entry idx is the sum of its nodes' scores
and of its factors' weights ``w[woff[t] + project(idx, scope)]``.

Workspace ``ws = (mws, bws)``: ``mws`` the message workspace of kernels.structures.junction and
``bws = (unary, phi, marg, prob, pk)``: (max nodes, K), two region-sized, one table-sized and
one (K,) float64 arrays.
"""

from __future__ import annotations

import numpy as np

from crfsdca.kernels.jit import njit
from crfsdca.kernels.structures import junction
from crfsdca.kernels.structures.items import item_scores
from crfsdca.kernels.structures.junction import (
    _strides,
    collect,
    distribute,
    project,
    projection,
    viterbi,
)


@njit(cache=True, nogil=True)
def node_unary(data, s, e, w, dims, unary):
    """Scores of the nodes s..e-1 into unary[:e-s] (attributes and the bias rows)."""
    _, attr_offsets, attr_ids, attr_values, _ = data
    n = e - s
    for v in range(n):
        item_scores(attr_offsets, attr_ids, attr_values, s + v, w, dims, v == 0, v == n - 1,
                    unary[v])  # fmt: skip


@njit(cache=True, nogil=True)
def potentials(data, jt, assign, feat, i, w, dims, unary, phi, pidx):
    """Clique potentials of example i into phi (region-local clique tables); pidx: a
    table-sized int64 scratch."""
    seq_offsets = data[0]
    node_unary(data, seq_offsets[i], seq_offsets[i + 1], w, dims, unary)
    clique_tables(jt, assign, feat[0], 0, i, unary, w, dims[1], phi, pidx)


@njit(cache=True, nogil=True)
def clique_table(c, jt, assign, woff, shift, unary, fw, K, table, pidx, product):
    """table_c = the scores unary (n, K) of the nodes clique c carries plus its factors' weights
    ``fw[woff[t] - shift + project(idx, scope)]``; with ``product`` the scaled table, the
    product of those entries of exponentiated unary and fw. Returns (size, m)."""
    var_start, tab_off = jt[2], jt[8]
    node_start, node_ids, node_pos, fac_start, fac_type, fac_pos_start, fac_pos = assign[:7]
    m = var_start[c + 1] - var_start[c]
    size, t0 = K**m, tab_off[c]
    for idx in range(size):
        table[t0 + idx] = 1.0 if product else 0.0
    for r in range(node_start[c], node_start[c + 1]):
        proj = projection(assign[7][r], m, K, node_pos, r, r + 1, pidx, jt)
        junction.combine(table, t0, size, unary[node_ids[r]], 0, proj, product)
    for f in range(fac_start[c], fac_start[c + 1]):
        lo, hi = fac_pos_start[f], fac_pos_start[f + 1]
        proj = projection(assign[8][f], m, K, fac_pos, lo, hi, pidx, jt)
        junction.combine(table, t0, size, fw, woff[fac_type[f]] - shift, proj, product)
    return size, m


@njit(cache=True, nogil=True)
def clique_tables(jt, assign, woff, shift, i, unary, fw, K, phi, pidx):
    """phi_c (:func:`clique_table`, log space) for every clique c of example i."""
    for c in range(jt[0][i], jt[0][i + 1]):
        clique_table(c, jt, assign, woff, shift, unary, fw, K, phi, pidx, False)


@njit(cache=True, nogil=True)
def add_expected(data, jt, assign, feat, i, log_tab, dims, coef, out, scratch, is_prob):
    """out += coef E F(x_i, .) under the clique log-marginals log_tab (region-local;
    probabilities when ``is_prob``); ``scratch = (prob, pk, pidx)``: table-sized float64, (K,)
    float64, table-sized int64."""
    seq_offsets, attr_offsets, attr_ids, attr_values, _ = data
    ex_cliques, var_start, tab_off = jt[0], jt[2], jt[8]
    node_start, node_ids, node_pos, fac_start, fac_type, fac_pos_start, fac_pos = assign[:7]
    prob, pk, pidx = scratch
    woff = feat[0]
    A, K, n_bias = dims
    s = seq_offsets[i]
    n = seq_offsets[i + 1] - s
    for c in range(ex_cliques[i], ex_cliques[i + 1]):
        m = var_start[c + 1] - var_start[c]
        size = K**m
        t0 = tab_off[c]
        for idx in range(size):
            x = np.float64(log_tab[t0 + idx])
            prob[idx] = coef * (x if is_prob else np.exp(x))
        for r in range(node_start[c], node_start[c + 1]):
            v = node_ids[r]
            proj = projection(assign[7][r], m, K, node_pos, r, r + 1, pidx, jt)
            pk[:] = 0.0
            for idx in range(size):
                pk[proj[idx]] += prob[idx]
            g = s + v
            for q in range(attr_offsets[g], attr_offsets[g + 1]):
                row, x = attr_ids[q] * K, attr_values[q]
                for k in range(K):
                    out[row + k] += x * pk[k]
            if n_bias:
                for k in range(K):
                    out[A * K + k] += pk[k]
                    if v == 0:
                        out[A * K + K + k] += pk[k]
                    if v == n - 1:
                        out[A * K + 2 * K + k] += pk[k]
        for f in range(fac_start[c], fac_start[c + 1]):
            base = woff[fac_type[f]]
            lo, hi = fac_pos_start[f], fac_pos_start[f + 1]
            proj = projection(assign[8][f], m, K, fac_pos, lo, hi, pidx, jt)
            for idx in range(size):
                out[base + proj[idx]] += prob[idx]


@njit(cache=True, nogil=True)
def marginals(data, jt, assign, feat, i, w, dims, ws):
    """log Z of example i; its clique and separator log-marginals into bws.marg (region)."""
    mws, bws = ws
    unary, phi, marg = bws[0], bws[1], bws[2]
    potentials(data, jt, assign, feat, i, w, dims, unary, phi, mws[5])
    log_z = collect(i, phi, jt, dims[1], mws)
    if np.isfinite(log_z):
        distribute(i, phi, jt, dims[1], mws, marg)
    return log_z


@njit(cache=True, nogil=True)
def value_and_expected(data, jt, assign, feat, w, dims, ws, grad):
    """sum_i log Z_i and grad = sum_i E_nu_i F (zeroed here) in log space; returns (sum, index
    of the first example with a non-finite log Z or -1). The caller subtracts the gold features.
    The oracle runs the scaled kernels (:mod:`crfsdca.kernels.structures.junction_scaled`) with this
    as the fallback."""
    mws, bws = ws
    grad[:] = 0.0
    total = 0.0
    for i in range(data[0].size - 1):
        log_z = marginals(data, jt, assign, feat, i, w, dims, ws)
        if not np.isfinite(log_z):
            return total, i
        total += log_z
        scratch = (bws[3], bws[4], mws[5])
        add_expected(data, jt, assign, feat, i, bws[2], dims, 1.0, grad, scratch, False)
    return total, -1


@njit(cache=True, nogil=True)
def predict(data, jt, assign, feat, w, dims, ws, backptr, chosen, out):
    """MAP labels of every node of every example into out (N,) int64."""
    seq_offsets = data[0]
    mws, bws = ws
    for i in range(seq_offsets.size - 1):
        potentials(data, jt, assign, feat, i, w, dims, bws[0], bws[1], mws[5])
        s, e = seq_offsets[i], seq_offsets[i + 1]
        viterbi(i, bws[1], jt, dims[1], mws, backptr, chosen, out[s:e])


@njit(cache=True, nogil=True)
def expected_features(data, jt, assign, feat, log_tab, dims, out, scratch):
    """out += sum_i E_mu_i F for the tables log_tab (all regions, like the dual state)."""
    ex_region = jt[1]
    for i in range(data[0].size - 1):
        region = log_tab[ex_region[i] : ex_region[i + 1]]
        add_expected(data, jt, assign, feat, i, region, dims, 1.0, out, scratch, False)


@njit(cache=True, nogil=True)
def gold_features(data, jt, assign, feat, dims, out):
    """out += sum_i F(x_i, y_i): each node's attributes and bias rows at its label, each
    factor's block at its scope's labels (labels must be >= 0)."""
    seq_offsets, attr_offsets, attr_ids, attr_values, labels = data
    ex_cliques, var_start, vars_ = jt[0], jt[2], jt[3]
    fac_start, fac_type, fac_pos_start, fac_pos = assign[3], assign[4], assign[5], assign[6]
    woff = feat[0]
    A, K, n_bias = dims
    for i in range(seq_offsets.size - 1):
        s, e = seq_offsets[i], seq_offsets[i + 1]
        for g in range(s, e):
            y = labels[g]
            for q in range(attr_offsets[g], attr_offsets[g + 1]):
                out[attr_ids[q] * K + y] += attr_values[q]
            if n_bias:
                out[A * K + y] += 1.0
                if g == s:
                    out[A * K + K + y] += 1.0
                if g == e - 1:
                    out[A * K + 2 * K + y] += 1.0
        for c in range(ex_cliques[i], ex_cliques[i + 1]):
            for f in range(fac_start[c], fac_start[c + 1]):
                j = 0
                for q in range(fac_pos_start[f], fac_pos_start[f + 1]):
                    j = j * K + labels[s + vars_[var_start[c] + fac_pos[q]]]
                out[woff[fac_type[f]] + j] += 1.0


@njit(cache=True, nogil=True)
def empirical_tables(data, jt, K, epsilon, out):
    """log(epsilon / K^|t| + (1 - epsilon) [entry = gold]) for every clique and separator table
    t (epsilon = 0: the gold tables, log 0 = -inf elsewhere)."""
    seq_offsets, labels = data[0], data[4]
    ex_cliques, ex_region, var_start, vars_, parent = jt[0], jt[1], jt[2], jt[3], jt[4]
    tab_off, sep_off, sep_start, sep_child = jt[8], jt[9], jt[10], jt[11]
    strides = np.empty(4, np.int64)
    for i in range(seq_offsets.size - 1):
        s, base = seq_offsets[i], ex_region[i]
        for c in range(ex_cliques[i], ex_cliques[i + 1]):
            m = var_start[c + 1] - var_start[c]
            size = _strides(m, K, strides)
            gold = 0
            for p in range(m):
                gold += labels[s + vars_[var_start[c] + p]] * strides[p]
            _fill(out, base + tab_off[c], size, gold, epsilon)
            if parent[c] >= 0:
                lo, hi = sep_start[c], sep_start[c + 1]
                g = project(gold, strides, K, sep_child, lo, hi)
                _fill(out, base + sep_off[c], K ** (hi - lo), g, epsilon)


@njit(cache=True, nogil=True)
def _fill(out, t0, size, gold, epsilon):
    off = np.log(epsilon / size) if epsilon > 0 else -np.inf
    for idx in range(size):
        out[t0 + idx] = off
    out[t0 + gold] = np.log(epsilon / size + (1.0 - epsilon))
