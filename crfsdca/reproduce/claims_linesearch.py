"""The claims on SDCA's line search (§6.2, footnote 4, Fig. 8, §6.4, App. A.3), judged on the
authors' own search: sdca4crf's safe Newton from 0.5 on f', float64 only, no predictor
(``--line-search-method paper``). crfsdca's search (a float32 predictor before a float64
rtsafe, from the root of a quadratic model) is reported beside it as context; it is not what
the paper measured, so it does not decide."""

from __future__ import annotations

import math

from crfsdca.reproduce.claims_figures import per_dataset
from crfsdca.reproduce.experiments import (
    DATASETS,
    LS_START_DATASETS,
    SHORT,
    fig8_runs,
    line_search_start_runs,
    one_step_starts,
    paper_search_runs,
    sdca,
)
from crfsdca.reproduce.registry import Judged, present, register
from crfsdca.reproduce.verdicts import (
    FAILS,
    HOLDS,
    NOT_JUDGED,
    PARTLY,
    SAME,
    Costs,
    Missing,
    combine,
    faster,
    on_par,
    share,
)


def line_search_counts(c: Costs, exp) -> tuple[float, float, float]:
    """(double-precision Newton evaluations, float32 predictor evaluations, line-search share
    of the solver's step time) per line search, over the whole run (last record's counters)."""
    extra = c.records(exp)[-1].extra
    searches = extra.get("line_searches", 0.0)
    if not searches:
        return math.nan, math.nan, math.nan
    steps = extra.get("step_seconds", 0.0)
    time_share = extra.get("line_search_seconds", math.nan) / steps if steps else math.nan
    return (
        extra.get("newton_iterations", math.nan) / searches,
        extra.get("predictor_evaluations", 0.0) / searches,
        time_share,
    )


def _paper(b, d):
    return paper_search_runs(d, b[d])


def _crfsdca(b, d):
    return sdca(d, b[d], "gap", 0.8, label="SDCA-GAP")


def _crfsdca_counts(c: Costs, b, d) -> str:
    dbl, f32, frac = line_search_counts(c, _crfsdca(b, d))
    return f"crfsdca's search {dbl:.2f} float64 + {f32:.2f} float32 per search, {100 * frac:.0f}%"


@register(
    "ls-newton",
    "linesearch",
    "The Newton line search reaches sub-precision 1e-2 or 1e-3 in about 2 iterations on average"
    " (§6.2)",
)
def newton_per_search(c: Costs, b) -> Judged:
    """The authors' search (from 0.5, float64 only) in SDCA-GAP at sub-precisions 1e-2 and 1e-3
    on every dataset: evaluations of f' and f'' per line search over the whole run (the
    authors count their safe_newton's evaluations); about 2 = within [1.5, 2.5]. Holds if at
    both sub-precisions on every dataset, does not hold if on none, partly otherwise.
    crfsdca's own search (float32 predictor, then float64) is reported as context."""
    parts, ok, outside = [], [], []
    for d in present(b, DATASETS):
        runs = _paper(b, d)
        its = {t: line_search_counts(c, runs[t])[0] for t in ("0.01", "0.001")}
        parts.append(
            f"{SHORT[d]}: authors' search {its['0.01']:.2f} (1e-2), {its['0.001']:.2f} (1e-3)"
            f" evaluations per search; {_crfsdca_counts(c, b, d)}"
        )
        for t, v in its.items():
            ok.append(1.5 <= v <= 2.5)
            if not ok[-1]:
                outside.append(f"{SHORT[d]} at {float(t):g} ({v:.2f})")
    verdict = share(ok)
    why = (
        f"outside [1.5, 2.5]: {', '.join(outside)}. From 0.5, a step size near 0 or 1 takes"
        " several Newton steps, or a bisection, to reach"
    )
    return Judged.of(parts, verdict, why)


