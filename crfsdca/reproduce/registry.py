"""The registry of claims: one small checker function per claim, its rule in its docstring.

A checker takes the curves (:class:`~crfsdca.reproduce.verdicts.Costs`) and the budgets and
returns a :class:`Judged`: what was measured, the verdict ("holds", "partly", "does not hold",
"not judged") and, unless it holds, why. Register one with ``@register(key, figure, text,
datasets)``; ``datasets`` are those the claim needs (all of them), ``None`` = any of the run's.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

from crfsdca.reproduce.experiments import Budget
from crfsdca.reproduce.verdicts import FAILS, HOLDS, NOT_JUDGED, Costs, Missing

SMOKE = "[smoke test: --quick sizes, not evidence]"


@dataclass(frozen=True)
class Judged:
    measured: str
    verdict: str
    reason: str = ""

    @classmethod
    def of(cls, parts: list[str], verdict: str, why: str) -> Judged:
        """What was measured, ``parts`` joined by "; ", and ``why`` as the reason unless the
        claim holds."""
        return cls("; ".join(parts), verdict, "" if verdict == HOLDS else why)


@dataclass
class Claim:
    """The outcome of one claim on one set of traces."""

    key: str
    figure: str
    text: str
    rule: str
    measured: str = ""
    verdict: str = NOT_JUDGED
    reason: str = ""
    measurement: bool = False  # a number we report, not a claim of the paper
    smoke: bool = False  # judged on --quick sizes

    @property
    def holds(self) -> bool | None:
        """True / False for holds / does not hold, None otherwise (partly, not judged)."""
        return {HOLDS: True, FAILS: False}.get(self.verdict)

    @property
    def outcome(self) -> str:
        if self.measurement and self.verdict != NOT_JUDGED:
            return "measurement"
        return self.verdict

    def line(self) -> str:
        """One line: key, verdict (with the smoke-test mark under --quick) and the reason."""
        shown = self.reason and (self.verdict != HOLDS or self.measurement)
        why = f": {self.reason}" if shown else ""
        mark = f" {SMOKE}" if self.smoke else ""
        return f"{self.key}: {self.outcome}{mark}{why}"


Checker = Callable[[Costs, dict[str, Budget]], Judged]


@dataclass(frozen=True)
class ClaimSpec:
    key: str
    figure: str  # the figure (plan.FIGURES name) whose runs the claim reads
    text: str
    datasets: tuple[str, ...] | None
    check: Checker
    measurement: bool = False

    @property
    def rule(self) -> str:
        return " ".join(inspect.getdoc(self.check).split())

    def applies(self, budgets: dict[str, Budget]) -> bool:
        if self.datasets is None:
            return bool(budgets)
        return all(d in budgets for d in self.datasets)

    def judge(self, costs: Costs, budgets: dict[str, Budget], smoke: bool = False) -> Claim:
        claim = Claim(
            self.key, self.figure, self.text, self.rule, measurement=self.measurement, smoke=smoke
        )
        try:
            out = self.check(costs, budgets)
        except Missing as err:
            claim.measured, claim.reason = f"trace missing: {err}", "run failed or not run"
            return claim
        claim.measured, claim.verdict, claim.reason = out.measured, out.verdict, out.reason
        return claim


CLAIMS: dict[str, ClaimSpec] = {}


def register(
    key: str,
    figure: str,
    text: str,
    datasets: tuple[str, ...] | None = None,
    measurement: bool = False,
) -> Callable[[Checker], Checker]:
    def add(fn: Checker) -> Checker:
        if key in CLAIMS:
            raise ValueError(f"claim {key!r} registered twice")
        if not inspect.getdoc(fn):
            raise ValueError(f"claim {key!r}: its checker needs a docstring stating its rule")
        CLAIMS[key] = ClaimSpec(key, figure, text, datasets, fn, measurement)
        return fn

    return add


def present(budgets: dict[str, Budget], among: tuple[str, ...]) -> list[str]:
    """The datasets of ``among`` that this run has."""
    return [d for d in among if d in budgets]


def not_judged(measured: str, reason: str) -> Judged:
    return Judged(measured, NOT_JUDGED, reason)
