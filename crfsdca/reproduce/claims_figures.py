"""The claims of the paper's figures (Fig. 2, 3, 4, 6, 7, 8, 9), one checker each.

Every comparison of two runs is a race over their whole curves (``verdicts``): the x at which
each first reaches every level 10^1 ... 10^-7 within their common range.
"""

from __future__ import annotations

import math

import numpy as np

from crfsdca.reproduce.experiments import (
    DATASETS,
    SEEDS,
    SHORT,
    SPARSE,
    fig2_runs,
    fig4_runs,
    measurements,
    nonuniformity_runs,
)
from crfsdca.reproduce.registry import Judged, present, register
from crfsdca.reproduce.verdicts import (
    FAILS,
    HOLDS,
    PAR,
    PARTLY,
    THRESHOLD,
    TIE,
    Costs,
    combine,
    faster,
    on_par,
    share,
    spearman,
)

DENSE = ("ocr",)


def _fig4(b, d):
    return {e.label: e for e in fig4_runs(d, b[d])}


def per_dataset(parts: list[tuple[str, str]], why: str) -> Judged:
    """Judged from (text, verdict) per dataset, combined."""
    verdict = combine([v for _, v in parts])
    text = "; ".join(f"{t} -> {v}" for t, v in parts)
    return Judged(text, verdict, "" if verdict == HOLDS else why)


def _fig4_races(
    c: Costs, b, datasets, first: str, second: str, rule, why: str, x="updates", band=TIE
):
    """Fig. 4's ``first`` races ``second`` by ``x`` on each of ``datasets`` in the run, judged
    by ``rule`` (with leads of a factor ``band``) and combined; not judged when none ran."""
    parts = []
    for d in present(b, datasets):
        r = _fig4(b, d)
        race = c.race(r[first], r[second], x)
        parts.append((f"{SHORT[d]}: {race.describe(band)}", rule(race, band)))
    if not parts:
        names = ", ".join(SHORT[d] for d in datasets)
        return Judged(f"none of {names} in this run", "not judged", "no such dataset")
    return per_dataset(parts, why)


# -- Fig. 2: sampling schemes on OCR -----------------------------------------------------------
@register("fig2-gap-best", "2", "Gap sampling is best on OCR", ("ocr",))
def gap_best(c: Costs, b) -> Judged:
    """Gap races each other scheme by updates (module verdicts: `faster`); holds if Gap is
    faster than all four, does not hold if faster than none, partly otherwise."""
    runs = fig2_runs("ocr", b["ocr"])
    races = [c.race(runs["Gap"], runs[k]) for k in runs if k != "Gap"]
    verdicts = [faster(r) for r in races]
    text = "; ".join(f"{r.describe()} -> {v}" for r, v in zip(races, verdicts, strict=True))
    verdict = combine(verdicts)
    return Judged(text, verdict, "" if verdict == HOLDS else "Gap is not ahead of every scheme")


@register("fig2-max-fails", "2", "Max sampling fails to converge", ("ocr",))
def max_fails(c: Costs, b) -> Judged:
    """Holds if Max never reaches P - P* <= 1e-4 and ends >= 10x above Uniform's final
    sub-optimality; partly if it reaches 1e-4 but every other scheme is faster than it
    (`faster`); does not hold otherwise."""
    runs = fig2_runs("ocr", b["ocr"])
    mx, uni = runs["Max"], runs["Uniform"]
    text = f"{c.show(mx)}; {c.show(uni)}"
    if math.isinf(c.cost(mx)) and c.final(mx) >= 10 * c.final(uni):
        return Judged(text, HOLDS)
    others = [faster(c.race(runs[k], mx)) == HOLDS for k in runs if k != "Max"]
    if all(others):
        return Judged(text, PARTLY, "Max converges, more slowly than every other scheme")
    return Judged(text, FAILS, "Max converges and is not slower than every other scheme")


@register("fig2-importance", "2", "Importance sampling is worse than uniform", ("ocr",))
def importance_worse(c: Costs, b) -> Judged:
    """Uniform races Importance by updates: `faster`(Uniform, Importance)."""
    runs = fig2_runs("ocr", b["ocr"])
    race = c.race(runs["Uniform"], runs["Importance"])
    verdict = faster(race)
    return Judged(race.describe(), verdict, "" if verdict == HOLDS else "Uniform is not ahead")


