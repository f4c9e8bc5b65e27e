"""The paper's claims, checked on the traces: what we measured and whether the claim holds.

Cost of a run = the x value (updates / n, oracle calls / n, seconds) of the first evaluation at
which P - P* <= THRESHOLD; runs that never get there rank after those that do, by their final
sub-optimality. ``holds`` is True, False, or None when a trace is missing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from crfsdca.reproduce.experiments import (
    SHORT,
    SPARSE,
    Budget,
    Experiment,
    baseline,
    fig4_runs,
    sdca,
)
from crfsdca.reproduce.figures import Traces, x_values

THRESHOLD = 1e-4


@dataclass
class Claim:
    key: str
    figure: str
    text: str
    measured: str = ""
    holds: bool | None = None
    reason: str = ""

    measurement: bool = False  # a number we report, not a claim of the paper

    @property
    def outcome(self) -> str:
        if self.measurement and self.holds is not None:
            return "measurement"
        return {True: "holds", False: "does not hold", None: "missing"}[self.holds]


class _Missing(Exception):
    pass


class Costs:
    """Cost to THRESHOLD and final sub-optimality of experiments, from their traces."""

    def __init__(self, traces: Traces) -> None:
        self.traces = traces

    def _trace(self, exp: Experiment):
        trace, p_star = self.traces.get(exp), self.traces.p_star(exp)
        if trace is None or p_star is None:
            raise _Missing(exp.describe())
        return trace, p_star

    def cost(self, exp: Experiment, x: str = "updates", thr: float = THRESHOLD) -> float:
        trace, p_star = self._trace(exp)
        xs = x_values(trace, x)
        hit = [k for k, r in enumerate(trace.records) if r.primal - p_star <= thr]
        return float(xs[hit[0]]) if hit else math.inf

    def best(self, exp: Experiment) -> float:
        """The lowest P - P* of the run."""
        trace, p_star = self._trace(exp)
        return min(r.primal for r in trace.records) - p_star

    def final(self, exp: Experiment) -> float:
        trace, p_star = self._trace(exp)
        return trace.records[-1].primal - p_star

    def key(self, exp: Experiment, x: str = "updates") -> tuple[float, float]:
        return self.cost(exp, x), self.final(exp)

    def last_x(self, exp: Experiment, x: str = "updates") -> float:
        return float(x_values(self._trace(exp)[0], x)[-1])

    def subopt_at(self, exp: Experiment, h: float, x: str = "updates") -> float:
        """P - P* of the last evaluation at or before x = h."""
        trace, p_star = self._trace(exp)
        xs = x_values(trace, x)
        k = max(int(np.searchsorted(xs, h, side="right")) - 1, 0)
        return trace.records[k].primal - p_star

    def less(self, a: Experiment, b: Experiment, x: str = "updates") -> bool:
        """a is faster than b over their common range of x: the first to reach THRESHOLD
        within it, or (neither reaches it) the lower sub-optimality at its end."""
        h = min(self.last_x(a, x), self.last_x(b, x))
        ca, cb = (v if v <= h else math.inf for v in (self.cost(a, x), self.cost(b, x)))
        if math.isfinite(ca) or math.isfinite(cb):
            return ca < cb
        return self.subopt_at(a, h, x) < self.subopt_at(b, h, x)

    def show(self, exp: Experiment, x: str = "updates") -> str:
        c = self.cost(exp, x)
        reach = f"{c:.1f}" if math.isfinite(c) else "never"
        return f"{exp.label} {reach} (final {self.final(exp):.1e} at {self.last_x(exp, x):.1f})"

    def test_error(self, exp: Experiment) -> float:
        return self._trace(exp)[0].records[-1].test_error


def _ratio_runs(c: Costs, a: Experiment, b: Experiment, x: str = "updates") -> tuple[float, float]:
    """(cost(a) / cost(b), level): costs to reach THRESHOLD, or, when one of the two never
    gets there, the deepest sub-optimality both reach (the level)."""
    level = max(THRESHOLD, c.best(a), c.best(b))
    return _ratio(c.cost(a, x, level), c.cost(b, x, level)), level


def _ratio(a: float, b: float) -> float:
    if math.isinf(a) and math.isinf(b):
        return math.nan
    return a / b if b > 0 else math.inf


def check_claims(traces: Traces, budgets: dict[str, Budget]) -> list[Claim]:
    """Every claim whose datasets are in ``budgets``; traces missing -> holds None."""
    c = Costs(traces)
    b = budgets
    out: list[Claim] = []

    def claim(key, fig, text, datasets, fn, measurement=False):
        if not all(d in b for d in datasets):
            return
        item = Claim(key, fig, text, measurement=measurement)
        try:
            item.measured, item.holds, item.reason = fn()
        except _Missing as err:
            item.measured, item.holds, item.reason = (
                f"trace missing: {err}",
                None,
                "run failed or not run",
            )
        out.append(item)

    thr = f"updates/n to P-P*<={THRESHOLD:g}"

    def fig2():
        d = "ocr"
        runs = {
            e.label: e
            for e in (
                sdca(d, b[d], "uniform", label="Uniform"),
                sdca(d, b[d], "importance", 0.8, label="Importance"),
                sdca(d, b[d], "gap", 0.8, label="Gap"),
                sdca(d, b[d], "gap-importance", 0.8, label="GapxImp"),
                sdca(d, b[d], "max", 0.8, label="Max"),
            )
        }
        return runs, f"{thr}: " + "; ".join(c.show(e) for e in runs.values())

    def gap_best():
        runs, text = fig2()
        wins = [k for k in runs if all(c.less(runs[k], runs[j]) for j in runs if j != k)]
        ok = wins == ["Gap"]
        return text, ok, "" if ok else f"{(wins or ['no scheme'])[0]} is fastest here"

    def max_fails():
        runs, text = fig2()
        mx, uni = runs["Max"], runs["Uniform"]
        ok = math.isinf(c.cost(mx)) and c.final(mx) >= 10 * c.final(uni)
        why = "Max reaches the threshold or ends within x10 of Uniform's final sub-optimality"
        return text, ok, "" if ok else why

    def importance_worse():
        runs, text = fig2()
        ok = c.less(runs["Uniform"], runs["Importance"])
        return text, ok, "" if ok else "importance sampling is not slower than uniform here"

    def gapimp_worse():
        runs, text = fig2()
        ok = c.less(runs["Gap"], runs["GapxImp"])
        return text, ok, "" if ok else "Gap x Importance is not slower than Gap here"

    claim("fig2-gap-best", "2", "Gap sampling is best on OCR", ["ocr"], gap_best)
    claim("fig2-max-fails", "2", "Max sampling fails to converge", ["ocr"], max_fails)
    claim(
        "fig2-importance",
        "2",
        "Importance sampling is worse than uniform",
        ["ocr"],
        importance_worse,
    )
    claim("fig2-gapimp", "2", "Gap x Importance is worse than Gap", ["ocr"], gapimp_worse)

    def nonuniformity():
        d = "conll2002-ned"
        fr = (0.0, 0.2, 0.5, 0.8, 1.0)
        runs = [sdca(d, b[d], "gap", f, label=f"{f:g}") for f in fr]

        text = f"{thr} by non-uniformity: " + "; ".join(c.show(e) for e in runs)
        ok = all(not c.less(runs[k], runs[k + 1]) for k in range(3))
        return text, ok, "" if ok else "the cost does not decrease monotonically up to 0.8"

    claim(
        "fig3-nonuniformity",
        "3",
        "More non-uniformity helps on NER (up to 0.8)",
        ["conll2002-ned"],
        nonuniformity,
    )

    def by_updates(d):
        return {e.label: e for e in fig4_runs(d, b[d])}

    def oeg_par():
        parts, ok = [], True
        for d in b:
            r = by_updates(d)
            ratio, level = _ratio_runs(c, r["OEG"], r["SDCA"])
            parts.append(
                f"{SHORT[d]}: {c.show(r['SDCA'])}, {c.show(r['OEG'])}; updates to {level:.0e}:"
                f" OEG/SDCA = {ratio:.2f}"
            )
            ok = ok and 0.67 <= ratio <= 1.5
        return f"{thr}: " + "; ".join(parts), ok, "" if ok else "OEG/SDCA outside [0.67, 1.5]"

    def gap_vs_sag():
        parts, ok = [], True
        for d in [d for d in SPARSE if d in b]:
            r = by_updates(d)
            parts.append(f"{SHORT[d]}: {c.show(r['SDCA-GAP'])} vs {c.show(r['SAG-NUS'])}")
            ok = ok and c.less(r["SDCA-GAP"], r["SAG-NUS"])
        return (
            f"{thr}: " + "; ".join(parts),
            ok,
            "" if ok else "SAG-NUS needs fewer updates somewhere",
        )

    def gap_vs_oeg():
        parts, ok = [], True
        for d in b:
            r = by_updates(d)
            parts.append(f"{SHORT[d]}: {c.show(r['SDCA-GAP'])} vs {c.show(r['OEG'])}")
            ok = ok and c.less(r["SDCA-GAP"], r["OEG"])
        return f"{thr}: " + "; ".join(parts), ok, "" if ok else "OEG needs fewer updates somewhere"

    def ocr_sag():
        r = by_updates("ocr")
        ok = c.less(r["SAG-NUS"], r["SDCA-GAP"])
        return (
            f"{thr}: {c.show(r['SDCA-GAP'])}, {c.show(r['SAG-NUS'])}",
            ok,
            "" if ok else "SDCA-GAP needs fewer updates than SAG-NUS on OCR here",
        )

    def oracle_calls():
        parts, ok = [], True
        for d in b:
            r = by_updates(d)
            g, s = c.cost(r["SDCA-GAP"], "oracle_calls"), c.cost(r["SAG-NUS*"], "oracle_calls")
            parts.append(f"{SHORT[d]}: SDCA-GAP {g:.1f}, SAG-NUS* {s:.1f}")
            if d in SPARSE:
                ok = ok and c.less(r["SDCA-GAP"], r["SAG-NUS*"], "oracle_calls")
        text = f"oracle calls/n to P-P*<={THRESHOLD:g} (inf = never): " + "; ".join(parts)
        return text, ok, "" if ok else "SAG-NUS* needs fewer oracle calls on a sparse dataset"

    all4 = list(b)
    claim(
        "fig4-sdca-oeg-par", "4", "SDCA and OEG are on par in updates (all datasets)", all4, oeg_par
    )
    claim(
        "fig4-gap-vs-sag",
        "4",
        "SDCA-GAP needs fewer updates than SAG-NUS on the sparse datasets",
        [d for d in SPARSE if d in b] or ["none"],
        gap_vs_sag,
    )
    claim(
        "fig4-gap-vs-oeg",
        "4",
        "SDCA-GAP needs fewer updates than OEG (all datasets)",
        all4,
        gap_vs_oeg,
    )
    claim(
        "fig4-ocr-sag", "4", "On OCR, SAG-NUS needs fewer updates than SDCA-GAP", ["ocr"], ocr_sag
    )
    claim(
        "fig4-oracle",
        "4/6",
        "By oracle calls SDCA-GAP is faster than SAG-NUS* on the sparse datasets",
        all4,
        oracle_calls,
    )

    def test_error():
        parts, ok = [], True
        for d in b:
            errs = {e.label: c.test_error(e) for e in fig4_runs(d, b[d])}
            spread = max(errs.values()) - min(errs.values())
            parts.append(
                f"{SHORT[d]}: "
                + ", ".join(f"{k} {v:.4f}" for k, v in errs.items())
                + f" (spread {spread:.4f})"
            )
            ok = ok and spread <= 0.005
        return "final test error: " + "; ".join(parts), ok, "" if ok else "spread above 0.5 points"

    claim(
        "fig7-test-error",
        "7",
        "All methods reach the same test error (spread <= 0.5 points)",
        all4,
        test_error,
    )

    def fig8(d):
        return (
            sdca(
                d,
                b[d],
                "gap",
                0.8,
                label="one step",
                max_newton_iterations=1,
                line_search_start="half",
            ),
            sdca(d, b[d], "gap", 0.8, label="1e-2", line_search_tol=1e-2),
            sdca(d, b[d], "gap", 0.8, label="1e-3"),
        )

    def one_step_ner():
        one, _, ref = fig8("conll2002-ned")
        ok = (math.isinf(c.cost(one)) and math.isfinite(c.cost(ref))) or c.final(one) > 100 * max(
            c.final(ref), 1e-12
        )
        return (
            f"{thr}: {c.show(one)}; {c.show(ref)}",
            ok,
            (
                ""
                if ok
                else "one Newton step converges on NER here; crfsdca's single step is rtsafe's"
                " safeguarded step (it stays inside the bracket of [0, 1] where the dual's"
                " derivative changes sign), so it cannot overshoot as a plain Newton step can"
            ),
        )

    def one_step_pos():
        one, _, ref = fig8("ewt-pos")
        ratio, level = _ratio_runs(c, one, ref)
        ok = math.isfinite(ratio) and ratio <= 1.1
        return (
            f"{thr}: {c.show(one)}; {c.show(ref)}; updates to {level:.0e}: ratio {ratio:.2f}",
            ok,
            "" if ok else "one Newton step slows SDCA-GAP on POS (ratio > 1.1)",
        )

    def tol_same():
        parts, ok = [], True
        for d in ("conll2002-ned", "ewt-pos"):
            _, e2, e3 = fig8(d)
            ratio, level = _ratio_runs(c, e2, e3)
            parts.append(
                f"{SHORT[d]}: {c.show(e2)}; {c.show(e3)}; updates to {level:.0e}: ratio {ratio:.2f}"
            )
            ok = ok and math.isfinite(ratio) and abs(ratio - 1) <= 0.1
        return (
            f"{thr}: " + "; ".join(parts),
            ok,
            "" if ok else "1e-2 and 1e-3 differ by more than 10%",
        )

    claim(
        "fig8-one-step-ner",
        "8",
        "One Newton step fails to converge on NER",
        ["conll2002-ned"],
        one_step_ner,
    )
    claim(
        "fig8-one-step-pos",
        "8",
        "One Newton step makes no difference on POS",
        ["ewt-pos"],
        one_step_pos,
    )
    claim(
        "fig8-tol",
        "8",
        "Sub-precision 1e-2 and 1e-3 give the same convergence",
        ["conll2002-ned", "ewt-pos"],
        tol_same,
    )

    def ratios():
        parts, within, direction, late, seen_late = [], True, True, True, False
        for d in ("conll2000", "ocr"):
            for f in (0.0, 0.8, 1.0):
                trace = traces.get(sdca(d, b[d], "gap", f))
                if trace is None:
                    raise _Missing(f"{d} non-uniformity {f}")
                recs = [x for x in trace.records if x.epoch > 0 and x.gap > 0]
                r = np.array([x.gap_estimate / x.gap for x in recs])
                e = np.array([x.epoch for x in recs])
                keep = np.isfinite(r)
                r, e = r[keep], e[keep]
                if r.size == 0:
                    continue
                r5 = r[e >= 5]
                tail = f", epochs >= 5 [{r5.min():.2f}, {r5.max():.2f}]" if r5.size else ""
                parts.append(
                    f"{SHORT[d]} {f:g}: [{r.min():.2f}, {r.max():.2f}] median {np.median(r):.2f}"
                    + tail
                )
                within = within and r.min() >= 0.5 and r.max() <= 2.0
                late = late and (r5.size == 0 or (r5.min() >= 0.5 and r5.max() <= 2.0))
                seen_late = seen_late or r5.size > 0
                direction = direction and ((np.median(r) > 1) if f == 0.0 else (np.median(r) < 1))
        return "; ".join(parts), (within, direction, late and seen_late)

    def within2():
        text, (within, _, late) = ratios()
        why = (
            "a ratio leaves [0.5, 2]. Above 2 early: the estimate is the mean of stale"
            " per-sequence gaps initialised to 100, and a sequence not yet drawn keeps its 100"
            " (uniform sampling leaves about e^-k of them after k epochs). Below 0.5 late, with"
            " gap sampling: sequences whose stale g_i is small are rarely redrawn while their"
            " true gaps no longer are, once the true gap is tiny"
            + ("; from epoch 5 on it stays within [0.5, 2]" if late else "")
        )
        return (
            f"gap estimate / true gap, epochs >= 1: {text}",
            within,
            "" if within else why,
        )

    def direction():
        text, (_, d, _) = ratios()
        return (f"median ratio: {text}", d, "" if d else "not (uniform > 1 and gap sampling < 1)")

    claim(
        "fig9-within-2",
        "9",
        "The gap estimate stays within x2 of the true gap",
        ["conll2000", "ocr"],
        within2,
    )
    claim(
        "fig9-direction",
        "9",
        "Gap sampling underestimates, uniform overestimates the gap",
        ["conll2000", "ocr"],
        direction,
    )

    def wall_time():
        parts = []
        for d in b:
            runs = [
                *fig4_runs(d, b[d]),
                baseline(d, b[d], "lbfgs", "L-BFGS"),
                baseline(d, b[d], "crfsuite", "CRFsuite"),
            ]
            cells = []
            for e in runs:
                s = c.cost(e, "seconds")
                cells.append(f"{e.label} {s:.1f}s" if math.isfinite(s) else f"{e.label} never")
            parts.append(f"{SHORT[d]}: " + ", ".join(cells))
        return (
            f"seconds to P-P*<={THRESHOLD:g} (one thread each, shared machine): "
            + "; ".join(parts),
            True,
            "not a claim of the paper",
        )

    claim(
        "time-crfsuite",
        "time",
        "Wall time against CRFsuite's L-BFGS (beyond the paper)",
        all4,
        wall_time,
        measurement=True,
    )

    def start():
        parts, ok = [], True
        for d in ("ocr", "conll2000", "conll2002-ned"):
            eps = sdca(d, b[d], "gap", 0.8, label="eps 1e-3", start="epsilon")
            gib = sdca(d, b[d], "gap", 0.8, label="authors' start")
            p0 = [self_first(traces, e) for e in (eps, gib)]
            parts.append(
                f"{SHORT[d]}: P(start) eps {p0[0]:.2f} vs authors' {p0[1]:.2f}; "
                f"{c.show(eps)} vs {c.show(gib)}"
            )
            if d != "ocr":
                ok = ok and not c.less(eps, gib)
        return (
            f"{thr}: " + "; ".join(parts),
            ok,
            "" if ok else "the epsilon-mix is faster on CONLL or NER",
        )

    claim(
        "start-authors",
        "start",
        "The authors' start converges at least as fast on CONLL and NER",
        ["ocr", "conll2000", "conll2002-ned"],
        start,
    )
    return out


def self_first(traces: Traces, exp: Experiment) -> float:
    trace = traces.get(exp)
    if trace is None:
        raise _Missing(exp.describe())
    return trace.records[0].primal
