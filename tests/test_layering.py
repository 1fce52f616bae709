"""kbert's floors: a module imports only from its own floor or lower ones (DESIGN.md, "Layers of
the code"). Every kbert module is parsed with `ast`; function-level (lazy) imports count too,
since a lazy import is still a dependency, only a hidden one. The one exception is the
documented entry points below, which load what a higher floor describes.
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "kbert"

FLOORS = {
    "kbert.config": 0, "kbert.config_checks": 0, "kbert.atomic": 0, "kbert.tensorflow_backend": 0,
    "kbert.outputs": 0,
    "kbert.layers": 1, "kbert.optimizers": 1,
    "kbert.models": 2,
    "kbert.tensorflow_input_checks": 2,  # the models' input checks for tf.data, outside models/
    "kbert.tensorflow_class_weights": 2,  # a tagger's class weights for tf.data, likewise
    "kbert.text": 3, "kbert.convert": 3, "kbert.evaluation": 3, "kbert.viz": 3,
    "kbert.data": 4,
    "kbert.presets": 5, "kbert.runs": 5,  # names and run directories → models, tokenizers
    "kbert.model_files": 5,  # a saved .keras file → the model it holds
    "kbert.tasks": 6,
    "kbert.training": 7, "kbert.export": 7,
    "kbert.cli": 8, "kbert.cli_config": 8, "kbert.cli_convert": 8, "kbert.cli_messages": 8,
    "kbert.cli_parser": 8, "kbert.cli_types": 8,
    "kbert.quickstart": 8,
    "kbert": 8,
}
"""Module (or package) → floor; a module takes the floor of its longest listed prefix."""

ENTRY_POINTS = {
    ("kbert.models.backbone", "BertBackbone.from_pretrained"): {"kbert.presets"},
    ("kbert.text.tokenizer", "BertTokenizer.from_pretrained"): {"kbert.presets"},
    ("kbert.models.task", "BertTask.from_pretrained"): {"kbert.tasks.pretrained"},
}
"""(module, Class.method) → the higher modules it may import lazily: `from_pretrained` builds
from a name of the registry (`kbert.presets`), or for a task from a run directory or a name with
the preprocessor its class takes (`kbert.tasks.pretrained`)."""

KNOWN_VIOLATIONS = set()
"""(module, imported module) pairs that break the floors today, reported to their owners; the
test fails if one of them is fixed without being removed from here."""


def floor(module):
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in FLOORS:
            return FLOORS[".".join(parts[:n])]
    raise KeyError(module)


def module_name(path):
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(tree, module, is_package):
    """(imported kbert module, enclosing Class.function or None, line) for every import."""
    found = []

    def visit(node, scope):
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inner = f"{scope}.{child.name}" if scope else child.name
            if isinstance(child, ast.Import):
                found.extend((alias.name, scope, child.lineno) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                found.extend((name, scope, child.lineno)
                             for name in _from_targets(child, module, is_package))
            visit(child, inner)

    visit(tree, None)
    return [(name, scope, line) for name, scope, line in found
            if name == "kbert" or name.startswith("kbert.")]


def _from_targets(node, module, is_package):
    """`from X import a, b`: the modules meant, X.a where a is a submodule, else X."""
    base = node.module or ""
    if node.level:
        package = module.split(".")
        package = package[:len(package) - node.level + (1 if is_package else 0)]
        base = ".".join(package + ([base] if base else []))
    targets = []
    for alias in node.names:
        candidate = f"{base}.{alias.name}"
        path = ROOT.parent / candidate.replace(".", "/")
        is_module = path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()
        targets.append(candidate if is_module else base)
    return targets


def violations():
    found = set()
    for path in sorted(ROOT.rglob("*.py")):
        module = module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for imported, scope, line in _imports(tree, module, path.name == "__init__.py"):
            if floor(imported) <= floor(module):
                continue
            allowed = ENTRY_POINTS.get((module, scope), set())
            if any(imported == a or imported.startswith(a + ".") for a in allowed):
                continue
            found.add((module, imported, f"{path.relative_to(ROOT.parent)}:{line} "
                       f"({scope or 'module level'}): floor {floor(module)} imports "
                       f"{imported}, floor {floor(imported)}"))
    return found


def test_every_module_has_a_floor():
    missing = [module_name(p) for p in ROOT.rglob("*.py") if not _has_floor(module_name(p))]
    assert not missing, f"add these modules to FLOORS in {__file__}: {missing}"


def _has_floor(module):
    try:
        floor(module)
        return True
    except KeyError:
        return False


def test_imports_only_go_down():
    found = violations()
    new = sorted(text for module, imported, text in found
                 if (module, imported) not in KNOWN_VIOLATIONS)
    assert not new, "imports from a higher floor:\n" + "\n".join(new)
    fixed = KNOWN_VIOLATIONS - {(module, imported) for module, imported, _ in found}
    assert not fixed, f"fixed, remove from KNOWN_VIOLATIONS: {sorted(fixed)}"


@pytest.mark.parametrize("source, expected", [
    ("from kbert.presets import resolve\n", "kbert.presets"),
    ("def f():\n    from kbert import presets\n", "kbert.presets"),
    ("import kbert.training.pretrain\n", "kbert.training.pretrain"),
    ("from kbert import __version__\n", "kbert"),
])
def test_the_parser_sees_every_form_of_import(source, expected):
    imports = _imports(ast.parse(source), "kbert.layers.x", False)
    assert [name for name, _, _ in imports] == [expected]



def _imported_packages(tree):
    """(top-level package, line) of every import in `tree`, lazy ones included."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name.split(".")[0], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.append(((node.module or "").split(".")[0], node.lineno))
    return found


def test_model_code_imports_no_tensorflow():
    """DESIGN.md: `kbert/layers` and `kbert/models` are `keras.ops` only, so that they run on
    Keras' JAX backend where TensorFlow is not installed; the TensorFlow-only code they call
    lives in `kbert.tensorflow_backend` and `kbert.tensorflow_input_checks`."""
    found = [f"{path.relative_to(ROOT.parent)}:{line} imports {package}"
             for folder in ("layers", "models") for path in sorted((ROOT / folder).rglob("*.py"))
             for package, line in _imported_packages(ast.parse(path.read_text(encoding="utf-8")))
             if package == "tensorflow"]
    assert not found, "\n".join(found)


def test_the_tensorflow_check_sees_lazy_and_from_imports():
    source = ("import keras\ndef f():\n    import tensorflow as tf\n"
              "    from tensorflow.python import ops\n    from . import x\n")
    assert _imported_packages(ast.parse(source)) == [
        ("keras", 1), ("tensorflow", 3), ("tensorflow", 4)]