@register(
    "ls-time",
    "linesearch",
    "The line search takes about 30% of SDCA's running time on each dataset (§6.2)",
)
def line_search_time(c: Costs, b) -> Judged:
    """The authors' search (1e-3) in SDCA-GAP on every dataset: line_search_seconds /
    step_seconds (the kernel's cycle counts split the wall time of the steps; evaluations of
    P, D and the test error are not steps, as in the authors' timer); about 30% = within
    [0.2, 0.4]. Holds if on every dataset, does not hold if on none, partly otherwise. The
    oracle's and the block gap's shares and crfsdca's own search are reported."""
    parts, ok, outside = [], [], []
    for d in present(b, DATASETS):
        exp = _paper(b, d)["0.001"]
        _, _, frac = line_search_counts(c, exp)
        oracle, gap = phase_shares(c, exp)
        parts.append(
            f"{SHORT[d]}: authors' search {100 * frac:.1f}% of step time (oracle"
            f" {100 * oracle:.1f}%, block gap {100 * gap:.1f}%); {_crfsdca_counts(c, b, d)}"
        )
        ok.append(0.2 <= frac <= 0.4)
        if not ok[-1]:
            outside.append(SHORT[d])
    verdict = share(ok)
    parts += _stopped_part(c, b)
    why = (
        f"outside [20%, 40%] on {', '.join(outside)}. An evaluation of f' and f'' costs O(K^2)"
        " per token (K labels); the rest of the step, the oracle and the update of w, also"
        " costs O(a K) per token for the a active attributes, so the share falls where a K is"
        " large against K^2 (NER: K = 9, a = 20) and rises where K^2 dominates (POS: K = 49)"
    )
    return Judged.of(parts, verdict, why)


def stopped(c: Costs, b) -> list[str]:
    """The datasets whose run of the authors' search (1e-3) had a solver wall time more than
    10% above its CPU time (stopped or waiting for a core), with that ratio: the kernel's cycle
    counts are wall-clock ticks, so a stop inflates whichever phase it fell in."""
    out = []
    for d in present(b, DATASETS):
        last = c.records(_paper(b, d)["0.001"])[-1]
        cpu = float(last.extra.get("cpu_seconds", math.nan))
        if cpu > 0 and last.seconds > 1.1 * cpu:
            out.append(f"{SHORT[d]} x{last.seconds / cpu:.2f}")
    return out


def _stopped_part(c: Costs, b) -> list[str]:
    late = stopped(c, b)
    if not late:
        return ["every run's wall time within 10% of its CPU time (shares not distorted by stops)"]
    return [
        "wall time over CPU time of the run: " + ", ".join(late) + " (a stop inflates the"
        " phase it fell in: these shares are upper or lower bounds)"
    ]


def phase_shares(c: Costs, exp) -> tuple[float, float]:
    """(oracle, block gap) shares of the solver's step time over the whole run."""
    extra = c.records(exp)[-1].extra
    steps = extra.get("step_seconds", 0.0)
    if not steps:
        return math.nan, math.nan
    return extra.get("oracle_seconds", math.nan) / steps, extra.get(
        "block_gap_seconds", math.nan
    ) / steps


def evaluation_cost(c: Costs, exp) -> tuple[float, float, float]:
    """(seconds per line-search evaluation, seconds per oracle call of the steps, their ratio)
    over a run of the authors' search (no predictor: every evaluation is a float64 one)."""
    last = c.records(exp)[-1]
    extra = last.extra
    evals, updates = extra.get("newton_iterations", 0.0), last.updates
    if not evals or not updates:
        return math.nan, math.nan, math.nan
    per_eval = extra.get("line_search_seconds", math.nan) / evals
    per_call = extra.get("oracle_seconds", math.nan) / updates
    return per_eval, per_call, per_eval / per_call


def _cost_rows(c: Costs, b) -> tuple[list[str], dict[str, float]]:
    parts, ratio = [], {}
    for d in present(b, DATASETS):
        per_eval, per_call, r = evaluation_cost(c, _paper(b, d)["0.001"])
        ratio[d] = r
        parts.append(
            f"{SHORT[d]}: {1e6 * per_eval:.1f} us per evaluation, {1e6 * per_call:.1f} us per"
            f" oracle call, ratio {r:.2f}"
        )
    return parts + _stopped_part(c, b), ratio


@register(
    "ls-eval-cost",
    "linesearch",
    "An evaluation of the line search costs roughly as much as an oracle call (§6.4)",
)
def eval_cost(c: Costs, b) -> Judged:
    """The authors' search (1e-3) in SDCA-GAP on every dataset: wall time per evaluation of f'
    and f'' over wall time per oracle call of the steps (the kernel's cycle counts; the oracle
    includes the scores w^T F); roughly the same = ratio within [0.5, 2]. Holds if on every
    dataset, does not hold if on none, partly otherwise."""
    why = "the ratio leaves [0.5, 2] somewhere: the oracle also computes the scores w^T F_c"
    return _ratio_within(c, b, 0.5, 2.0, why)


