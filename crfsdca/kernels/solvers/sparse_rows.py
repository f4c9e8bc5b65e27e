"""Row bookkeeping of a distributed SDCA round (``crfsdca.solvers.sparse_update``).

A round moves the attribute rows of the examples it stepped on. These kernels find those rows,
take their increments, apply and sum sparse updates, and save and restore the dual entries of
the blocks a round stepped on (``crfsdca.solvers.adaptive.Snapshot``). Each costs time in the
rows or entries it touches, never in the whole of w, and releases the GIL, so that partitions
running as threads of one process do their bookkeeping at the same time.

Every result equals the plain numpy expression it replaces bit for bit (the same operations on
the same values: one subtraction and one division per entry, sums in partition order from
zero), so runs are unchanged. w is flat: attribute row ``r`` is ``w[r * K:(r + 1) * K]``.
"""

from __future__ import annotations

import numpy as np

from crfsdca.kernels.jit import njit

#: below ``rows * SORT_BELOW < attributes`` the rows found are sorted, else the marks scanned
SORT_BELOW = 32


@njit(cache=True, nogil=True)
def touched_rows(seq_offsets, attr_offsets, attr_ids, examples, mark):
    """Sorted distinct attribute ids of the sequences ``examples`` (repeats allowed);
    ``mark``: one bool per attribute, all False, and all False again on return."""
    total = 0
    for e in examples:
        total += attr_offsets[seq_offsets[e + 1]] - attr_offsets[seq_offsets[e]]
    found = np.empty(total, np.int64)
    count = 0
    for e in examples:
        for p in range(attr_offsets[seq_offsets[e]], attr_offsets[seq_offsets[e + 1]]):
            a = attr_ids[p]
            if not mark[a]:
                mark[a] = True
                found[count] = a
                count += 1
    if count * SORT_BELOW < mark.size:
        rows = np.sort(found[:count])
        for a in rows:
            mark[a] = False
        return rows
    rows = np.empty(count, np.int64)
    j = 0
    for a in range(mark.size):
        if mark[a]:
            mark[a] = False
            rows[j] = a
            j += 1
    return rows


@njit(cache=True, nogil=True)
def row_increments(u, w, rows, n_labels, scale):
    """(u - w) / scale on the attribute ``rows``: a (len(rows), K) array."""
    K = n_labels
    out = np.empty((rows.size, K))
    for j in range(rows.size):
        b = rows[j] * K
        for k in range(K):
            out[j, k] = (u[b + k] - w[b + k]) / scale
    return out


@njit(cache=True, nogil=True)
def add_rows(w, rows, values):
    """w[rows] += values (distinct rows; ``values`` (len(rows), K))."""
    K = values.shape[1]
    for j in range(rows.size):
        b = rows[j] * K
        for k in range(K):
            w[b + k] += values[j, k]


@njit(cache=True, nogil=True)
def copy_rows(dst, src, rows, n_labels):
    """dst[rows] = src[rows] of two flat vectors."""
    K = n_labels
    for j in range(rows.size):
        b = rows[j] * K
        for k in range(K):
            dst[b + k] = src[b + k]


@njit(cache=True, nogil=True)
def sum_two(rows_a, values_a, rows_b, values_b):
    """The sum of two sparse row sets (sorted rows), each row's values summed as
    (0 + a) + b: the union of rows and their (len, K) values."""
    K = values_a.shape[1]
    na, nb = rows_a.size, rows_b.size
    rows = np.empty(na + nb, np.int64)
    out = np.empty((na + nb, K))
    i = j = m = 0
    while i < na or j < nb:
        take_a = i < na and (j >= nb or rows_a[i] <= rows_b[j])
        take_b = j < nb and (i >= na or rows_b[j] <= rows_a[i])
        rows[m] = rows_a[i] if take_a else rows_b[j]
        for k in range(K):
            s = 0.0
            if take_a:
                s += values_a[i, k]
            if take_b:
                s += values_b[j, k]
            out[m, k] = s
        i += take_a
        j += take_b
        m += 1
    return rows[:m], out[:m]


@njit(cache=True, nogil=True)
def gather_runs(flat, off, length):
    """The entries off[r]:off[r] + length[r] of ``flat``, run after run, in one array."""
    out = np.empty(length.sum(), flat.dtype)
    q = 0
    for r in range(off.size):
        for j in range(off[r], off[r] + length[r]):
            out[q] = flat[j]
            q += 1
    return out


@njit(cache=True, nogil=True)
def scatter_runs(flat, off, length, values):
    """The inverse of :func:`gather_runs`: the runs of ``flat`` set from ``values``."""
    q = 0
    for r in range(off.size):
        for j in range(off[r], off[r] + length[r]):
            flat[j] = values[q]
            q += 1


