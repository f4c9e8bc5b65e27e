"""The same seed gives the same run: identical traces (all but ``seconds``), bitwise weights.

Every SDCA sampling scheme and L-BFGS is run twice in a row on a small synthetic problem. A
different seed must change an SDCA run (otherwise the first check would prove nothing). The slow
test repeats a CLI run in fresh interpreters with different hash seeds, which would expose any
dependence on set or dict iteration order between the text file and the weights.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from _synthetic import random_sequences

from crfsdca.errors import ConvergenceWarning
from crfsdca.estimators.model import SequenceCRF
from crfsdca.solvers.samplers import SCHEMES

RUNS = [("sdca", {"sampling": s}) for s in SCHEMES] + [("lbfgs", {})]


def fit(solver: str, seed: int, **options) -> SequenceCRF:
    data = random_sequences(11, n=16, max_T=6, K=3, A=7)
    test = random_sequences(12, n=6, max_T=6, K=3, A=7)
    model = SequenceCRF(solver=solver, seed=seed, max_epochs=6, eval_every=0.5, tol=0.0, **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(data, test)


def trace_without_time(model: SequenceCRF) -> list[dict]:
    """Every record as JSON (nan -> None), without the wall-clock fields."""
    records = []
    for record in model.result_.trace.records:
        obj = record.to_json()
        obj.pop("seconds")
        obj["extra"] = {k: v for k, v in obj["extra"].items() if "seconds" not in k}
        records.append(obj)
    return records


@pytest.mark.parametrize(("solver", "options"), RUNS, ids=[o.get("sampling", s) for s, o in RUNS])
def test_same_seed_same_trace_and_bitwise_weights(solver, options):
    first, second = fit(solver, 3, **options), fit(solver, 3, **options)
    assert first.weights_.tobytes() == second.weights_.tobytes()
    assert trace_without_time(first) == trace_without_time(second)
    assert first.result_.trace.header == second.result_.trace.header
    assert first.result_.stop_reason == second.result_.stop_reason
    assert len(first.result_.trace.records) >= 5  # several evaluation points compared


@pytest.mark.parametrize("sampling", SCHEMES)
def test_another_seed_changes_an_sdca_run(sampling):
    first, other = fit("sdca", 3, sampling=sampling), fit("sdca", 4, sampling=sampling)
    assert first.weights_.tobytes() != other.weights_.tobytes()


CORPUS = "\n\n".join(
    "\n".join(f"{w} {p} {y}" for w, p, y in sentence)
    for sentence in [
        [("The", "DT", "B-NP"), ("cat", "NN", "I-NP"), ("sat", "VBD", "B-VP"), (".", ".", "O")],
        [("A", "DT", "B-NP"), ("dog", "NN", "I-NP"), ("ran", "VBD", "B-VP")],
        [("Dogs", "NNS", "B-NP"), ("bark", "VBP", "B-VP"), ("loudly", "RB", "B-ADVP")],
    ]
    * 4
)


def _cli_digest(workdir: Path, hash_seed: str) -> str:
    """Train through the CLI in a fresh interpreter; digest of the weights and the trace."""
    model, trace = workdir / f"m{hash_seed}.npz", workdir / f"t{hash_seed}.jsonl"
    command = [sys.executable, "-m", "crfsdca.cli", "train", str(workdir / "train.txt")]
    command += ["--format", "conll", "--template", "conll", "--epochs", "4", "--seed", "5"]
    command += ["--model", str(model), "--trace", str(trace), "-q"]
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    subprocess.run(command, check=True, env=env, capture_output=True, timeout=300)
    digest = hashlib.sha256()
    with np.load(model, allow_pickle=False) as arrays:
        digest.update(arrays["weights"].tobytes())
    for line in trace.read_text().splitlines()[1:]:
        record = json.loads(line)
        record.pop("seconds")
        record["extra"] = {k: v for k, v in record["extra"].items() if "seconds" not in k}
        digest.update(json.dumps(record, sort_keys=True).encode())
    return digest.hexdigest()


@pytest.mark.slow
def test_cli_run_does_not_depend_on_the_hash_seed(tmp_path):
    (tmp_path / "train.txt").write_text(CORPUS + "\n")
    assert _cli_digest(tmp_path, "1") == _cli_digest(tmp_path, "2")
