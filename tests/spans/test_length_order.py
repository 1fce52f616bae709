"""Evaluation passes run their rows shortest first (`length_order`), so that batches cut to
their longest row carry little padding, and hand the outputs back in the rows' own order.

The reference is one untrimmed batch in the data's order: on real tokens the logits must be the
same, whatever order the batches ran in."""

import numpy as np
import pytest

from kbert.data.conll import conll2003
from kbert.data.sources import fetch
from kbert.data.squad import read_squad
from kbert.models import BertBackbone
from kbert.config import INPUT_KEYS
from kbert.tasks.conll import ConllTask
from kbert.tasks.squad import SquadTask
from kbert.text import BertTokenizer
from kbert.text.datasets import length_order


@pytest.fixture(scope="module")
def minilm(minilm_dir):
    return BertBackbone.from_pretrained(minilm_dir), BertTokenizer.from_pretrained(minilm_dir)


def test_length_order_is_shortest_first_and_stable():
    mask = (np.arange(6)[None] < np.array([[4], [2], [4], [1], [6], [2]])).astype("int32")
    order = length_order(mask)
    assert order.tolist() == [3, 1, 5, 0, 2, 4]
    assert np.argsort(order)[order].tolist() == list(range(6))


def _real(values, mask):
    return values[mask.astype(bool)]


@pytest.mark.slow
def test_conll_logits_and_validation_rows_in_length_order(minilm):
    spec = ConllTask()
    model = spec.build(*minilm, 128)
    sentences = conll2003()["dev"][:48]
    features, _, weights = spec.rows(model, sentences)
    mask = features["padding_mask"]
    assert not np.array_equal(length_order(mask), np.arange(len(mask)))  # the order changes

    logits = spec.logits(model, features, batch_size=8)
    whole = np.asarray(model.predict_on_batch({k: features[k] for k in INPUT_KEYS}))
    assert logits.shape == whole.shape
    np.testing.assert_allclose(_real(logits, mask), _real(whole, mask), atol=2e-4)

    # validation: every labelled token once, in batches that carry less padding
    batches = list(spec.validation_dataset(model, sentences, 8))
    assert sum(float(np.sum(w)) for _, _, w in batches) == float(weights.sum())
    assert sum(int(np.sum(x["padding_mask"])) for x, _, _ in batches) == int(mask.sum())
    in_order = sum(8 * mask[i:i + 8].sum(1).max() for i in range(0, len(mask), 8))
    assert sum(np.size(x["token_ids"]) for x, _, _ in batches) < in_order


@pytest.mark.slow
def test_squad_logits_in_length_order(minilm):
    spec = SquadTask(doc_stride=64)
    model = spec.build(*minilm, 192)
    dev, _ = read_squad(fetch("squad") / "dev-v1.1.json")
    windows = spec.windows(model, dev[:24])
    mask = windows["padding_mask"]
    assert not np.array_equal(length_order(mask), np.arange(len(mask)))

    starts, ends = spec.logits(model, windows, batch_size=8)
    whole = model.predict_on_batch({k: windows[k] for k in INPUT_KEYS})
    for mine, theirs in ((starts, whole["start_logits"]), (ends, whole["end_logits"])):
        np.testing.assert_allclose(_real(mine, mask), _real(np.asarray(theirs), mask),
                                   atol=2e-4)
