"""Convergence plots from traces: suboptimality, duality gap or test error against a cost.

One line per trace, labelled by its solver (and sampling scheme when the trace has one). The
x axis is one of the paper's cost measures (``X_AXES``): epochs, oracle calls, weight updates or
solver seconds. The y axis (``Y_AXES``) is

* ``suboptimality``: P(w) - P*, on a log scale. P* is given, or else estimated as the smallest
  finite primal in the traces minus a hair (``HAIR`` times max(1, |P|)), so that the best point
  stays on the log axis; the axis label says which.
* ``gap``: the certified duality gap P(w) - D(mu), on a log scale (a trace without a finite gap
  is left out, and named in the returned summary).
* ``test``: the test error (1 - token accuracy), on a linear scale.

matplotlib is an optional dependency (``pip install 'crfsdca[plot]'``), imported only when a
figure is drawn. Figures are built without pyplot (no display needed) and written atomically;
the format follows the file extension (``FORMATS``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from crfsdca.io.modelfile import atomic_write_bytes
from crfsdca.solvers.trace import Trace, read_trace

__all__ = [
    "FORMATS",
    "HAIR",
    "INSTALL_HINT",
    "X_AXES",
    "Y_AXES",
    "PlotSummary",
    "plot_trace_file",
    "plot_traces",
]

X_AXES = {
    "epochs": ("epoch", "epochs (oracle calls / n)"),
    "oracle-calls": ("oracle_calls", "oracle calls"),
    "updates": ("updates", "weight updates"),
    "seconds": ("seconds", "solver time [s]"),
}
Y_AXES = ("suboptimality", "gap", "test")
FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
HAIR = 1e-9
INSTALL_HINT = "plotting needs matplotlib: pip install 'crfsdca[plot]'"


@dataclass(slots=True)
class PlotSummary:
    """What a plot shows: where it was written, the P* used, the lines drawn, the traces left out.

    ``lines`` maps each legend label to the (x, y) arrays drawn (finite points only).
    """

    path: Path
    p_star: float | None = None
    p_star_source: str | None = None
    lines: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)


def _figure_class() -> Any:
    """matplotlib's Figure, or an ImportError naming the extra to install."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    return Figure


def trace_label(trace: Trace) -> str:
    """The legend entry of a trace: its solver, plus the sampling scheme if it has one."""
    config = trace.header.get("config") or {}
    sampling = config.get("sampling") if isinstance(config, dict) else None
    return f"{trace.solver} ({sampling})" if sampling else trace.solver


def check_axes(x: str, y: str) -> None:
    """Raise ValueError unless ``x`` is in X_AXES and ``y`` in Y_AXES."""
    if x not in X_AXES:
        raise ValueError(f"x must be one of {', '.join(X_AXES)}; got {x!r}")
    if y not in Y_AXES:
        raise ValueError(f"y must be one of {', '.join(Y_AXES)}; got {y!r}")


