"""The paper's experiments as data: datasets, budgets, one :class:`Experiment` per trace.

An experiment is (dataset, solver, options, budget). Its digest (those inputs, the digest of
the code that runs it and the libraries' versions: ``provenance.cache_key``) names its trace
``OUT/traces/<digest>.jsonl``; figures that share a run (Fig. 4, 6 and 7 all use the same
SDCA-GAP run on NER) share its digest, so it is computed once. Its ``identity`` (the inputs
without the code) finds its trace in an archive of traces made by other code.

Besides solver runs, ``measure`` experiments record numbers that come from the data or a
solver's state rather than from a curve (Table 1, the starting points, the radii against the
per-sequence gaps, the memory of the states): cached, keyed and archived the same way.

Every problem is the dataset's default attribute template on the first ``max_sequences``
training sequences (``None``: all), no bias rows, restricted to the labels and attributes that
occur in that training set (CRFsuite's model, so that CRFsuite's L-BFGS minimises the same
objective), lambda = 1/n (``problem.py``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from crfsdca.reproduce.provenance import cache_key

DATASETS = ("ocr", "conll2000", "conll2002-ned", "ewt-pos")
SHORT = {"ocr": "OCR", "conll2000": "CONLL", "conll2002-ned": "NER", "ewt-pos": "POS"}
SPARSE = ("conll2000", "conll2002-ned", "ewt-pos")

#: the authors' starting point (sdca4crf): the chain Gibbs law with score 10 on every gold label
#: and gold transition, w = w_hat(mu); P(w) at that start is P(0) to ~1e-9 (see REPORT.md)
PAPER_START = "gibbs"
#: SDCA as the paper ran it (sub-precision 1e-3, the authors' start)
SDCA_BASE = {"line_search_tol": 1e-3, "start": PAPER_START}
#: OEG: the authors' start and Collins et al.'s learning-rate rule (halve on failure, x1.05 on
#: success, initial 0.5): see REPORT.md, "OEG step size"
OEG_BASE = {"start": PAPER_START, "learning_rate": 0.5, "learning_rate_growth": 1.05}


@dataclass(frozen=True)
class Budget:
    """Training subset and stopping rule of every run on one dataset."""

    max_sequences: int | None
    max_epochs: float
    stop_below: float = 1e-7  # stop once P - P* <= this (below the figures' floor)
    eval_every: float = 1.0


#: full run: subsets and epochs chosen to fit about an hour with --jobs 1 on two shared cores
#: (P* of the four subsets: about 18 minutes of it)
FULL_BUDGETS = {
    "ocr": Budget(max_sequences=3000, max_epochs=100),
    "conll2000": Budget(max_sequences=2500, max_epochs=50),
    "conll2002-ned": Budget(max_sequences=5000, max_epochs=30),
    "ewt-pos": Budget(max_sequences=1500, max_epochs=20),
}
#: --quick: small subsets and a few epochs, every figure (CI)
QUICK_BUDGETS = {
    "ocr": Budget(max_sequences=60, max_epochs=3),
    "conll2000": Budget(max_sequences=60, max_epochs=3),
    "conll2002-ned": Budget(max_sequences=60, max_epochs=3),
    "ewt-pos": Budget(max_sequences=60, max_epochs=3),
}


@dataclass(frozen=True)
class Experiment:
    """One run: ``solver`` is a crfsdca solver name, ``crfsuite`` or ``reference`` (P*)."""

    dataset: str
    solver: str
    options: tuple[tuple[str, Any], ...]
    budget: Budget
    label: str = field(default="", compare=False)

    @classmethod
    def make(
        cls, dataset: str, solver: str, budget: Budget, label: str = "", **options
    ) -> Experiment:
        return cls(dataset, solver, tuple(sorted(options.items())), budget, label)

    @property
    def opts(self) -> dict[str, Any]:
        return dict(self.options)

    def inputs(self) -> dict[str, Any]:
        """Everything the trace depends on (the label is presentation only): the experiment's
        own inputs and the code that runs it."""
        return {**self.own_inputs(), **cache_key()}

    def own_inputs(self) -> dict[str, Any]:
        """Dataset, solver, options and budget (what a trace's ``identity`` hashes)."""
        budget = self.budget
        if self.solver in ("reference", "measure"):  # P*, measurements: the problem alone
            budget = Budget(budget.max_sequences, 0.0, 0.0, 0.0)
        return {
            "dataset": self.dataset,
            "solver": self.solver,
            "options": self.opts,
            "budget": budget.__dict__,
        }

    @property
    def digest(self) -> str:
        """The cache key: 16 hex digits of the inputs with the code digest."""
        return _hash(self.inputs())

    @property
    def identity(self) -> str:
        """The inputs without the code: the same experiment run by other code."""
        return identity_of(self.own_inputs())

    @property
    def needs_reference(self) -> bool:
        """Whether its curves are read against P* (solver runs; not P* or measurements)."""
        return self.solver not in ("reference", "measure")

    @property
    def reference(self) -> Experiment:
        """The P* run of this experiment's problem."""
        return reference(self.dataset, self.budget)

    def describe(self) -> str:
        opts = " ".join(f"{k}={v}" for k, v in self.options)
        n = self.budget.max_sequences or "all"
        return f"{self.dataset}[n={n}] {self.solver} {opts}".strip()


def _hash(inputs: dict[str, Any]) -> str:
    text = json.dumps(inputs, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def identity_of(inputs: dict[str, Any]) -> str:
    """The identity of the experiment whose inputs (a trace header's ``experiment``) these are."""
    keys = ("dataset", "solver", "options", "budget")
    return _hash({k: inputs[k] for k in keys})


def reference(dataset: str, budget: Budget) -> Experiment:
    return Experiment.make(dataset, "reference", budget, label="P*", tol=1e-9)


def sdca(
    dataset: str,
    budget: Budget,
    sampling: str = "gap",
    non_uniformity: float = 0.8,
    label: str = "",
    **options,
) -> Experiment:
    """SDCA with the paper's defaults; non-uniformity 0 is plain uniform sampling."""
    if sampling == "uniform" or non_uniformity == 0.0:
        sampling, non_uniformity = "uniform", 0.0
    opts = {**SDCA_BASE, "sampling": sampling, "non_uniformity": non_uniformity, **options}
    return Experiment.make(dataset, "sdca", budget, label=label, **opts)


def baseline(dataset: str, budget: Budget, solver: str, label: str, **options) -> Experiment:
    """SAG-NUS, SAG-NUS*, OEG, L-BFGS or CRFsuite with the reproduction's options."""
    options = {**(OEG_BASE if solver == "oeg" else {}), **options}
    return Experiment.make(dataset, solver, budget, label=label, **options)


def fig4_runs(dataset: str, budget: Budget) -> list[Experiment]:
    """SDCA, SDCA-GAP, SAG-NUS, SAG-NUS*, OEG (Fig. 4, 6, 7)."""
    return [
        sdca(dataset, budget, "uniform", label="SDCA"),
        sdca(dataset, budget, "gap", 0.8, label="SDCA-GAP"),
        baseline(dataset, budget, "sag-nus", "SAG-NUS"),
        baseline(dataset, budget, "sag-nus-skip", "SAG-NUS*"),
        baseline(dataset, budget, "oeg", "OEG"),
    ]


def fig2_runs(dataset: str, budget: Budget, seed: int = 0) -> dict[str, Experiment]:
    """The five sampling schemes of Fig. 2 (seed 0: the runner's default, not in the digest)."""
    more = {"seed": seed} if seed else {}
    tag = f" (seed {seed})" if seed else ""
    d, b = dataset, budget
    return {
        "Uniform": sdca(d, b, "uniform", label="Uniform" + tag, **more),
        "Importance": sdca(d, b, "importance", 0.8, label="Importance" + tag, **more),
        "Gap": sdca(d, b, "gap", 0.8, label="Gap" + tag, **more),
        "GapxImp": sdca(d, b, "gap-importance", 0.8, label="Gap x Importance" + tag, **more),
        "Max": sdca(d, b, "max", 0.8, label="Max" + tag, **more),
    }


SEEDS = (0, 1, 2)
FRACTIONS = (0.0, 0.2, 0.5, 0.8, 1.0)


def nonuniformity_runs(dataset: str, budget: Budget) -> dict[float, Experiment]:
    """Gap sampling at every fraction of non-uniform draws (Fig. 3)."""
    return {f: sdca(dataset, budget, "gap", f, label=f"non-uniformity {f:g}") for f in FRACTIONS}


def fig8_runs(dataset: str, budget: Budget) -> dict[str, Experiment]:
    """crfsdca's one Newton step from 0.5 (``max_newton_iterations=1``, no predictor) and
    crfsdca's search at 1e-3; the authors' search at 0.5, 1e-2, 1e-3 is ``paper_search_runs``."""
    d, b = dataset, budget
    return {
        "one step": sdca(
            d,
            b,
            "gap",
            0.8,
            label="crfsdca, one Newton step from 0.5 (max_newton_iterations=1)",
            max_newton_iterations=1,
            line_search_start="half",
        ),
        "1e-3": sdca(d, b, "gap", 0.8, label="crfsdca search, sub-precision 1e-3"),
    }


#: datasets of crfsdca's footnote-4 starts and of the SAG-NUS constants' variants
LS_START_DATASETS = ("ocr", "conll2000", "conll2002-ned")
SAG_DATASETS = DATASETS

#: the authors' line search (sdca4crf's safe_newton, §6.2): float64 Newton from 0.5, no predictor
PAPER_SEARCH = {"line_search_method": "paper", "line_search_start": "half"}
#: its sub-precisions: §6.2's "0.01 or less" (1e-2, 1e-3, 1e-4) and Fig. 8's 0.5 (one step)
PAPER_TOLS = (1e-2, 1e-3, 1e-4, 0.5)


def paper_search_runs(dataset: str, budget: Budget) -> dict[str, Experiment]:
    """SDCA-GAP with the authors' line search at each of PAPER_TOLS (keys "0.01", "0.001",
    "0.0001", "0.5") and, at 1e-3, started from the sequence's previous step ("previous")."""
    d, b = dataset, budget
    out = {
        f"{t:g}": sdca(
            d,
            b,
            "gap",
            0.8,
            label=f"paper search, sub-precision {t:g}",
            line_search_tol=t,
            **PAPER_SEARCH,
        )  # fmt: skip
        for t in PAPER_TOLS
    }
    previous = {**PAPER_SEARCH, "line_search_start": "previous"}
    label = "paper search from the previous step"
    out["previous"] = sdca(d, b, "gap", 0.8, label=label, **previous)
    return out


def one_step_starts(dataset: str, budget: Budget) -> dict[str, Experiment]:
    """The authors' search at 0.5 (one step) and at 1e-3 from the paper's text's start (the
    epsilon-mix, App. A.1) instead of its code's: does the start explain Fig. 8's NER panel?"""
    d, b = dataset, budget
    return {
        t: sdca(
            d,
            b,
            "gap",
            0.8,
            label=f"paper search, sub-precision {float(t):g}, epsilon-mix start",
            line_search_tol=float(t),
            start="epsilon",
            **PAPER_SEARCH,
        )  # fmt: skip
        for t in ("0.5", "0.001")
    }


#: L-BFGS and CRFsuite run this many times the epoch budget in the wall-time figure, so that
#: they are not stopped before the stochastic methods' levels (runs still stop at 1e-7)
TIME_BUDGET_FACTOR = 4


def time_baselines(dataset: str, budget: Budget) -> list[Experiment]:
    """crfsdca's L-BFGS and CRFsuite's with TIME_BUDGET_FACTOR x the epoch budget."""
    b = Budget(budget.max_sequences, budget.max_epochs * TIME_BUDGET_FACTOR, budget.stop_below)
    return [
        baseline(dataset, b, "lbfgs", "L-BFGS (crfsdca)"),
        baseline(dataset, b, "crfsuite", "CRFsuite L-BFGS"),
    ]


DIFFICULTY_EPOCHS = 5  # uniform SDCA epochs before the per-sequence gaps are measured


def measure(dataset: str, kind: str, max_sequences: int | None, **options) -> Experiment:
    """A measurement (``measurements.KINDS``) on the first max_sequences sequences (None: the
    whole training set)."""
    return Experiment.make(
        dataset, "measure", Budget(max_sequences, 0.0), label=kind, kind=kind, **options
    )


def measurements(dataset: str, budget: Budget) -> dict[str, Experiment]:
    """Table 1 of the full set and of the subset, the radii against the gaps on the subset, and
    (OCR) the starting points on the full set with crfsdca's default model."""
    out = {
        "full": measure(dataset, "data", None),
        "subset": measure(dataset, "data", budget.max_sequences),
        "difficulty": measure(
            dataset, "difficulty", budget.max_sequences, epochs=DIFFICULTY_EPOCHS
        ),
    }
    if dataset == "ocr":
        out["start"] = measure(dataset, "start", None, model="default")
    return out


def line_search_start_runs(dataset: str, budget: Budget) -> dict[str, Experiment]:
    """SDCA-GAP with the Newton search started at crfsdca's model point, 0.5, the last step."""
    d, b = dataset, budget
    return {
        "model": sdca(d, b, "gap", 0.8, label="start: quadratic model (crfsdca default)"),
        "half": sdca(d, b, "gap", 0.8, label="start: 0.5", line_search_start="half"),
        "previous": sdca(
            d, b, "gap", 0.8, label="start: previous step", line_search_start="previous"
        ),
    }


REFRESH_EVERY = 5  # epochs; Osokin et al. refresh every ~10, more often favours refreshing


def refresh_runs(dataset: str, budget: Budget) -> dict[str, Experiment]:
    """SDCA-GAP without and with an exact pass over every gap each REFRESH_EVERY epochs."""
    d, b = dataset, budget
    return {
        "none": sdca(d, b, "gap", 0.8, label="SDCA-GAP, no refresh"),
        "refresh": sdca(
            d,
            b,
            "gap",
            0.8,
            label=f"SDCA-GAP, all gaps recomputed every {REFRESH_EVERY} epochs",
            refresh_every=REFRESH_EVERY,
        ),
    }


def start_runs(dataset: str, budget: Budget) -> dict[str, Experiment]:
    """SDCA-GAP from the epsilon-mix, the authors' start and the uniform law (App. A.1)."""
    d, b = dataset, budget
    return {
        "epsilon": sdca(
            d, b, "gap", 0.8, label="epsilon-mix, eps=1e-3 (crfsdca default)", start="epsilon"
        ),
        "authors": sdca(d, b, "gap", 0.8, label="Gibbs score 10 (authors' start)"),
        "uniform": sdca(
            d, b, "gap", 0.8, label="uniform law (OEG's egstra start)", start="uniform"
        ),
    }


#: SAG-NUS constants that are reconstructions (baselines.md §3-4), one changed per variant
SAG_VARIANTS = {
    "L_i x0.9 on revisit": ("sag-nus", {"revisit_factor": 0.9}),
    "first visit L_i = mean/2": ("sag-nus", {"first_visit": "half-mean"}),
    "L_max halves every 4 n": ("sag-nus", {"lipschitz_halflife": 4.0}),
    "L_i x1.5 per failed test": ("sag-nus", {"lipschitz_growth": 1.5}),
    "* L_i x0.9 on revisit": ("sag-nus-skip", {"revisit_factor": 0.9}),
    "* skipped visits decay L_max": ("sag-nus-skip", {"skipped_visit": "decay"}),
    "* L_i x1.5 per failed test": ("sag-nus-skip", {"lipschitz_growth": 1.5}),
    "* skip c_i searches (not 2^(c_i-1))": ("sag-nus-skip", {"skip_line_search": "linear"}),
}


def sag_variant_runs(dataset: str, budget: Budget) -> dict[str, Experiment]:
    """SAG-NUS and SAG-NUS* with one reconstructed constant changed (label -> experiment)."""
    out = {}
    for name, (solver, options) in SAG_VARIANTS.items():
        base = "SAG-NUS" + ("*" if solver == "sag-nus-skip" else "")
        label = f"{base}, {name.lstrip('* ')}"
        out[name] = baseline(dataset, budget, solver, label, **options)
    return out
