"""Settings of the whole test run."""

from __future__ import annotations

import os

# A fit on a cold numba cache would start a second process to compile its evaluation kernels
# (crfsdca.estimators.compile_ahead); the suite already keeps both cores busy with its workers.
# tests/test_warmup.py runs it on purpose (the variable set in its subprocesses' environment).
os.environ.setdefault("CRFSDCA_COMPILE_AHEAD", "0")
