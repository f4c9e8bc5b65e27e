"""The only place where crfsdca chooses dtypes."""

import numpy as np

FLOAT = np.float64
INDEX = np.int64
LABEL = np.int64
