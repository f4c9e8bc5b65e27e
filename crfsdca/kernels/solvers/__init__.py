"""Solver kernels, written once for every structure against ``crfsdca.kernels.primitives``:
SDCA (``sdca``, ``line_search``, ``prox``, ``sdca_epoch``), SAG-NUS (``sag``, ``sag_epoch``),
OEG (``oeg``, ``oeg_epoch``), the sampling sum-trees (``trees``) and the row bookkeeping of
distributed rounds (``sparse_rows``); and CRFsuite's chain algorithms (``online``, ``sgd``)."""
