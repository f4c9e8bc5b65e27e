"""Which runs each figure draws, and on which axes: the figures as data.

A figure is a list of panels; a panel is one dataset, one x-axis (``updates``, ``oracle_calls``,
``epoch``, ``seconds``), one y quantity (``subopt`` = log10(P - P*), ``test_error``,
``gap_ratio`` = gap estimate / true gap) and its curves (one experiment each).
"""

from __future__ import annotations

from dataclasses import dataclass

from crfsdca.reproduce.experiments import (
    LS_START_DATASETS,
    OEG_BASE,
    SAG_DATASETS,
    SEEDS,
    SHORT,
    Budget,
    Experiment,
    baseline,
    fig2_runs,
    fig4_runs,
    fig8_runs,
    line_search_start_runs,
    nonuniformity_runs,
    refresh_runs,
    sag_variant_runs,
    sdca,
    start_runs,
)

X_LABELS = {
    "updates": "epochs of parameter updates (updates / n)",
    "oracle_calls": "epochs of oracle calls (calls / n)",
    "epoch": "epochs (oracle calls / n)",
    "seconds": "solver wall time (s)",
}
Y_LABELS = {
    "subopt": "log10 primal sub-optimality P(w) - P*",
    "test_error": "test error (token)",
    "gap_ratio": "gap estimate / true duality gap",
    "newton_per_search": "Newton evaluations per line search (run so far)",
    "line_search_share": "line-search share of step time (run so far)",
}


@dataclass(frozen=True)
class Panel:
    title: str
    dataset: str
    x: str
    y: str
    curves: tuple[Experiment, ...]


def _fig2(b: dict[str, Budget]) -> list[Panel]:
    d = "ocr"
    curves = tuple(fig2_runs(d, b[d]).values())
    return [Panel("(OCR) sampling schemes, 80% non-uniform", d, "updates", "subopt", curves)]


def _fig3(b: dict[str, Budget]) -> list[Panel]:
    """NER first (the paper's figure), then the other datasets ("on all datasets")."""
    return [
        Panel(
            f"({SHORT[d]}) gap sampling, fraction of non-uniform draws",
            d,
            "updates",
            "subopt",
            tuple(nonuniformity_runs(d, b[d]).values()),
        )
        for d in ("conll2002-ned", "ocr", "conll2000", "ewt-pos")
    ]


def _fig4(b: dict[str, Budget]) -> list[Panel]:
    return [
        Panel(f"({SHORT[d]}) by {x.replace('_', ' ')}", d, x, "subopt", tuple(fig4_runs(d, b[d])))
        for d in b
        for x in ("oracle_calls", "updates")
    ]


def _fig6(b: dict[str, Budget]) -> list[Panel]:
    return [
        Panel(
            f"({SHORT[d]}) by oracle calls", d, "oracle_calls", "subopt", tuple(fig4_runs(d, b[d]))
        )
        for d in ("conll2000", "ewt-pos")
    ]


def _fig7(b: dict[str, Budget]) -> list[Panel]:
    return [
        Panel(f"({SHORT[d]}) test error", d, "epoch", "test_error", tuple(fig4_runs(d, b[d])))
        for d in b
    ]


def _fig8(b: dict[str, Budget]) -> list[Panel]:
    """NER and POS (the paper's figure), then OCR and CONLL (the text's claim)."""
    return [
        Panel(
            f"({SHORT[d]}) line-search sub-precision",
            d,
            "updates",
            "subopt",
            tuple(fig8_runs(d, b[d]).values()),
        )
        for d in ("conll2002-ned", "ewt-pos", "ocr", "conll2000")
    ]


def _fig9(b: dict[str, Budget]) -> list[Panel]:
    return [
        Panel(
            f"({SHORT[d]}) gap estimate / true gap",
            d,
            "epoch",
            "gap_ratio",
            tuple(sdca(d, b[d], "gap", f, label=f"non-uniformity {f:g}") for f in (0.0, 0.8, 1.0)),
        )
        for d in ("conll2000", "ocr")
    ]


def _time(b: dict[str, Budget]) -> list[Panel]:
    return [
        Panel(
            f"({SHORT[d]}) by wall time",
            d,
            "seconds",
            "subopt",
            (
                *fig4_runs(d, b[d]),
                baseline(d, b[d], "lbfgs", "L-BFGS (crfsdca)"),
                baseline(d, b[d], "crfsuite", "CRFsuite L-BFGS"),
            ),
        )
        for d in b
    ]


def _start(b: dict[str, Budget]) -> list[Panel]:
    return [
        Panel(
            f"({SHORT[d]}) SDCA-GAP from three starting points",
            d,
            "updates",
            "subopt",
            tuple(start_runs(d, b[d]).values()),
        )
        for d in ("ocr", "conll2000", "conll2002-ned")
    ]


