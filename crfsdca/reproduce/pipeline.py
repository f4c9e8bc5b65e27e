"""One call from names to REPORT.md: plan, run what is missing, draw, check the claims."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from crfsdca.reproduce import notes
from crfsdca.reproduce.claims import check_claims
from crfsdca.reproduce.experiments import DATASETS, FULL_BUDGETS, QUICK_BUDGETS, Budget
from crfsdca.reproduce.figures import Traces, draw_figure
from crfsdca.reproduce.plan import FIGURES, experiments_of, figure_panels
from crfsdca.reproduce.report import table1_cached, write_report
from crfsdca.reproduce.runner import run_all, trace_path


class UsageError(ValueError):
    """An unknown figure or dataset name."""


@dataclass
class Outcome:
    report: Path
    failures: dict[str, str] = field(default_factory=dict)
    missing: dict[str, list[str]] = field(default_factory=dict)
    computed: int = 0
    seconds: float = 0.0
    claims: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures and not any(self.missing.values())


def check_names(figures: Sequence[str], datasets: Sequence[str]) -> tuple[list[str], list[str]]:
    """Validated figure and dataset names (all when empty); UsageError lists the valid ones."""
    bad = [f for f in figures if f not in FIGURES]
    if bad:
        raise UsageError(f"unknown figure {bad[0]!r}; valid figures: {', '.join(FIGURES)}")
    bad = [d for d in datasets if d not in DATASETS]
    if bad:
        raise UsageError(f"unknown dataset {bad[0]!r}; valid datasets: {', '.join(DATASETS)}")
    return list(dict.fromkeys(figures or FIGURES)), list(dict.fromkeys(datasets or DATASETS))


def check_corpora(datasets: Sequence[str], data_dir: str | None) -> None:
    """Raise DatasetNotFoundError (which says where it looked) for a missing corpus."""
    import data_loaders

    for name in datasets:
        spec = data_loaders.get_dataset(name)
        for split in ("train", "test"):
            data_loaders.find_data_file(name, spec.split(split)[1].relpath, data_dir)


def budgets_for(datasets: Sequence[str], quick: bool) -> dict[str, Budget]:
    table = QUICK_BUDGETS if quick else FULL_BUDGETS
    return {d: table[d] for d in DATASETS if d in datasets}


def reproduce(
    figures: Sequence[str] = (),
    datasets: Sequence[str] = (),
    *,
    quick: bool = False,
    jobs: int = 1,
    out: str | Path = "reproduction",
    data_dir: str | None = None,
    progress: Callable[[str], None] = lambda line: None,
    extra_experiments: Sequence = (),
    cached_only: bool = False,
) -> Outcome:
    """Run the figures' experiments (cached), draw them, write OUT/REPORT.md.

    ``cached_only``: run nothing; draw and judge what the cached traces allow (the report
    marks the rest missing, its claims not judged).
    """
    start = time.perf_counter()
    figures, datasets = check_names(figures, datasets)
    check_corpora(datasets, data_dir)
    out = Path(out)
    budgets = budgets_for(datasets, quick)
    panels = {name: figure_panels(name, budgets) for name in figures}
    panels = {name: p for name, p in panels.items() if p}
    experiments = experiments_of([p for ps in panels.values() for p in ps]) + list(
        extra_experiments
    )
    before = _n_traces(out)
    if cached_only:
        failures = {}
        progress(
            f"--cached-only: {sum(not trace_path(out, e).exists() for e in experiments)}"
            f" of {len(experiments)} traces missing, not run"
        )
    else:
        failures = run_all(experiments, out, jobs=jobs, data_dir=data_dir, progress=progress)
    computed = _n_traces(out) - before
    if computed:
        notes.log_runtime(out, computed, time.perf_counter() - start)
    traces = Traces(out)
    missing = {}
    for name, ps in panels.items():
        missing[name] = draw_figure(name, ps, traces, out)
        progress(
            f"figure {name}: fig{name}.png"
            + (f" ({len(missing[name])} curves missing)" if missing[name] else "")
        )
    table = table1_cached(out, datasets, data_dir)
    ocr_start = None
    if "ocr" in datasets and "start" in panels:
        ocr_start = notes.full_ocr_start(out, data_dir)
    claims = check_claims(
        traces, budgets, smoke=quick, density=subset_density(out, budgets, data_dir)
    )
    claims = [c for c in claims if c.figure.split("/")[0] in panels or c.figure in panels]
    report = write_report(
        out,
        claims,
        budgets,
        table,
        missing,
        failures,
        notes.notes(traces, budgets, quick=quick, ocr_start=ocr_start, folder=out),
    )
    return Outcome(report, failures, missing, computed, time.perf_counter() - start, claims)


def subset_density(out: Path, budgets: dict[str, Budget], data_dir: str | None) -> dict:
    """a / A (mean active attributes per token / attributes) of each training subset, cached
    in OUT/subsets.json."""
    import json

    from crfsdca import __version__
    from crfsdca.io.modelfile import atomic_write_text
    from crfsdca.reproduce.problems import load_problem, table1_row

    path = Path(out) / "subsets.json"
    cached = json.loads(path.read_text()) if path.exists() else {}
    if cached.get("version") != __version__:
        cached = {"version": __version__}
    density = {}
    for d, b in budgets.items():
        key = f"{d}:{b.max_sequences}"
        if key not in cached:
            row = table1_row(load_problem(d, b.max_sequences, data_dir))
            cached[key] = row["a"] / row["A"]
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, json.dumps(cached, indent=1))
        density[d] = cached[key]
    return density


def _n_traces(out: Path) -> int:
    folder = out / "traces"
    return len(list(folder.glob("*.jsonl"))) if folder.exists() else 0
