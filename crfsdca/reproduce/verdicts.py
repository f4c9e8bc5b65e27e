"""How a claim is judged: costs read off the traces, whole-curve races and the verdict rules.

A *race* compares two curves of P - P* over their common range of x (updates / n, oracle
calls / n, epochs or seconds): for every level 10^1, 10^0, ..., 10^-7 that one of the two
reaches within that range (and not both at x = 0), the x at which each first gets there. At a
level, A is *ahead* when x_A * TIE < x_B and B's evaluation at or after x_A still shows B
above the level (curves are known at their evaluations only: SAG-NUS and OEG are evaluated
every epoch of oracle calls, i.e. at fractions of an epoch of updates); when B does not get
there within the common range, when B is still above the level at x_A * TIE. *Behind* is the
mirror case, *tied* the rest. From the counts over the levels:

- ``order``: ``ahead`` (A ahead at more than half of the levels and behind at none),
  ``behind`` (the mirror), ``tied`` (ahead and behind each at < 1/3 of the levels), else
  ``partly ahead`` (behind at none), ``partly behind`` (ahead at none) or ``mixed`` (ahead at
  some levels, behind at others). (A first version asked for 2/3 of the levels; the levels
  10^1 and 10^0 are reached at the first evaluations by nearly every run, so they are tied by
  construction);
- ``faster`` (claim "A is faster than B"): ahead -> holds, partly ahead or mixed -> partly,
  tied, partly behind or behind -> does not hold; "much faster" is the same rule with a lead
  of a factor 1.5 (PAR) for TIE;
- ``on_par`` (claim "A and B are on par", band r): at a level, neither leads the other by a
  factor r (the rule of *ahead* with r for TIE); at every level -> holds, at half of them or
  more -> partly, else does not hold. Its rows count the levels inside and outside the band
  r, not the 10% leads.

A verdict over several datasets (``combine``): holds if it holds on all, does not hold if it
holds on none and is partly on none, partly otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from crfsdca.reproduce.experiments import Experiment
from crfsdca.reproduce.figures import Traces, x_values

THRESHOLD = 1e-4  # the single level of the "cost" columns of the report
LEVELS = tuple(10.0**k for k in range(1, -8, -1))
TIE = 1.1  # x within 10% at a level: tied
PAR = 1.5  # "on par" / "roughly the same": x within a factor 1.5 at every level
SAME = 1.25  # "no (significant) difference": x within 25% at every level

HOLDS, PARTLY, FAILS, NOT_JUDGED = "holds", "partly", "does not hold", "not judged"
VERDICTS = (HOLDS, PARTLY, FAILS, NOT_JUDGED)


class Missing(Exception):
    """A trace (or its P*) is missing: the claim is not judged."""


@dataclass(frozen=True)
class Race:
    """Level-by-level comparison of curve A against curve B (module docstring)."""

    a: str
    b: str
    x: str
    levels: tuple[float, ...]
    xa: tuple[float, ...]  # inf: not reached within the common range
    xb: tuple[float, ...]
    common: float  # the end of the common range of x
    #: x of each curve's last evaluation above the level (None: resolution not limited)
    prev_a: tuple[float, ...] | None = None
    prev_b: tuple[float, ...] | None = None

    def ratios(self) -> list[float]:
        return [_ratio(p, q) for p, q in zip(self.xa, self.xb, strict=True)]

    def counts(self, band: float = TIE) -> tuple[int, int, int]:
        """(ahead, behind, tied) of A, a lead being a factor ``band``."""
        prev_a, prev_b = self.prev_a or self.xa, self.prev_b or self.xb
        ahead = behind = 0
        for p, q, p0, q0 in zip(self.xa, self.xb, prev_a, prev_b, strict=True):
            ahead += _leads(p, q, q0, band)
            behind += _leads(q, p, p0, band)
        return ahead, behind, len(self.levels) - ahead - behind

    def order(self, band: float = TIE) -> str:
        n = len(self.levels)
        if n == 0:
            return "none"
        ahead, behind, _ = self.counts(band)
        if 3 * ahead < n and 3 * behind < n:
            return "tied"
        if ahead and behind:
            return "mixed"
        if behind == 0:
            return "ahead" if 2 * ahead > n else "partly ahead"
        return "behind" if 2 * behind > n else "partly behind"

    def within(self, band: float) -> int:
        """Number of levels where neither curve leads the other by more than ``band`` (the
        rule of ``ahead`` with the factor ``band`` instead of TIE)."""
        return len(self.levels) - sum(self.counts(band)[:2])

    def describe(self, band: float = TIE) -> str:
        """The x of both curves at every level, then the counts of leads by a factor ``band``
        (the verdict's own band)."""
        if not self.levels:
            return f"{self.a} vs {self.b}: no level reached"
        cells = "; ".join(
            f"{lv:.0e}: {_fmt(p)}/{_fmt(q)}"
            for lv, p, q in zip(self.levels, self.xa, self.xb, strict=True)
        )
        ahead, behind, tied = self.counts(band)
        lead = "10%" if band == TIE else f"a factor {band:g}"
        return (
            f"{self.a} vs {self.b}, {self.x}/n to reach each level within {self.common:.1f}"
            f" ({cells}): leads by {lead}: ahead {ahead}, behind {behind}, tied {tied}"
        )


def _leads(p: float, q: float, q0: float, factor: float = TIE) -> bool:
    """A (first at or below the level at x = p) leads B (first at q, last above at q0): p is
    more than 10% before q and B was still above at or after p. When B never gets there
    within the common range, q is unknown beyond q0: B must still be above at p * TIE."""
    if math.isinf(q):
        return math.isfinite(p) and p * factor <= q0
    return p * factor < q and p <= q0


def _fmt(x: float) -> str:
    return "never" if math.isinf(x) else f"{x:.3g}"


def _ratio(a: float, b: float) -> float:
    if math.isinf(a) and math.isinf(b):
        return math.nan
    if b == 0:
        return 1.0 if a == 0 else math.inf
    return a / b


def faster(race: Race, band: float = TIE) -> str:
    """Claim "A is faster than B" (``band``: the factor a lead needs; PAR for "much")."""
    if not race.levels:
        return NOT_JUDGED
    return {"ahead": HOLDS, "partly ahead": PARTLY, "mixed": PARTLY}.get(race.order(band), FAILS)


def on_par(race: Race, band: float = PAR) -> str:
    n = len(race.levels)
    if n == 0:
        return NOT_JUDGED
    k = race.within(band)
    return HOLDS if k == n else PARTLY if 2 * k >= n else FAILS


def combine(verdicts: list[str]) -> str:
    """One verdict from several (datasets, seeds, variants); not judged if any is."""
    if not verdicts or NOT_JUDGED in verdicts:
        return NOT_JUDGED
    if all(v == HOLDS for v in verdicts):
        return HOLDS
    if all(v == FAILS for v in verdicts):
        return FAILS
    return PARTLY


def share(values: list[bool]) -> str:
    """holds if all, does not hold if none, partly otherwise."""
    if not values:
        return NOT_JUDGED
    return HOLDS if all(values) else FAILS if not any(values) else PARTLY


def spearman(x, y) -> float:
    """Spearman's rank correlation of two sequences (0 when one is constant; ties broken by
    position)."""
    rx = np.argsort(np.argsort(x)).astype(float)
    ry = np.argsort(np.argsort(y)).astype(float)
    if rx.std() == 0 or ry.std() == 0:
        return 0.0
    return float(np.corrcoef(rx, ry)[0, 1])


class Costs:
    """Curves of experiments read off their traces; Missing when a trace or P* is absent."""

    def __init__(self, traces: Traces) -> None:
        self.traces = traces

    def trace(self, exp: Experiment):
        trace = self.traces.get(exp)
        if trace is None or not trace.records:
            raise Missing(exp.describe())
        return trace

    def measurement(self, exp: Experiment) -> dict:
        """The numbers of a ``measure`` experiment (Missing when it was not run)."""
        trace = self.traces.get(exp)
        if trace is None:
            raise Missing(exp.describe())
        return trace.header["measurement"]

    def p_star(self, exp: Experiment) -> float:
        p_star = self.traces.p_star(exp)
        if p_star is None:
            raise Missing(f"P* of {exp.describe()}")
        return p_star

    def curve(self, exp: Experiment, x: str = "updates") -> tuple[np.ndarray, np.ndarray]:
        """(x, P - P*) of every evaluation."""
        trace, p_star = self.trace(exp), self.p_star(exp)
        return x_values(trace, x), np.array([r.primal - p_star for r in trace.records])

    def cost(self, exp: Experiment, x: str = "updates", level: float = THRESHOLD) -> float:
        """x of the first evaluation with P - P* <= level (inf: never)."""
        xs, sub = self.curve(exp, x)
        hit = np.flatnonzero(sub <= level)
        return float(xs[hit[0]]) if hit.size else math.inf

    def final(self, exp: Experiment) -> float:
        return float(self.curve(exp)[1][-1])

    def last_x(self, exp: Experiment, x: str = "updates") -> float:
        return float(self.curve(exp, x)[0][-1])

    def race(self, a: Experiment, b: Experiment, x: str = "updates") -> Race:
        (xa, sa), (xb, sb) = self.curve(a, x), self.curve(b, x)
        common = min(float(xa[-1]), float(xb[-1]))
        levels, ca, cb, qa, qb = [], [], [], [], []
        for level in LEVELS:
            (pa, pa0), (pb, pb0) = _first(xa, sa, level, common), _first(xb, sb, level, common)
            if (math.isinf(pa) and math.isinf(pb)) or (pa == 0 and pb == 0):
                continue
            levels.append(level)
            ca.append(pa)
            cb.append(pb)
            qa.append(pa0)
            qb.append(pb0)
        return Race(
            a.label, b.label, x, tuple(levels), tuple(ca), tuple(cb), common, tuple(qa), tuple(qb)
        )

    def show(self, exp: Experiment, x: str = "updates") -> str:
        c = self.cost(exp, x)
        reach = f"{c:.1f}" if math.isfinite(c) else "never"
        return f"{exp.label} {reach} (final {self.final(exp):.1e} at {self.last_x(exp, x):.1f})"

    def records(self, exp: Experiment):
        return self.trace(exp).records


def _first(xs: np.ndarray, sub: np.ndarray, level: float, common: float) -> tuple[float, float]:
    """(x of the first evaluation at or below ``level`` within the common range, inf if none;
    x of the last evaluation before it, i.e. the last one known to be above the level)."""
    inside = xs <= common
    hit = np.flatnonzero((sub <= level) & inside)
    if hit.size:
        k = int(hit[0])
        return float(xs[k]), float(xs[k - 1]) if k > 0 else -math.inf
    return math.inf, float(xs[inside][-1]) if inside.any() else -math.inf
