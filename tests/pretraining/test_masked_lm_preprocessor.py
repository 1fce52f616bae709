"""BertMaskedLMPreprocessor on real Wikipedia text and the real uncased vocabulary: the packing
is BertPreprocessor's, and the masking follows the paper (15% chosen, never special tokens, at
most max_predictions, 80% [MASK] / 10% random / 10% kept)."""

import keras
import numpy as np
import pytest

from kbert.data.corpus import wikipedia_articles
from kbert.text import BertPreprocessor
from kbert.text.masked_lm_preprocessor import BertMaskedLMPreprocessor


@pytest.fixture(scope="module")
def articles():
    return wikipedia_articles()[:480]


def _collect(dataset):
    """The batches of `dataset` as numpy, with each batch's sequence length."""
    return [keras.tree.map_structure(np.asarray, batch) for batch in dataset]


def _unmasked_ids(inputs, targets, weights):
    """token_ids with the original ids put back at the chosen positions."""
    ids = inputs["token_ids"].copy()
    rows, slots = np.nonzero(weights["mlm"])
    ids[rows, inputs["masked_positions"][rows, slots]] = targets["mlm"][rows, slots]
    return ids


def test_masking_statistics_and_packing_on_wikipedia(tokenizer, articles):
    pre = BertMaskedLMPreprocessor(tokenizer, sequence_length=128, seed=3)
    assert pre.max_predictions == 20  # the paper's setting at length 128
    batches = _collect(pre.dataset(articles, batch_size=64))
    reference = BertPreprocessor(tokenizer, sequence_length=128)(np.array(articles))
    specials = [tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id]
    counts = {"chosen": 0, "candidates": 0, "mask": 0, "kept": 0, "random": 0}
    start = 0
    for inputs, targets, weights in batches:
        n, length = inputs["token_ids"].shape
        expected = {k: np.asarray(v)[start:start + n, :length] for k, v in reference.items()}
        start += n
        original = _unmasked_ids(inputs, targets, weights)
        np.testing.assert_array_equal(original, expected["token_ids"])
        for key in ("segment_ids", "padding_mask"):
            np.testing.assert_array_equal(inputs[key], expected[key])
        assert inputs["masked_positions"].shape == (n, 20)
        chosen = np.zeros_like(original, bool)
        rows, slots = np.nonzero(weights["mlm"])
        chosen[rows, inputs["masked_positions"][rows, slots]] = True
        assert chosen.sum() == len(rows)  # no position chosen twice
        candidates = (expected["padding_mask"] == 1) & ~np.isin(original, specials)
        assert not (chosen & ~candidates).any()  # never [CLS], [SEP] or padding
        per_row = np.minimum(20, np.maximum(1, np.round(0.15 * candidates.sum(1))))
        np.testing.assert_array_equal(chosen.sum(1), per_row)
        corrupted = inputs["token_ids"][chosen]
        counts["mask"] += int((corrupted == tokenizer.mask_token_id).sum())
        counts["kept"] += int((corrupted == original[chosen]).sum())
        counts["chosen"] += int(chosen.sum())
        counts["candidates"] += int(candidates.sum())
        np.testing.assert_array_equal(inputs["token_ids"][~chosen], original[~chosen])
    assert start == len(articles)
    counts["random"] = counts["chosen"] - counts["mask"] - counts["kept"]
    assert counts["chosen"] > 5000
    assert counts["chosen"] / counts["candidates"] == pytest.approx(0.15, abs=0.01)
    # ~7,000 chosen tokens: 4 standard deviations of a 10% share is about 0.015.
    assert counts["mask"] / counts["chosen"] == pytest.approx(0.8, abs=0.02)
    assert counts["kept"] / counts["chosen"] == pytest.approx(0.1, abs=0.015)
    assert counts["random"] / counts["chosen"] == pytest.approx(0.1, abs=0.015)


def test_pairs_carry_nsp_labels_and_pack_as_bert_preprocessor(tokenizer, articles):
    a, b = articles[:40], articles[40:80]
    labels = np.arange(40) % 2
    pre = BertMaskedLMPreprocessor(tokenizer, sequence_length=64, seed=0)
    assert pre.max_predictions == 10  # ceil(0.15 * 64)
    reference = BertPreprocessor(tokenizer, sequence_length=64)((np.array(a), np.array(b)))
    (inputs, targets, weights), = _collect(pre.dataset((a, b), labels, batch_size=40))
    np.testing.assert_array_equal(_unmasked_ids(inputs, targets, weights),
                                  np.asarray(reference["token_ids"]))
    np.testing.assert_array_equal(inputs["segment_ids"], np.asarray(reference["segment_ids"]))
    np.testing.assert_array_equal(targets["nsp"], labels)
    np.testing.assert_array_equal(weights["nsp"], np.ones(40))


def test_masks_are_fresh_every_epoch_and_reproducible_with_a_seed(tokenizer, articles):
    def positions(dataset):
        return np.concatenate([x["masked_positions"] for x, *_ in _collect(dataset)])

    seeded = BertMaskedLMPreprocessor(tokenizer, sequence_length=64, seed=7)
    dataset = seeded.dataset(articles[:64], batch_size=16)
    first, second = positions(dataset), positions(dataset)
    assert (first != second).mean() > 0.5  # dynamic masking: new masks each pass
    again = seeded.dataset(articles[:64], batch_size=16)
    np.testing.assert_array_equal(positions(again), first)
    np.testing.assert_array_equal(positions(again), second)


def test_sample_weights_scale_each_row(tokenizer, articles):
    pre = BertMaskedLMPreprocessor(tokenizer, sequence_length=32, seed=0)
    row_weights = np.linspace(0.0, 1.0, 8).astype("float32")
    (_, _, plain), = _collect(pre.dataset(articles[:8], batch_size=8))
    (_, _, weighted), = _collect(pre.dataset(articles[:8], sample_weight=row_weights,
                                             batch_size=8))
    np.testing.assert_allclose(weighted["mlm"], plain["mlm"] * row_weights[:, None])


def test_bad_settings_are_refused_by_name(tokenizer):
    with pytest.raises(ValueError, match="mask_token_rate \\+ random_token_rate"):
        BertMaskedLMPreprocessor(tokenizer, mask_token_rate=0.95, random_token_rate=0.1)
    with pytest.raises(ValueError, match="sequence_length"):
        BertMaskedLMPreprocessor(tokenizer, sequence_length=2)
    with pytest.raises(ValueError, match="sentence pairs"):
        BertMaskedLMPreprocessor(tokenizer).dataset(["one text"], [0])


def test_config_round_trip(tokenizer):
    pre = BertMaskedLMPreprocessor(tokenizer, sequence_length=96, mask_rate=0.2,
                                   mask_token_rate=0.7, random_token_rate=0.2, seed=5)
    config = keras.saving.serialize_keras_object(pre)
    restored = keras.saving.deserialize_keras_object(config)
    assert isinstance(restored, BertMaskedLMPreprocessor)
    assert restored.get_config() == pre.get_config()
    assert restored.max_predictions == 20  # ceil(0.2 * 96)
    assert restored.tokenizer.get_vocabulary() == tokenizer.get_vocabulary()