@register("fig2-gapimp", "seeds", "Gap x Importance is worse than Gap", ("ocr",))
def gapimp_worse(c: Costs, b) -> Judged:
    """Gap races Gap x Importance by updates with seeds 0, 1 and 2: `faster`(Gap, Gap x
    Importance) per seed; holds if it holds for every seed, does not hold if for none and
    partly for none, partly otherwise. The updates/n to P - P* <= 1e-4 and 1e-5 of every seed
    are reported (the two runs' ranges over the seeds)."""
    parts, costs = [], {"Gap": {}, "GapxImp": {}}
    for seed in SEEDS:
        runs = fig2_runs("ocr", b["ocr"], seed)
        race = c.race(runs["Gap"], runs["GapxImp"])
        parts.append((f"seed {seed}: {race.describe()}", faster(race)))
        for k in costs:
            costs[k][seed] = [c.cost(runs[k], level=lv) for lv in (1e-4, 1e-5)]
    ranges = "; ".join(
        f"{lv:g}: Gap {_range([costs['Gap'][s][i] for s in SEEDS])}, Gap x Importance"
        f" {_range([costs['GapxImp'][s][i] for s in SEEDS])}"
        for i, lv in enumerate((1e-4, 1e-5))
    )
    judged = per_dataset(parts, "Gap is not ahead of Gap x Importance for every seed")
    text = f"{judged.measured}; updates/n over the seeds at {ranges}"
    return Judged(text, judged.verdict, judged.reason)


def _range(xs: list[float]) -> str:
    finite = [x for x in xs if math.isfinite(x)]
    if len(finite) < len(xs):
        return "[" + ", ".join("never" if math.isinf(x) else f"{x:.0f}" for x in xs) + "]"
    return f"{min(xs):.0f}-{max(xs):.0f}"


# -- Fig. 3: non-uniformity ----------------------------------------------------------------------
def _nonuniformity(c: Costs, b, d: str) -> tuple[str, str]:
    runs = nonuniformity_runs(d, b[d])
    steps = [(0.0, 0.2), (0.2, 0.5), (0.5, 0.8)]
    orders = {(lo, hi): c.race(runs[hi], runs[lo]).order() for lo, hi in steps}
    overall = c.race(runs[0.8], runs[0.0]).order()
    top = c.race(runs[1.0], runs[0.8]).order()
    text = (
        f"{SHORT[d]}: updates/n to 1e-4 "
        + ", ".join(f"{f:g}: {_cost(c, e)}" for f, e in runs.items())
        + "; each step up vs the one below: "
        + ", ".join(f"{hi:g} {o}" for (_, hi), o in orders.items())
        + f"; 0.8 vs 0 {overall}; 1 vs 0.8 {top}"
    )
    if overall != "ahead":
        return text, FAILS
    helps = ("ahead", "partly ahead", "tied")  # never behind: "only helps"
    ok = all(o in helps for o in orders.values()) and top in helps
    return text, HOLDS if ok else PARTLY


def _cost(c: Costs, exp) -> str:
    x = c.cost(exp)
    return "never" if math.isinf(x) else f"{x:.1f}"


@register(
    "fig3-nonuniformity",
    "3",
    "More non-uniformity only helps on NER, marginally beyond 0.8",
    ("conll2002-ned",),
)
def nonuniformity_ner(c: Costs, b) -> Judged:
    """Races by updates between gap sampling at fractions 0, 0.2, 0.5, 0.8, 1 (`order`).
    Holds if 0.8 is ahead of 0, every step 0->0.2->0.5->0.8 is ahead, partly ahead or tied
    (never behind) and so is 1 against 0.8; does not hold if 0.8 is not ahead of 0; partly
    otherwise."""
    text, verdict = _nonuniformity(c, b, "conll2002-ned")
    return Judged(text, verdict, "" if verdict == HOLDS else "a step up is behind or mixed")


@register(
    "fig3-all-datasets",
    "3",
    "More non-uniformity only helps on all datasets",
)
def nonuniformity_all(c: Costs, b) -> Judged:
    """The rule of `fig3-nonuniformity` on every dataset of the run, combined (holds on all ->
    holds, on none and partly on none -> does not hold, else partly)."""
    parts = [_nonuniformity(c, b, d) for d in present(b, DATASETS)]
    return per_dataset(parts, "not on every dataset")


# -- Fig. 4 and 6: SDCA against SAG-NUS, SAG-NUS*, OEG -----------------------------------------
@register("fig4-sdca-oeg-par", "4", "SDCA and OEG are on par in updates (all datasets)")
def oeg_par(c: Costs, b) -> Judged:
    """OEG races uniform SDCA by updates on every dataset: `on_par` with band 1.5 (updates to
    every level within a factor 1.5), combined over the datasets."""
    why = "OEG/SDCA leaves [0.67, 1.5] at some level"
    return _fig4_races(c, b, DATASETS, "OEG", "SDCA", on_par, why, band=PAR)