# -- updates in the form the steps produce them: per-token node-marginal changes -------------
@njit(cache=True, nogil=True)
def node_deltas(seq_offsets, examples, log_node, committed, out):
    """The node-marginal change of every token of the sequences ``examples`` (in order) since
    it was last committed, rounded to the dtype of ``out`` ((tokens, K), float32 or float64,
    filled and returned); ``committed`` (float64,
    one row per token) is advanced by exactly the rounded change, so it stays the sum of
    what was sent (the residual ``exp(log_node) - committed`` is what the rounding kept back,
    and is sent with the token's next change)."""
    K = log_node.shape[1]
    q = 0
    for e in examples:
        for t in range(seq_offsets[e], seq_offsets[e + 1]):
            for k in range(K):
                out[q, k] = np.exp(np.float64(log_node[t, k])) - committed[t, k]
                committed[t, k] += np.float64(out[q, k])
            q += 1
    return out


@njit(cache=True, nogil=True)
def add_tokens(w, slot, rows, n_rows, saved, table, examples, deltas, coef):
    """w[a] += coef * v * delta_t for every attribute (a, v) of every token of the sequences
    ``examples`` (ids into ``table`` = (seq_offsets, attr_offsets, attr_ids, attr_values); no
    values: all 1), tokens in the order of ``deltas``. A row first reached gets the next slot
    (``slot[a]`` was -1): it is appended to ``rows`` after ``n_rows`` and its values before
    kept in ``saved`` (for the adaptive check and a rejected round). Returns the new count.
    A token's change is converted and scaled once, not per attribute occurrence."""
    seq_offsets, attr_offsets, attr_ids, attr_values = table
    K = deltas.shape[1]
    ones = attr_values.size == 0
    d = np.empty(K)
    q = 0
    for e in examples:
        for t in range(seq_offsets[e], seq_offsets[e + 1]):
            for k in range(K):
                d[k] = coef * np.float64(deltas[q, k])
            for p in range(attr_offsets[t], attr_offsets[t + 1]):
                a = attr_ids[p]
                b = a * K
                if slot[a] < 0:
                    slot[a] = n_rows
                    rows[n_rows] = a
                    for k in range(K):
                        saved[n_rows, k] = w[b + k]
                    n_rows += 1
                if ones:
                    for k in range(K):
                        w[b + k] += d[k]
                else:
                    v = attr_values[p]
                    for k in range(K):
                        w[b + k] += v * d[k]
            q += 1
    return n_rows


@njit(cache=True, nogil=True)
def row_changes(w, u, saved, rows):
    """(w_before . Delta, |Delta|^2) over ``rows``, Delta = w - saved (row j saved in slot j),
    and u = w there (what :func:`settle_rows` sets when the change is kept: one pass)."""
    K = saved.shape[1]
    dot = 0.0
    sq = 0.0
    for j in range(rows.size):
        b = rows[j] * K
        for k in range(K):
            v = w[b + k]
            d = v - saved[j, k]
            dot += saved[j, k] * d
            sq += d * d
            u[b + k] = v
    return dot, sq


@njit(cache=True, nogil=True)
def settle_rows(w, u, saved, slot, rows, t, copied):
    """Keep t times the change of the ``rows`` since saved (t = 1: w as it is; t = 0: w as
    saved, bit for bit; else saved + t (w - saved)), u = w there (already done when
    ``copied``, by :func:`row_changes`), slots freed."""
    K = saved.shape[1]
    for j in range(rows.size):
        a = rows[j]
        slot[a] = -1
        b = a * K
        if t == 1.0:
            if not copied:
                for k in range(K):
                    u[b + k] = w[b + k]
        else:
            for k in range(K):
                v = saved[j, k] if t == 0.0 else saved[j, k] + t * (w[b + k] - saved[j, k])
                w[b + k] = v
                u[b + k] = v


@njit(cache=True, nogil=True)
def uncommit(seq_offsets, examples, committed, deltas, t):
    """committed -= (1 - t) * delta for the tokens of ``examples`` (the sent changes kept at
    the mix t only; t = 0: taken back)."""
    K = deltas.shape[1]
    q = 0
    for e in examples:
        for i in range(seq_offsets[e], seq_offsets[e + 1]):
            for k in range(K):
                committed[i, k] -= (1.0 - t) * np.float64(deltas[q, k])
            q += 1


@njit(cache=True, nogil=True)
def residual_terms(attr_offsets, attr_ids, attr_values, log_node, committed, w, K):
    """Over every token t of a shard, with r_t = exp(log_node[t]) - committed[t]: (sum_t
    r_t . s_t, sum_t |x_t| |r_t|), s_t[k] = sum_a x_ta w[a, k] (the token's scores)."""
    dot = 0.0
    bound = 0.0
    ones = attr_values.size == 0
    r = np.empty(K)
    for t in range(committed.shape[0]):
        rr = 0.0
        for k in range(K):
            r[k] = np.exp(np.float64(log_node[t, k])) - committed[t, k]
            rr += r[k] * r[k]
        if rr == 0.0:
            continue
        xx = 0.0
        for p in range(attr_offsets[t], attr_offsets[t + 1]):
            v = 1.0 if ones else attr_values[p]
            xx += v * v
            b = attr_ids[p] * K
            s = 0.0
            for k in range(K):
                s += r[k] * w[b + k]
            dot += v * s
        bound += np.sqrt(xx * rr)
    return dot, bound
