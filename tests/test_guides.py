"""Every guide's Python runs as written, as keras.io's guides do: the ```python blocks of each
page of docs/, in order, in one new process per page, in an empty folder (the guides write
their own small files there). The guides use small budgets, so this checks that the code runs
and its calls exist, not what accuracy it reaches."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).parents[1]
PAGES = sorted((ROOT / "docs").glob("**/*.md"))


def python_blocks(page):
    """The page's ```python blocks, joined in order."""
    return "\n\n".join(re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S))


RUNNABLE = [page for page in PAGES if python_blocks(page)]


def test_the_guides_hold_code():
    names = {page.relative_to(ROOT / "docs").as_posix() for page in RUNNABLE}
    assert {"getting-started.md", "guides/classification.md", "guides/token-classification.md",
            "guides/question-answering.md", "guides/multiple-choice.md",
            "guides/pretraining.md", "guides/serving.md"} <= names, names


@pytest.mark.slow
@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: p.relative_to(ROOT / "docs").as_posix())
def test_guide_runs(page, tmp_path):
    script = tmp_path / "guide.py"
    script.write_text(python_blocks(page), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"{page.name}:\n{result.stderr[-3000:]}"