@register(
    "fig4-gap-vs-sag",
    "4",
    "SDCA-GAP needs fewer updates than SAG-NUS on the sparse datasets",
    None,
)
def gap_vs_sag(c: Costs, b) -> Judged:
    """`faster`(SDCA-GAP, SAG-NUS) by updates on CONLL, NER and POS (those run), combined."""
    why = "SDCA-GAP is not ahead of SAG-NUS on every sparse dataset"
    return _fig4_races(c, b, SPARSE, "SDCA-GAP", "SAG-NUS", faster, why)


@register("fig4-gap-vs-oeg", "4", "SDCA-GAP needs fewer updates than OEG (all datasets)")
def gap_vs_oeg(c: Costs, b) -> Judged:
    """`faster`(SDCA-GAP, OEG) by updates on every dataset, combined."""
    why = "SDCA-GAP is not ahead of OEG on every dataset"
    return _fig4_races(c, b, DATASETS, "SDCA-GAP", "OEG", faster, why)


def ocr_sag_verdict(c: Costs, sag, sdca_uniform, sdca_gap) -> tuple[str, str]:
    races = [c.race(sag, sdca_uniform), c.race(sag, sdca_gap)]
    return "; ".join(r.describe() for r in races), combine([faster(r) for r in races])


@register(
    "fig4-ocr-sag",
    "4",
    "On OCR, SDCA and SDCA-GAP need more updates than SAG-NUS",
    ("ocr",),
)
def ocr_sag(c: Costs, b) -> Judged:
    """`faster`(SAG-NUS, SDCA) and `faster`(SAG-NUS, SDCA-GAP) by updates on OCR, combined."""
    r = _fig4(b, "ocr")
    text, verdict = ocr_sag_verdict(c, r["SAG-NUS"], r["SDCA"], r["SDCA-GAP"])
    return Judged(text, verdict, "" if verdict == HOLDS else "SAG-NUS is not ahead of both")


@register(
    "fig4-oracle-ocr",
    "4",
    "By oracle calls, SDCA-GAP is on par with SAG-NUS* on OCR",
    ("ocr",),
)
def oracle_ocr(c: Costs, b) -> Judged:
    """SDCA-GAP races SAG-NUS* by oracle calls on OCR: `on_par` with band 1.5."""
    r = _fig4(b, "ocr")
    race = c.race(r["SDCA-GAP"], r["SAG-NUS*"], "oracle_calls")
    calls = _calls_per_update(c, r["SAG-NUS*"])
    skipped, trials = sag_counts(c, r["SAG-NUS*"])
    verdict = on_par(race, PAR)
    why = (
        f"SAG-NUS* spends {calls:.2f} oracle calls per update: it skips {100 * skipped:.0f}% of"
        f" its line searches and a search runs {trials:.2f} trials (one oracle call each), so"
        " by oracle calls it is slower than by updates"
    )
    text = (
        f"{race.describe(PAR)}; SAG-NUS*: {calls:.2f} oracle calls per update, line searches"
        f" skipped {100 * skipped:.1f}%, trials per search {trials:.2f}"
    )
    return Judged(text, verdict, "" if verdict == HOLDS else why)


def _calls_per_update(c: Costs, exp) -> float:
    last = c.records(exp)[-1]
    return last.oracle_calls / max(last.updates, 1)


def sag_counts(c: Costs, exp) -> tuple[float, float]:
    """(share of visits whose line search was skipped, trials per line search) of a SAG run."""
    extra = c.records(exp)[-1].extra
    searches, skipped = extra.get("line_searches", 0.0), extra.get("skipped_line_searches", 0.0)
    trials = extra.get("line_search_trials", math.nan)
    visits = searches + skipped
    return (skipped / visits if visits else math.nan, trials / searches if searches else math.nan)


@register(
    "fig4-oracle-sparse",
    "4/6",
    "By oracle calls, SDCA-GAP is much faster than SAG-NUS* on the sparse datasets",
    None,
)
def oracle_sparse(c: Costs, b) -> Judged:
    """`faster`(SDCA-GAP, SAG-NUS*) by oracle calls on CONLL, NER and POS, combined."""
    why = "SDCA-GAP is not ahead of SAG-NUS* on every sparse dataset"
    return _fig4_races(c, b, SPARSE, "SDCA-GAP", "SAG-NUS*", faster, why, "oracle_calls")


