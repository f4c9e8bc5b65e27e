"""512-bit vectors for the compiled kernels on AVX-512 hosts.

LLVM tunes recent Intel cores to prefer 256-bit vectors ("prefer-256-bit"), so numba's loops use
four doubles per instruction even where the processor has 512-bit registers. The SDCA block
kernels are flat loops over thousands of cached entries; with eight doubles per instruction an
epoch takes 0.71-0.79x the time on OCR and 0.83-0.97x on CoNLL-2000 (measured when the option
was introduced).
Importing ``crfsdca.kernels``, which every kernel import goes through, therefore sets
``NUMBA_CPU_FEATURES`` to the host's features plus ``-prefer-256-bit`` when

* the host has AVX-512F,
* ``NUMBA_CPU_FEATURES`` is not already set, and
* ``CRFSDCA_VECTOR_WIDTH`` is not ``256`` (the opt-out).

The setting is process-wide (numba has no per-function vector width) and takes effect only if
numba has not compiled anything yet in this process; otherwise nothing changes. Compiled-code
caches are keyed by the feature string, so 256- and 512-bit builds do not mix. The instruction
set is the host's either way: only LLVM's choice of vector width changes.

With eight doubles per vector LLVM runs its loops 32 elements at a time (four vectors
interleaved), so a loop over one row of K < 32 labels (OCR's 26, NER's 9) never enters the
vector body and runs element by element. The 512-bit build therefore also sets LLVM's
``-epilogue-vectorization-force-VF=8``: the remainder of every vectorized loop gets a vector
loop of eight before the last few elements (``EPILOGUE_OPTION``). An SDCA epoch then takes
0.93x the time on OCR and on NER, 0.96x on CoNLL-2000 (measured when the option was
introduced); loops over
thousands of entries keep their 32-wide body. Like the width, it applies to every numba
compilation after it in the process, and it changes no value beyond the order of reassociated
sums.
"""

from __future__ import annotations

import os

OPT_OUT = "CRFSDCA_VECTOR_WIDTH"
WIDE_SUFFIX = ",-prefer-256-bit"
EPILOGUE_OPTION = "-epilogue-vectorization-force-VF=8"
_epilogues = False


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
    return features.flatten() + WIDE_SUFFIX


def is_wide(features: str | None) -> bool:
    """Whether a NUMBA_CPU_FEATURES string is this module's 512-bit build."""
    return bool(features) and "+avx512f" in features and features.endswith(WIDE_SUFFIX)


def epilogues_vectorized() -> bool:
    """Whether this process set ``EPILOGUE_OPTION``."""
    return _epilogues


def enable() -> bool:
    """Set NUMBA_CPU_FEATURES for 512-bit vectors if applicable; return whether it did.

    Whenever the build is the 512-bit one (set here, or inherited by a child process through
    the environment), also set ``EPILOGUE_OPTION`` once.
    """
    global _epilogues
    features = wide_vector_features()
    from numba.core import config

    if features is not None:
        os.environ["NUMBA_CPU_FEATURES"] = features
        config.reload_config()  # the compiler re-reads the environment too; keep both in step
    if is_wide(config.CPU_FEATURES) and not _epilogues:
        from llvmlite import binding

        binding.set_option("crfsdca", EPILOGUE_OPTION)
        _epilogues = True
    return features is not None
