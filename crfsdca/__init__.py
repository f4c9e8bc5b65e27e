"""crfsdca: conditional random fields trained by adaptive stochastic dual coordinate ascent."""

__version__ = "0.1.0"

from crfsdca.errors import ConvergenceWarning, DataFormatError, ModelFormatError, NotFittedError
from crfsdca.features import FeatureMap
from crfsdca.sequences import SequenceData

__all__ = [
    "ConvergenceWarning",
    "DataFormatError",
    "FeatureMap",
    "ModelFormatError",
    "NotFittedError",
    "SequenceData",
    "__version__",
]
