"""BertPreprocessor: packing, Google's pair truncation, graph contexts, offsets, saving."""

import random

import keras
import numpy as np
import pytest
import tensorflow as tf

from kbert.text.preprocessor import BertPreprocessor, pack_segments, truncated_lengths
from kbert.text.tokenizer import BertTokenizer
from reference_tokenizer import truncate_pair

CLS, SEP, PAD, A = 101, 102, 0, 1037  # A is the id of the word "a"


@pytest.fixture(scope="module")
def tok(uncased_vocab):
    return BertTokenizer(uncased_vocab)


def words(n, word="a"):
    return " ".join([word] * n)


def test_single_segment_packing(tok):
    out = BertPreprocessor(tok, sequence_length=8)(tf.constant([words(2), words(20), ""]))
    assert set(out) == {"token_ids", "segment_ids", "padding_mask"}
    for v in out.values():
        assert v.dtype == tf.int32 and v.shape == (3, 8)
    assert out["token_ids"].numpy().tolist() == [
        [CLS, A, A, SEP, PAD, PAD, PAD, PAD], [CLS] + [A] * 6 + [SEP], [CLS, SEP] + [PAD] * 6]
    assert out["padding_mask"].numpy().tolist()[0] == [1, 1, 1, 1, 0, 0, 0, 0]
    assert out["segment_ids"].numpy().sum() == 0


def test_pair_packing_and_segments(tok):
    pre = BertPreprocessor(tok, sequence_length=10)
    out = pre((tf.constant([words(2)]), tf.constant([words(3, "b")])))
    B = tok.token_to_id("b")
    assert out["token_ids"].numpy().tolist() == [[CLS, A, A, SEP, B, B, B, SEP, PAD, PAD]]
    assert out["segment_ids"].numpy().tolist() == [[0, 0, 0, 0, 1, 1, 1, 1, 0, 0]]
    assert out["padding_mask"].numpy().tolist() == [[1] * 8 + [0, 0]]


def test_pair_truncation_is_googles_rule(tok):
    """Random length pairs, packed by kbert, against Google's _truncate_seq_pair loop."""
    rng = random.Random(3)
    seq_len = 16
    pairs = [(rng.randint(0, 25), rng.randint(0, 25)) for _ in range(300)]
    pairs += [(13, 13), (14, 13), (13, 14), (0, 30), (30, 0), (6, 7), (7, 6)]
    out = BertPreprocessor(tok, sequence_length=seq_len)(
        (tf.constant([words(a, "a") for a, _ in pairs]),
         tf.constant([words(b, "b") for _, b in pairs])))
    B = tok.token_to_id("b")
    for (la, lb), ids in zip(pairs, out["token_ids"].numpy().tolist()):
        ka, kb = truncate_pair(["a"] * la, ["b"] * lb, seq_len - 3)
        expected = [CLS] + [A] * len(ka) + [SEP] + [B] * len(kb) + [SEP]
        assert ids == expected + [PAD] * (seq_len - len(expected)), (la, lb)


def test_pack_segments_places_every_kept_token():
    """`pack_segments` against the packing written out in Python: a distinct id and offsets per
    token, rows without tokens, any kept counts, rows cut at a length given as a tensor."""
    rng = np.random.default_rng(5)
    lengths = [(int(rng.integers(0, 9)), int(rng.integers(0, 9))) for _ in range(60)]
    lengths += [(0, 0), (0, 4), (4, 0)]
    keep = [[int(rng.integers(0, n + 1)) for n in row] for row in lengths]
    ids = [[list(range(1000 * r + 100 * s, 1000 * r + 100 * s + n)) for s, n in enumerate(row)]
           for r, row in enumerate(lengths)]

    def ragged(segment, shift):
        return tf.ragged.constant([[i + shift for i in row[segment]] for row in ids], tf.int32,
                                  ragged_rank=1)

    tokenized = [tuple(ragged(s, shift) for shift in (0, 1, 2)) for s in (0, 1)]
    length = 12
    out = pack_segments(tokenized, [tf.constant([k[s] for k in keep]) for s in (0, 1)],
                        tf.constant(length, tf.int64), CLS, SEP, PAD)
    assert set(out) == {"token_ids", "segment_ids", "padding_mask", "start_offsets",
                        "end_offsets"}
    for row, (a, b), (ka, kb) in zip(range(len(ids)), ids, keep):
        fit = lambda values, pad: (values + [pad] * length)[:length]  # noqa: E731
        edge = lambda tokens, shift: [-1] + [i + shift for i in tokens]  # noqa: E731
        want = {"token_ids": fit([CLS] + a[:ka] + [SEP] + b[:kb] + [SEP], PAD),
                "segment_ids": fit([0] * (ka + 2) + [1] * (kb + 1), 0),
                "padding_mask": fit([1] * (ka + kb + 3), 0),
                "start_offsets": fit(edge(a[:ka], 1) + edge(b[:kb], 1) + [-1], -1),
                "end_offsets": fit(edge(a[:ka], 2) + edge(b[:kb], 2) + [-1], -1)}
        assert {k: v[row].numpy().tolist() for k, v in out.items()} == want, (row, ka, kb)


