"""The notebooks run top to bottom on the real corpora (CRFSDCA_DATA_DIR), each under a timeout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
DATA_DIR = os.environ.get("CRFSDCA_DATA_DIR")
# the first kernel calls may compile (about a minute of CPU time, more on a loaded machine)
TIMEOUT_SECONDS = 900

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not DATA_DIR or not Path(DATA_DIR).is_dir(), reason="CRFSDCA_DATA_DIR not set or missing"
    ),
]


def execute(name: str, workdir: Path, monkeypatch) -> nbformat.NotebookNode:
    """Run notebooks/<name> in ``workdir`` with this checkout first on the kernel's path."""
    monkeypatch.setenv("CRFSDCA_DATA_DIR", str(Path(DATA_DIR).resolve()))
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    monkeypatch.setenv("PYTHONPATH", path)
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=TIMEOUT_SECONDS,
        kernel_name="python3",
        resources={"metadata": {"path": str(workdir)}},
    )
    client.execute()
    return notebook


def outputs_text(notebook) -> str:
    parts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            parts.append(output.get("text", ""))
            parts.append(str(output.get("data", {}).get("text/plain", "")))
    return "\n".join(parts)


@pytest.mark.parametrize("name", sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")))
def test_outputs_are_stripped_in_git(name):
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, name


def test_quickstart_runs(tmp_path, monkeypatch):
    notebook = execute("quickstart.ipynb", tmp_path, monkeypatch)
    text = outputs_text(notebook)
    assert "1000 sentences" in text
    assert "chunk F1" in text
    figure = tmp_path / "convergence.png"
    assert figure.read_bytes().startswith(b"\x89PNG")
    assert (tmp_path / "chunker.npz").is_file()


def test_sklearn_crfsuite_migration_runs(tmp_path, monkeypatch):
    notebook = execute("sklearn_crfsuite_migration.ipynb", tmp_path, monkeypatch)
    assert "weighted F1 over the entity labels" in outputs_text(notebook)
