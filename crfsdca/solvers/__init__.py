"""Solver registry: name -> solver class (also drives the CLI)."""

from crfsdca.solvers.base import SolverConfig, SolverResult
from crfsdca.solvers.lbfgs import LBFGS, LBFGSConfig
from crfsdca.solvers.oeg import OEG
from crfsdca.solvers.sag_nus import SAGNUS, SAGNUSSkip
from crfsdca.solvers.sdca import SDCA, SDCAConfig

SOLVERS = {cls.name: cls for cls in (SDCA, LBFGS, SAGNUS, SAGNUSSkip, OEG)}

__all__ = ["LBFGS", "SDCA", "SOLVERS", "LBFGSConfig", "SDCAConfig", "SolverConfig", "SolverResult"]
