"""Solver registry: name -> solver class (also drives the CLI)."""

from crfsdca.solvers.base import SolverConfig, SolverResult
from crfsdca.solvers.lbfgs import LBFGS, LBFGSConfig
from crfsdca.solvers.sdca import SDCA, SDCAConfig

SOLVERS = {cls.name: cls for cls in (SDCA, LBFGS)}

__all__ = ["LBFGS", "SDCA", "SOLVERS", "LBFGSConfig", "SDCAConfig", "SolverConfig", "SolverResult"]
