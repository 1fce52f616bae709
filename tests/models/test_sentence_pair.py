"""A sentence classifier knows whether it reads pairs (`sentence_pair`): a `fit` on raw text
records the form once its input passed the checks, before training (so that checkpoints saved
during it carry it), and the model saves it; `export_saved_model` serves that form."""

import keras
import pytest

from kbert.config import BertConfig
from kbert.models import BertBackbone, BertClassifier, BertFeatureClassifier
from kbert.text import BertPreprocessor, BertTokenizer

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "movie", "was", "good", "bad"]
TEXTS, PAIRS = ["the movie was good", "the movie was bad"], ["good", "bad"]


def model_of(cls):
    keras.utils.set_random_seed(0)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_layers=2, num_heads=2,
                        intermediate_size=32, max_position_embeddings=32)
    preprocessor = BertPreprocessor(BertTokenizer(vocabulary=VOCAB, lowercase=True),
                                    sequence_length=12)
    extra = {"layers": (-2, -1), "lstm_units": 4} if cls is BertFeatureClassifier else {}
    model = cls(BertBackbone(config), num_classes=2, preprocessor=preprocessor, **extra)
    model.compile()
    return model


@pytest.mark.slow
@pytest.mark.parametrize("cls", [BertClassifier, BertFeatureClassifier])
def test_fit_records_the_form_it_trained_on_and_the_model_keeps_it(cls, tmp_path):
    model = model_of(cls)
    assert model.sentence_pair is None
    # Refused input trains nothing and records nothing (the label 7 has no logit).
    with pytest.raises(ValueError, match="7"):
        model.fit((TEXTS, PAIRS), [1, 7], verbose=0)
    assert model.sentence_pair is None
    with pytest.raises(ValueError, match="leaves no training"):
        model.fit((TEXTS, PAIRS), [1, 0], validation_split=0.9, verbose=0)
    assert model.sentence_pair is None

    seen = []
    record = keras.callbacks.LambdaCallback(
        on_train_begin=lambda logs: seen.append(model.get_config()["sentence_pair"]))
    model.fit((TEXTS, PAIRS), [1, 0], callbacks=[record], verbose=0)
    assert seen == [True] and model.sentence_pair is True  # known while it trained
    model.save(tmp_path / "pair.keras")
    assert keras.saving.load_model(tmp_path / "pair.keras").sentence_pair is True
    model.fit(TEXTS, [1, 0], verbose=0)
    assert model.sentence_pair is False
