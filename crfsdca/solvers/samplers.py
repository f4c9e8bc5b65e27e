"""Sampling schemes of SDCA (Le Priol et al. 2018, Sec. 5 and 6.3).

With probability ``non_uniformity`` a sequence is drawn from the scheme's law, otherwise
uniformly. Laws: ``uniform``; ``importance`` (p_i proportional to 1 + R_i / (lambda n));
``gap`` (p_i proportional to the stale gap estimate g_i); ``gap-importance`` (g_i times the
importance weight); ``max`` (argmax_i g_i). Draws use a flat sum-tree (max-tree for ``max``),
O(log n) each; uniforms come from a seeded ``numpy.random.Generator`` and are passed to the
kernels, which draw nothing themselves.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import NDArray

from crfsdca.kernels.solvers import trees
from crfsdca.structures.dual import INITIAL_GAP

Sampling = Literal["uniform", "importance", "gap", "gap-importance", "max"]
SCHEMES: tuple[str, ...] = ("uniform", "importance", "gap", "gap-importance", "max")
SCHEME_CODES = {name: code for code, name in enumerate(SCHEMES)}


def check_scheme(name: str) -> int:
    """The integer code of a scheme; ValueError for an unknown name."""
    key = name.replace("_", "-")
    if key not in SCHEME_CODES:
        raise ValueError(f"sampling must be one of {', '.join(SCHEMES)}; got {name!r}")
    return SCHEME_CODES[key]


def tree_capacity(n: int) -> int:
    return 1 << max(0, int(np.ceil(np.log2(max(n, 1)))))


class TreeSampler:
    """Scores of one scheme kept in a flat binary tree (the kernels update it in place)."""

    def __init__(
        self,
        scheme: str,
        gap_estimates: NDArray[np.float64],
        importance: NDArray[np.float64] | None = None,
    ) -> None:
        self.code = check_scheme(scheme)
        self.scheme = SCHEMES[self.code]
        n = gap_estimates.size
        self.multipliers = np.ones(n) if importance is None else np.asarray(importance, float)
        if self.scheme in ("importance", "gap-importance") and importance is None:
            raise ValueError(f"sampling {self.scheme!r} needs importance weights (radii)")
        self.use_max = self.scheme == "max"
        self.tree = np.zeros(2 * tree_capacity(n))
        self.rebuild(gap_estimates)

    def scores(self, gap_estimates: NDArray[np.float64]) -> NDArray[np.float64]:
        if self.scheme == "importance":
            return INITIAL_GAP * self.multipliers
        if self.scheme == "gap-importance":
            return gap_estimates * self.multipliers
        return np.array(gap_estimates, dtype=np.float64)

    def rebuild(self, gap_estimates: NDArray[np.float64]) -> None:
        """Recompute the whole tree from scratch (removes accumulated round-off)."""
        trees.build(self.tree, self.scores(gap_estimates), self.use_max)

    def draw(self, u: float, n: int) -> int:
        if self.use_max:
            return int(trees.argmax(self.tree))
        return int(trees.draw(self.tree, u, n))
