"""Claims of the paper's text on the gap estimate (Fig. 9, §6.3), the refresh of the gaps and
the starting points (App. A.1), and the reproduction's fidelity (SAG-NUS's reconstructed
constants, wall time), one checker each."""

from __future__ import annotations

import math

import numpy as np

from crfsdca.reproduce.claims_figures import ocr_sag_verdict, per_dataset, sag_counts
from crfsdca.reproduce.experiments import (
    DATASETS,
    SAG_DATASETS,
    SAG_VARIANTS,
    SHORT,
    fig4_runs,
    nonuniformity_runs,
    refresh_runs,
    sag_variant_runs,
    sdca,
    start_runs,
    time_baselines,
)
from crfsdca.reproduce.registry import Judged, present, register
from crfsdca.reproduce.verdicts import (
    FAILS,
    HOLDS,
    NOT_JUDGED,
    PAR,
    PARTLY,
    THRESHOLD,
    Costs,
    faster,
    on_par,
    share,
)

START_DATASETS = ("ocr", "conll2000", "conll2002-ned")


# -- Fig. 9 and §6.3: the gap estimate -----------------------------------------------------
def gap_ratios(c: Costs, exp) -> tuple[np.ndarray, np.ndarray]:
    """(epochs, gap estimate / true gap) of the evaluations after the start."""
    recs = [r for r in c.records(exp) if r.epoch > 0 and r.gap > 0]
    ratio = np.array([r.gap_estimate / r.gap for r in recs])
    epoch = np.array([r.epoch for r in recs])
    keep = np.isfinite(ratio)
    return epoch[keep], ratio[keep]


def _fig9(c: Costs, b):
    for d in present(b, ("conll2000", "ocr")):
        for f in (0.0, 0.8, 1.0):
            epoch, ratio = gap_ratios(c, sdca(d, b[d], "gap", f))
            if ratio.size:
                yield d, f, epoch, ratio


@register("fig9-within-2", "9", "The gap estimate stays within x2 of the true gap", None)
def within2(c: Costs, b) -> Judged:
    """Ratio gap estimate / true gap at every evaluation after the start, CONLL and OCR,
    non-uniformity 0, 0.8, 1: holds if all within [0.5, 2]; partly if all within from epoch 5
    on; does not hold otherwise."""
    parts, early, late = [], [], []
    for d, f, epoch, ratio in _fig9(c, b):
        r5 = ratio[epoch >= 5]
        parts.append(
            f"{SHORT[d]} {f:g}: [{ratio.min():.2f}, {ratio.max():.2f}]"
            + (f", epochs >= 5 [{r5.min():.2f}, {r5.max():.2f}]" if r5.size else "")
        )
        early.append(bool(ratio.min() >= 0.5 and ratio.max() <= 2))
        late.append(bool(r5.size and r5.min() >= 0.5 and r5.max() <= 2))
    if not parts:
        return Judged("no run of CONLL or OCR", "not judged", "no dataset")
    verdict = HOLDS if all(early) else PARTLY if all(late) else FAILS
    why = (
        "a ratio leaves [0.5, 2]. Above 2 early: the estimate is the mean of stale"
        " per-sequence gaps initialised to 100, and a sequence not yet drawn keeps its 100."
        " Below 0.5 late, with gap sampling: sequences whose stale g_i is small are rarely"
        " redrawn while their true gaps no longer are"
    )
    return Judged.of(parts, verdict, why)


@register("fig9-direction", "9", "Gap sampling underestimates, uniform overestimates the gap", None)
def direction(c: Costs, b) -> Judged:
    """Median ratio gap estimate / true gap per run: > 1 for uniform (0), < 1 for gap sampling
    (0.8, 1); holds if every run agrees, does not hold if none, partly otherwise."""
    parts, agree = [], []
    for d, f, _, ratio in _fig9(c, b):
        med = float(np.median(ratio))
        parts.append(f"{SHORT[d]} {f:g}: median {med:.2f}")
        agree.append(med > 1 if f == 0.0 else med < 1)
    verdict = share(agree)
    return Judged("; ".join(parts), verdict, "" if verdict == HOLDS else "some medians disagree")


STOP_TOLS = (1e-2, 1e-3, 1e-4)


def stop_checks(c: Costs, exp, tol: float) -> tuple[int, float] | None:
    """Simulate §6.3's stopping rule on a run's evaluations: once the gap estimate G <= tol, a
    batch pass checks the true gap, and the run stops if it is <= tol too. Returns (batch
    passes until the stop, epochs from the first evaluation with true gap <= tol to the stop),
    or None when the run never has both G and the true gap <= tol."""
    checks, first_true = 0, None
    for r in c.records(exp):
        if r.epoch <= 0:  # the initial estimates (100) are no estimates
            continue
        if first_true is None and r.gap <= tol:
            first_true = r.epoch
        if r.gap_estimate <= tol:
            checks += 1
            if r.gap <= tol:
                return checks, r.epoch - first_true
    return None


