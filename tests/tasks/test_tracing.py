"""Graph building is most of a small run's seconds: a raw-text `fit` traces its training step
once and the preprocessor once, however many datasets (train, validation, evaluate, predict)
pack with it, and a preprocessor whose settings change packs by the new ones."""

import functools

import keras
import numpy as np
import pytest

from kbert import BertBackbone
from kbert.models.classifier import BertClassifier
from tests.tasks.helpers import VOCAB, preprocessor

TEXTS = ["good film", "very dull movie", "fine", "bad", "what a good movie", "not good"]
LABELS = [1, 0, 1, 0, 1, 0]


def _counting(monkeypatch, cls, name):
    """Counts the Python calls of `cls.name`: in a traced function, one per trace."""
    calls = []
    method = getattr(cls, name)

    @functools.wraps(method)
    def counted(self, *args, **kwargs):
        calls.append(name)
        return method(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, counted)
    return calls


@pytest.mark.slow
def test_fit_evaluate_predict_trace_the_step_and_the_preprocessor_once(tiny_config,
                                                                     monkeypatch):
    backbone = BertBackbone(tiny_config.__class__(**{**tiny_config.to_dict(),
                                                     "vocab_size": len(VOCAB)}))
    pre = preprocessor(12)
    model = BertClassifier(backbone, num_classes=2, preprocessor=pre)
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    pre(TEXTS[:1])  # built: Keras' first call of a layer also runs `call` to build it
    steps = _counting(monkeypatch, BertClassifier, "train_step")
    packs = _counting(monkeypatch, type(pre), "call")
    model.fit(TEXTS, LABELS, batch_size=2, epochs=2, verbose=0,
              validation_data=(TEXTS[:2], LABELS[:2]))
    model.evaluate(TEXTS, LABELS, batch_size=4, verbose=0)
    model.predict(TEXTS, batch_size=4, verbose=0)
    # Keras' TensorFlow trainer creates an unbuilt optimizer's moments inside the first
    # trace, and a step that creates variables is traced twice.
    assert len(steps) == 1
    assert len(packs) == 1  # five tf.data maps, one graph of the preprocessor

    pre.sequence_length = 4  # "[CLS] what a [SEP]"
    packed = next(iter(pre.dataset(TEXTS, batch_size=6)))[0]
    assert packed["token_ids"].shape == (6, 4) and len(packs) == 2
    np.testing.assert_array_equal(packed["token_ids"], pre(TEXTS)["token_ids"])
