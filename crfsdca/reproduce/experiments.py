"""The paper's experiments as data: datasets, budgets, one :class:`Experiment` per trace.

An experiment is (dataset, solver, options, budget). Its digest (inputs + crfsdca's version)
names its trace ``OUT/traces/<digest>.jsonl``; figures that share a run (Fig. 4, 6 and 7 all
use the same SDCA-GAP run on NER) share its digest, so it is computed once.

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

from crfsdca import __version__

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
        """Everything the trace depends on (the label is presentation only)."""
        budget = self.budget
        if self.solver == "reference":  # P* depends on the problem alone
            budget = Budget(budget.max_sequences, 0.0, 0.0, 0.0)
        return {
            "dataset": self.dataset,
            "solver": self.solver,
            "options": self.opts,
            "budget": budget.__dict__,
            "version": __version__,
        }

    @property
    def digest(self) -> str:
        text = json.dumps(self.inputs(), sort_keys=True, default=repr)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def reference(self) -> Experiment:
        """The P* run of this experiment's problem."""
        return reference(self.dataset, self.budget)

    def describe(self) -> str:
        opts = " ".join(f"{k}={v}" for k, v in self.options)
        n = self.budget.max_sequences or "all"
        return f"{self.dataset}[n={n}] {self.solver} {opts}".strip()


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


def baseline(dataset: str, budget: Budget, solver: str, label: str) -> Experiment:
    """SAG-NUS, SAG-NUS*, OEG, L-BFGS or CRFsuite with the reproduction's options."""
    options = OEG_BASE if solver == "oeg" else {}
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
