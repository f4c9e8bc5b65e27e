"""The Hamming loss on a structure's scores and the 0/1 marginals of a labelling: what each
structure's loss-augmented MAP (``primitives.loss_augmented_map``, the structured hinge loss of
``crfsdca.kernels.solvers.hinge``) is written with."""

import numpy as np

from crfsdca.kernels.jit import njit

# what the loss-augmented MAP computes besides y* (``HingeArrays.mode[0]``): nothing, the
# linear value <mu_i, augmented scores> (the Frank-Wolfe gap), that and the away corner over
# mu_i's face, or that and the away corner over the block's stored labellings (its atoms)
MAP_ONLY, WITH_LINEAR, WITH_AWAY, WITH_ATOMS = 0, 1, 2, 3


@njit(cache=True, nogil=True)
def hamming_augment(unary, labels):
    """unary[t, k] += 1 for every k != labels[t] (the Hamming loss added to the node scores);
    the score of the gold labelling is left unchanged."""
    T, K = unary.shape
    for t in range(T):
        y = labels[t]
        for k in range(K):
            if k != y:
                unary[t, k] += 1.0


@njit(cache=True, nogil=True)
def hamming(path, labels):
    """The number of positions where path and labels differ (as a float)."""
    d = 0.0
    for t in range(path.shape[0]):
        d += 1.0 if path[t] != labels[t] else 0.0
    return d


@njit(cache=True, nogil=True)
def corner_entry(nu, log_nu, lo, size, hit):
    """Entries [lo, lo + size) of the block buffers: 1 (log 0) at lo + hit, 0 (log -inf) else."""
    for p in range(lo, lo + size):
        nu[p] = 0.0
        log_nu[p] = -np.inf
    nu[lo + hit] = 1.0
    log_nu[lo + hit] = 0.0


@njit(cache=True, nogil=True)
def corner_values(buf, lo, size, hit):
    """buf[lo:lo + size] = 1 at lo + hit, 0 elsewhere (the away corner, as probabilities)."""
    for p in range(lo, lo + size):
        buf[p] = 0.0
    buf[lo + hit] = 1.0


@njit(cache=True, nogil=True)
def masked_negation(scores, mu, n):
    """scores[p] = -scores[p] where mu[p] > 0, -inf elsewhere (p < n): the away corner
    minimises the augmented score over the labellings of mu_i's support, its minimal face."""
    for p in range(n):
        scores[p] = -scores[p] if mu[p] > 0.0 else -np.inf


@njit(cache=True, nogil=True)
def scale(x, c):
    """x *= c (the scores at temperature 1 / c)."""
    for p in range(x.shape[0]):
        x[p] *= c


@njit(cache=True, nogil=True)
def expected_hamming(node, labels):
    """E Hamming(., labels) under the node marginals node (T, K): sum_t 1 - node[t, y_t]."""
    d = 0.0
    for t in range(labels.shape[0]):
        d += 1.0 - node[t, labels[t]]
    return d


@njit(cache=True, nogil=True)
def find_atom(atoms, count, t0, path):
    """The column s < count with atoms[s, t0:t0 + T] = path (T = len(path)), else -1."""
    T = path.shape[0]
    for s in range(count):
        same = True
        for t in range(T):
            if atoms[s, t0 + t] != path[t]:
                same = False
                break
        if same:
            return s
    return -1


@njit(cache=True, nogil=True)
def atom_hamming(atoms, s, t0, labels):
    """Hamming(atom s, labels) of the atom at atoms[s, t0:t0 + len(labels)]."""
    d = 0.0
    for t in range(labels.shape[0]):
        d += 1.0 if atoms[s, t0 + t] != labels[t] else 0.0
    return d
