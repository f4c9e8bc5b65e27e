"""Solver registry: name -> solver class (also drives the CLI)."""

from crfsdca.solvers.base import SolverConfig, SolverResult
from crfsdca.solvers.lbfgs import LBFGS, LBFGSConfig

SOLVERS = {cls.name: cls for cls in (LBFGS,)}

__all__ = ["LBFGS", "SOLVERS", "LBFGSConfig", "SolverConfig", "SolverResult"]
