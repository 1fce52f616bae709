"""kbert's floors (docs/architecture.md): a module imports only from its own floor or lower ones,
and no modules import each other in a cycle. Every kbert module is parsed with `ast`;
function-level (lazy) imports count too, since a lazy import is still a dependency, only a
hidden one.
"""

import ast
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "kbert"

FLOORS = {
    "kbert.config": 0, "kbert.config_checks": 0, "kbert.atomic": 0, "kbert.tensorflow_backend": 0,
    "kbert.compat": 0,  # workarounds for upstream bugs
    "kbert.outputs": 0, "kbert.model_files": 0, "kbert.data.sources": 0, "kbert.settings": 0,
    "kbert.text.tokenizer_files": 0,  # vocab.txt and casing files, read by convert and presets
    "kbert.layers": 1, "kbert.optimizers": 1, "kbert.evaluation": 1,
    "kbert.convert": 1,  # checkpoint formats: the caller names the class to build
    "kbert.runs": 1,  # run directories
    "kbert.presets": 2,  # names → checkpoints; builds the class it is given
    "kbert.text": 3,
    "kbert.models": 4,
    "kbert.tensorflow_inputs": 4,  # the models' input path on tf.data, outside models/
    "kbert.viz": 5, "kbert.data": 5,
    "kbert.tasks": 6,
    "kbert.training": 7, "kbert.export": 7,
    "kbert.quickstart": 8,
    "kbert": 8,
}
"""Module (or package) → floor; a module takes the floor of its longest listed prefix."""

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
    found = sorted(text for _, _, text in violations())
    assert not found, "imports from a higher floor:\n" + "\n".join(found)


def import_graph():
    """{module: the kbert modules it imports}, each import resolved to the module it names."""
    paths = {module_name(p): p for p in ROOT.rglob("*.py")}

    def resolve(name):
        while name not in paths:
            name = name.rpartition(".")[0]
        return name

    return {module: {resolve(name) for name, _, _ in _imports(
        ast.parse(path.read_text(encoding="utf-8")), module, path.name == "__init__.py")}
        - {module} for module, path in paths.items()}


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, found = {}, {}, [], []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_library_never_imports_the_command():
    """`kbert_cli` sits above the whole library: kbert imports nothing of it."""
    found = [f"{path.relative_to(ROOT.parent)}:{node.lineno}" for path in ROOT.rglob("*.py")
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                 name.split(".")[0] == "kbert_cli" for name in
                 ([a.name for a in node.names] if isinstance(node, ast.Import)
                  else [node.module or ""]))]
    assert not found, found


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_cycles_are_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


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
    lives in `kbert.tensorflow_backend` and `kbert.tensorflow_inputs`."""
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


def documented_floors():
    """{module: floor} from the table of docs/architecture.md."""
    page = (ROOT.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    floors = {}
    for row in page.splitlines():
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        if len(cells) != 3 or not cells[0].isdigit():
            continue
        for name in cells[1].replace("`", "").split(", "):
            full = "kbert" if name == "kbert" else f"kbert.{name}"
            matches = [m for m in FLOORS if m.startswith(full[:-1])] if name.endswith("*") \
                else [full]
            floors.update({module: int(cells[0]) for module in matches})
    return floors


def test_the_architecture_page_shows_these_floors():
    assert documented_floors() == FLOORS


def test_the_models_train_without_tensorflow():
    """DESIGN.md: the models run on Keras' JAX backend on a machine with no TensorFlow (the GPU
    image). A task model declares its preprocessor class, so the text package must load there
    too; a tokenizer built there names what is missing."""
    pytest.importorskip("jax")
    script = """
import sys
sys.modules["tensorflow"] = sys.modules["tensorflow_text"] = None
import numpy as np
from benchmarks.gpu_worker import kbert_module
models, config = kbert_module("models"), kbert_module("config")
backbone = models.BertBackbone(config.BertConfig(vocab_size=30, hidden_size=8, num_layers=1,
                                                 num_heads=2, intermediate_size=16))
model = models.BertClassifier(backbone, num_classes=2)
model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
inputs = {"token_ids": np.ones((4, 6), "int32"), "segment_ids": np.zeros((4, 6), "int32"),
          "padding_mask": np.ones((4, 6), "bool")}
model.fit(inputs, np.array([0, 1, 0, 1]), epochs=1, verbose=0)
assert "tensorflow" not in [m.split(".")[0] for m in sys.modules if sys.modules[m] is not None]
try:
    kbert_module("text.tokenizer").BertTokenizer(["[PAD]"])
except ModuleNotFoundError as error:
    print(error)
"""
    env = {**os.environ, "KERAS_BACKEND": "jax"}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT.parent, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == (
        "BertTokenizer needs tensorflow and tensorflow-text: "
        "pip install tensorflow tensorflow-text")
