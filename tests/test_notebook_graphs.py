"""notebooks/custom_graphs.ipynb runs as written (executed with nbclient)."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

pytestmark = pytest.mark.slow  # a notebook in a kernel of its own

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "custom_graphs.ipynb"


@pytest.mark.timeout(600)
def test_custom_graphs_notebook_runs_and_certifies(tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")  # stripped
    nbclient.NotebookClient(
        nb, timeout=600, resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    text = "\n".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
    )
    assert "tol: " in text and "certified gap" in text
    gap = float(text.split("certified gap ")[1].split()[0])
    assert gap <= 1e-8
    assert "example 5: node 0: lies on a cycle of parents" in text
    assert "accuracy 1.0" in text and "tree 2\nTrue\n" in text  # CRF fit, save/load
    assert "this CRF was trained on trees; pass graphs=" in text
    assert "graphs[0]: the tree has 4 nodes but X[0] has 3 tokens" in text
