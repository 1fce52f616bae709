"""Every notebook in notebooks/ runs top to bottom (small budget) without an error."""

import os
import pathlib
import re
import sys

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = pathlib.Path(__file__).parent.parent / "notebooks"
EXPECTED = ["attention.ipynb", "checkpoints.ipynb", "multiple_choice.ipynb", "ner.ipynb",
            "own_data.ipynb", "pretraining.ipynb", "question_answering.ipynb",
            "quickstart.ipynb", "serving.ipynb", "text_classification.ipynb"]
# serving.ipynb exports an untrained head; every other notebook teaches a training job.
TRAINING = [name for name in EXPECTED if name != "serving.ipynb"]


def _code(name):
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    return [cell.source for cell in notebook.cells if cell.cell_type == "code"]


def test_the_notebook_list_is_complete():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", TRAINING)
def test_notebook_trains_with_model_fit(name):
    """The product promise: each job a notebook teaches is trained with the model's own `fit`."""
    assert any(re.search(r"\w*model\.fit\(", source) for source in _code(name)), \
        f"{name} trains no model with model.fit"


@pytest.mark.parametrize("name", EXPECTED)
def test_notebook_reads_the_budget(name):
    """CI's small budget reaches every notebook; the full budget is the default."""
    first = _code(name)[0]
    assert 'SMALL = os.environ.get("KBERT_NOTEBOOK_BUDGET") == "small"' in first, name


@pytest.mark.parametrize("name", EXPECTED)
def test_notebook_runs(name, tmp_path, monkeypatch):
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), \
        "notebooks are committed with outputs stripped"
    monkeypatch.setenv("KBERT_NOTEBOOK_BUDGET", "small")
    # The kernel is this interpreter's (the venv's python first on PATH).
    monkeypatch.setenv("PATH", f"{pathlib.Path(sys.executable).parent}{os.pathsep}"
                               f"{os.environ['PATH']}")
    NotebookClient(notebook, timeout=900, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
