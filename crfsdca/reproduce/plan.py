"""Which runs each figure draws, and on which axes: the figures as data.

A figure is a list of panels; a panel is one dataset, one x-axis (``updates``, ``oracle_calls``,
``epoch``, ``seconds``, ``cpu_seconds``), one y quantity (``subopt`` = log10(P - P*),
``test_error``, ``gap_ratio`` = gap estimate / true gap) and its curves (one experiment each).
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
    measurements,
    nonuniformity_runs,
    one_step_starts,
    paper_search_runs,
    refresh_runs,
    sag_variant_runs,
    sdca,
    start_runs,
    time_baselines,
)

X_LABELS = {
    "updates": "epochs of parameter updates (updates / n)",
    "oracle_calls": "epochs of oracle calls (calls / n)",
    "epoch": "epochs (oracle calls / n)",
    "seconds": "solver wall time (s)",
    "cpu_seconds": "solver CPU time (s), one thread",
    "radius": "radius R_i (App. C)",
}
Y_LABELS = {
    "subopt": "log10 primal sub-optimality P(w) - P*",
    "test_error": "test error (token)",
    "gap_ratio": "gap estimate / true duality gap",
    "newton_per_search": "Newton evaluations per line search (run so far)",
    "line_search_share": "line-search share of step time (run so far)",
    "difficulty": "gap g_i after 5 epochs of uniform SDCA",
}
#: what a reader needs under a figure to read it (printed under it and in the report)
FIGURE_NOTES = {
    "4": "By updates, SAG-NUS, SAG-NUS* and OEG end before SDCA: every run has the same budget"
    " of oracle calls and they spend more than one per update (line-search trials, one oracle"
    " call each). Any run also stops once P - P* <= 1e-7.",
    "7": "From epoch 1: the error at the start (w ~ 0) would squash the scale.",
    "8": "The authors' search at sub-precision 0.5 takes one Newton step from 0.5 (bisecting to"
    " 0.25 or 0.75 when that step leaves [0, 1]).",
    "time": "Solver CPU time (time.process_time) of single-threaded runs made after an untimed"
    " warm-up run of the same solver on 8 sequences (numba's compilation excluded;"
    " compile_seconds of each trace in traces.csv), on a shared machine whose benchmarks stop"
    " other processes for minutes at a time: CPU time does not count those stops, wall time"
    " does (both in traces.csv). L-BFGS and CRFsuite get 4x the epoch budget.",
    "difficulty": "One point per training sequence: its radius R_i and its exact gap after 5"
    " epochs of uniform SDCA from the authors' start.",
}


@dataclass(frozen=True)
class Panel:
    title: str
    dataset: str
    x: str
    y: str
    curves: tuple[Experiment, ...]


ALL4 = ("ocr", "conll2000", "conll2002-ned", "ewt-pos")
BY_CALLS = ("updates", "oracle_calls")


def _panels(title, datasets, xs, ys, curves) -> list[Panel]:
    """One panel per (dataset, x, y): ``title`` after the dataset's short name, the x-axis's name
    in place of ``{x}``; ``curves(d)`` gives the dataset's experiments."""
    return [
        Panel(f"({SHORT[d]}) {title.format(x=x.replace('_', ' '))}", d, x, y, tuple(curves(d)))
        for d in datasets
        for x in xs
        for y in ys
    ]


def _fig2(b: dict[str, Budget]) -> list[Panel]:
    runs = lambda d: fig2_runs(d, b[d]).values()  # noqa: E731
    return _panels("sampling schemes, 80% non-uniform", ("ocr",), ("updates",), ("subopt",), runs)


def _fig3(b: dict[str, Budget]) -> list[Panel]:
    """NER first (the paper's figure), then the other datasets ("on all datasets")."""
    runs = lambda d: nonuniformity_runs(d, b[d]).values()  # noqa: E731
    datasets = ("conll2002-ned", "ocr", "conll2000", "ewt-pos")
    title = "gap sampling, fraction of non-uniform draws"
    return _panels(title, datasets, ("updates",), ("subopt",), runs)


def _fig4(b: dict[str, Budget]) -> list[Panel]:
    xs = ("oracle_calls", "updates")
    return _panels("by {x}", b, xs, ("subopt",), lambda d: fig4_runs(d, b[d]))


def _fig6(b: dict[str, Budget]) -> list[Panel]:
    runs = lambda d: fig4_runs(d, b[d])  # noqa: E731
    return _panels("by {x}", ("conll2000", "ewt-pos"), ("oracle_calls",), ("subopt",), runs)


def _fig7(b: dict[str, Budget]) -> list[Panel]:
    return _panels("test error", b, ("epoch",), ("test_error",), lambda d: fig4_runs(d, b[d]))


def _fig8(b: dict[str, Budget]) -> list[Panel]:
    """NER and POS (the paper's figure), then OCR and CONLL (the text's claim): the authors'
    search at sub-precision 0.5 (one Newton step), 1e-2, 1e-3 and 1e-4, and crfsdca's one
    step."""

    def runs(d):
        paper = paper_search_runs(d, b[d])
        yield from (paper[k] for k in ("0.5", "0.01", "0.001", "0.0001"))
        yield fig8_runs(d, b[d])["one step"]
        if d == "conll2002-ned":
            yield from one_step_starts(d, b[d]).values()

    datasets = ("conll2002-ned", "ewt-pos", "ocr", "conll2000")
    return _panels("line-search sub-precision", datasets, ("updates",), ("subopt",), runs)


def _fig9(b: dict[str, Budget]) -> list[Panel]:
    def runs(d):
        return (sdca(d, b[d], "gap", f, label=f"non-uniformity {f:g}") for f in (0.0, 0.8, 1.0))

    title = "gap estimate / true gap"
    return _panels(title, ("conll2000", "ocr"), ("epoch",), ("gap_ratio",), runs)


