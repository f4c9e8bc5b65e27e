"""Wapiti's L-BFGS on two threads against ``crfsdca train --threads 1|2``, on one objective.

    CRFSDCA_DATA_DIR=../shared/data python benchmarks/bench_wapiti.py [--cache DIR] \\
        [--template conll] [--target 1e-3] [--cap 1200] [--nthread 2] [--reps 1]

Wapiti (Lavergne, Cappé & Yvon, ACL 2010) is built from the C sources shipped in the PyPI sdist
``libwapiti`` (``cwapiti/``, its own Makefile): ``pip download`` puts the sdist in ``--cache``
(outside the repository), ``make`` builds ``wapiti`` there; nothing of Wapiti enters the repo.

The same features in both programs. Every training and test token is written as one line of
Wapiti's feature-form input (no pattern file): one unigram observation ``u<j>`` per active
attribute j of crfsdca's encoder (``--template``; all values are 1), ``u:c`` / ``u:f`` / ``u:l``
for crfsdca's bias rows (count, first position, last position), and one constant bigram
observation ``b``, then the label. Wapiti gives each unigram observation K weights and ``b`` K²
weights used between positions t-1 and t (t >= 1): crfsdca's emission, bias and transition
blocks, d = (A + 3) K + K² in both.

The same objective. Wapiti minimises sum_i -log p(y_i | x_i) + rho1 |w|_1 + rho2/2 |w|²;
crfsdca P(w) = lambda/2 |w|² + sigma |w|_1 + 1/n sum_i loss_i, so Wapiti's objective is n P(w)
with rho2 = n lambda and rho1 = n sigma (here lambda = 1/n: rho2 = 1, rho1 = 0). Checked at
the end of every run: Wapiti's model file (hexadecimal weights) is read back into crfsdca's
layout and crfsdca's n P(w) is compared with the last objective Wapiti printed; crfsdca's own
L-BFGS reference model is read back the same way against the primal its command reported.

Timed, once per repetition, each a whole command started from this script (run it under
``nice -n 0``): ``wapiti train -a l-bfgs -t 2`` (every other stopping rule off) from its start to
the first iteration whose objective is within relative ``--target`` of n P*, where P* is the
primal of ``crfsdca train --solver lbfgs --tol 1e-6`` (untimed); Wapiti is then stopped by
SIGINT (its clean stop: it saves the model of that iteration), or at ``--cap`` seconds. Then
``crfsdca train DATASET --tol TARGET --threads 2`` and ``--threads 1`` (after an untimed warm-up
of each), as ``benchmarks/bench_wall.py`` runs them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import numpy as np
from bench_wall import run_once

from crfsdca.estimators.model import SequenceCRF
from crfsdca.features.feature_map import FeatureMap
from crfsdca.structures.problem import Problem
from data_loaders import load_encoded

SDIST = "libwapiti==0.2.1"
BIAS_OBS = ("u:c", "u:f", "u:l")  # crfsdca's bias rows: count, first, last
ITERATION = re.compile(r"\[\s*(\d+)\] obj=(\S+)\s.*time=([\d.]+)s/([\d.]+)s")


def build_wapiti(cache: Path) -> Path:
    """``cache/cwapiti/wapiti``, built from the sdist downloaded by pip if not there yet."""
    binary = cache / "cwapiti" / "wapiti"
    if binary.exists():
        return binary
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", SDIST, "--no-deps",
                    "--no-binary", ":all:", "-q", "-d", str(cache)], check=True)  # fmt: skip
    (sdist,) = cache.glob("libwapiti-*.tar.gz")
    print(f"{sdist.name}: sha256 {hashlib.sha256(sdist.read_bytes()).hexdigest()}")
    prefix = sdist.name.removesuffix(".tar.gz") + "/cwapiti/"
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
        for m in members:
            m.name = "cwapiti/" + m.name.removeprefix(prefix)
        tar.extractall(cache, members=members, filter="data")
    subprocess.run(["make", "-C", str(cache / "cwapiti")], check=True)
    return binary


def write_wapiti_data(data, path: Path, bias_rows: int) -> None:
    """``data`` (encoded SequenceData) as Wapiti's feature-form input, gold labels last."""
    names = list(data.label_names)
    unknown = data.gold_names_of_unknown()
    lines = []
    for i in range(data.n_sequences):
        start, stop = int(data.seq_offsets[i]), int(data.seq_offsets[i + 1])
        for t in range(start, stop):
            a, b = data.attr_offsets[t], data.attr_offsets[t + 1]
            obs = [f"u{j}" for j in data.attr_ids[a:b].tolist()]
            if bias_rows:
                obs += (
                    [BIAS_OBS[0]] + [BIAS_OBS[1]] * (t == start) + [BIAS_OBS[2]] * (t == stop - 1)
                )
            k = int(data.labels[t])
            lines.append(" ".join([*obs, "b", names[k] if k >= 0 else unknown[t]]))
        lines.append("")
    path.write_text("\n".join(lines) + "\n")