@register(
    "stop-estimate",
    "9",
    "The gap estimate can stop the run, with one last batch pass to check the true gap (§6.3)",
    None,
)
def stop_estimate(c: Costs, b) -> Judged:
    """On SDCA-GAP (non-uniformity 0.8) of every dataset and the runs of Fig. 9 (0, 1 on CONLL
    and OCR), for tolerances 1e-2, 1e-3 and 1e-4 that the run reaches: the batch passes the
    rule makes until it stops (``stop_checks``; one per evaluation with G <= tol, the
    evaluations being one epoch apart). Holds if every stop takes one pass, partly if every
    stop takes at most 3, does not hold otherwise. The epochs the rule stops after the true
    gap got there are reported."""
    runs = {(d, 0.8) for d in present(b, DATASETS)}
    runs |= {(d, f) for d in present(b, ("conll2000", "ocr")) for f in (0.0, 1.0)}
    parts, passes, late = [], [], []
    for d, f in sorted(runs, key=lambda k: (DATASETS.index(k[0]), k[1])):
        cells = []
        for tol in STOP_TOLS:
            got = stop_checks(c, nonuniformity_runs(d, b[d])[f], tol)
            if got is None:
                continue
            passes.append(got[0])
            late.append(got[1])
            cells.append(f"{tol:g}: {got[0]} pass(es), {got[1]:g} epoch(s) late")
        if cells:
            parts.append(f"{SHORT[d]} {f:g}: " + ", ".join(cells))
    if not passes:
        return Judged("no run reaches the tolerances", NOT_JUDGED, "no stop to check")
    verdict = HOLDS if max(passes) == 1 else PARTLY if max(passes) <= 3 else FAILS
    text = "; ".join(parts) + f"; passes per stop: at most {max(passes)}, median"
    text += f" {np.median(passes):g}; epochs late: at most {max(late):g}"
    why = (
        "some stop needs more than one batch pass: the estimate (gap sampling underestimates)"
        " was below the tolerance while the true gap was not"
    )
    return Judged(text, verdict, "" if verdict == HOLDS else why)


# -- §6.3: no periodic refresh of the gaps -------------------------------------------------------
@register(
    "refresh-not-needed",
    "refresh",
    "No periodic exact refresh of all gaps (Osokin et al.) is needed by SDCA-GAP (§6.3)",
)
def refresh_not_needed(c: Costs, b) -> Judged:
    """SDCA-GAP with all gaps recomputed exactly every 5 epochs races SDCA-GAP without, by
    updates (the axis most favourable to refreshing: its n oracle calls per refresh are
    free there): holds on a dataset if the refreshed run is tied or behind (`order`),
    partly if mixed, does not hold if ahead; combined. Oracle calls are reported too."""
    parts = []
    for d in present(b, DATASETS):
        r = refresh_runs(d, b[d])
        race = c.race(r["refresh"], r["none"])
        calls = c.race(r["refresh"], r["none"], "oracle_calls")
        order = race.order()
        verdict = {"ahead": FAILS, "mixed": PARTLY}.get(order, HOLDS)
        text = f"{SHORT[d]}: {race.describe()} [{order}]; by oracle calls [{calls.order()}]"
        parts.append((text, verdict))
    return per_dataset(parts, "refreshing helps somewhere")


# -- App. A.1: the starting point ----------------------------------------------------------------
@register(
    "a1-uniform-start",
    "start",
    "Starting the duals at the uniform law gives a huge w_hat, a large negative dual and a large"
    " primal (App. A.1)",
    None,
)
def uniform_start(c: Costs, b) -> Judged:
    """At step 0 on OCR, CONLL and NER (those run): P at the uniform start >= 10 x P at the
    authors' start (~ P(0) = (N/n) log K) and D at the uniform start < 0; holds if on every
    dataset, does not hold if on none, partly otherwise. Whether SDCA-GAP still converges from
    there is reported."""
    parts, ok = [], []
    for d in present(b, START_DATASETS):
        r = start_runs(d, b[d])
        u, a = c.records(r["uniform"])[0], c.records(r["authors"])[0]
        parts.append(
            f"{SHORT[d]}: uniform start P {u.primal:.4g}, D {u.dual:.4g}; authors' start"
            f" P {a.primal:.4g}; {c.show(r['uniform'])}"
        )
        ok.append(u.primal >= 10 * a.primal and u.dual < 0)
    if not parts:
        return Judged("none of OCR, CONLL, NER in this run", NOT_JUDGED, "no dataset")
    verdict = share(ok)
    return Judged("; ".join(parts), verdict, "" if verdict == HOLDS else "not huge everywhere")


