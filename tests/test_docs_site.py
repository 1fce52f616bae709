"""`make docs`: the MkDocs site builds with warnings as errors (broken links, missing
references, pages left out of the navigation), and its generated references are complete."""

import pathlib
import subprocess
import sys

import pytest

from kbert_cli import build_parser

ROOT = pathlib.Path(__file__).parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site = tmp_path_factory.mktemp("site")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                             "--site-dir", str(site)], cwd=ROOT, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return site


def test_the_site_has_its_pages(site):
    pages = {p.parent.relative_to(site).as_posix() for p in site.glob("**/index.html")}
    assert len(pages) >= 8, pages
    assert {"getting-started", "guides/classification", "guides/serving", "reference/cli",
            "reference/api"} <= pages


def test_the_cli_reference_is_every_commands_help(site):
    html = (site / "reference/cli/index.html").read_text(encoding="utf-8")
    for name, command in build_parser().commands.items():
        assert f"kbert {name}" in html
        flags = [f for action in command._actions for f in action.option_strings
                 if f.startswith("--")]
        assert all(flag in html for flag in flags), name


def test_the_api_reference_shows_the_docstrings(site):
    html = (site / "reference/api/index.html").read_text(encoding="utf-8")
    for name in ("BertBackbone", "BertClassifier", "BertTokenizer", "export_saved_model"):
        assert name in html
    assert "&gt;&gt;&gt;" in html  # the examples render as code
