"""The token classifier's SavedModel: raw text in, entities out, all in the graph, equal to the
Python reference on the model before export (`tests.spans.reference_tagging_windows`: a text
longer than a row in run_squad.py's windows)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from kbert.data.conll import CONLL2003_LABELS
from kbert.export import export_saved_model
from kbert.export.signatures import ServingModule
from kbert.models import BertBackbone, BertTokenClassifier
from kbert.text import BertPreprocessor
from tests.spans.reference_tagging_windows import window_entities
from tests.spans.helpers import tiny_config, tokenizer

TEXTS = ["Peter Smith visited Paris, France in 1990.", "", "   ",
         "The Eiffel tower was built ; the river Seine flows through Paris .",
         "John lives in Berlin's museum-city, Germany — unbelievable!",
         "Café 東京 😀 don't who? " * 4]  # long: tagged in windows


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    keras.utils.set_random_seed(3)
    model = BertTokenClassifier(BertBackbone(tiny_config()), label_names=CONLL2003_LABELS)
    # Bigger head weights than the initializer's, so that many tags (and entities) come out.
    kernel = model.classifier.kernel
    kernel.assign(np.random.default_rng(0).normal(size=kernel.shape).astype("float32"))
    pre = BertPreprocessor(tokenizer(), sequence_length=24)
    path = export_saved_model(model, tmp_path_factory.mktemp("ner") / "ner", preprocessor=pre,
                              warmup_texts=[])  # check_servable runs: stock TF Serving ops
    return model, path


@pytest.mark.slow
def test_serving_default_returns_the_reference_entities(exported):
    model, path = exported
    expected = window_entities(model, tokenizer(), TEXTS, list(CONLL2003_LABELS), 24,
                               doc_stride=11)  # half a row, the default
    serve = tf.saved_model.load(str(path)).signatures["serving_default"]
    out = {k: v.numpy() for k, v in serve(text=tf.constant(TEXTS)).items()}
    assert sorted(out) == ["entity_count", "entity_end", "entity_label", "entity_start",
                           "entity_text"]
    assert out["entity_count"].tolist() == [len(e) for e in expected]
    assert sum(map(len, expected)) >= 5
    for n, entities in enumerate(expected):
        got = [{"text": out["entity_text"][n, j].decode(),
                "type": out["entity_label"][n, j].decode(),
                "start": int(out["entity_start"][n, j]), "end": int(out["entity_end"][n, j])}
               for j in range(out["entity_count"][n])]
        assert got == entities, TEXTS[n]


def test_serve_token_ids_gives_per_token_tags(exported):
    model, path = exported
    features = BertPreprocessor(tokenizer(), sequence_length=24)(tf.constant(TEXTS[:2]))
    serve = tf.saved_model.load(str(path)).signatures["serve_token_ids"]
    out = serve(**features)
    logits = model.predict_on_batch(features)
    np.testing.assert_allclose(out["logits"].numpy(), logits, atol=1e-5)
    names = np.array(CONLL2003_LABELS, dtype=object)[logits.argmax(-1)]
    assert out["label"].numpy().astype(str).tolist() == names.astype(str).tolist()


def test_token_classifier_without_label_names_is_refused():
    model = BertTokenClassifier(BertBackbone(tiny_config()), num_classes=9)
    with pytest.raises(ValueError, match="needs label_names"):
        ServingModule(model, BertPreprocessor(tokenizer(), sequence_length=24))