def _linesearch(b: dict[str, Budget]) -> list[Panel]:
    """Newton evaluations per search and the search's time share of SDCA-GAP (§6.2)."""
    return [
        Panel(
            f"({SHORT[d]}) line-search cost",
            d,
            "epoch",
            y,
            (
                sdca(d, b[d], "gap", 0.8, label="SDCA-GAP"),
                *(
                    line_search_start_runs(d, b[d])[k]
                    for k in ("half", "previous")
                    if d in LS_START_DATASETS
                ),
            ),
        )
        for d in ("ocr", "conll2000", "conll2002-ned", "ewt-pos")
        for y in ("newton_per_search", "line_search_share")
    ]


def _fn4(b: dict[str, Budget]) -> list[Panel]:
    return [
        Panel(
            f"({SHORT[d]}) where the Newton search starts",
            d,
            "updates",
            "subopt",
            tuple(line_search_start_runs(d, b[d]).values()),
        )
        for d in LS_START_DATASETS
    ]


def _refresh(b: dict[str, Budget]) -> list[Panel]:
    return [
        Panel(
            f"({SHORT[d]}) periodic exact refresh of the gaps, by {x.replace('_', ' ')}",
            d,
            x,
            "subopt",
            tuple(refresh_runs(d, b[d]).values()),
        )
        for d in ("ocr", "conll2000", "conll2002-ned", "ewt-pos")
        for x in ("updates", "oracle_calls")
    ]


def _seeds(b: dict[str, Budget]) -> list[Panel]:
    d = "ocr"
    curves = tuple(fig2_runs(d, b[d], seed)[k] for k in ("Gap", "GapxImp") for seed in SEEDS)
    return [Panel("(OCR) Gap vs Gap x Importance, seeds 0, 1, 2", d, "updates", "subopt", curves)]


def _sag(b: dict[str, Budget]) -> list[Panel]:
    panels = []
    for d in SAG_DATASETS:
        base = {e.label: e for e in fig4_runs(d, b[d])}
        variants = sag_variant_runs(d, b[d])
        for x in ("updates", "oracle_calls"):
            curves = (
                base["SDCA-GAP"],
                base["SAG-NUS"],
                base["SAG-NUS*"],
                *variants.values(),
            )
            panels.append(
                Panel(
                    f"({SHORT[d]}) SAG-NUS constants, by {x.replace('_', ' ')}",
                    d,
                    x,
                    "subopt",
                    curves,
                )
            )
    return panels


def _oeg(b: dict[str, Budget]) -> list[Panel]:
    return [
        Panel(
            f"({SHORT[d]}) OEG learning-rate rules",
            d,
            "updates",
            "subopt",
            (
                sdca(d, b[d], "uniform", label="SDCA (uniform)"),
                baseline(d, b[d], "oeg", "OEG, halve on failure, x1.05 on success"),
                Experiment.make(
                    d,
                    "oeg",
                    b[d],
                    label="OEG, halve only (crfsdca default)",
                    **{**OEG_BASE, "learning_rate_growth": 1.0},
                ),
            ),
        )
        for d in ("conll2000", "conll2002-ned")
    ]


FIGURES = {
    "2": ("Fig. 2: sampling schemes on OCR", _fig2),
    "3": ("Fig. 3: non-uniformity on NER", _fig3),
    "4": ("Fig. 4: SDCA vs SAG-NUS, SAG-NUS*, OEG", _fig4),
    "6": ("Fig. 6: oracle calls on CONLL and POS", _fig6),
    "7": ("Fig. 7: test error against epochs", _fig7),
    "8": ("Fig. 8: line-search sub-precision", _fig8),
    "9": ("Fig. 9: gap estimate / true gap", _fig9),
    "time": ("Fig. 4 against wall time, with CRFsuite's L-BFGS", _time),
    "start": ("Starting point: the authors' start, the epsilon-mix, the uniform law", _start),
    "oeg": ("OEG step-size rule", _oeg),
    "linesearch": ("Sec. 6.2: Newton evaluations per line search and its time share", _linesearch),
    "fn4": ("Footnote 4: where the Newton line search starts", _fn4),
    "refresh": ("Sec. 6.3: SDCA-GAP with and without periodic exact gaps", _refresh),
    "seeds": ("Fig. 2 over seeds: Gap vs Gap x Importance on OCR", _seeds),
    "sag": ("SAG-NUS / SAG-NUS*: sensitivity to the reconstructed constants", _sag),
}


def figure_panels(name: str, budgets: dict[str, Budget]) -> list[Panel]:
    """The panels of figure ``name`` whose dataset is among ``budgets``."""
    full = {d: budgets.get(d, Budget(None, 1.0)) for d in SHORT}
    return [p for p in FIGURES[name][1](full) if p.dataset in budgets]


def experiments_of(panels: list[Panel]) -> list[Experiment]:
    """The distinct experiments of ``panels``, references first, in a stable order."""
    seen: dict[str, Experiment] = {}
    for panel in panels:
        for exp in panel.curves:
            seen.setdefault(exp.reference.digest, exp.reference)
    for panel in panels:
        for exp in panel.curves:
            seen.setdefault(exp.digest, exp)
    return list(seen.values())
