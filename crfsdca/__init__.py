"""crfsdca: conditional random fields trained by adaptive stochastic dual coordinate ascent."""

__version__ = "0.1.0"

from crfsdca.errors import ConvergenceWarning, DataFormatError, ModelFormatError, NotFittedError
from crfsdca.features import FeatureMap
from crfsdca.model import SequenceCRF
from crfsdca.monitor import Monitor
from crfsdca.problem import Problem
from crfsdca.sequences import SequenceData
from crfsdca.solvers import SOLVERS
from crfsdca.trace import Trace, TraceRecord, read_trace

__all__ = [
    "CRF",
    "SOLVERS",
    "ConvergenceWarning",
    "DataFormatError",
    "FeatureMap",
    "ModelFormatError",
    "Monitor",
    "NotFittedError",
    "Problem",
    "SequenceCRF",
    "SequenceData",
    "Trace",
    "TraceRecord",
    "__version__",
    "read_trace",
]


def __getattr__(name: str) -> object:
    """``crfsdca.CRF`` imports scikit-learn (when installed): only on first use, not for the CLI."""
    if name == "CRF":
        from crfsdca.estimator import CRF

        return CRF
    raise AttributeError(f"module 'crfsdca' has no attribute {name!r}")
