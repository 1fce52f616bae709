"""`kbert predict` on a tagger: a text longer than one row of word pieces is tagged to its end,
each further row from the first untagged word, as if its words were sent as a text alone."""

import numpy as np

from kbert.config import BertConfig
from kbert.models import BertBackbone, BertTokenClassifier
from kbert.tasks import get_spec
from kbert.text import BertTokenizer, BertTokenPreprocessor
from tests.tasks.helpers import VOCAB, WORDS

LABELS = ["O", "B-PER", "I-PER"]


def tagger(sequence_length):
    backbone = BertBackbone(BertConfig(vocab_size=len(VOCAB), hidden_size=8, num_layers=1,
                                       num_heads=2, intermediate_size=16,
                                       max_position_embeddings=32))
    model = BertTokenClassifier(backbone, label_names=LABELS, preprocessor=BertTokenPreprocessor(
        BertTokenizer(VOCAB, lowercase=True), sequence_length=sequence_length))
    kernel, bias = model.classifier.get_weights()
    model.classifier.set_weights([np.zeros_like(kernel), np.array([0, 5, 0], "float32")])
    return model  # every word's first piece says B-PER: each word one entity


def test_every_word_of_a_long_text_is_tagged():
    model, spec = tagger(8), get_spec("conll", label_names=LABELS)  # 6 words a row
    words = [WORDS[i % 20] for i in range(15)]
    text = " ".join(words)
    found = spec.predict(model, text=text)
    assert [e["text"] for e in found] == words
    assert all(text[e["start"]:e["end"]] == e["text"] and e["type"] == "PER" for e in found)
    # rows of 6, 6 and 3 words: what each chunk gives alone, at its place in the text
    chunks = [" ".join(words[i:i + 6]) for i in (0, 6, 12)]
    offsets = [text.index(chunk) for chunk in chunks]
    alone = [dict(e, start=e["start"] + at, end=e["end"] + at)
             for chunk, at in zip(chunks, offsets) for e in spec.predict(model, text=chunk)]
    assert found == alone
    fine = [{"text": "fine", "type": "PER", "start": 0, "end": 4}]
    assert spec.predict(model, text=["", text, "fine"]) == [[], found, fine]
