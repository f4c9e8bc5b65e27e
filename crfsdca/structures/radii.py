"""Radii R_i = max_y ||F(x_i, y_i) - F(x_i, y)||^2 (Le Priol et al., App. C).

As in the paper's code, y~ is the constant labelling with a label z absent from y_i (the least
frequent label of y_i when all labels occur), and R_i = ||F(x_i, y_i) - F(x_i, y~)||^2 is computed
exactly. Importance weights are L_i / lambda = 1 + R_i / (lambda n). :func:`example_radii` gives
the same radii on every structure (through its primitives), :func:`radii` the chain's.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from crfsdca.features.layout import max_unique, sequence_layout
from crfsdca.kernels.solvers import radii as structure_radii
from crfsdca.kernels.structures import chain_blocks
from crfsdca.structures.objectives import lambda_n


def radii(problem) -> NDArray[np.float64]:
    """R_i for every training sequence, shape (n,)."""
    fm = problem.feature_map
    layout = sequence_layout(problem.train)
    dims = (fm.n_attributes, fm.n_labels, fm.n_bias_rows)
    return chain_blocks.radii(layout, dims, max_unique(layout))


def example_radii(problem) -> NDArray[np.float64]:
    """R_i of every training example of any structure (chains, trees, junction trees), shape
    (n,) (``crfsdca.kernels.solvers.radii``)."""
    structure = problem.structure
    return structure_radii.radii(structure.blocks, structure.sag_workspace()[2])


def importance_weights(problem) -> NDArray[np.float64]:
    """1 + R_i / (lambda n), proportional to the smoothness constants L_i."""
    return 1.0 + radii(problem) / lambda_n(problem)
