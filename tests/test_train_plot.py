"""``crfsdca train ... --plot fig.png`` draws the run's convergence."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from test_checkpoint import synthetic_conll

from crfsdca.cli.main import main

pytest.importorskip("matplotlib")


def test_train_plot_writes_the_figure(tmp_path):
    data = synthetic_conll(tmp_path / "train.txt", n=30)
    out = tmp_path / "fig.png"
    args = ["train", str(data), "--format", "conll", "--template", "conll", "--epochs", "4"]
    result = CliRunner().invoke(main, [*args, "-q", "--plot", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_train_plot_is_checked_before_training(tmp_path):
    data = synthetic_conll(tmp_path / "train.txt", n=30)
    args = ["train", str(data), "--format", "conll", "--template", "conll"]
    result = CliRunner().invoke(main, [*args, "--plot", str(tmp_path / "fig.bmp")])
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert "Error: Invalid value for --plot:" in result.stderr and "got '.bmp'" in result.stderr