def output_format(path: str | os.PathLike) -> str:
    """The figure format for ``path`` from its extension; ValueError for any other."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(
            f"{path}: the figure file must end in {', '.join(FORMATS)}; got {suffix or 'none'!r}"
        )
    return FORMATS[suffix]


def estimate_p_star(traces: Sequence[Trace]) -> float:
    """The smallest finite primal over the traces minus ``HAIR * max(1, |P|)``."""
    primals = [r.primal for t in traces for r in t if math.isfinite(r.primal)]
    if not primals:
        raise ValueError("no finite primal value in the traces; cannot plot suboptimality")
    best = min(primals)
    return best - HAIR * max(1.0, abs(best))


def _series(trace: Trace, x: str, y: str, p_star: float | None) -> tuple[np.ndarray, np.ndarray]:
    arrays = trace.as_arrays()
    xs = arrays[X_AXES[x][0]].astype(np.float64)
    if y == "suboptimality":
        ys = arrays["primal"] - p_star
        ys[~(ys > 0)] = np.nan  # at or below P*: not drawable on a log axis
    elif y == "gap":
        ys = arrays["gap"].copy()
        ys[~(ys > 0)] = np.nan
    else:
        ys = arrays["test_error"]
    return xs, ys


def _y_label(y: str, p_star: float | None, source: str | None) -> str:
    if y == "suboptimality":
        return f"P(w) - P*  (P* = {p_star:.10g}, {source})"
    if y == "gap":
        return "duality gap P(w) - D(mu)"
    return "test error (1 - token accuracy)"


def plot_traces(
    traces: Sequence[Trace],
    out: str | os.PathLike,
    *,
    x: str = "epochs",
    y: str = "suboptimality",
    p_star: float | None = None,
    title: str | None = None,
) -> PlotSummary:
    """Draw one line per trace and write the figure to ``out`` (.png, .svg or .pdf), atomically.

    Parameters
    ----------
    traces : sequence of Trace
        The runs to compare (e.g. from :func:`crfsdca.read_trace`).
    out : str or PathLike
        Figure file; the extension picks the format. Its folder must exist.
    x : str
        One of ``X_AXES``: ``epochs``, ``oracle-calls``, ``updates``, ``seconds``.
    y : str
        One of ``Y_AXES``: ``suboptimality``, ``gap``, ``test``.
    p_star : float, optional
        The optimal primal value for ``suboptimality``; estimated from the traces if None.
    title : str, optional
        Figure title; default the dataset name(s) of the traces.

    Returns
    -------
    PlotSummary
        The path, the P* used (and whether given or estimated), the traces left out.

    Raises
    ------
    ValueError
        Unknown axis or extension, no traces, or nothing finite to draw.
    ImportError
        matplotlib is not installed (the message names ``pip install 'crfsdca[plot]'``).
    """
    check_axes(x, y)
    fmt = output_format(out)
    if not traces:
        raise ValueError("no traces to plot")
    summary = PlotSummary(path=Path(out))
    if y == "suboptimality":
        if p_star is None:
            p_star, source = estimate_p_star(traces), f"best primal - {HAIR:g}"
        elif not math.isfinite(p_star):
            raise ValueError(f"p_star must be a finite number; got {p_star}")
        else:
            source = "given"
        summary.p_star, summary.p_star_source = p_star, source
    figure_class = _figure_class()
    fig = figure_class(figsize=(6.4, 4.4), layout="constrained")
    ax = fig.add_subplot()
    for trace in traces:
        xs, ys = _series(trace, x, y, p_star)
        keep = np.isfinite(xs) & np.isfinite(ys)
        if not keep.any():
            summary.skipped.append(f"{trace_label(trace)}: no finite {y} values")
            continue
        label = trace_label(trace)
        if label in summary.lines:
            label = f"{label} #{len(summary.lines) + 1}"
        summary.lines[label] = (xs[keep], ys[keep])
        ax.plot(xs[keep], ys[keep], marker="o", markersize=3, label=label)
    if not summary.lines:
        raise ValueError(f"no trace has finite {y} values; nothing to plot")
    if y in ("suboptimality", "gap"):
        ax.set_yscale("log")
    ax.set_xlabel(X_AXES[x][1])
    ax.set_ylabel(_y_label(y, p_star, summary.p_star_source))
    datasets = dict.fromkeys(str(t.header.get("dataset") or "") for t in traces)
    ax.set_title(title if title is not None else ", ".join(filter(None, datasets)))
    ax.grid(True, which="major", alpha=0.3)
    ax.legend()
    atomic_write_bytes(out, lambda f: fig.savefig(f, format=fmt, dpi=150))
    return summary


def plot_trace_file(
    trace: str | os.PathLike | Trace,
    out: str | os.PathLike,
    *,
    x: str = "epochs",
    y: str = "gap",
) -> PlotSummary:
    """Plot one trace (a Trace or a .jsonl path) to ``out``; for ``train`` to call after a run.

    The default y is the certified gap, which needs no P*; a trace without a finite gap falls
    back to suboptimality against its own best primal.
    """
    loaded = trace if isinstance(trace, Trace) else read_trace(trace)
    if y == "gap" and not any(math.isfinite(r.gap) and r.gap > 0 for r in loaded):
        y = "suboptimality"
    return plot_traces([loaded], out, x=x, y=y)
