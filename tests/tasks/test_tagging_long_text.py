"""A tagger on text longer than one row of word pieces (`kbert predict`, `kbert evaluate`):
every word is tagged, in run_squad.py's windows, by its logits in the window that gives it the
most context, equal to the reference (`tests.spans.reference_tagging_windows`)."""

import keras
import numpy as np
import pytest

from kbert.config import BertConfig
from kbert.data.conll import TaggedSentence
from kbert.evaluation.entities import entity_metrics
from kbert.models import BertBackbone, BertTokenClassifier
from kbert.tasks import get_spec
from kbert.text import BertTokenizer, BertTokenPreprocessor
from tests.spans.reference_tagging_windows import window_entities, window_tags
from tests.tasks.helpers import VOCAB, WORDS

LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
LENGTH = 8  # 6 word pieces a row, windows 3 apart


def tagger():
    keras.utils.set_random_seed(5)
    backbone = BertBackbone(BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_layers=2,
                                       num_heads=2, intermediate_size=32,
                                       max_position_embeddings=32))
    model = BertTokenClassifier(backbone, label_names=LABELS, preprocessor=BertTokenPreprocessor(
        BertTokenizer(VOCAB, lowercase=True), sequence_length=LENGTH))
    kernel = model.classifier.kernel  # larger than the initializer's: varied tags
    kernel.assign(np.random.default_rng(0).normal(size=kernel.shape).astype("float32") * 3)
    return model


def test_a_long_text_is_tagged_to_its_end_in_windows():
    model, spec = tagger(), get_spec("conll", label_names=LABELS)
    rng = np.random.default_rng(1)
    texts = ["", " ".join(rng.choice(WORDS, 40)), "fine film", " ".join(rng.choice(WORDS, 13))]
    expected = window_entities(model, model.preprocessor.tokenizer, texts, LABELS, LENGTH,
                               doc_stride=3)
    assert spec.predict(model, text=texts) == expected
    assert spec.predict(model, text=texts[1]) == expected[1]
    assert spec.predict(model, text=[]) == []
    assert expected[1][-1]["end"] > len(texts[1]) - 12  # entities to the end, several kinds
    assert {e["type"] for e in expected[1]} == {"PER", "LOC"}


@pytest.mark.slow
def test_evaluate_scores_every_word_of_long_sentences():
    model, spec = tagger(), get_spec("conll", label_names=LABELS)
    rng = np.random.default_rng(2)
    words = [list(rng.choice(WORDS, n)) for n in (3, 17, 30)]
    gold = [list(rng.choice(LABELS, len(w))) for w in words]
    examples = [TaggedSentence(w, g, f"s{n}") for n, (w, g) in enumerate(zip(words, gold))]
    metrics, rows = spec.evaluate(model, examples)
    predicted = window_tags(model, model.preprocessor.tokenizer, words, LABELS, LENGTH, 3)
    assert [r["predicted"] for r in rows] == predicted
    assert metrics["truncated_words"] == 0
    assert metrics["f1"] == entity_metrics(gold, predicted)["f1"]
