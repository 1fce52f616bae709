"""The graph NER pipeline (BertTokenPreprocessor, split_words, entity decoding) against the numpy
reference (`conll_features`, `decode_tags`, and `split_words` / `tag_entities` of
`tests.spans.reference_conll`) on the real CoNLL-2003 sentences and the real MiniLM vocabulary."""

import numpy as np
import pytest
import tensorflow as tf

from kbert.data.conll import CONLL2003_LABELS, conll2003
from tests.spans.reference_conll import conll_features, decode_tags
from kbert.text import BertTokenizer
from kbert.text.entity_decoding import decode_entities, word_tags
from kbert.text.token_preprocessor import BertTokenPreprocessor, split_words
from kbert.text.trim import trim_to_longest
from tests.spans import reference_conll
from tests.spans.reference_tagging_windows import window_features

TRICKY = ["", " ", " \t\n\u3000\u00a0", "Café naïve résumé Ångström", "東京タワーは東京にある。",
          "don't stop, rock'n'roll’s O'Neil", "state-of-the-art -- well- -known -x- a--b",
          "U.S.A. Inc. a.b. .5 3.14 1,000 AT&T &amp; R&D", "😀👍🏽 family👨‍👩‍👧 ok",
          "x_y __init__ snake_case", "tab\there\x1cfs\x85nel", "١٢٣ ٤٥ Ελλάδα ΣΊΣΥΦΟΣ",
          "e\u0301 a\u0300b \u200bzero-width\u200b", "Mr. Smith (born 1990) visited Paris."]


@pytest.fixture(scope="module")
def tokenizer(minilm_dir):
    return BertTokenizer.from_pretrained(minilm_dir)


@pytest.fixture(scope="module")
def conll():
    return conll2003()


def _words_and_labels(sentences):
    index = {name: i for i, name in enumerate(CONLL2003_LABELS)}
    words = tf.ragged.constant([s.words for s in sentences])
    labels = tf.ragged.constant([[index[t] for t in s.tags] for s in sentences], tf.int32)
    return words, labels


# Sentences with words cut off: none of the 3,453 test sentences at 128 loses a word but one
# (10 words); at 24, 903 test sentences lose 10,037 words, and 898 of the first 3,000 training
# sentences lose 9,654 words (none at 128).
@pytest.mark.slow
@pytest.mark.parametrize("sequence_length, truncated", [(128, (1, 0)), (24, (903, 898))])
def test_features_equal_conll_features(tokenizer, conll, sequence_length, truncated):
    pre = BertTokenPreprocessor(tokenizer, sequence_length)
    run = tf.function(lambda w, y: (pre(w), pre(w, y)))
    for split, sentences, cut in (("test", conll["test"], truncated[0]),
                                  ("train", conll["train"][:3000], truncated[1])):
        expected = conll_features(sentences, tokenizer, sequence_length)
        got, (inputs, labels, weights) = run(*_words_and_labels(sentences))
        for key, value in inputs.items():  # with labels, the model's inputs as without
            np.testing.assert_array_equal(value.numpy(), got[key].numpy())
        got = {**got, "labels": labels, "label_weights": weights}
        assert sorted(got) == sorted(set(expected) - {"truncated_words"})
        for key, value in got.items():
            assert value.dtype == expected[key].dtype, key
            np.testing.assert_array_equal(value.numpy(), expected[key], err_msg=f"{split} {key}")
        words = np.array([len(s.words) for s in sentences])
        lost = words - (got["word_index"].numpy() >= 0).sum(1)
        assert lost.sum() == expected["truncated_words"]
        assert (lost > 0).sum() == cut, split


def test_split_words_equal_python_on_conll_text_and_tricky_strings(conll):
    texts = [" ".join(s.words) for s in conll["test"] + conll["dev"]] + TRICKY
    words, starts, ends, normalized = split_words(tf.constant(texts))
    assert normalized.numpy().tolist() == [t.encode() for t in texts]
    rows = zip(texts, words.to_list(), starts.to_list(), ends.to_list())
    for text, row_words, row_starts, row_ends in rows:
        ref_words, ref_spans = reference_conll.split_words(text)
        assert [w.decode() for w in row_words] == ref_words, text
        assert list(zip(row_starts, row_ends)) == ref_spans, text


