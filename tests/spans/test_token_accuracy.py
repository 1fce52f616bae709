"""A tagger's `accuracy` is the share of its weighted tokens labelled right, whatever the
batching: Keras' metric weighed each token 1/length of its batch's rows, and kbert's raw-text
batches are cut to their longest row, so the epoch's accuracy changed with the batch size."""

import keras
import numpy as np
import pytest

from kbert import BertBackbone
from kbert.data.conll import TaggedSentence
from kbert.models.token_accuracy import TokenAccuracy
from kbert.models.token_classifier import BertTokenClassifier
from kbert.text import BertTokenPreprocessor
from tests.spans.helpers import tiny_config, tokenizer
from tests.spans.reference_conll import conll_features

LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
SENTENCES = [TaggedSentence("Peter Smith visited Paris .".split(),
                            ["B-PER", "I-PER", "O", "B-LOC", "O"]),
             TaggedSentence(["Berlin"], ["B-LOC"]),
             TaggedSentence("John lives in unbelievable Berlin".split(),
                            ["B-PER", "O", "O", "O", "B-LOC"])]


@pytest.mark.slow
def test_accuracy_counts_every_weighted_token_once():
    keras.utils.set_random_seed(0)
    model = BertTokenClassifier(BertBackbone(tiny_config()), label_names=LABELS,
                                preprocessor=BertTokenPreprocessor(tokenizer(), 16))
    model.compile()
    features = conll_features(SENTENCES, tokenizer(), sequence_length=16, label_names=LABELS)
    inputs = {k: features[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    right = model.predict(inputs, verbose=0).argmax(-1) == features["labels"]
    weights = features["label_weights"]
    expected = (right * weights).sum() / weights.sum()  # first sub-tokens labelled right
    words = [s.words for s in SENTENCES]
    labels = [[LABELS.index(t) for t in s.tags] for s in SENTENCES]
    for batch_size in (1, 2, 3):
        result = model.evaluate(words, labels, batch_size=batch_size, verbose=0,
                                return_dict=True)
        assert result["accuracy"] == pytest.approx(expected, abs=1e-6), batch_size


def test_token_accuracy_weighs_each_token():
    metric = TokenAccuracy()
    logits = np.eye(3)[[[0, 1, 2], [2, 2, 0]]]  # predicts 0 1 2 / 2 2 0
    metric.update_state(np.array([[0, 1, 0], [2, 0, 0]]), logits,
                        sample_weight=np.array([[1.0, 0.5, 1.0], [2.0, 1.0, 0.0]]))
    metric.update_state(np.array([[1]]), np.eye(3)[[[1]]])  # one right, weight 1
    assert float(metric.result()) == pytest.approx((1 + 0.5 + 2 + 1) / (2.5 + 3 + 1))
