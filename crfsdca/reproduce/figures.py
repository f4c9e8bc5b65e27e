"""Figures drawn from traces alone: one PNG and one CSV (the data behind it) per figure."""

from __future__ import annotations

import csv
import io
import math
import textwrap
from pathlib import Path

import numpy as np

from crfsdca.io.modelfile import atomic_write_bytes, atomic_write_text
from crfsdca.reproduce.experiments import Experiment, identity_of
from crfsdca.reproduce.plan import FIGURE_NOTES, FIGURES, X_LABELS, Y_LABELS, Panel
from crfsdca.reproduce.runner import is_cached, trace_path
from crfsdca.solvers.trace import Trace, read_trace

FLOOR = 1e-12  # sub-optimality below this is round-off; plotted at the floor
#: y quantities read off the SDCA counters: (numerator keys, denominator key), run so far
LINE_SEARCH_Y = {
    "newton_per_search": (("newton_iterations", "predictor_evaluations"), "line_searches"),
    "line_search_share": (("line_search_seconds",), "step_seconds"),
}


class Traces:
    """Read-once access to the traces of an output folder (None when missing).

    By default a trace is found by its experiment's digest, which includes today's code: the
    traces of other code are not seen (``runner.is_cached``). With ``any_code`` (an archive of
    traces, ``crfsdca reproduce --from-archive``) a trace is found by the experiment's
    ``identity``, whatever code made it; ``commits`` then says which.
    """

    def __init__(self, out: Path, *, any_code: bool = False) -> None:
        self.out = Path(out)
        self.any_code = any_code
        self._cache: dict[str, Trace | None] = {}
        self._paths: dict[str, Path] = {}
        self._index: dict[str, Path] | None = None

    def path(self, exp: Experiment) -> Path | None:
        if not self.any_code:
            return trace_path(self.out, exp) if is_cached(self.out, exp) else None
        if self._index is None:
            self._index = index_traces(self.out / "traces")
        return self._index.get(exp.identity)

    def get(self, exp: Experiment) -> Trace | None:
        if exp.digest not in self._cache:
            path = self.path(exp)
            self._cache[exp.digest] = read_trace(path) if path is not None else None
            if path is not None:
                self._paths[exp.digest] = path
        return self._cache[exp.digest]

    def p_star(self, exp: Experiment) -> float | None:
        ref = self.get(exp.reference)
        return None if ref is None else float(ref.header["p_star"])

    def measurement(self, exp: Experiment) -> dict | None:
        trace = self.get(exp)
        return None if trace is None else trace.header["measurement"]

    def used(self) -> dict[Path, Trace]:
        """{path: trace} of the traces read so far."""
        return {path: self._cache[digest] for digest, path in self._paths.items()}


def index_traces(folder: Path) -> dict[str, Path]:
    """{experiment identity: path} of the traces in ``folder`` (their headers' experiments)."""
    import json

    out = {}
    for path in sorted(Path(folder).glob("*.jsonl")):
        with path.open(encoding="utf-8") as fh:
            header = json.loads(fh.readline())
        if "experiment" in header:
            out[identity_of(header["experiment"])] = path
    return out


def x_values(trace: Trace, x: str) -> np.ndarray:
    n = trace.header["n_sequences"]
    recs = trace.records
    if x == "updates":
        return np.array([r.updates / n for r in recs])
    if x == "oracle_calls":
        return np.array([r.oracle_calls / n for r in recs])
    if x == "epoch":
        return np.array([r.epoch for r in recs])
    if x == "cpu_seconds":  # the CPU time of a single-threaded run (runner's docstring)
        return np.array([r.get("cpu_seconds") for r in recs])
    return np.array([r.seconds for r in recs])


def series(traces: Traces, panel: Panel, exp: Experiment) -> tuple[np.ndarray, np.ndarray] | None:
    """(x, y) of one curve of a panel, or None when its trace (or P*) is missing."""
    trace = traces.get(exp)
    if trace is None:
        return None
    if panel.y == "difficulty":  # a measurement: one point per sequence
        m = trace.header["measurement"]
        return np.array(m["radius"], float), np.array(m["gap"], float)
    x = x_values(trace, panel.x)
    recs = trace.records
    if panel.y == "subopt":
        p_star = traces.p_star(exp)
        if p_star is None:
            return None
        sub = np.array([r.primal - p_star for r in recs])
        y = np.log10(np.maximum(sub, FLOOR))
    elif panel.y == "test_error":  # from epoch 1: the start's error would squash the scale
        y = np.array([r.test_error for r in recs])
        keep = x > 0
        x, y = x[keep], y[keep]
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