def test_closed_form_truncation_matches_loop():
    for m in range(0, 12):
        for la in range(0, 15):
            for lb in range(0, 15):
                ka, kb = truncated_lengths([tf.constant([la]), tf.constant([lb])], m)
                ra, rb = truncate_pair(range(la), range(lb), m)
                assert (int(ka[0]), int(kb[0])) == (len(ra), len(rb)), (m, la, lb)


def test_waterfall_keeps_the_first_segment(tok):
    out = BertPreprocessor(tok, sequence_length=8, truncate="waterfall")(
        (tf.constant([words(4)]), tf.constant([words(4, "b")])))
    B = tok.token_to_id("b")
    assert out["token_ids"].numpy().tolist() == [[CLS, A, A, A, A, SEP, B, SEP]]


@pytest.mark.slow
def test_runs_in_tf_data_and_tf_function(tok):
    pre = BertPreprocessor(tok, sequence_length=16)
    ds = tf.data.Dataset.from_tensor_slices((["first a", "second b b"], ["x", "y y"]))
    ds = ds.batch(2).map(lambda a, b: pre((a, b)), num_parallel_calls=tf.data.AUTOTUNE)
    eager = pre((tf.constant(["first a", "second b b"]), tf.constant(["x", "y y"])))
    batch = next(iter(ds))
    for k in eager:
        np.testing.assert_array_equal(batch[k], eager[k])
    fn = tf.function(pre, input_signature=[tf.TensorSpec([None], tf.string)])
    np.testing.assert_array_equal(fn(tf.constant(["first a"]))["token_ids"],
                                  pre(tf.constant(["first a"]))["token_ids"])


def test_keras_model_saves_and_loads_in_safe_mode(tok, tmp_path):
    pre = BertPreprocessor(tok, sequence_length=12)
    text = keras.Input(shape=(), dtype="string")
    model = keras.Model(text, pre(text))
    path = tmp_path / "pre.keras"
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    sample = tf.constant(["Hello, World!", "unaffable"])
    for k, v in model(sample).items():
        np.testing.assert_array_equal(loaded(sample)[k], v)


def test_config_round_trip(tok):
    pre = BertPreprocessor(tok, sequence_length=32, truncate="waterfall", return_offsets=True,
                           offset_unit="char")
    again = BertPreprocessor.from_config(pre.get_config())
    assert (again.sequence_length, again.truncate, again.return_offsets, again.offset_unit) == (
        32, "waterfall", True, "char")
    assert again.tokenizer.get_vocabulary() == tok.get_vocabulary()


def test_offsets_follow_the_packing(tok):
    question, context = "Who wrote Hamlet?", "Hamlet was written by Shakespeare."
    pre = BertPreprocessor(tok, sequence_length=24, return_offsets=True, offset_unit="char")
    out = pre((tf.constant([question]), tf.constant([context])))
    ids = out["token_ids"][0].numpy()
    seg = out["segment_ids"][0].numpy()
    starts, ends = out["start_offsets"][0].numpy(), out["end_offsets"][0].numpy()
    for i, s, e, g in zip(ids, starts, ends, seg):
        if i in (CLS, SEP, PAD):
            assert s == e == -1
        else:
            source = question if g == 0 else context
            assert source[s:e].lower() == tok.id_to_token(i).removeprefix("##")
    shakespeare = [k for k in range(24) if seg[k] == 1 and starts[k] == context.index("Shake")]
    assert shakespeare