@register(
    "a3-cost-model",
    "linesearch",
    "An evaluation of the line search costs about half a marginalisation (sum_c |Y_c| against"
    " 2 sum_c |Y_c|, App. A.3)",
)
def cost_model(c: Costs, b) -> Judged:
    """The ratio of ``ls-eval-cost`` against the cost model's 1/2: within a factor 2 of it
    ([0.25, 1]) on every dataset -> holds; on none -> does not hold; partly otherwise. (The
    model counts the marginal tables alone; the oracle's scores w^T F_c cost O(a K) more per
    token, which App. A.3 calls an overhead that is not critical.)"""
    why = "the measured ratio is off the model's 1/2 by more than a factor 2 somewhere"
    return _ratio_within(c, b, 0.25, 1.0, why)


def _ratio_within(c: Costs, b, lo: float, hi: float, why: str) -> Judged:
    """The cost rows of every dataset (``_cost_rows``), judged by the share of datasets whose
    line-search-to-oracle ratio lies in [lo, hi]; ``why`` when not on all of them."""
    parts, ratio = _cost_rows(c, b)
    verdict = share([lo <= r <= hi for r in ratio.values()])
    return Judged.of(parts, verdict, why)


@register(
    "fn4-ls-start",
    "fn4",
    "Starting the line search at 0.5 or at the previous step size makes no significant"
    " difference (footnote 4)",
    None,
)
def line_search_start(c: Costs, b) -> Judged:
    """The authors' search (1e-3) started at the sequence's previous step size races it started
    at 0.5, by updates, on every dataset: `on_par` with band 1.25, combined. Evaluations per
    search of both are reported, and, as context, crfsdca's search started at 0.5 and at the
    previous step against its default start (quadratic model) on OCR, CONLL and NER."""
    parts = []
    for d in present(b, DATASETS):
        r = _paper(b, d)
        race = c.race(r["previous"], r["0.001"])
        its = [line_search_counts(c, r[k])[0] for k in ("0.001", "previous")]
        text = (
            f"{SHORT[d]}: {race.describe(SAME)}; evaluations per search: from 0.5 {its[0]:.2f},"
            f" from the previous step {its[1]:.2f}"
        )
        parts.append((text, on_par(race, SAME)))
    if not parts:
        return Judged("no dataset in this run", NOT_JUDGED, "no dataset")
    verdict = combine([v for _, v in parts])
    text = "; ".join(f"{t} -> {v}" for t, v in parts)
    context = []
    for d in present(b, LS_START_DATASETS):
        r = line_search_start_runs(d, b[d])
        try:
            cells = [f"{k} {on_par(c.race(r[k], r['model']), SAME)}" for k in ("half", "previous")]
        except Missing:
            continue
        context.append(f"{SHORT[d]}: " + ", ".join(cells))
    if context:
        text += "; crfsdca's search, on par with its default start: " + "; ".join(context)
    return Judged(text, verdict, "" if verdict == HOLDS else "a start differs by more than 25%")


# -- Fig. 8: the sub-precision ---------------------------------------------------------------
@register(
    "fig8-one-step-ner",
    "8",
    "One Newton step (sub-precision 0.5) fails to converge on NER",
    ("conll2002-ned",),
)
def one_step_ner(c: Costs, b) -> Judged:
    """The authors' search at sub-precision 0.5 (one Newton step from 0.5) against it at 1e-3
    on NER: holds if the one-step run never reaches 1e-4 while 1e-3 does, or ends >= 100x
    above it; partly if 1e-3 is faster (`faster`); does not hold otherwise. crfsdca's one
    step (max_newton_iterations=1) and the authors' one step from the epsilon-mix start (the
    paper's text's, against 1e-3 from it) are reported beside it."""
    d = "conll2002-ned"
    r, mine, eps = _paper(b, d), fig8_runs(d, b[d]), one_step_starts(d, b[d])
    one, ref = r["0.5"], r["0.001"]
    race = c.race(ref, one)
    eps_race = c.race(eps["0.001"], eps["0.5"])
    text = (
        f"{c.show(one)}; {c.show(ref)}; {race.describe()}; {c.show(mine['one step'])};"
        f" {c.show(eps['0.5'])}; {eps_race.describe()}"
    )
    stalls = math.isinf(c.cost(one)) and math.isfinite(c.cost(ref))
    if stalls or c.final(one) > 100 * max(c.final(ref), 1e-12):
        return Judged(text, HOLDS)
    if faster(race) == HOLDS:
        return Judged(text, PARTLY, "one step converges, more slowly")
    why = ONE_STEP_REASON
    if faster(eps_race) != HOLDS and math.isfinite(c.cost(eps["0.5"])):
        why += "; from the epsilon-mix start (the paper's text's) one step converges too"
    return Judged(text, FAILS, why + ONE_STEP_UNKNOWN)


