"""Every `>>>` example in the docstrings of kbert and kbert_cli runs and prints what it shows:
the same check as `pytest --doctest-modules kbert kbert_cli`, one test a module."""

import doctest
import importlib
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def modules_with_examples():
    """The modules whose source holds a `>>>` line, by dotted name."""
    names = []
    for package in ("kbert", "kbert_cli"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if ">>>" in path.read_text(encoding="utf-8"):
                parts = path.relative_to(ROOT).with_suffix("").parts
                names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


@pytest.mark.slow  # some examples fine-tune, pre-train or export a tiny model
@pytest.mark.parametrize("name", modules_with_examples())
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted, f"{name} holds `>>>` lines that doctest does not see"
    assert not result.failed, f"{result.failed} of {result.attempted} examples of {name} failed"


def test_the_public_names_have_examples():
    """Each name `import kbert` offers (its classes and job functions) shows an example."""
    import inspect

    import kbert

    names = [name for name in kbert._PUBLIC if not inspect.ismodule(getattr(kbert, name))]
    missing = [name for name in names if ">>>" not in (getattr(kbert, name).__doc__ or "")]
    assert len(names) >= 20 and not missing, missing