def test_split_words_replaces_invalid_utf8_one_character_per_sequence():
    words, starts, ends, text = split_words(tf.constant([b"ab\xffcd \xe2\x82 x"]))
    assert [w.decode() for w in words[0].numpy()] == ["ab", "\ufffd", "cd", "\ufffd", "x"]
    assert starts[0].numpy().tolist() == [0, 2, 3, 6, 8]
    assert text[0].numpy().decode() == "ab\ufffdcd \ufffd x"


class _TableModel:
    """A stand-in tagger for `tag_entities`: seeded random logits per (token id, position)."""

    def __init__(self, num_classes, seed, vocab_size, sequence_length):
        rng = np.random.default_rng(seed)
        self.tokens = rng.normal(size=(vocab_size, num_classes)).astype("float32")
        self.positions = rng.normal(size=(sequence_length, num_classes)).astype("float32")

    def predict_on_batch(self, x):
        ids = np.asarray(x["token_ids"])
        return self.tokens[ids] + self.positions[:ids.shape[1]]


@pytest.mark.filterwarnings("ignore:.*seems not to be NE tag")
@pytest.mark.parametrize("label_names", [
    list(CONLL2003_LABELS),
    ["B-PER", "I-PER", "E-PER", "S-PER", "O", "S-LOC"],  # IOBES, "O" not first
    ["O", "I-ORG", "I-PER", "B-ORG", "X", "I", "B-", ".x"],  # IOB1-ish and malformed tags
])
@pytest.mark.slow
def test_entities_equal_tag_entities(tokenizer, conll, label_names):
    sequence_length = 24  # long sentences lose words: those are "O"
    texts = [" ".join(s.words) for s in conll["test"][:400]] + TRICKY
    model = _TableModel(len(label_names), len(label_names), tokenizer.vocabulary_size(),
                        sequence_length)
    expected = reference_conll.tag_entities(model, tokenizer, texts, label_names,
                                           sequence_length)
    pre = BertTokenPreprocessor(tokenizer, sequence_length)

    @tf.function
    def serve(text):
        words, starts, ends, text = split_words(text)
        features = trim_to_longest(pre(words))
        ids = features["token_ids"]
        logits = tf.gather(model.tokens, ids) + tf.constant(model.positions)[:tf.shape(ids)[1]]
        return decode_entities(logits, features["word_index"], starts, ends, text, label_names)

    out = {k: v.numpy() for k, v in serve(tf.constant(texts)).items()}
    assert out["entity_count"].tolist() == [len(e) for e in expected]
    assert sum(map(len, expected)) > 1000
    for n, entities in enumerate(expected):
        got = [{"text": out["entity_text"][n, j].decode(), "type": out["entity_label"][n, j].decode(),
                "start": int(out["entity_start"][n, j]), "end": int(out["entity_end"][n, j])}
               for j in range(out["entity_count"][n])]
        assert got == entities, texts[n]
        assert (out["entity_start"][n, len(entities):] == -1).all()


