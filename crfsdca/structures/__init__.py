"""The structures SDCA trains: one object per structure kind, chosen in one place.

A structure owns what depends on the graph of its examples, so that every solver is written
once (``crfsdca.solvers``, ``crfsdca.kernels.solvers.sdca_epoch``):

- its packed arrays as one compiled type (:attr:`blocks`) whose primitives the kernels call
  (``crfsdca.kernels.primitives``: the block oracle, the primal direction and its scatter);
- its dual blocks as runs (``crfsdca.kernels.primitives.RunTable``): where each block's
  entries live in the dual state and with which coefficient of the junction-tree entropy

    H~(mu) = sum_r coef_r H(run r),   KL~(mu || nu) = sum_r coef_r KL(run r);

- w(mu) = (sum_i F(x_i, y_i) - E_mu_i F) / (lambda n), the summed loss at w, and the
  importance weights of a sampling scheme that needs them.

=================  ===========================================================================
structure          runs of one example
=================  ===========================================================================
linear chain       edge tables (K^2 each) with +1, then node tables: the two ends 0, the
                   interior -1 (a single node: +1)
tree / forest      the non-root nodes' edge tables parent(v)-v with +1, then node tables with
                   1 - degree(v)
junction tree      clique tables (K^|c|) with +1, separator tables (K^|s|) with -1
=================  ===========================================================================

The dual state keeps clique tables in ``log_edge`` and node tables in ``log_node`` (empty for
junction trees, whose node marginals are projections of their cliques). Each problem holds
its structure (``Problem.structure``): the chain in :mod:`crfsdca.structures.chain`, trees in
:mod:`crfsdca.structures.tree`, junction trees in :mod:`crfsdca.structures.junction`, each
module with the structure's data, oracle, problem and structure object.
"""
