"""Which runs each figure draws, and on which axes: the figures as data.

A figure is a list of panels; a panel is one dataset, one x-axis (``updates``, ``oracle_calls``,
``epoch``, ``seconds``), one y quantity (``subopt`` = log10(P - P*), ``test_error``,
``gap_ratio`` = gap estimate / true gap) and its curves (one experiment each).
"""

from __future__ import annotations

from dataclasses import dataclass

from crfsdca.reproduce.experiments import (
    OEG_BASE,
    SHORT,
    Budget,
    Experiment,
    baseline,
    fig4_runs,
    sdca,
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
    curves = (
        sdca(d, b[d], "uniform", label="Uniform"),
        sdca(d, b[d], "importance", 0.8, label="Importance"),
        sdca(d, b[d], "gap", 0.8, label="Gap"),
        sdca(d, b[d], "gap-importance", 0.8, label="Gap x Importance"),
        sdca(d, b[d], "max", 0.8, label="Max"),
    )
    return [Panel("(OCR) sampling schemes, 80% non-uniform", d, "updates", "subopt", curves)]


def _fig3(b: dict[str, Budget]) -> list[Panel]:
    d = "conll2002-ned"
    curves = tuple(
        sdca(d, b[d], "gap", f, label=f"non-uniformity {f:g}") for f in (0.0, 0.2, 0.5, 0.8, 1.0)
    )
    return [
        Panel("(NER) gap sampling, fraction of non-uniform draws", d, "updates", "subopt", curves)
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
    panels = []
    for d in ("conll2002-ned", "ewt-pos"):
        curves = (
            sdca(
                d,
                b[d],
                "gap",
                0.8,
                label="one Newton step (from 0.5)",
                max_newton_iterations=1,
                line_search_start="half",
            ),
            sdca(d, b[d], "gap", 0.8, label="sub-precision 1e-2", line_search_tol=1e-2),
            sdca(d, b[d], "gap", 0.8, label="sub-precision 1e-3"),
        )
        panels.append(
            Panel(f"({SHORT[d]}) line-search sub-precision", d, "updates", "subopt", curves)
        )
    return panels


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
            f"({SHORT[d]}) SDCA-GAP from two starting points",
            d,
            "updates",
            "subopt",
            (
                sdca(
                    d,
                    b[d],
                    "gap",
                    0.8,
                    label="epsilon-mix, eps=1e-3 (crfsdca default)",
                    start="epsilon",
                ),
                sdca(d, b[d], "gap", 0.8, label="Gibbs score 10 (authors' start)"),
            ),
        )
        for d in ("ocr", "conll2000", "conll2002-ned")
    ]


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
    "start": ("Starting point: the authors' start vs the epsilon-mix", _start),
    "oeg": ("OEG step-size rule", _oeg),
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
