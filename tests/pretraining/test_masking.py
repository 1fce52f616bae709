"""The graph-mode masked-LM step: rates, specials, padding, whole words, dynamic vs static."""

import numpy as np
import pytest
import tensorflow as tf

from kbert.data.pretraining import pairs
from kbert.data.pretraining.masking import MaskedLM, dynamic_masking_dataset


@pytest.fixture(scope="module")
def features(tokenizer, wiki_documents):
    examples = list(pairs.examples(wiki_documents, 128, tokenizer.cls_token_id,
                                   tokenizer.sep_token_id, seed=0))
    return {k: np.stack([e[k] for e in examples]) for k in examples[0]}


def run_mask(masker, features, seed=(1, 2)):
    out = masker.mask(features["token_ids"], features["padding_mask"], tf.constant(seed))
    return [t.numpy() for t in out]


@pytest.mark.parametrize("whole_word", [False, True])
def test_rates_specials_and_padding(tokenizer, features, whole_word):
    masker = MaskedLM.from_tokenizer(tokenizer, whole_word=whole_word)
    ids = features["token_ids"]
    corrupted, positions, targets, weights = run_mask(masker, features)
    assert positions.shape == (len(ids), 20) and weights.shape == (len(ids), 20)
    special = np.isin(ids, [tokenizer.cls_token_id, tokenizer.sep_token_id,
                            tokenizer.pad_token_id])
    candidates = (~special).sum(1)
    count = weights.sum(1)
    expected = np.minimum(20, np.maximum(1, np.round(0.15 * candidates)))
    # 15% of the non-special tokens (whole words may leave a slot of the budget unused).
    assert (count <= expected).all()
    assert count.sum() / candidates.sum() == pytest.approx(0.15, abs=0.01)
    if not whole_word:
        np.testing.assert_array_equal(count, expected)
    # Padding slots: position 0, weight 0, target 0; real slots: increasing positions.
    for row in range(len(ids)):
        n = int(count[row])
        assert (weights[row, :n] == 1).all() and (weights[row, n:] == 0).all()
        assert (positions[row, n:] == 0).all() and (targets[row, n:] == 0).all()
        assert (np.diff(positions[row, :n]) > 0).all()
    real = weights > 0
    chosen_ids = np.take_along_axis(ids, positions, 1)[real]
    new_ids = np.take_along_axis(corrupted, positions, 1)[real]
    np.testing.assert_array_equal(np.take_along_axis(ids, positions, 1)[real], targets[real])
    assert not np.isin(chosen_ids, [tokenizer.cls_token_id, tokenizer.sep_token_id,
                                    tokenizer.pad_token_id]).any()
    # Only chosen positions change.
    changed = corrupted != ids
    chosen_mask = np.zeros_like(ids, bool)
    np.put_along_axis(chosen_mask, positions, real, 1)
    assert not (changed & ~chosen_mask).any()
    # 80% [MASK], 10% random, 10% unchanged (random ids rarely equal the original).
    n = real.sum()
    assert n > 10_000
    assert (new_ids == tokenizer.mask_token_id).mean() == pytest.approx(0.8, abs=0.015)
    assert (new_ids == chosen_ids).mean() == pytest.approx(0.1, abs=0.01)
    random_ids = (new_ids != chosen_ids) & (new_ids != tokenizer.mask_token_id)
    assert random_ids.mean() == pytest.approx(0.1, abs=0.01)


def test_whole_words_masked_together(tokenizer, features):
    masker = MaskedLM.from_tokenizer(tokenizer, whole_word=True)
    ids = features["token_ids"]
    _, positions, _, weights = run_mask(masker, features, seed=(3, 4))
    vocab = tokenizer.get_vocabulary()
    continuation = np.array([t.startswith("##") for t in vocab])[ids]
    special = np.isin(ids, [tokenizer.cls_token_id, tokenizer.sep_token_id,
                            tokenizer.pad_token_id])
    chosen = np.zeros_like(ids, bool)
    np.put_along_axis(chosen, positions, weights > 0, 1)
    pieces = 0
    for row in range(len(ids)):
        for j in range(1, ids.shape[1]):
            if continuation[row, j] and not special[row, j - 1]:
                assert chosen[row, j] == chosen[row, j - 1], (row, j)
                pieces += chosen[row, j]
    assert pieces > 100  # the test saw many multi-piece words masked


def test_dynamic_masks_change_every_epoch_and_are_reproducible(tokenizer, features):
    masker = MaskedLM.from_tokenizer(tokenizer)
    base = tf.data.Dataset.from_tensor_slices(
        {k: v[:64] for k, v in features.items()}).batch(32)

    def epochs(seed):
        ds = dynamic_masking_dataset(base.repeat(2), masker, seed=seed)
        return [x["masked_positions"].numpy() for x, _, _ in ds]

    first = epochs(7)
    assert not np.array_equal(first[0], first[2])  # same rows, second epoch: new masks
    again = epochs(7)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)


def test_stateful_masking_without_seed(tokenizer, features):
    masker = MaskedLM.from_tokenizer(tokenizer)
    a = masker.mask(features["token_ids"][:8], features["padding_mask"][:8])[1].numpy()
    b = masker.mask(features["token_ids"][:8], features["padding_mask"][:8])[1].numpy()
    assert not np.array_equal(a, b)