@register(
    "start-authors",
    "start",
    "The authors' start converges at least as fast as the epsilon-mix on CONLL and NER",
    ("conll2000", "conll2002-ned"),
)
def authors_start(c: Costs, b) -> Judged:
    """The authors' start races the epsilon-mix (eps 1e-3) by updates on CONLL and NER: ahead
    or tied (`order`) -> holds there, mixed -> partly, behind -> does not hold; combined."""
    parts = []
    for d in ("conll2000", "conll2002-ned"):
        r = start_runs(d, b[d])
        race = c.race(r["authors"], r["epsilon"])
        verdict = {"behind": FAILS, "mixed": PARTLY}.get(race.order(), HOLDS)
        parts.append((f"{SHORT[d]}: {race.describe()}", verdict))
    return per_dataset(parts, "the epsilon-mix is faster on CONLL or NER")


@register(
    "a1-uniform-unstable",
    "start",
    "Starting the duals at the uniform law raises numerical stability issues (App. A.1)",
    None,
)
def uniform_unstable(c: Costs, b) -> Judged:
    """SDCA-GAP from the uniform law on OCR, CONLL and NER (those run): an issue is a
    non-finite primal, dual or gap at an evaluation, a line search that stopped at its
    iteration cap (``line_search_failures``), or a dual that decreases between evaluations (by
    more than 1e-9 relative; SDCA's dual never decreases in exact arithmetic). Holds if some
    issue shows on every dataset, does not hold if on none, partly otherwise. Whether the run
    reaches 1e-4 (and the authors' start's) is reported."""
    parts, issues = [], []
    for d in present(b, START_DATASETS):
        r = start_runs(d, b[d])
        recs = c.records(r["uniform"])
        values = [(x.primal, x.dual, x.gap) for x in recs]
        nonfinite = sum(not all(math.isfinite(v) for v in row) for row in values)
        failures = recs[-1].extra.get("line_search_failures", 0.0)
        duals = [x.dual for x in recs]
        drops = sum(
            b2 < a2 - 1e-9 * max(abs(a2), 1.0) for a2, b2 in zip(duals, duals[1:], strict=False)
        )
        found = nonfinite + failures + drops > 0
        issues.append(found)
        parts.append(
            f"{SHORT[d]}: non-finite evaluations {nonfinite}, failed line searches"
            f" {failures:g}, dual decreases {drops}; {c.show(r['uniform'])};"
            f" {c.show(r['authors'])}"
        )
    if not parts:
        return Judged("none of OCR, CONLL, NER in this run", NOT_JUDGED, "no dataset")
    verdict = share(issues)
    why = (
        "no numerical issue in crfsdca's runs from the uniform law somewhere: SDCA stores and"
        " mixes the log-marginals (as the paper recommends), and the huge w_hat(u) only makes"
        " P and -D large; the run from u converges more slowly where it converges"
    )
    return Judged.of(parts, verdict, why)


# -- fidelity: SAG-NUS's constants, wall time ------------------------------------------------
def _sag_checks(c: Costs, b, d: str, variant: str, exp) -> list[tuple[str, str]]:
    """(claim, verdict) of the claims reading SAG runs, with ``exp`` in place of the default."""
    r = {e.label: e for e in fig4_runs(d, b[d])}
    star = SAG_VARIANTS[variant][0] == "sag-nus-skip"
    out = []
    if d == "ocr" and not star:
        out.append(("fig4-ocr-sag", ocr_sag_verdict(c, exp, r["SDCA"], r["SDCA-GAP"])[1]))
    if d == "ocr" and star:
        race = c.race(r["SDCA-GAP"], exp, "oracle_calls")
        out.append(("fig4-oracle-ocr", on_par(race, PAR)))
    if d != "ocr" and not star:
        out.append(("fig4-gap-vs-sag", faster(c.race(r["SDCA-GAP"], exp))))
    if d != "ocr" and star:
        out.append(("fig4-oracle-sparse", faster(c.race(r["SDCA-GAP"], exp, "oracle_calls"))))
        if d in ("conll2000", "ewt-pos"):
            race = c.race(r["SDCA-GAP"], exp, "oracle_calls")
            out.append(("fig6-much-better", faster(race, PAR)))
    if d in ("conll2000", "ewt-pos") and not star:
        race = c.race(r["SDCA-GAP"], exp, "oracle_calls")
        out.append(("fig6-much-better", faster(race, PAR)))
    if star:
        out.append(("fig4-sagstar-worse", faster(c.race(r["SAG-NUS"], exp))))
    return out