#: why the one-step run converges here while the paper's did not (see fig8-one-step-ner)
ONE_STEP_REASON = (
    "one Newton step converges on NER here, with the authors' own search (its safeguard, the"
    " bracket [0, 1], is the paper's too, so it does not explain the difference) and with"
    " crfsdca's (max_newton_iterations=1)"
)
ONE_STEP_UNKNOWN = (
    ". The reason for the paper's failure is unknown. Differences that remain: the training set"
    " (the first 5,000 of 15,806 sentences here, no bias rows; the paper's NER from SAG4CRF),"
    " the authors' arithmetic (f'/f'' through logarithms and log-sum-exp) and their runs'"
    " length beyond 30 epochs"
)


@register(
    "fig8-one-step-others",
    "8",
    "One Newton step makes no difference on OCR, CONLL and POS",
    None,
)
def one_step_others(c: Costs, b) -> Judged:
    """The authors' search at sub-precision 0.5 (one Newton step) races it at 1e-3 by updates
    on OCR, CONLL, POS (those run): `on_par` with band 1.25, combined."""
    parts = []
    for d in present(b, ("ocr", "conll2000", "ewt-pos")):
        r = _paper(b, d)
        race = c.race(r["0.5"], r["0.001"])
        parts.append((f"{SHORT[d]}: {race.describe(SAME)}", on_par(race, SAME)))
    if not parts:
        return Judged("none of OCR, CONLL, POS in this run", NOT_JUDGED, "no dataset")
    return per_dataset(parts, "one step differs by more than 25% somewhere")


@register(
    "fig8-tol",
    "8",
    "Sub-precision 1e-2 or less gives the same convergence on all datasets (§6.2)",
)
def tol_same(c: Costs, b) -> Judged:
    """The authors' search at sub-precisions 1e-2 and 1e-4 each race it at 1e-3 by updates on
    every dataset: `on_par` with band 1.25, combined."""
    parts = []
    for d in present(b, DATASETS):
        r = _paper(b, d)
        for t in ("0.01", "0.0001"):
            race = c.race(r[t], r["0.001"])
            parts.append((f"{SHORT[d]}: {race.describe(SAME)}", on_par(race, SAME)))
    return per_dataset(parts, "a sub-precision differs by more than 25% somewhere")


@register(
    "fig8-half-is-one-step",
    "8",
    "Sub-precision 0.5 means Newton stops after one step (Fig. 8 caption)",
    None,
)
def half_is_one_step(c: Costs, b) -> Judged:
    """The authors' search at sub-precision 0.5 on every dataset: evaluations per search (one
    evaluation = one Newton step from 0.5; a step leaving [0, 1] is replaced by a bisection
    that evaluates 0.5 again), and its race by updates against crfsdca's one-step ablation
    (max_newton_iterations=1 from 0.5, the same step up to its tolerance 1e-3: tested in
    tests/test_sdca_math.py). Holds on a dataset if at most 1.05 evaluations per search and
    `on_par` (band 1.25) with the ablation; partly if one of the two; combined."""
    parts = []
    for d in present(b, DATASETS):
        one, mine = _paper(b, d)["0.5"], fig8_runs(d, b[d])["one step"]
        evals = line_search_counts(c, one)[0]
        race = c.race(one, mine)
        par = on_par(race, SAME) == HOLDS
        verdict = HOLDS if evals <= 1.05 and par else PARTLY if evals <= 1.05 or par else FAILS
        text = f"{SHORT[d]}: {evals:.3f} evaluations per search; {race.describe(SAME)}"
        parts.append((text, verdict))
    if not parts:
        return Judged("no dataset in this run", NOT_JUDGED, "no dataset")
    why = (
        "more than 1.05 evaluations per search, or not on par with max_newton_iterations=1:"
        " a first Newton step from 0.5 that leaves [0, 1] costs the authors' search a second"
        " evaluation of 0.5 and lands at 0.25 or 0.75"
    )
    return per_dataset(parts, why)