def read_wapiti_model(path: Path, fm: FeatureMap, label_names) -> np.ndarray:
    """The weights of Wapiti's model file at ``path`` in crfsdca's flat layout."""

    def netstrings(count: int) -> list[str]:
        return [next(lines).split(":", 1)[1][:-1] for _ in range(count)]

    lines = iter(path.read_text().splitlines())
    _, n_active = next(lines).rsplit("#", 1)
    if not next(lines).startswith("#rdr#0/"):
        raise ValueError(f"{path}: a model trained with patterns; expected feature-form input")
    labels = netstrings(int(next(lines).removeprefix("#qrk#")))
    observations = netstrings(int(next(lines).removeprefix("#qrk#")))
    theta = np.zeros(len(observations) * len(labels) ** 2)
    for _ in range(int(n_active)):
        f, value = next(lines).split("=")
        theta[int(f)] = float.fromhex(value)
    K, A = fm.n_labels, fm.n_attributes
    ours = np.array([list(label_names).index(name) for name in labels])
    w, offset = fm.zeros(), 0
    for obs in observations:
        if obs == "b":
            w[fm.transition_offset + (ours[:, None] * K + ours[None, :]).ravel()] = theta[
                offset : offset + K * K
            ]
            offset += K * K
            continue
        row = A + BIAS_OBS.index(obs) if obs in BIAS_OBS else int(obs[1:])
        w[row * K + ours] = theta[offset : offset + K]
        offset += K
    return w


def run_wapiti(args, binary: Path, folder: Path, rho2: float, target_obj: float) -> dict:
    """One ``wapiti train`` until its objective is <= target_obj (then SIGINT) or the cap."""
    model = folder / "wapiti.model"
    cmd = [str(binary), "train", "-a", "l-bfgs", "-t", str(args.nthread), "-1", "0", "-2",
           repr(rho2), "-i", "1000000", "-e", "0", "-w", "0", "-d", str(folder / "test.txt"),
           str(folder / "train.txt"), str(model)]  # fmt: skip
    load = os.getloadavg()[0]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, bufsize=1)
    trace, reached, log = [], None, []
    for line in proc.stderr:
        log.append(line)
        m = ITERATION.search(line)
        if m is None:
            continue
        obj = float(m.group(2)) if m.group(2) != "NA" else math.nan
        trace.append((int(m.group(1)), obj, float(m.group(4)), time.perf_counter() - start))
        if reached is None and obj <= target_obj:
            reached = trace[-1]
        if (reached is not None or trace[-1][3] > args.cap) and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    proc.wait()
    wall = time.perf_counter() - start
    if proc.returncode != 0 or not trace:
        raise RuntimeError(f"wapiti failed ({proc.returncode}):\n{''.join(log[-20:])}")
    features = next(int(x.split()[-1]) for x in log if "nb features" in x)
    return {"trace": trace, "reached": reached, "wall": wall, "model": model,
            "features": features, "load": (load, os.getloadavg()[0])}  # fmt: skip


