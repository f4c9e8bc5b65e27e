"""The solver registry: name -> solver class (also drives the CLI's options)."""

from crfsdca.solvers.base import SolverConfig, SolverResult
from crfsdca.solvers.l2sgd import L2SGD
from crfsdca.solvers.lbfgs import LBFGS, LBFGSConfig
from crfsdca.solvers.oeg import OEG
from crfsdca.solvers.online import AP, AROW, PA
from crfsdca.solvers.sag_nus import SAGNUS, SAGNUSSkip
from crfsdca.solvers.sdca import SDCA, SDCAConfig
from crfsdca.solvers.spdc import SPDC

SOLVERS = {
    cls.name: cls for cls in (SDCA, LBFGS, SAGNUS, SAGNUSSkip, OEG, SPDC, L2SGD, AP, PA, AROW)
}

__all__ = [
    "AP", "AROW", "L2SGD", "LBFGS", "OEG", "PA", "SAGNUS", "SDCA", "SOLVERS", "SPDC", "LBFGSConfig",
    "SAGNUSSkip", "SDCAConfig", "SolverConfig", "SolverResult",
]  # fmt: skip