#: the claims ``_sag_checks`` judges again with a variant of SAG-NUS or SAG-NUS*
SAG_READERS = frozenset(
    {
        "fig4-ocr-sag",
        "fig4-oracle-ocr",
        "fig4-gap-vs-sag",
        "fig4-oracle-sparse",
        "fig4-sagstar-worse",
        "fig6-much-better",
    }
)


def sag_sensitivity(c: Costs, b) -> list[tuple[str, str, str, str, str]]:
    """(claim, dataset, variant, verdict there with the default constants, with the variant)
    of every claim reading a SAG run, on every dataset of SAG_DATASETS run."""
    out = []
    for d in present(b, SAG_DATASETS):
        base = {e.label: e for e in fig4_runs(d, b[d])}
        for variant, exp in sag_variant_runs(d, b[d]).items():
            default = base["SAG-NUS*" if SAG_VARIANTS[variant][0] == "sag-nus-skip" else "SAG-NUS"]
            then = dict(_sag_checks(c, b, d, variant, default))
            for key, now in _sag_checks(c, b, d, variant, exp):
                out.append((key, SHORT[d], exp.label, then[key], now))
    return out


def sag_dependence(rows: list[tuple[str, str, str, str, str]], key: str) -> str:
    """What ``sag_sensitivity`` says of one claim: the variants that change its verdict on a
    dataset, or that none of those tried does."""
    mine = [r for r in rows if r[0] == key]
    if not mine:
        return ""
    changed = [f"{r[2]} on {r[1]}: {r[3]} -> {r[4]}" for r in mine if r[3] != r[4]]
    if not changed:
        return (
            f"Reconstructed SAG constants: no verdict changes under the {len(mine)} variant"
            " runs of `sag-constants`."
        )
    return (
        "Depends on the reconstructed SAG constants: "
        + "; ".join(changed)
        + f" ({len(changed)} of {len(mine)} variant runs)."
    )


@register(
    "sag-constants",
    "sag",
    "Sensitivity of the SAG-NUS verdicts to its reconstructed constants (beyond the paper)",
    None,
    measurement=True,
)
def sag_constants(c: Costs, b) -> Judged:
    """On every dataset, each variant changes one reconstructed constant of SAG-NUS or
    SAG-NUS* (baselines.md §3-4: L_i's decay on a revisit, L_i at a first visit, L_max's
    decay, L_i's growth per failed test (2), what a skipped visit does, the skip budget after
    c_i first-test successes (2^(c_i - 1))); the claims that read that run are judged again
    with the variant in its place (on this dataset alone). A conclusion depends on the
    constants if its verdict changes under some variant; the rows of those claims say so."""
    rows = sag_sensitivity(c, b)
    if not rows:
        return Judged("no dataset in this run", NOT_JUDGED, "no dataset")
    parts = []
    for d in present(b, SAG_DATASETS):
        for exp in sag_variant_runs(d, b[d]).values():
            mine = [r for r in rows if r[1] == SHORT[d] and r[2] == exp.label]
            last = c.records(exp)[-1]
            skipped, _ = sag_counts(c, exp)
            calls = last.oracle_calls / max(last.updates, 1)
            cells = ", ".join(f"{k} {now} (default {then})" for k, _, _, then, now in mine)
            parts.append(
                f"{SHORT[d]} {exp.label} ({calls:.2f} calls/update, {100 * skipped:.0f}%"
                f" searches skipped): {cells}"
            )
    changed = [f"{k} on {d} ({v})" for k, d, v, then, now in rows if then != now]
    reason = "verdicts that change: " + ("; ".join(changed) if changed else "none")
    return Judged("; ".join(parts), HOLDS, reason)


@register(
    "time-crfsuite",
    "time",
    "Solver time against CRFsuite's L-BFGS (beyond the paper)",
    None,
    measurement=True,
)
def wall_time(c: Costs, b) -> Judged:
    """Seconds of solver CPU time to P - P* <= 1e-4 of every method (single-threaded runs, so
    their solver time without the stops and waits of a shared machine; numba's compilation
    excluded by a warm-up run; L-BFGS and CRFsuite with 4x the epoch budget): a measurement,
    not a claim of the paper."""
    parts = []
    for d in present(b, DATASETS):
        runs = [*fig4_runs(d, b[d]), *time_baselines(d, b[d])]
        cells = []
        for e in runs:
            s = c.cost(e, "cpu_seconds")
            cells.append(f"{e.label} {s:.1f}s" if math.isfinite(s) else f"{e.label} never")
        parts.append(f"{SHORT[d]}: " + ", ".join(cells))
    return Judged(
        f"CPU seconds to P-P*<={THRESHOLD:g}: " + "; ".join(parts),
        HOLDS,
        "not a claim of the paper",
    )
