"""The vector-width choice of ``crfsdca.kernels.numerics.vector_width`` (512-bit vectors on
AVX-512)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from crfsdca.kernels.numerics import vector_width

llvm = pytest.importorskip("llvmlite.binding")
HAS_AVX512 = bool(llvm.get_host_cpu_features().get("avx512f", False))
# LLVM tunes Intel cores to prefer 256-bit vectors; AMD's Zen 4 and 5 (znver4, znver5) are tuned
# for 512-bit ones already, so there numba's own build (the opt-out) has zmm registers too
DEFAULT_512 = llvm.get_host_cpu_name().startswith("znver")

SCRIPT = """
import json, numpy as np
import crfsdca.kernels
from numba.core import config
from crfsdca.kernels.numerics import fastmath as fm
x = np.random.default_rng(0).uniform(1e-300, 1.0, 10007)
out = np.empty_like(x)
k = fm.make_map(fm.fast_log)
k(x, out)
s = fm.make_weighted_sum(fm.fast_log, reassoc=True)
total = s(x, x, x, x)
asm = k.inspect_asm(k.signatures[0])
from crfsdca.kernels.numerics import vector_width
from crfsdca.kernels.structures import chain
w = np.random.default_rng(1).normal(size=(26, 26))
e = np.empty_like(w)
m = chain.transition_exp(w, e)  # rows of K = 26 < 32: the vectorized remainder
print(json.dumps({"features": config.CPU_FEATURES, "zmm": "zmm" in asm,
                  "logs": out[:50].tolist(), "sum": total, "trans": e.ravel().tolist(),
                  "epilogues": vector_width.epilogues_vectorized()}))
"""


def run(env_updates: dict[str, str | None]) -> dict:
    env = dict(os.environ)
    env.pop("NUMBA_CPU_FEATURES", None)
    env.pop(vector_width.OPT_OUT, None)
    for key, value in env_updates.items():
        if value is not None:
            env[key] = value
    env["NUMBA_CACHE_DIR"] = os.path.join(os.environ.get("TMPDIR", "/tmp"), "crfsdca-vw-cache")
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_respects_an_explicit_setting_and_the_opt_out(monkeypatch):
    monkeypatch.setenv("NUMBA_CPU_FEATURES", "+avx2")
    assert vector_width.wide_vector_features() is None
    monkeypatch.delenv("NUMBA_CPU_FEATURES")
    monkeypatch.setenv(vector_width.OPT_OUT, "256")
    assert vector_width.wide_vector_features() is None
    monkeypatch.delenv(vector_width.OPT_OUT)
    features = vector_width.wide_vector_features()
    assert (features is not None) == HAS_AVX512
    if features is not None:
        assert features.endswith(",-prefer-256-bit") and "+avx512f" in features
        assert vector_width.is_wide(features)
    assert not vector_width.is_wide("+avx2") and not vector_width.is_wide(None)


@pytest.mark.slow
@pytest.mark.skipif(not HAS_AVX512, reason="host without AVX-512")
def test_wide_and_narrow_builds_compute_the_same_values():
    wide = run({})
    narrow = run({vector_width.OPT_OUT: "256"})
    assert wide["features"].endswith("-prefer-256-bit") and wide["zmm"] and wide["epilogues"]
    assert narrow["features"] is None and not narrow["epilogues"]
    assert narrow["zmm"] == DEFAULT_512
    assert wide["logs"] == narrow["logs"]  # element-wise: bit for bit
    assert wide["trans"] == narrow["trans"]
    # a child process inherits the 512-bit features through the environment: same build
    child = run({"NUMBA_CPU_FEATURES": wide["features"]})
    assert child["epilogues"] and child["zmm"] and child["trans"] == wide["trans"]
    assert wide["sum"] == pytest.approx(narrow["sum"], rel=1e-13)  # reassociated sum
