"""kbert's datasets, and the user's datasets its models read, run without tf.data's autotuning
thread (`kbert.compat.without_autotune`): destroying an iterator waits for that
thread's next wake-up, which came up to a minute after the last step of a `fit` (README, "Side
by side")."""

import ast
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from kbert.data.tasks import make_dataset
from kbert.compat import without_autotune
from kbert.text.datasets import batched_dataset, length_bucketed, packed_batches, random_batches
from tests.tasks.helpers import preprocessor

ROOT = pathlib.Path(__file__).resolve().parents[2] / "kbert"


def prefetch_calls():
    """(file, enclosing function) of every `.prefetch(...)` call in kbert's sources."""
    found = []

    class Visitor(ast.NodeVisitor):
        def __init__(self, path):
            self.path, self.functions = path, ["<module>"]

        def visit_FunctionDef(self, node):
            self.functions.append(node.name)
            self.generic_visit(node)
            self.functions.pop()

        def visit_Call(self, node):
            if isinstance(node.func, ast.Attribute) and node.func.attr == "prefetch":
                found.append((self.path, self.functions[-1]))
            self.generic_visit(node)

    for path in sorted(ROOT.rglob("*.py")):
        Visitor(str(path.relative_to(ROOT.parent))).visit(ast.parse(path.read_text()))
    return found


def test_every_prefetch_in_kbert_goes_through_prefetched():
    assert prefetch_calls() == [("kbert/text/datasets.py", "prefetched")]


def rows(count=12, length=10):
    lengths = np.random.default_rng(0).integers(3, length, count)
    mask = (np.arange(length) < lengths[:, None]).astype("int32")
    inputs = {"token_ids": mask * 7, "segment_ids": 0 * mask, "padding_mask": mask}
    return inputs, np.arange(count, dtype="int32")


DATASETS = {
    "make_dataset": lambda: make_dataset([("good film", 1), ("bad", 0)] * 3, preprocessor(16),
                                         batch_size=2, shuffle=True, seed=0),
    "batched_dataset": lambda: batched_dataset(["good film", "bad"], [1, 0], None,
                                               lambda *parts: parts, batch_size=2),
    "random_batches": lambda: random_batches(rows(), 4, seed=0),
    "length_bucketed": lambda: length_bucketed(rows(), rows()[0]["padding_mask"], 4, seed=0),
    "packed_batches": lambda: packed_batches(rows()[0], 4),
}


@pytest.mark.parametrize("name", DATASETS)
def test_kbert_datasets_run_without_the_autotuning_thread(name):
    dataset = DATASETS[name]()
    assert dataset.options().autotune.enabled is False
    iterator = iter(dataset)
    assert next(iterator) is not None
    del iterator


def test_a_plain_tf_data_pipeline_has_the_thread():
    """The control: what tf.data does unless told (so the check above can fail)."""
    dataset = tf.data.Dataset.range(4).prefetch(tf.data.AUTOTUNE)
    assert dataset.options().autotune.enabled is not False


def _autotune(enabled=None):
    options = tf.data.Options()
    options.autotune.enabled = enabled
    return options


@pytest.mark.parametrize("given, read", [(None, False), (True, True), (False, False)])
def test_without_autotune_keeps_a_users_own_choice(given, read):
    dataset = tf.data.Dataset.range(4)
    if given is not None:
        dataset = dataset.with_options(_autotune(given))
    assert without_autotune(dataset).options().autotune.enabled is read


@pytest.mark.slow
@pytest.mark.parametrize("given, read", [(None, False), (True, True)])
def test_a_users_dataset_reaches_keras_without_the_thread_unless_asked(given, read,
                                                                       tiny_config, monkeypatch):
    """A packed dataset of the user's own, given to a model's `fit` (and `validation_data`),
    `evaluate` and `predict`, and to a backbone's `predict`: the dataset Keras reads."""
    import keras

    from kbert import BertBackbone, BertClassifier
    from tests.conftest import make_inputs

    seen = []
    for method in ("fit", "evaluate", "predict"):
        original = getattr(keras.Model, method)

        def spy(self, x=None, *args, original=original, **kwargs):
            seen.append(x.options().autotune.enabled)
            if "validation_data" in kwargs:
                seen.append(kwargs["validation_data"].options().autotune.enabled)
            return original(self, x, *args, **kwargs)

        monkeypatch.setattr(keras.Model, method, spy)

    def users(*parts):
        dataset = tf.data.Dataset.from_tensor_slices(parts[0] if len(parts) == 1 else parts)
        dataset = dataset.batch(2)
        return dataset if given is None else dataset.with_options(_autotune(given))

    x, y = make_inputs(4, 8, tiny_config.vocab_size), np.array([0, 1, 1, 0])
    model = BertClassifier(BertBackbone(tiny_config), num_classes=2)
    model.compile(optimizer="sgd")
    model.fit(users(x, y), validation_data=users(x, y), verbose=0)
    model.evaluate(users(x, y), verbose=0)
    model.predict(users(x), verbose=0)
    model.backbone.predict(users(x), verbose=0)
    assert seen == [read] * 6  # fit, its validation data, and the evaluate it validates by