def test_errors(tok):
    with pytest.raises(ValueError, match="truncate"):
        BertPreprocessor(tok, truncate="middle")
    with pytest.raises(ValueError, match="at least 3"):
        BertPreprocessor(tok, sequence_length=2)
    with pytest.raises(TypeError, match="BertTokenizer"):
        BertPreprocessor("vocab.txt")
    with pytest.raises(ValueError, match="one or two segments, got 3: a batch of texts is a "
                                         "list or a tensor"):
        BertPreprocessor(tok)(("a", "b", "c"))
    # Lengths that are not whole numbers were cut (10.7 → 10) or failed in int().
    for length in (10.7, "abc", True):
        with pytest.raises(ValueError, match="sequence_length must be an integer of at least 3"):
            BertPreprocessor(tok, sequence_length=length)
    # A pair's parts of different sizes: TensorFlow's "Incompatible shapes: [3] vs. [2]".
    pre = BertPreprocessor(tok, sequence_length=8)
    differ = "two parts of a pair .* differ in number"
    with pytest.raises(ValueError, match=differ + ": 3 and 2"):
        pre((["a", "b", "c"], ["d", "e"]))
    with pytest.raises(ValueError, match=differ + ": 3 and 2"):
        pre((["a", "b", "c"], [["d", "e"], ["f", "g"]]))  # questions and their choices
    traced = tf.function(pre, input_signature=[(tf.TensorSpec([None], tf.string),) * 2])
    with pytest.raises(tf.errors.InvalidArgumentError, match=differ):
        traced((tf.constant(["a", "b", "c"]), tf.constant(["d", "e"])))


def test_a_python_list_of_texts_is_a_batch_not_a_pair():
    """Two texts in a list are two examples (what `predict(["a", "b"])` means); only a tuple
    is a pair of segments."""
    import kbert

    pre = kbert.BertPreprocessor(kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased"),
                                 sequence_length=16)
    texts = ["a great film", "dull"]
    as_list, as_tensor = pre(texts), pre(tf.constant(texts))
    for key in as_tensor:
        assert as_list[key].shape == (2, 16)
        np.testing.assert_array_equal(as_list[key], as_tensor[key])
    assert pre(("a great film", "dull"))["segment_ids"].numpy().max() == 1  # a pair


@pytest.mark.slow
def test_dataset_map_packs_text_and_keeps_labels_and_weights(tok):
    """keras-hub's form: `dataset.map(preprocessor)` on (text, label[, weight]) elements gives
    (packed, label[, weight]); the packed part is the preprocessor's packing of the text."""
    pre = BertPreprocessor(tok, sequence_length=12)
    texts, others = ["the cat sat", "a dog"], ["on the mat", "ran off"]
    labels, weights = np.array([1, 0]), np.array([0.5, 2.0], "float32")
    for x, rest in [(texts, (labels,)), ((texts, others), (labels,)), (texts, (labels, weights))]:
        dataset = tf.data.Dataset.from_tensor_slices((x, *rest)).batch(2)
        got = next(iter(dataset.map(pre)))
        expected = pre(tf.constant(x) if isinstance(x, list) else tuple(map(tf.constant, x)))
        assert isinstance(got, tuple) and len(got) == 1 + len(rest)
        for key in expected:
            np.testing.assert_array_equal(got[0][key], expected[key])
        for value, want in zip(got[1:], rest):
            np.testing.assert_array_equal(value, want)
    assert isinstance(pre(tf.constant(texts)), dict)  # no labels: the packed dict alone
    # Unbatched elements, mapped before `.batch` (keras-hub's order): a text, a pair, and a
    # question with its choices (which failed in the tokenizer: "shape (1, 2)").
    choices = [["on the mat", "ran off"], ["a cat", "the dog"]]
    for x in (texts, (texts, others), (texts, choices)):
        dataset = tf.data.Dataset.from_tensor_slices((x, labels))
        unbatched = next(iter(dataset.map(pre).batch(2)))
        batched = next(iter(dataset.batch(2).map(pre)))
        for key in batched[0]:
            np.testing.assert_array_equal(unbatched[0][key], batched[0][key])
        np.testing.assert_array_equal(unbatched[1], labels)
    np.testing.assert_array_equal(tok.tokenize(tf.constant(texts)).to_tensor(),
                                  tok(tf.constant(texts)).to_tensor())