def test_word_tags_equal_decode_tags_with_shorter_logits(tokenizer, conll):
    sentences = conll["dev"][:500]
    features = conll_features(sentences, tokenizer, 64)
    seq = int(features["padding_mask"].sum(1).max())
    logits = np.random.default_rng(7).normal(size=(len(sentences), seq, 9)).astype("float32")
    padded = np.pad(logits, [(0, 0), (0, 64 - seq), (0, 0)])
    num_words = [len(s.words) for s in sentences]
    expected = decode_tags(padded, features["word_index"], num_words)
    got = word_tags(logits, features["word_index"], num_words, CONLL2003_LABELS).to_list()
    assert [[t.decode() for t in row] for row in got] == expected
    with pytest.raises(tf.errors.InvalidArgumentError, match="cut too short"):
        word_tags(logits[:, :seq // 2], features["word_index"], num_words, CONLL2003_LABELS)


def test_config_round_trip_and_tf_data(tokenizer, conll):
    pre = BertTokenPreprocessor(tokenizer, sequence_length=40, name="ner_pre")
    restored = keras_round_trip(pre)
    assert restored.sequence_length == 40 and restored.name == "ner_pre"
    assert restored.tokenizer.get_vocabulary() == tokenizer.get_vocabulary()
    words, labels = _words_and_labels(conll["dev"][:200])
    expected = tf.nest.flatten(pre(words, labels))  # inputs, labels, label_weights
    for got, want in zip(tf.nest.flatten(restored(words, labels)), expected, strict=True):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    # tf.data, keras-hub's `dataset.map(preprocessor)`: batched ragged rows, and single
    # sentences (outputs without the batch axis).
    dataset = tf.data.Dataset.from_tensor_slices((words, labels))
    batches = [tf.nest.flatten(b) for b in dataset.ragged_batch(64).map(restored)]
    for i, want in enumerate(expected):
        np.testing.assert_array_equal(np.concatenate([b[i] for b in batches]), want.numpy())
    single = tf.nest.flatten(next(iter(dataset.map(restored))))
    for got, want in zip(single, expected, strict=True):
        np.testing.assert_array_equal(got.numpy(), want[0].numpy())


def keras_round_trip(layer):
    import keras

    config = keras.saving.serialize_keras_object(layer)
    return keras.saving.deserialize_keras_object(config)


def test_bad_inputs_name_the_problem(tokenizer):
    pre = BertTokenPreprocessor(tokenizer, 16)
    with pytest.raises(TypeError, match="words of dtype string, got int32"):
        pre(tf.ragged.constant([[1, 2]]))
    with pytest.raises(TypeError, match="labels of dtype int32 or int64, got float32"):
        pre(tf.ragged.constant([["a"]]), tf.ragged.constant([[1.0]]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="one label per word"):
        pre(tf.ragged.constant([["a", "b"]]), tf.ragged.constant([[1]]))
    with pytest.raises(TypeError, match="split_words expects strings, got dtype int32"):
        split_words(tf.constant([1, 2]))
    with pytest.raises(ValueError, match="sequence_length must be an integer of at least 3"):
        BertTokenPreprocessor(tokenizer, 2)
    with pytest.raises(TypeError, match="needs a BertTokenizer"):
        BertTokenPreprocessor("vocab.txt")


def test_python_lists_are_accepted(tokenizer):
    pre = BertTokenPreprocessor(tokenizer, 16)
    words = [["Peter", "Blackburn"], ["BRUSSELS"]]
    inputs, labels, weights = pre(words, [[1, 2], [5]])
    expected = conll_features(words, tokenizer, 16)
    np.testing.assert_array_equal(inputs["token_ids"].numpy(), expected["token_ids"])
    np.testing.assert_array_equal(pre(words)["word_index"].numpy(), expected["word_index"])
    np.testing.assert_array_equal(weights.numpy(), expected["label_weights"])
    assert labels.numpy()[0, 1] == 1 and labels.numpy()[1, 1] == 5


@pytest.mark.slow
def test_token_classifier_fits_and_predicts_on_words_and_raw_text(conll):
    import keras

    from kbert.models import BertBackbone, BertTokenClassifier
    from tests.spans.helpers import tiny_config
    from tests.spans.helpers import tokenizer as small_tokenizer

    keras.utils.set_random_seed(0)
    pre = BertTokenPreprocessor(small_tokenizer(), sequence_length=16)
    # one block: the claims (packing, raw text = words, learning) do not depend on depth
    model = BertTokenClassifier(BertBackbone(tiny_config(num_layers=1)), num_classes=9,
                                preprocessor=pre)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    sentences = conll["train"][:32]
    index = {name: i for i, name in enumerate(CONLL2003_LABELS)}
    words = [s.words for s in sentences]
    labels = [[index[t] for t in s.tags] for s in sentences]
    # The training batches: cut to their longest row, labels and weights as conll_features.
    expected = conll_features(sentences, small_tokenizer(), 16)
    (x, y, w), = list(pre.dataset(words, labels, batch_size=32))
    seq = x["token_ids"].shape[1]
    assert seq == expected["padding_mask"].sum(1).max()
    np.testing.assert_array_equal(y.numpy(), expected["labels"][:, :seq])
    np.testing.assert_array_equal(w.numpy(), expected["label_weights"][:, :seq])
    history = model.fit(words, labels, batch_size=16, epochs=2, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    logits = model.predict(words[:20], batch_size=10, verbose=0)
    assert logits.shape == (20, 16, 9)  # full length: lines up with pre(words)["word_index"]
    features = pre(words[:20])
    direct = model({k: features[k] for k in ("token_ids", "segment_ids", "padding_mask")})
    np.testing.assert_allclose(logits, direct, atol=1e-5)
    texts = [" ".join(w) for w in words[:20]]  # raw text: split_words in the pipeline
    np.testing.assert_allclose(model.predict(texts, batch_size=10, verbose=0), logits, atol=1e-5)
    # A sentence's weight multiplies its words' weights.
    weight = np.arange(32) % 3 / 2
    (_, y, w), = list(pre.dataset(words, labels, sample_weight=weight, batch_size=32))
    np.testing.assert_array_equal(w.numpy(), expected["label_weights"][:, :seq] * weight[:, None])
    with pytest.raises(ValueError, match="sample_weight weighs labels"):
        pre.dataset(words, sample_weight=weight)


@pytest.mark.slow
def test_keras_hubs_dataset_map_trains_a_tagger_as_fit_on_words(conll):
    """keras-hub's habit: `dataset.map(model.preprocessor)` on `(words, labels, weight)` gives
    the batches `fit` takes; the steps equal `fit` on the words, which cuts each batch to its
    longest row (padding weighs 0 and is masked, so the weights must agree)."""
    import dataclasses

    import keras

    from kbert.models import BertBackbone, BertTokenClassifier
    from tests.spans.helpers import tiny_config
    from tests.spans.helpers import tokenizer as small_tokenizer

    sentences = conll["train"][:16]
    words, labels = _words_and_labels(sentences)
    weight = np.linspace(0.5, 1.5, 16).astype("float32")
    models = []
    for _ in range(2):
        keras.utils.set_random_seed(0)
        config = dataclasses.replace(tiny_config(num_layers=1), hidden_dropout=0.0,
                                     attention_dropout=0.0)  # the same steps on any length
        model = BertTokenClassifier(BertBackbone(config), num_classes=9, preprocessor=(
            BertTokenPreprocessor(small_tokenizer(), sequence_length=16)))
        model.compile(optimizer=keras.optimizers.Adam(1e-2))
        models.append(model)
    dataset = tf.data.Dataset.from_tensor_slices((words, labels, weight)).ragged_batch(8)
    mapped = models[0].fit(dataset.map(models[0].preprocessor), epochs=2, verbose=0)
    direct = models[1].fit(words.to_list(), labels.to_list(), sample_weight=weight,
                           batch_size=8, epochs=2, shuffle=False, verbose=0)
    np.testing.assert_allclose(mapped.history["loss"], direct.history["loss"], rtol=1e-5)
    for a, b in zip(models[0].get_weights(), models[1].get_weights(), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)
    with pytest.raises(ValueError, match="sample_weight weighs labels"):
        models[0].preprocessor(words, sample_weight=weight)


@pytest.mark.slow
def test_a_tagger_fits_after_it_predicts(conll):
    """The packing traced for words alone, then for words and labels: with one `tf.function`
    taking both, TensorFlow's retracing crashed (IndexError in most_specific_common_subtype)."""
    from kbert.models import BertBackbone, BertTokenClassifier
    from tests.spans.helpers import tiny_config
    from tests.spans.helpers import tokenizer as small_tokenizer

    model = BertTokenClassifier(BertBackbone(tiny_config(num_layers=1)), num_classes=9,
                                preprocessor=BertTokenPreprocessor(small_tokenizer(), 16))
    model.compile(optimizer="adam")
    sentences = conll["train"][:8]
    words = [s.words for s in sentences]
    labels = [[CONLL2003_LABELS.index(t) for t in s.tags] for s in sentences]
    assert model.predict(words, verbose=0).shape == (8, 16, 9)
    assert np.isfinite(model.fit(words, labels, verbose=0).history["loss"][0])


@pytest.mark.parametrize("sequence_length, doc_stride, count", [(24, None, 120), (24, 5, 60),
                                                                 (128, None, 0)])
@pytest.mark.slow
def test_windows_equal_run_squad_windows(tokenizer, conll, sequence_length, doc_stride, count):
    """Real sentences, cut into run_squad.py's windows (`reference_tagging_windows`): at 24 most
    need several, at 128 the one test sentence longer than a row (with the first 10)."""
    pre = BertTokenPreprocessor(tokenizer, sequence_length, doc_stride=doc_stride)
    sentences = conll["test"][:count]
    if not count:
        rows = pre(tf.ragged.constant([s.words for s in conll["test"]]))
        long = np.nonzero(rows["padding_mask"].numpy()[:, -1])[0]
        sentences = conll["test"][:10] + [conll["test"][n] for n in long if n >= 10]
    word_lists = [s.words for s in sentences]
    expected = window_features(word_lists, tokenizer, sequence_length, pre.doc_stride)
    got = {k: v.numpy() for k, v in pre.windows(tf.ragged.constant(word_lists)).items()}
    assert len(got["token_ids"]) > len(sentences)
    for key, value in expected.items():
        np.testing.assert_array_equal(got[key], value, err_msg=key)
    # Every word is named once; a sentence that fits one row is packed as `call` packs it.
    for n, words in enumerate(word_lists):
        named = np.sort(got["word_index"][got["example_index"] == n].ravel())
        assert named[named >= 0].tolist() == list(range(len(words)))
    single = np.bincount(got["example_index"]) == 1
    fits = pre(tf.ragged.constant([w for w, one in zip(word_lists, single) if one]))
    alone = np.isin(got["example_index"], np.nonzero(single)[0])
    for key in ("token_ids", "padding_mask", "word_index"):
        np.testing.assert_array_equal(got[key][alone], fits[key].numpy(), err_msg=key)


def test_windows_of_empty_and_capped_texts(tokenizer):
    pre = BertTokenPreprocessor(tokenizer, 8, doc_stride=2, max_context_length=10)
    words = tf.ragged.constant([[], ["paris"] * 30], tf.string)
    got = pre.windows(words)
    assert got["example_index"].numpy().tolist() == [0] + [1] * 3  # 1 + ceil((10 - 6) / 2)
    assert got["token_ids"].numpy()[0].tolist()[:3] == [tokenizer.cls_token_id,
                                                        tokenizer.sep_token_id, 0]
    named = got["word_index"].numpy()[1:]
    assert sorted(named[named >= 0].tolist()) == list(range(10))  # words past 10 pieces: "O"
    assert BertTokenPreprocessor.from_config(pre.get_config()).get_config() == pre.get_config()


def test_empty_words_keep_every_word_on_its_own_label(tokenizer):
    """A sentence split on spaces (`" John lives".split(" ")`) starts with an empty word:
    TensorFlow's ragged reduce_join dropped it with its space, and every word took its left
    neighbour's label. Equal to the reference, for empty words first, inside and last."""
    sentences = [["", "John", "lives", "in", "Berlin"], ["", "", "Peter", "Smith"],
                 ["Paris", "", "France", ""], ["", "unbelievable"]]
    expected = conll_features(sentences, tokenizer, 16)
    words = tf.ragged.constant(sentences)
    labels = tf.ragged.constant([list(range(1, len(s) + 1)) for s in sentences], tf.int32)
    pre = BertTokenPreprocessor(tokenizer, 16)
    packed, (_, got, _) = pre(words), pre(words, labels)
    np.testing.assert_array_equal(packed["word_index"], expected["word_index"])
    np.testing.assert_array_equal(packed["token_ids"], expected["token_ids"])
    # "John" is word 1 and carries label 2 (its own), not word 0's label 1
    assert packed["word_index"].numpy()[0, 1] == 1 and got.numpy()[0, 1] == 2
