"""Settings of the whole test run."""

from __future__ import annotations

import os

# A fit on a cold numba cache would start a second process to compile its evaluation kernels
# (crfsdca.estimators.compile_ahead); the suite already keeps both cores busy with its workers.
# tests/test_warmup.py runs it on purpose (the variable set in its subprocesses' environment).
os.environ.setdefault("CRFSDCA_COMPILE_AHEAD", "0")

# Each test encodes its corpora itself: what an earlier run left in ~/.cache cannot change a
# result (tests/test_encoded_cache.py turns the cache on in a folder of its own).
os.environ.setdefault("CRFSDCA_ENCODED_CACHE", "0")
