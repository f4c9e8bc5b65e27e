"""Reproduce the paper's figures and claims: experiments as data, cached traces, a report.

>>> from crfsdca.reproduce import reproduce
>>> outcome = reproduce(["2"], quick=True, out="repro")  # doctest: +SKIP
>>> outcome.report  # doctest: +SKIP
PosixPath('repro/REPORT.md')
"""

from crfsdca.reproduce.experiments import DATASETS, FULL_BUDGETS, QUICK_BUDGETS, Budget, Experiment
from crfsdca.reproduce.pipeline import Outcome, UsageError, check_names, reproduce
from crfsdca.reproduce.plan import FIGURES
from crfsdca.reproduce.runner import run_all, run_experiment, trace_path

__all__ = [
    "DATASETS",
    "FIGURES",
    "FULL_BUDGETS",
    "QUICK_BUDGETS",
    "Budget",
    "Experiment",
    "Outcome",
    "UsageError",
    "check_names",
    "reproduce",
    "run_all",
    "run_experiment",
    "trace_path",
]
