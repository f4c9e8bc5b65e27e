"""512-bit vectors for the compiled kernels on AVX-512 hosts.

LLVM tunes recent Intel cores to prefer 256-bit vectors ("prefer-256-bit"), so numba's loops use
four doubles per instruction even where the processor has 512-bit registers. The SDCA block
kernels are flat loops over thousands of cached entries; with eight doubles per instruction an
epoch takes 0.71-0.79x the time on OCR and 0.83-0.97x on CoNLL-2000 (BENCHMARKS.md section 3).
Importing ``crfsdca.kernels``, which every kernel import goes through, therefore sets
``NUMBA_CPU_FEATURES`` to the host's features plus ``-prefer-256-bit`` when

* the host has AVX-512F,
* ``NUMBA_CPU_FEATURES`` is not already set, and
* ``CRFSDCA_VECTOR_WIDTH`` is not ``256`` (the opt-out).

The setting is process-wide (numba has no per-function vector width) and takes effect only if
numba has not compiled anything yet in this process; otherwise nothing changes. Compiled-code
caches are keyed by the feature string, so 256- and 512-bit builds do not mix. The instruction
set is the host's either way: only LLVM's choice of vector width changes.
"""

from __future__ import annotations

import os

OPT_OUT = "CRFSDCA_VECTOR_WIDTH"


def wide_vector_features() -> str | None:
    """The feature string to use, or None to leave numba's default."""
    if os.environ.get("NUMBA_CPU_FEATURES") or os.environ.get(OPT_OUT, "").strip() == "256":
        return None
    try:
        from llvmlite import binding

        features = binding.get_host_cpu_features()
    except Exception:  # noqa: BLE001 - no feature map on this platform: keep the default
        return None
    if not features.get("avx512f", False):
        return None
    return features.flatten() + ",-prefer-256-bit"


def enable() -> bool:
    """Set NUMBA_CPU_FEATURES for 512-bit vectors if applicable; return whether it did."""
    features = wide_vector_features()
    if features is None:
        return False
    os.environ["NUMBA_CPU_FEATURES"] = features
    from numba.core import config

    config.reload_config()  # the compiler re-reads the environment too; keep both in step
    return True