#: one colour per method in every figure (the rest take the next free colour of the cycle)
METHOD_COLOURS = {
    "SDCA": "tab:blue",
    "SDCA-GAP": "tab:orange",
    "SAG-NUS": "tab:green",
    "SAG-NUS*": "tab:red",
    "OEG": "tab:purple",
    "L-BFGS (crfsdca)": "tab:brown",
    "CRFsuite L-BFGS": "tab:pink",
}


TAB10 = ("blue", "orange", "green", "red", "purple", "brown", "pink", "gray", "olive", "cyan")


def colours(labels: list[str]) -> dict[str, str]:
    """A colour per curve label: METHOD_COLOURS for the methods; the other curves take, in
    order of first appearance, tab10's colours that no method has, then tab20's light shades
    (the same in every panel of the figure)."""
    from matplotlib import colormaps, colors

    out = {k: METHOD_COLOURS[k] for k in dict.fromkeys(labels) if k in METHOD_COLOURS}
    light = [colors.to_hex(c) for c in colormaps["tab20"].colors[1::2]]
    free = [f"tab:{c}" for c in TAB10 if f"tab:{c}" not in METHOD_COLOURS.values()] + light
    others = [k for k in dict.fromkeys(labels) if k not in out]
    out.update((k, free[i % len(free)]) for i, k in enumerate(others))
    return out


def draw_figure(name: str, panels: list[Panel], traces: Traces, folder: Path) -> list[str]:
    """Write ``fig<name>.png`` and ``fig<name>.csv``; returns the labels of missing curves.

    Every method keeps its colour across figures (METHOD_COLOURS); when every panel draws the
    same curves, one legend below the panels replaces the panels' own (it hides no curve); a
    figure's note (plan.FIGURE_NOTES) is printed under it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    missing: list[str] = []
    rows = [("figure", "panel", "dataset", "curve", "x_axis", "x", "y_axis", "y")]
    cols = min(len(panels), 2 if len(panels) > 1 else 1)
    nrows = math.ceil(len(panels) / cols)
    labels = [exp.label for panel in panels for exp in panel.curves]
    palette = colours(labels)
    shared = len({tuple(e.label for e in p.curves) for p in panels}) == 1
    height = 4.2 * nrows
    fig, axes = plt.subplots(nrows, cols, figsize=(6.2 * cols, height), squeeze=False)
    for ax, panel in zip(axes.flat, panels, strict=False):
        for exp in panel.curves:
            data = series(traces, panel, exp)
            colour = palette[exp.label]
            if data is None:
                missing.append(f"{panel.title}: {exp.label}")
                ax.plot([], [], color=colour, label=f"{exp.label} (missing)")
                continue
            x, y = data
            if panel.y == "difficulty":
                ax.loglog(x, y, ".", markersize=2, alpha=0.4, color=colour, label=exp.label)
            else:
                ax.plot(x, y, marker=".", markersize=3, color=colour, label=exp.label)
            rows += [
                (name, panel.title, panel.dataset, exp.label, panel.x, f"{a:.6g}", panel.y,
                 f"{b:.6g}")
                for a, b in zip(x, y, strict=True)
            ]  # fmt: skip
        ax.set_title(panel.title, fontsize=10)
        ax.set_xlabel(X_LABELS[panel.x])
        ax.set_ylabel(Y_LABELS[panel.y])
        if panel.y == "gap_ratio":
            ax.set_yscale("log", base=2)
            for level in (0.5, 1.0, 2.0):
                ax.axhline(level, color="grey", lw=0.6, ls=":" if level != 1 else "-")
        ax.grid(alpha=0.3)
        if not shared:
            ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    # the bottom strip (inches): the shared legend, then the figure's note under it
    note = textwrap.fill(FIGURE_NOTES[name], width=95 * cols) if name in FIGURE_NOTES else ""
    note_in = 0.16 * (note.count("\n") + 1) + 0.1 if note else 0.0
    handles, names = axes.flat[0].get_legend_handles_labels()
    legend_in = 0.22 * math.ceil(len(names) / 4) + 0.15 if shared else 0.0
    fig.suptitle(FIGURES[name][0])
    fig.tight_layout(rect=(0, (note_in + legend_in) / height, 1, 1 - 0.15 / height))
    if shared:
        anchor = (0.5, note_in / height)
        fig.legend(handles, names, loc="lower center", bbox_to_anchor=anchor, ncols=4, fontsize=8)
    if note:
        fig.text(0.5, 0.05 / height, note, ha="center", va="bottom", fontsize=8)
    folder.mkdir(parents=True, exist_ok=True)
    png = folder / f"fig{name}.png"
    atomic_write_bytes(png, lambda f: fig.savefig(f, dpi=90, format="png", bbox_inches="tight"))
    plt.close(fig)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    atomic_write_text(folder / f"fig{name}.csv", buf.getvalue())
    return missing