def reference(args, folder: Path) -> tuple[dict, Path]:
    """crfsdca's L-BFGS to a relative gap of ``--reference`` (one thread), and its model."""
    model = folder / "lbfgs.npz"
    cmd = [sys.executable, "-m", "crfsdca.cli", "train", args.dataset, "--solver", "lbfgs",
           "--tol", str(args.reference), "--threads", "1", "--json", "-q", "--model", str(model),
           *args.extra]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1]), model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "crfsdca-wapiti")
    parser.add_argument("--dataset", default="conll2000")
    parser.add_argument("--template", default=None, help="crfsdca's template [the dataset's]")
    parser.add_argument("--target", type=float, default=1e-3, help="relative P - P* to reach")
    parser.add_argument("--reference", type=float, default=1e-6, help="L-BFGS reference tol")
    parser.add_argument("--cap", type=float, default=1200.0, help="Wapiti's seconds at most")
    parser.add_argument("--nthread", type=int, default=2, help="Wapiti's threads")
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--max-sequences", type=int, default=None, help="a quick check")
    args = parser.parse_args()
    args.tol = args.target
    args.extra = ["--template", args.template] if args.template else []
    if args.max_sequences:
        args.extra += ["--max-sequences", str(args.max_sequences)]

    binary = build_wapiti(args.cache)
    encoder, train, test = load_encoded(
        args.dataset, template=args.template, max_sequences=args.max_sequences
    )
    bias_rows = encoder.default_bias_rows
    fm = FeatureMap(train.n_attributes, train.n_labels, n_bias_rows=bias_rows)
    problem = Problem(train=train, feature_map=fm)
    n, lam = train.n_sequences, problem.regularization
    rho2 = n * lam
    subset = f"{args.template or 'default'}-{args.max_sequences or 'all'}"
    folder = args.cache / f"{args.dataset}-{subset}"
    folder.mkdir(exist_ok=True)  # the data, both models: rewritten by every run
    write_wapiti_data(train, folder / "train.txt", bias_rows)
    write_wapiti_data(test, folder / "test.txt", bias_rows)
    print(f"{args.dataset}: n = {n}, N = {train.n_items}, K = {fm.n_labels}, A ="
          f" {fm.n_attributes}, bias rows {bias_rows}, d = {fm.n_features}; lambda = {lam:.6g}"
          f" -> rho2 = n lambda = {rho2:.6g}, rho1 = 0", flush=True)  # fmt: skip

    ref, ref_model = reference(args, folder)
    p_star = ref["primal"]
    w_ref = SequenceCRF.load(str(ref_model)).weights_
    print(f"P* = {p_star:.12g} (L-BFGS, certified gap {ref['gap']:.2e}); crfsdca's P of its"
          f" model read back: {problem.primal(w_ref):.12g}", flush=True)  # fmt: skip
    target_obj = n * p_star * (1 + args.target)
    for name in ("cores2", "cores1"):
        run_once(args, name)  # warm-up: numba's cache, the encoded cache, the page cache

    rows = []
    for rep in range(args.reps):
        wap = run_wapiti(args, binary, folder, rho2, target_obj)
        w = read_wapiti_model(wap["model"], fm, train.label_names)
        last = wap["trace"][-1]
        ours = n * problem.primal(w)
        print(f"rep {rep}: Wapiti nb features {wap['features']} (crfsdca d = {fm.n_features});"
              f" its last objective {last[1]:.2f} at iteration {last[0]}, crfsdca's n P of its"
              f" model {ours:.4f} (difference {ours - last[1]:+.4f}, relative"
              f" {(ours - last[1]) / ours:+.1e})", flush=True)  # fmt: skip
        for rel in (1e-1, 1e-2, 1e-3):
            hit = next((x for x in wap["trace"] if x[1] <= n * p_star * (1 + rel)), None)
            print(f"  Wapiti at rel {rel:g}: " + ("not reached" if hit is None else
                  f"iteration {hit[0]}, {hit[2]:.1f} s training, {hit[3]:.1f} s wall"))  # fmt: skip
        got = wap["reached"] or last
        rows.append(("Wapiti L-BFGS", f"-t {args.nthread}", got[3], f"{got[0]} iterations", "—",
                     got[1] / n - p_star, wap["load"], wap["reached"] is not None))  # fmt: skip
        for name, flag in (("cores2", "--threads 2"), ("cores1", "--threads 1")):
            r = run_once(args, name)
            rows.append(("crfsdca SDCA", flag, r["wall"], f"{r['epochs']:.1f} epochs",
                         f"{r['gap']:.2e}", r["primal"] - p_star, r["load"], True))  # fmt: skip

    print()
    print("| program | threads | wall s | iterations / epochs | certified gap P − D | P − P*"
          " | (P − P*)/P* | load |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for prog, flag, wall, work, gap, above, load, ok in rows:
        print(
            f"| {prog} | {flag} | {wall:.1f}{'' if ok else ' (cap)'} | {work} | {gap} |"
            f" {above:.2e} | {above / p_star:.2e} | {load[0]:.1f} → {load[1]:.1f} |"
        )


if __name__ == "__main__":
    main()
