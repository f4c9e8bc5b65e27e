"""Settings of the whole test run."""

from __future__ import annotations

import os
from collections import Counter

# A fit on a cold numba cache would start a second process to compile its evaluation kernels
# (crfsdca.estimators.compile_ahead); the suite already keeps both cores busy with its workers.
# tests/test_warmup.py runs it on purpose (the variable set in its subprocesses' environment).
os.environ.setdefault("CRFSDCA_COMPILE_AHEAD", "0")

# Each test encodes its corpora itself: what an earlier run left in ~/.cache cannot change a
# result (tests/test_encoded_cache.py turns the cache on in a folder of its own).
os.environ.setdefault("CRFSDCA_ENCODED_CACHE", "0")

#: files whose tests take minutes in one worker (a module fixture that trains, cold compiles run
#: one after the other): handed out first, so that no worker idles at the end while one runs
#: them (``--dist loadfile``; setup.cfg turns off xdist's own order, by number of tests, which
#: sent these last)
LONGEST_FIRST = ("test_reproduce.py", "test_warmup.py", "test_front_door_messages.py")


def pytest_collection_modifyitems(config, items):
    """The files of :data:`LONGEST_FIRST` first, then the others by number of tests (as xdist
    orders them); a file's tests keep their order."""
    counts = Counter(item.nodeid.split("::", 1)[0] for item in items)

    def rank(item):
        path = item.nodeid.split("::", 1)[0]
        name = path.rsplit("/", 1)[-1]
        first = LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)
        return first, -counts[path]

    items.sort(key=rank)  # stable
