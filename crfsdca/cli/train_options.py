"""The options of ``crfsdca train``, declared once: the data and model, the outputs, checkpoints,
distributed runs, the structure and the console (the solver options are generated from the
solver configs by :mod:`crfsdca.cli.options`)."""

from __future__ import annotations

import math
from collections.abc import Callable

import click

from crfsdca.cli.shared_options import DATA_DIR_OPTION, count_option, label_option
from crfsdca.features.sources import FORMATS, TEMPLATES
from crfsdca.solvers import SOLVERS


def _finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise click.BadParameter(f"expected a finite number > 0, got {value}")
    return value


def _non_negative(ctx: click.Context, param: click.Parameter, value: float) -> float:
    if not (math.isfinite(value) and value >= 0):
        raise click.BadParameter(f"expected a finite number >= 0, got {value}")
    return value


def number_option(
    *decls: str,
    help: str,
    default: float | None = None,
    zero_ok: bool = False,
    show_default: bool = False,
) -> Callable:
    """A finite number > 0 (>= 0 with ``zero_ok``); None when not given and no default."""
    return click.option(
        *decls,
        type=float,
        callback=_non_negative if zero_ok else _finite,
        default=default,
        show_default=show_default,
        help=help,
    )


#: DATASET and every ``train`` option but the solver's, in the order ``--help`` lists them
TRAIN_OPTIONS: tuple[Callable, ...] = (
    click.argument("dataset", required=False),
    click.option(
        "--solver",
        default="sdca",
        show_default=True,
        type=click.Choice(sorted(SOLVERS)),
        help="training algorithm",
    ),
    click.option("--test", "test", default=None, help="test set: registered name or file path"),
    click.option(
        "--format",
        "fmt",
        default=None,
        type=click.Choice(FORMATS),
        help="format of DATASET and --test files [from the name: .conll, .conllu, .attr,"
        " .crfsuite, .data; else conll with a token --template]",
    ),
    label_option("CoNLL-U column to learn [xpos]"),
    click.option(
        "--template",
        default=None,
        type=click.Choice(TEMPLATES),
        help="attribute template [the dataset's; none for .attr and .data files]",
    ),
    number_option("--lambda", "regularization", help="regularization > 0 [1/n]"),
    number_option(
        "--l1",
        "l1",
        default=0.0,
        zero_ok=True,
        help="sigma >= 0: the elastic net's l1 term sigma |w|_1 (CRFsuite's c1 / n); sdca"
        " (Prox-SDCA) and lbfgs (OWL-QN) [0]",
    ),
    click.option(
        "--loss",
        type=click.Choice(["log", "hinge"]),
        default="log",
        help="log: the CRF; hinge: the structured SVM (Hamming loss; --solver sdca) [log]",
    ),
    click.option(
        "--bias/--no-bias", default=None, help="count/first/last bias rows [on for templates]"
    ),
    count_option("--max-sequences", help="train on the first N sequences only"),
    click.option(
        "--seed", type=click.IntRange(min=0), default=0, show_default=True, help="random seed"
    ),
    count_option(
        "--threads",
        help="cores: SDCA's threads stepping at once on one shared w (1: serial, reproducible"
        " bit for bit), and the threads of the full-batch passes [all; SDCA steps on one"
        " thread when the threads would get fewer than 1000 sequences each]",
    ),
    DATA_DIR_OPTION,
    click.option("--model", "model_path", default=None, help="write the trained model here (.npz)"),
    click.option("--trace", "trace_path", default=None, help="write the trace here (.jsonl)"),
    click.option(
        "--score-test",
        type=click.Choice(["end", "every"]),
        default=None,
        help="score the test set at the end, or at every evaluation as well (the default with"
        " --trace) [end]",
    ),
    click.option(
        "--plot",
        "plot_path",
        default=None,
        help="draw the duality gap against epochs here (.png, .svg, .pdf; needs matplotlib)",
    ),
    click.option(
        "--checkpoint",
        "checkpoint_dir",
        default=None,
        help="save the run's state here every --checkpoint-seconds (or --checkpoint-every epochs),"
        " at the end of a run stopped above --tol and on Ctrl-C; written from a copy in the"
        " background",
    ),
    number_option(
        "--checkpoint-every",
        help="epochs between checkpoints [by wall time: --checkpoint-seconds]",
    ),
    number_option(
        "--checkpoint-seconds",
        default=300.0,
        show_default=True,
        help="wall-time seconds between checkpoints (a killed run loses at most this much)",
    ),
    click.option(
        "--resume",
        "resume_dir",
        default=None,
        help="continue the run saved in this checkpoint folder: the same command with --resume DIR"
        " appended, or --resume DIR alone",
    ),
    count_option(
        "--workers",
        help="distributed SDCA (DisDCA) on a local Dask cluster of this many processes x 1 thread"
        " (with --scheduler: wait for this many workers)",
    ),
    click.option(
        "--worker-threads",
        is_flag=True,
        default=False,
        help="with --workers and no --scheduler: run the partitions as threads of this process"
        " (no Dask, nothing pickled; one process holds every shard) instead of worker processes",
    ),
    click.option(
        "--scheduler", default=None, help="distributed SDCA on the Dask cluster at tcp://HOST:PORT"
    ),
    count_option("--partitions", help="distributed: number of partitions [one per worker]"),
    count_option(
        "--local-updates",
        help="distributed: SDCA steps per partition and round [100, or one pass over the shard]",
    ),
    number_option(
        "--round-timeout",
        default=600.0,
        show_default=True,
        help="distributed: seconds to wait for a partition before calling it lost",
    ),
    click.option(
        "--graph",
        default=None,
        type=click.Choice(["chain", "tree"]),
        help="CoNLL-U data: link each word to its syntactic head (tree) or to the next word"
        " (chain); every --solver trains either",
    ),
    click.option(
        "--order",
        type=click.IntRange(1, 2),
        default=1,
        show_default=True,
        help="chain order: 2 adds a K x K x K block on every three consecutive labels"
        " (second-order chains as junction trees; every --solver)",
    ),
    click.option("--json", "as_json", is_flag=True, help="print one JSON object on stdout"),
    click.option("--quiet", "-q", is_flag=True, help="no progress bar, no warnings"),
    click.option("--verbose", "-v", count=True, help="tracebacks on errors"),
)


def train_options(func: Callable) -> Callable:
    """Decorate the ``train`` command with DATASET and :data:`TRAIN_OPTIONS`."""
    for option in reversed(TRAIN_OPTIONS):
        func = option(func)
    return func