def _time(b: dict[str, Budget]) -> list[Panel]:
    def runs(d):
        yield from fig4_runs(d, b[d])
        yield from time_baselines(d, b[d])

    return _panels("by CPU time", b, ("cpu_seconds",), ("subopt",), runs)


def _start(b: dict[str, Budget]) -> list[Panel]:
    runs = lambda d: start_runs(d, b[d]).values()  # noqa: E731
    datasets = ("ocr", "conll2000", "conll2002-ned")
    title = "SDCA-GAP from three starting points"
    return _panels(title, datasets, ("updates",), ("subopt",), runs)


def _linesearch(b: dict[str, Budget]) -> list[Panel]:
    """Newton evaluations per search and the search's time share of SDCA-GAP (§6.2): the
    authors' search at 1e-2 and 1e-3 and from the previous step, and crfsdca's."""

    def runs(d):
        paper = paper_search_runs(d, b[d])
        yield from (paper[k] for k in ("0.01", "0.001", "previous"))
        yield sdca(d, b[d], "gap", 0.8, label="crfsdca search (float32 predictor + float64)")

    ys = ("newton_per_search", "line_search_share")
    return _panels("line-search cost", ALL4, ("epoch",), ys, runs)


def _paperls(b: dict[str, Budget]) -> list[Panel]:
    """SDCA-GAP with the authors' search at every sub-precision and start, against crfsdca's."""

    def runs(d):
        yield from paper_search_runs(d, b[d]).values()
        yield sdca(d, b[d], "gap", 0.8, label="crfsdca search, sub-precision 1e-3")

    title = "the authors' line search"
    return _panels(title, ALL4, ("updates",), ("subopt",), runs)


def _difficulty(b: dict[str, Budget]) -> list[Panel]:
    runs = lambda d: (measurements(d, b[d])["difficulty"],)  # noqa: E731
    title = "radius R_i against the gap g_i"
    return _panels(title, ALL4, ("radius",), ("difficulty",), runs)


def _fn4(b: dict[str, Budget]) -> list[Panel]:
    runs = lambda d: line_search_start_runs(d, b[d]).values()  # noqa: E731
    title = "where the Newton search starts"
    return _panels(title, LS_START_DATASETS, ("updates",), ("subopt",), runs)


def _refresh(b: dict[str, Budget]) -> list[Panel]:
    runs = lambda d: refresh_runs(d, b[d]).values()  # noqa: E731
    title = "periodic exact refresh of the gaps, by {x}"
    return _panels(title, ALL4, BY_CALLS, ("subopt",), runs)


def _seeds(b: dict[str, Budget]) -> list[Panel]:
    def runs(d):
        return (fig2_runs(d, b[d], seed)[k] for k in ("Gap", "GapxImp") for seed in SEEDS)

    title = "Gap vs Gap x Importance, seeds 0, 1, 2"
    return _panels(title, ("ocr",), ("updates",), ("subopt",), runs)


def _sag(b: dict[str, Budget]) -> list[Panel]:
    def runs(d):
        base = {e.label: e for e in fig4_runs(d, b[d])}
        yield from (base[k] for k in ("SDCA-GAP", "SAG-NUS", "SAG-NUS*"))
        yield from sag_variant_runs(d, b[d]).values()

    return _panels("SAG-NUS constants, by {x}", SAG_DATASETS, BY_CALLS, ("subopt",), runs)


def _oeg(b: dict[str, Budget]) -> list[Panel]:
    def runs(d):
        yield sdca(d, b[d], "uniform", label="SDCA (uniform)")
        yield baseline(d, b[d], "oeg", "OEG, halve on failure, x1.05 on success")
        rule = {**OEG_BASE, "learning_rate_growth": 1.0}
        yield Experiment.make(d, "oeg", b[d], label="OEG, halve only (crfsdca default)", **rule)

    title = "OEG learning-rate rules"
    return _panels(title, ("conll2000", "conll2002-ned"), ("updates",), ("subopt",), runs)


FIGURES = {
    "2": ("Fig. 2: sampling schemes on OCR", _fig2),
    "3": ("Fig. 3: non-uniformity on NER", _fig3),
    "4": ("Fig. 4: SDCA vs SAG-NUS, SAG-NUS*, OEG", _fig4),
    "6": ("Fig. 6: oracle calls on CONLL and POS", _fig6),
    "7": ("Fig. 7: test error against epochs", _fig7),
    "8": ("Fig. 8: line-search sub-precision", _fig8),
    "9": ("Fig. 9: gap estimate / true gap", _fig9),
    "time": ("Fig. 4 against CPU time, with CRFsuite's L-BFGS", _time),
    "start": ("Starting point: the authors' start, the epsilon-mix, the uniform law", _start),
    "oeg": ("OEG step-size rule", _oeg),
    "linesearch": ("Sec. 6.2: Newton evaluations per line search and its time share", _linesearch),
    "fn4": ("Footnote 4: where the Newton line search starts", _fn4),
    "paperls": (
        "Sec. 6.2: the authors' line search (safe Newton from 0.5, no predictor)",
        _paperls,
    ),
    "difficulty": ("Sec. 6.3: do the radii R_i tell which sequences are hard?", _difficulty),
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
            if exp.needs_reference:
                seen.setdefault(exp.reference.digest, exp.reference)
    for panel in panels:
        for exp in panel.curves:
            seen.setdefault(exp.digest, exp)
    return list(seen.values())


def measurement_experiments(budgets: dict[str, Budget]) -> list[Experiment]:
    """Every measurement of the datasets of ``budgets`` (the claims on Table 1, App. A and C)."""
    return [e for d, b in budgets.items() for e in measurements(d, b).values()]