@register(
    "fig6-much-better",
    "6",
    "By oracle calls, SDCA-GAP performs much better than every competing method on CONLL and"
    " POS (Fig. 6 caption)",
    None,
)
def much_better_fig6(c: Costs, b) -> Judged:
    """SDCA-GAP races SDCA, SAG-NUS, SAG-NUS* and OEG by oracle calls on CONLL and POS (those
    run): "much faster", i.e. `faster` with a lead of a factor 1.5 (PAR) for 10%; holds if it
    holds against every method on both, does not hold if against none, partly otherwise."""
    parts = []
    for d in present(b, ("conll2000", "ewt-pos")):
        r = _fig4(b, d)
        for other in ("SDCA", "SAG-NUS", "SAG-NUS*", "OEG"):
            race = c.race(r["SDCA-GAP"], r[other], "oracle_calls")
            parts.append((f"{SHORT[d]}: {race.describe(PAR)}", faster(race, PAR)))
    if not parts:
        return Judged("neither CONLL nor POS in this run", "not judged", "no dataset")
    return per_dataset(parts, "SDCA-GAP does not lead some method by a factor 1.5")


@register(
    "fig4-sagstar-worse",
    "4",
    "SAG-NUS* looks worse than SAG-NUS by updates (caption of Fig. 4)",
)
def sagstar_worse(c: Costs, b) -> Judged:
    """`faster`(SAG-NUS, SAG-NUS*) by updates on every dataset, combined; the oracle calls per
    update of both are reported (skipping lowers SAG-NUS*'s)."""
    parts = []
    for d in present(b, DATASETS):
        r = _fig4(b, d)
        race = c.race(r["SAG-NUS"], r["SAG-NUS*"])
        calls = (_calls_per_update(c, r["SAG-NUS"]), _calls_per_update(c, r["SAG-NUS*"]))
        text = f"{SHORT[d]}: {race.describe()}; calls/update {calls[0]:.2f} vs {calls[1]:.2f}"
        parts.append((text, faster(race)))
    return per_dataset(parts, "SAG-NUS is not ahead of SAG-NUS* by updates everywhere")


@register(
    "fig4-sparsity",
    "4",
    "The sparser the dataset, the fewer updates SDCA-GAP needs",
)
def sparsity(c: Costs, b) -> Judged:
    """Rank correlation (Spearman) between the density a/A (mean active attributes per token
    over attributes) of the training subset each run solved and SDCA-GAP's updates/n to
    P - P* <= 1e-4 (never = last): holds if 1 (same order), partly if in (0, 1), does not hold
    if <= 0; not judged with fewer than 3 datasets. The subsets' densities decide, since those
    are the problems solved; the full sets' (Table 1, the paper's) are reported beside them."""
    ds = present(b, DATASETS)
    if len(ds) < 3:
        return Judged("fewer than 3 datasets", "not judged", "needs 3 datasets")
    dens = {}
    for which in ("subset", "full"):
        rows = {d: c.measurement(measurements(d, b[d])[which]) for d in ds}
        dens[which] = {d: r["a"] / r["A"] for d, r in rows.items()}
    cost = {d: c.cost(_fig4(b, d)["SDCA-GAP"]) for d in ds}
    rho = {w: spearman([dens[w][d] for d in ds], [cost[d] for d in ds]) for w in dens}
    text = "; ".join(
        f"{SHORT[d]}: a/A subset {dens['subset'][d]:.2g} (full set {dens['full'][d]:.2g}),"
        f" updates/n {cost[d]:.1f}"
        for d in ds
    )
    order = lambda w: " < ".join(SHORT[d] for d in sorted(ds, key=dens[w].get))  # noqa: E731
    text += (
        f"; by density, subsets: {order('subset')}, full sets: {order('full')}; by updates:"
        f" {' < '.join(SHORT[d] for d in sorted(ds, key=cost.get))}; Spearman with the subsets'"
        f" densities {rho['subset']:.2f}, with the full sets' {rho['full']:.2f}"
    )
    r = rho["subset"]
    verdict = HOLDS if r >= 1 - 1e-12 else PARTLY if r > 0 else FAILS
    why = (
        "the subsets' densities order the datasets otherwise than the updates do (A, the"
        " attributes present, shrinks with the subset while a does not, so a subset's a/A"
        " exceeds the full set's, by a factor that differs per dataset)"
    )
    return Judged(text, verdict, "" if verdict == HOLDS else why)


# -- Fig. 7: test error ------------------------------------------------------------------------
def _test_errors(c: Costs, exp) -> tuple[np.ndarray, np.ndarray]:
    recs = c.records(exp)
    return np.array([r.epoch for r in recs]), np.array([r.test_error for r in recs])


