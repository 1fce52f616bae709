import numpy as np
import pytest

from kbert.data.tasks import make_dataset
from tests.tasks.helpers import preprocessor, token_id

CLS, SEP = token_id("[CLS]"), token_id("[SEP]")


def ids(*words):
    return [token_id(w) for w in words]


def test_single_sentences_are_cut_to_the_longest_in_each_batch():
    examples = [("good film", 1), ("bad", 0), ("a very very very dull movie", 0), ("fine", 1)]
    batches = list(make_dataset(examples, preprocessor(16), batch_size=2))
    (x1, y1), (x2, y2) = batches
    assert x1["token_ids"].shape == (2, 4)  # [CLS] good film [SEP]
    np.testing.assert_array_equal(x1["token_ids"], [[CLS, *ids("good", "film"), SEP],
                                                    [CLS, token_id("bad"), SEP, 0]])
    np.testing.assert_array_equal(x1["padding_mask"], [[1, 1, 1, 1], [1, 1, 1, 0]])
    assert x2["token_ids"].shape == (2, 8)
    np.testing.assert_array_equal(y1, [1, 0])
    assert y2.dtype == np.int32


def test_pairs_are_packed_with_segments():
    examples = [(("what is it", "a film"), 1)]
    (x, y), = list(make_dataset(examples, preprocessor(16), batch_size=4))
    np.testing.assert_array_equal(
        x["token_ids"][0], [CLS, *ids("what", "is", "it"), SEP, *ids("a", "film"), SEP])
    np.testing.assert_array_equal(x["segment_ids"][0], [0, 0, 0, 0, 0, 1, 1, 1])


def test_choices_are_packed_as_pairs_with_the_question():
    examples = [(("what is it", ("a", "b film", "c", "no")), 1),
                (("who", ("one", "two", "three", "four")), 3)]
    (x, y), = list(make_dataset(examples, preprocessor(16), 8, kind="multiple_choice"))
    assert x["token_ids"].shape == (2, 4, 8)
    np.testing.assert_array_equal(
        x["token_ids"][0, 1], [CLS, *ids("what", "is", "it"), SEP, *ids("b", "film"), SEP])
    np.testing.assert_array_equal(x["segment_ids"][0, 1], [0, 0, 0, 0, 0, 1, 1, 1])
    np.testing.assert_array_equal(x["token_ids"][1, 3], [CLS, token_id("who"), SEP,
                                                         token_id("four"), SEP, 0, 0, 0])
    np.testing.assert_array_equal(y, [1, 3])


def test_regression_labels_are_float():
    (x, y), = list(make_dataset([("good", 2.5), ("bad", -1.0)], preprocessor(), 4,
                                kind="regression"))
    assert y.dtype == np.float32 and list(y.numpy()) == [2.5, -1.0]


def test_bucketing_groups_similar_lengths_and_keeps_every_example():
    rng = np.random.default_rng(0)
    examples = [(" ".join(["good"] * n), int(n)) for n in rng.integers(1, 12, 64)]
    batches = list(make_dataset(examples, preprocessor(16), batch_size=8, shuffle=True,
                                bucket=True, seed=1))
    labels = sorted(int(v) for _, y in batches for v in y.numpy())
    assert labels == sorted(y for _, y in examples)
    # padding is what bucketing saves: far below padding every batch to the longest text
    real = sum(int(x["padding_mask"].numpy().sum()) for x, _ in batches)
    padded = sum(int(np.prod(x["padding_mask"].shape)) for x, _ in batches)
    assert padded - real < 0.5 * (13 * 64 - real)


@pytest.mark.slow
def test_padding_to_a_multiple_keeps_the_tokens_and_caps_at_the_sequence_length():
    examples = [(" ".join(["good"] * n), n) for n in (1, 2, 5, 6, 9, 13)]
    exact = list(make_dataset(examples, preprocessor(15), batch_size=2))
    rounded = list(make_dataset(examples, preprocessor(15), batch_size=2, pad_to_multiple_of=4))
    # longest per batch: 4, 8, 15 tokens (the last truncated at 15) → 4, 8, 15 (not 16)
    assert [x["token_ids"].shape[1] for x, _ in exact] == [4, 8, 15]
    assert [x["token_ids"].shape[1] for x, _ in rounded] == [4, 8, 15]
    three = list(make_dataset(examples, preprocessor(15), batch_size=3, pad_to_multiple_of=4))
    assert [x["token_ids"].shape[1] for x, _ in three] == [8, 15]  # 7 → 8, 15 stays
    for (x, _), (y, _) in zip(list(make_dataset(examples, preprocessor(15), batch_size=3)),
                              three):
        for key in x:
            cut = x[key].shape[1]
            np.testing.assert_array_equal(y[key][:, :cut], x[key])
            assert not y[key][:, cut:].numpy().any()  # the added columns are padding (all 0)


def packed_rows(lengths, width=16):
    """Already-packed rows (inputs dict, per-token labels, row id) of the given real lengths."""
    mask = (np.arange(width)[None, :] < np.asarray(lengths)[:, None]).astype("int32")
    inputs = {"token_ids": mask * 7, "segment_ids": np.zeros_like(mask), "padding_mask": mask}
    return inputs, mask * 3, np.arange(len(lengths))


def test_random_batches_draw_each_row_once_a_pass_in_any_length_and_cut_to_the_longest():
    from kbert.text.datasets import length_bucketed, random_batches

    lengths = np.random.default_rng(0).integers(1, 17, 64)
    rows = packed_rows(lengths)
    batches = list(random_batches(rows, 8, seed=1).take(16))
    passes = [batches[:8], batches[8:]]  # 64 rows in batches of 8: two passes
    for batches in passes:
        drawn = np.concatenate([ids.numpy() for _, _, ids in batches])
        assert sorted(drawn) == list(range(64))  # every row once a pass, no row twice
        for x, labels, ids in batches:
            assert x["token_ids"].shape[1] == labels.shape[1] == lengths[ids.numpy()].max()
    assert [ids.numpy().tolist() for _, _, ids in passes[0]] != [
        ids.numpy().tolist() for _, _, ids in passes[1]]  # reshuffled each pass

    def spread(dataset):  # mean range of real lengths inside a batch
        return np.mean([np.ptp(lengths[ids.numpy()]) for _, _, ids in dataset.take(8)])

    # length_bucketed's batches hold similar lengths; random ones the whole range
    assert spread(random_batches(rows, 8, seed=1)) > 2 * spread(
        length_bucketed(rows, rows[0]["padding_mask"], 8, seed=1))


def test_conll_batching_is_checked_and_recorded():
    from kbert.tasks import get_spec

    assert get_spec("conll").batching == "random"
    spec = get_spec("conll", batching="length")
    assert spec.info()["task_options"]["batching"] == "length"
    with pytest.raises(ValueError, match="batching must be one of"):
        get_spec("conll", batching="sorted")
    with pytest.raises(ValueError, match="takes no option"):
        get_spec("squad", batching="random")
