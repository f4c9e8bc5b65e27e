"""crfsdca: conditional random fields trained by adaptive stochastic dual coordinate ascent."""

__version__ = "0.1.0"

from importlib import import_module
from typing import TYPE_CHECKING, Any

from crfsdca.errors import (
    ConvergenceWarning,
    DataFormatError,
    GraphError,
    ModelFormatError,
    NotFittedError,
    WorkerLostError,
)
from crfsdca.features.feature_map import FeatureMap
from crfsdca.features.sequences import SequenceData
from crfsdca.solvers.trace import Trace, TraceRecord, read_trace

if TYPE_CHECKING:
    from crfsdca.estimators.crf import CRF
    from crfsdca.estimators.model import SequenceCRF
    from crfsdca.solvers import SOLVERS
    from crfsdca.solvers.monitor import Monitor
    from crfsdca.structures.problem import Problem

# names whose modules import the numba kernels (or scikit-learn, for CRF): loaded on first use,
# so that the command line (``crfsdca --help``, ``crfsdca datasets list``) starts without them
_LAZY = {
    "CRF": "crfsdca.estimators.crf",
    "SequenceCRF": "crfsdca.estimators.model",
    "Monitor": "crfsdca.solvers.monitor",
    "Problem": "crfsdca.structures.problem",
    "SOLVERS": "crfsdca.solvers",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'crfsdca' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "CRF",
    "SOLVERS",
    "ConvergenceWarning",
    "DataFormatError",
    "FeatureMap",
    "GraphError",
    "ModelFormatError",
    "Monitor",
    "NotFittedError",
    "Problem",
    "SequenceCRF",
    "SequenceData",
    "Trace",
    "TraceRecord",
    "WorkerLostError",
    "__version__",
    "read_trace",
]
