"""`fit(class_weight=...)` on a tagger weighs each token by its tag. Keras alone made one weight
a sentence of [batch, seq] tag labels (read as one-hot rows) and failed ("Incompatible shapes"),
and refused class weights beside the token weights that raw text and CoNLL features carry."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from kbert import BertBackbone
from kbert.data.conll import TaggedSentence
from kbert.models.token_classifier import BertTokenClassifier
from kbert.text import BertTokenPreprocessor
from tests.spans.helpers import tiny_config, tokenizer
from tests.spans.reference_conll import conll_features

LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
SENTENCES = [TaggedSentence("Peter Smith visited Paris .".split(),
                            ["B-PER", "I-PER", "O", "B-LOC", "O"]),
             TaggedSentence("John lives in unbelievable Berlin".split(),
                            ["B-PER", "O", "O", "O", "B-LOC"])]
CLASS_WEIGHT = {0: 0.1, 3: 4.0}  # "O" down, "B-LOC" up; the others weigh 1


def _model(preprocessor=None):
    """A tagger without dropout, compiled not to move: `fit`'s loss is the weighted loss of
    these very weights."""
    keras.utils.set_random_seed(0)
    config = tiny_config()
    config = config.__class__(**{**config.to_dict(), "hidden_dropout": 0.0,
                                 "attention_dropout": 0.0})
    model = BertTokenClassifier(BertBackbone(config), label_names=LABELS, dropout=0.0,
                                preprocessor=preprocessor)
    model.compile(optimizer=keras.optimizers.SGD(0.0))
    return model


def _expected_loss(model, features, token_weights=None):
    """Cross-entropy over the first sub-tokens (or every position, by `token_weights`), each
    weighed by its tag's class weight."""
    inputs = {k: features[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    logits = model.predict(inputs, verbose=0).astype("float64")
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    nll = -np.take_along_axis(log_p, features["labels"][..., None], -1)[..., 0]
    tag_weight = np.vectorize(lambda t: CLASS_WEIGHT.get(int(t), 1.0))(features["labels"])
    token_weights = features["label_weights"] if token_weights is None else token_weights
    weights = token_weights * tag_weight
    return (nll * weights).sum() / weights.sum()


@pytest.mark.slow
def test_class_weight_weighs_each_token_by_its_tag():
    features = conll_features(SENTENCES, tokenizer(), sequence_length=16, label_names=LABELS)
    inputs = {k: features[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    model = _model()
    expected = _expected_loss(model, features)
    plain = model.fit(inputs, features["labels"], sample_weight=features["label_weights"],
                      verbose=0).history["loss"][0]
    assert plain != pytest.approx(expected, rel=1e-3)  # the weights change the loss
    fits = {
        "arrays": lambda: model.fit(inputs, features["labels"],
                                    sample_weight=features["label_weights"],
                                    class_weight=CLASS_WEIGHT, verbose=0),
        "dataset": lambda: model.fit(tf.data.Dataset.from_tensor_slices(
            (inputs, features["labels"], features["label_weights"])).batch(2),
            class_weight=CLASS_WEIGHT, verbose=0),
    }
    for name, fit in fits.items():
        assert fit().history["loss"][0] == pytest.approx(expected, rel=1e-4), name
    # Without token weights every position counts, each by its tag (Keras gave each sentence
    # the weight of the class numbered like its argmax position).
    every = _expected_loss(model, features, np.ones_like(features["label_weights"]))
    history = model.fit(inputs, features["labels"], class_weight=CLASS_WEIGHT, verbose=0).history
    assert history["loss"][0] == pytest.approx(every, rel=1e-4)


@pytest.mark.slow
def test_class_weight_on_raw_words_and_bad_class_weights():
    features = conll_features(SENTENCES, tokenizer(), sequence_length=16, label_names=LABELS)
    model = _model(BertTokenPreprocessor(tokenizer(), sequence_length=16))
    words = [s.words for s in SENTENCES]
    labels = [[LABELS.index(t) for t in s.tags] for s in SENTENCES]
    history = model.fit(words, labels, class_weight=CLASS_WEIGHT, verbose=0).history
    assert history["loss"][0] == pytest.approx(_expected_loss(model, features), rel=1e-4)
    with pytest.raises(ValueError, match="class_weight names class 5; the head has classes 0 "
                                         "to 4"):
        model.fit(words, labels, class_weight={5: 2.0}, verbose=0)
    with pytest.raises(ValueError, match="class_weight of class 1 must be a finite number"):
        model.fit(words, labels, class_weight={1: float("nan")}, verbose=0)