@register(
    "fig7-test-error",
    "7",
    "All methods reach the same test error (final spread <= 0.5 points)",
)
def test_error(c: Costs, b) -> Judged:
    """Per dataset, the spread (max - min) of the five methods' final test errors: <= 0.005 ->
    holds there; combined over the datasets."""
    parts = []
    for d in present(b, DATASETS):
        errs = {e.label: _test_errors(c, e)[1][-1] for e in fig4_runs(d, b[d])}
        spread = max(errs.values()) - min(errs.values())
        text = f"{SHORT[d]}: " + ", ".join(f"{k} {v:.4f}" for k, v in errs.items())
        parts.append((f"{text} (spread {spread:.4f})", HOLDS if spread <= 0.005 else FAILS))
    return per_dataset(parts, "spread above 0.5 points somewhere")


def mean_error(c: Costs, exp, until: float) -> float:
    """Mean test error over the evaluations at epochs in [1, until] (the whole curve)."""
    ep, err = _test_errors(c, exp)
    keep = (ep >= 1) & (ep <= until)
    return float(err[keep].mean()) if keep.any() else float(err[-1])


@register("fig7-sdca-oeg", "7", "In test error SDCA is a bit better than OEG")
def sdca_better_than_oeg(c: Costs, b) -> Judged:
    """Per dataset, the mean test error over epochs 1 .. (the common end) of uniform SDCA and
    OEG: SDCA lower -> holds there, else does not hold; combined (`share`)."""
    parts, lower = [], []
    for d in present(b, DATASETS):
        r = _fig4(b, d)
        until = min(c.records(r["SDCA"])[-1].epoch, c.records(r["OEG"])[-1].epoch)
        s, o = mean_error(c, r["SDCA"], until), mean_error(c, r["OEG"], until)
        parts.append(f"{SHORT[d]}: mean test error SDCA {s:.4f}, OEG {o:.4f}")
        lower.append(s < o)
    verdict = share(lower)
    return Judged("; ".join(parts), verdict, "" if verdict == HOLDS else "not lower everywhere")


def epochs_to_final_error(c: Costs, exp, slack: float = 0.001) -> float:
    """First epoch whose test error is within ``slack`` of the run's final test error."""
    ep, err = _test_errors(c, exp)
    return float(ep[np.flatnonzero(err <= err[-1] + slack)[0]])


@register(
    "fig7-sdca-sag-speed",
    "7",
    "In test error SDCA and SAG converge at the same speed",
)
def sdca_sag_speed(c: Costs, b) -> Judged:
    """Per dataset, the epoch at which uniform SDCA and SAG-NUS first come within 0.1 point of
    their final test error: same speed if the two differ by <= 1 epoch or by a factor <= 1.5;
    combined (`share`)."""
    parts, same = [], []
    for d in present(b, DATASETS):
        r = _fig4(b, d)
        s, g = epochs_to_final_error(c, r["SDCA"]), epochs_to_final_error(c, r["SAG-NUS"])
        ok = abs(s - g) <= 1 or (min(s, g) > 0 and max(s, g) / min(s, g) <= 1.5)
        parts.append(f"{SHORT[d]}: epochs to final error +0.1 pt SDCA {s:g}, SAG-NUS {g:g}")
        same.append(ok)
    verdict = share(same)
    return Judged("; ".join(parts), verdict, "" if verdict == HOLDS else "speeds differ somewhere")


EARLY = 5  # "a few epochs"


@register(
    "fig7-few-epochs",
    "7",
    "All methods reach maximum accuracy after a few epochs (§6.4)",
)
def few_epochs(c: Costs, b) -> Judged:
    """Per dataset and method of Fig. 7, the first epoch at which the test error is within 0.1
    point of the run's final one (`epochs_to_final_error`); a few = at most 5 epochs. Holds if
    for every method on every dataset, does not hold if for none, partly otherwise."""
    parts, ok = [], []
    for d in present(b, DATASETS):
        cells = []
        for e in fig4_runs(d, b[d]):
            k = epochs_to_final_error(c, e)
            ok.append(k <= EARLY)
            cells.append(f"{e.label} {k:.3g}")
        parts.append(f"{SHORT[d]}: epochs to final error +0.1 pt " + ", ".join(cells))
    verdict = share(ok)
    why = f"{sum(not x for x in ok)} of {len(ok)} runs need more than {EARLY} epochs"
    return Judged.of(parts, verdict, why)


__all__ = ["THRESHOLD", "mean_error", "ocr_sag_verdict"]
