r"""Reproduce the paper's figures and write REPORT.md: the same code as ``crfsdca reproduce``.

Run from the repository root::

    CRFSDCA_DATA_DIR=../shared/data .venv/bin/python scripts/reproduce_figures.py --quick
    CRFSDCA_DATA_DIR=../shared/data .venv/bin/python scripts/reproduce_figures.py --figure 2,3

Options are those of ``crfsdca reproduce --help`` (figures, datasets, --quick, --jobs, --out,
--data-dir). Traces are cached under OUT/traces/ by a digest of each experiment's inputs, so a
second run only redraws the figures and the report.
"""

from crfsdca.cli.reproduce import reproduce

if __name__ == "__main__":
    reproduce(prog_name="reproduce_figures.py")
