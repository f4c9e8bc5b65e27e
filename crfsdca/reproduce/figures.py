"""Figures drawn from traces alone: one PNG and one CSV (the data behind it) per figure."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import numpy as np

from crfsdca.io.modelfile import atomic_write_bytes, atomic_write_text
from crfsdca.reproduce.experiments import Experiment
from crfsdca.reproduce.plan import FIGURES, X_LABELS, Y_LABELS, Panel
from crfsdca.reproduce.runner import trace_path
from crfsdca.solvers.trace import Trace, read_trace

FLOOR = 1e-12  # sub-optimality below this is round-off; plotted at the floor
#: y quantities read off the SDCA counters: (numerator keys, denominator key), run so far
LINE_SEARCH_Y = {
    "newton_per_search": (("newton_iterations", "predictor_evaluations"), "line_searches"),
    "line_search_share": (("line_search_seconds",), "step_seconds"),
}


class Traces:
    """Read-once access to the traces of an output folder (None when missing)."""

    def __init__(self, out: Path) -> None:
        self.out = Path(out)
        self._cache: dict[str, Trace | None] = {}

    def get(self, exp: Experiment) -> Trace | None:
        if exp.digest not in self._cache:
            path = trace_path(self.out, exp)
            self._cache[exp.digest] = read_trace(path) if path.exists() else None
        return self._cache[exp.digest]

    def p_star(self, exp: Experiment) -> float | None:
        ref = self.get(exp.reference)
        return None if ref is None else float(ref.header["p_star"])


def x_values(trace: Trace, x: str) -> np.ndarray:
    n = trace.header["n_sequences"]
    recs = trace.records
    if x == "updates":
        return np.array([r.updates / n for r in recs])
    if x == "oracle_calls":
        return np.array([r.oracle_calls / n for r in recs])
    if x == "epoch":
        return np.array([r.epoch for r in recs])
    return np.array([r.seconds for r in recs])


def series(traces: Traces, panel: Panel, exp: Experiment) -> tuple[np.ndarray, np.ndarray] | None:
    """(x, y) of one curve of a panel, or None when its trace (or P*) is missing."""
    trace = traces.get(exp)
    if trace is None:
        return None
    x = x_values(trace, panel.x)
    recs = trace.records
    if panel.y == "subopt":
        p_star = traces.p_star(exp)
        if p_star is None:
            return None
        sub = np.array([r.primal - p_star for r in recs])
        y = np.log10(np.maximum(sub, FLOOR))
    elif panel.y == "test_error":
        y = np.array([r.test_error for r in recs])
    elif panel.y in LINE_SEARCH_Y:
        num, den = LINE_SEARCH_Y[panel.y]
        top = np.array([sum(r.extra.get(k, math.nan) for k in num) for r in recs])
        bottom = np.array([r.extra.get(den, math.nan) for r in recs])
        with np.errstate(all="ignore"):
            y = np.where(bottom > 0, top / bottom, math.nan)
    else:  # gap_ratio: skip the start (estimates are the initial 100, not estimates)
        y = np.array([r.gap_estimate / r.gap if r.gap > 0 else math.nan for r in recs])
        keep = x > 0
        x, y = x[keep], y[keep]
    return x, y


def draw_figure(name: str, panels: list[Panel], traces: Traces, folder: Path) -> list[str]:
    """Write ``fig<name>.png`` and ``fig<name>.csv``; returns the labels of missing curves."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    missing: list[str] = []
    rows = [("figure", "panel", "dataset", "curve", "x_axis", "x", "y_axis", "y")]
    cols = min(len(panels), 2 if len(panels) > 1 else 1)
    nrows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(6.2 * cols, 4.2 * nrows), squeeze=False)
    for ax, panel in zip(axes.flat, panels, strict=False):
        for exp in panel.curves:
            data = series(traces, panel, exp)
            if data is None:
                missing.append(f"{panel.title}: {exp.label}")
                ax.plot([], [], label=f"{exp.label} (missing)")
                continue
            x, y = data
            ax.plot(x, y, marker=".", markersize=3, label=exp.label)
            rows += [
                (
                    name,
                    panel.title,
                    panel.dataset,
                    exp.label,
                    panel.x,
                    f"{a:.6g}",
                    panel.y,
                    f"{b:.6g}",
                )
                for a, b in zip(x, y, strict=True)
            ]
        ax.set_title(panel.title, fontsize=10)
        ax.set_xlabel(X_LABELS[panel.x])
        ax.set_ylabel(Y_LABELS[panel.y])
        if panel.y == "gap_ratio":
            ax.set_yscale("log", base=2)
            for level in (0.5, 1.0, 2.0):
                ax.axhline(level, color="grey", lw=0.6, ls=":" if level != 1 else "-")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.suptitle(FIGURES[name][0])
    fig.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    png = folder / f"fig{name}.png"
    atomic_write_bytes(png, lambda f: fig.savefig(f, dpi=90, format="png"))
    plt.close(fig)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    atomic_write_text(folder / f"fig{name}.csv", buf.getvalue())
    return missing
