"""One call from names to REPORT.md: plan, run what is missing, draw, check the claims."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from crfsdca.reproduce import archive, notes
from crfsdca.reproduce.claims import check_claims
from crfsdca.reproduce.experiments import DATASETS, FULL_BUDGETS, QUICK_BUDGETS, Budget
from crfsdca.reproduce.figures import Traces, draw_figure
from crfsdca.reproduce.plan import (
    FIGURES,
    experiments_of,
    figure_panels,
    measurement_experiments,
)
from crfsdca.reproduce.report import measurements_table, table1_rows, write_report
from crfsdca.reproduce.runner import is_cached, run_all


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


def budgets_for(datasets: Sequence[str], quick: bool, subsets: float = 1.0) -> dict[str, Budget]:
    """Each dataset's budget; ``subsets`` < 1 takes that fraction of the full run's training
    subsets (at least 100 sequences), the same epoch budgets."""
    table = QUICK_BUDGETS if quick else FULL_BUDGETS
    out = {d: table[d] for d in DATASETS if d in datasets}
    if subsets != 1.0:
        if quick or not 0.0 < subsets <= 1.0:
            raise UsageError(f"--subsets takes a fraction in (0, 1] of a full run; got {subsets}")
        out = {
            d: replace(b, max_sequences=max(100, round(b.max_sequences * subsets)))
            for d, b in out.items()
        }
    return out


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
    from_archive: str | Path | None = None,
    subsets: float = 1.0,
) -> Outcome:
    """Run the figures' experiments (cached), draw them, write OUT/REPORT.md.

    ``cached_only``: run nothing; draw and judge what today's code has cached (the report
    marks the rest missing, its claims not judged). ``from_archive``: run nothing and read no
    corpus: figures and report from the traces of an archive (``archive``), whatever code made
    them. Otherwise the traces the report read are packed into ``OUT/traces.tar.xz``.
    ``subsets``: ``budgets_for``'s fraction of the full run's training subsets.
    """
    start = time.perf_counter()
    figures, datasets = check_names(figures, datasets)
    out = Path(out)
    failures: dict[str, str] = {}
    computed = 0
    if from_archive is not None:
        manifest = archive.read_archive(Path(from_archive), out)
        quick = bool(manifest["quick"])
        budgets = {d: b for d, b in archive.budgets_of(manifest).items() if d in datasets}
        traces = Traces(out / archive.UNPACKED, any_code=True)
        runtime = manifest["runtime"]
        progress(f"--from-archive: {from_archive}, nothing run")
    else:
        check_corpora(datasets, data_dir)
        budgets = budgets_for(datasets, quick, subsets)
        panels = {name: figure_panels(name, budgets) for name in figures}
        runs = experiments_of([p for ps in panels.values() for p in ps])
        experiments = runs + measurement_experiments(budgets) + list(extra_experiments)
        before = _n_traces(out)
        if cached_only:
            progress(
                f"--cached-only: {sum(not is_cached(out, e) for e in experiments)}"
                f" of {len(experiments)} traces missing, not run"
            )
        else:
            failures = run_all(experiments, out, jobs=jobs, data_dir=data_dir, progress=progress)
        computed = _n_traces(out) - before
        if computed:
            notes.log_runtime(out, computed, time.perf_counter() - start, jobs)
        traces = Traces(out)
        runtime = notes.read_runtime(out)
    panels = {name: figure_panels(name, budgets) for name in figures}
    panels = {name: p for name, p in panels.items() if p}
    missing = {}
    for name, ps in panels.items():
        missing[name] = draw_figure(name, ps, traces, out)
        progress(
            f"figure {name}: fig{name}.png"
            + (f" ({len(missing[name])} curves missing)" if missing[name] else "")
        )
    claims = check_claims(traces, budgets, smoke=quick)
    shown = set(panels) | {"measurements"}  # the measurements run with every figure
    claims = [c for c in claims if c.figure.split("/")[0] in shown or c.figure in shown]
    texts = notes.notes(traces, budgets, quick=quick)
    texts["measurements"] = measurements_table(traces, budgets)
    table = table1_rows(traces, budgets)
    used = traces.used()  # every trace the report reads has been read by now
    texts["run"] = "\n".join(notes.provenance_lines(runtime, list(used.values())))
    report = write_report(out, claims, budgets, table, missing, failures, texts)
    names = {e.digest: e.describe() for e in _all_experiments(budgets)}
    names.update({t.header["digest"]: _describe(t) for t in used.values()})
    archive.write_index(out, names, list(used.values()))
    if from_archive is None:
        manifest = {
            "quick": quick,
            "budgets": {d: b.__dict__ for d, b in budgets.items()},
            "runtime": runtime,
        }
        archive.write_archive(out, sorted(used), manifest)
    return Outcome(report, failures, missing, computed, time.perf_counter() - start, claims)


def _all_experiments(budgets: dict[str, Budget]) -> list:
    panels = [p for name in FIGURES for p in figure_panels(name, budgets)]
    return experiments_of(panels) + measurement_experiments(budgets)


def _describe(trace) -> str:
    """The experiment of a trace as ``Experiment.describe`` writes it, from its header."""
    e = trace.header["experiment"]
    opts = " ".join(f"{k}={v}" for k, v in sorted(e["options"].items()))
    n = e["budget"]["max_sequences"] or "all"
    return f"{e['dataset']}[n={n}] {e['solver']} {opts}".strip()


def _n_traces(out: Path) -> int:
    folder = out / "traces"
    return len(list(folder.glob("*.jsonl"))) if folder.exists() else 0
