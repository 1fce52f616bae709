"""Task models check what they are given, as served ones do (issue 23): a preprocessor the
backbone cannot embed, packed arrays, datasets, generators and raw text whose ids, segments,
masks, positions or labels lie outside what the backbone embeds and the head scores are refused
by name (`kbert.models.task_inputs`, `kbert.tensorflow_inputs`), not trained into NaN or
read from a clamped row under XLA."""

import keras
import numpy as np
import pytest

from kbert.config import BertConfig
from tests.test_bad_inputs import SMALL

XLA = pytest.param(True, marks=pytest.mark.slow)
"""jit_compile=True: the same checks, which run before the model, compiled (full suite only).
Two tests take it, one for arrays and one for datasets: the checks run outside the compiled
step, so XLA changes nothing they do; the other tests compile without it."""

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(45)]


@pytest.mark.parametrize("task, preprocessor, options", [
    ("BertClassifier", "BertPreprocessor", {}),
    ("BertMultipleChoice", "BertPreprocessor", {}),
    ("BertSpanLabeler", "BertSpanPreprocessor", {}),
    ("BertTokenClassifier", "BertTokenPreprocessor", {"num_classes": 3}),
    ("BertFeatureClassifier", "BertPreprocessor", {"layers": (-1,)}),
    ("BertPretrainer", "BertMaskedLMPreprocessor", {}),
])
def test_a_task_refuses_a_preprocessor_its_backbone_cannot_embed(task, preprocessor, options):
    import kbert

    backbone = kbert.BertBackbone(BertConfig(**SMALL))  # 16 positions, 50 tokens
    tokenizer = kbert.BertTokenizer(vocabulary=VOCAB, lowercase=True)
    task, preprocessor = getattr(kbert, task), getattr(kbert, preprocessor)
    fits = {"sequence_length": 16}
    task(backbone, preprocessor=preprocessor(tokenizer, **fits), **options)
    longer = {**fits, "sequence_length": 17}
    with pytest.raises(ValueError, match="preprocessor's sequence_length=17 exceeds the model's "
                                         "16 positions"):
        task(backbone, preprocessor=preprocessor(tokenizer, **longer), **options)
    wider = kbert.BertTokenizer(vocabulary=VOCAB + ["extra"], lowercase=True)
    with pytest.raises(ValueError, match="vocabulary has 51 tokens but the model's embedding "
                                         r"only 50 \(vocab_size\)"):
        task(backbone, preprocessor=preprocessor(wider, **fits), **options)


def test_a_span_model_smaller_than_squads_windows_gets_windows_that_fit():
    import kbert
    from kbert.models.pretrained import preprocessor_for

    tokenizer = kbert.BertTokenizer(vocabulary=VOCAB, lowercase=True)
    pre = preprocessor_for(kbert.BertSpanLabeler, tokenizer, max_positions=16)
    assert (pre.sequence_length, pre.max_query_length, pre.doc_stride) == (16, 6, 128)
    windows = pre((["w1 w2"], [" ".join(f"w{i % 40}" for i in range(50))]))
    assert windows["token_ids"].shape == (5, 16)  # 11 of the 50 tokens a window (16 - 2 - 3)
    kbert.BertSpanLabeler(kbert.BertBackbone(BertConfig(**SMALL)), preprocessor=pre)


def packed(rows=2, length=8):
    ones = np.ones((rows, length), "int32")
    return {"token_ids": ones * 7, "segment_ids": ones * 0, "padding_mask": ones}


@pytest.mark.parametrize("change, message", [
    ({"token_ids": 50}, r"token_ids must be vocabulary ids, in \[0, 50\); got 50 at \(0, 0\)"),
    ({"token_ids": -1}, r"token_ids must be vocabulary ids, in \[0, 50\); got -1"),
    ({"segment_ids": 2}, r"segment_ids must be the model's segment types, in \[0, 2\); got 2"),
    ({"padding_mask": 3}, r"padding_mask must be 0 or 1, in \[0, 2\); got 3"),
    ({"token_ids": 7.5}, "token_ids must hold integers, got float64"),
    ("long", "token_ids rows hold 17 tokens, more than the model's 16 positions"),
    ("shape", r"padding_mask has shape \(2, 7\), token_ids \(2, 8\)"),
])
@pytest.mark.parametrize("jit_compile", [XLA, False])
def test_packed_inputs_beyond_the_backbone_are_refused_by_name(change, message, jit_compile):
    """Under XLA the embedding lookup clamps an id beyond its table and answers; kbert's
    default picks XLA for inputs of one length, so the check must come before the model."""
    import kbert

    model = kbert.BertClassifier(kbert.BertBackbone(BertConfig(**SMALL)), num_classes=2)
    model.compile(jit_compile=jit_compile)
    x = packed()
    if change == "long":
        x = packed(length=17)
    elif change == "shape":
        x["padding_mask"] = x["padding_mask"][:, :7]
    else:
        (key, value), = change.items()
        x[key] = x[key].astype(np.asarray(value).dtype)
        x[key][0, 0] = value
    for call in (lambda: model.predict(x, verbose=0), lambda: model.evaluate(x, [0, 1]),
                 lambda: model.fit(x, [0, 1], verbose=0),
                 lambda: model.fit(packed(), [0, 1], validation_data=(x, [0, 1]))):
        with pytest.raises(ValueError, match=message):
            call()
    assert model.predict(packed(), verbose=0).shape == (2, 2)
    with pytest.raises(ValueError, match=message):
        model.backbone.predict(x, verbose=0)


def test_masked_positions_must_lie_in_the_row():
    import kbert

    model = kbert.BertPretrainer(kbert.BertBackbone(BertConfig(**SMALL)))
    x = {**packed(), "masked_positions": np.array([[1, 8], [0, 2]], "int32")}
    with pytest.raises(ValueError, match=r"masked_positions must be positions in the row, "
                                         r"in \[0, 8\); got 8 at \(0, 1\)"):
        model.predict(x, verbose=0)


@pytest.mark.parametrize("labels, message", [
    ([0, 2], r"Labels must be class ids, integers in \[0, 2\); got 2 at \(1,\)"),
    ([-1, 0], r"got -1 at \(0,\)"),
    ([0.5, 1.0], r"got 0.5 at \(0,\)"),
    (["a", "b"], "Labels must be class ids, got dtype <U1"),
])
def test_class_labels_outside_the_head_are_refused_by_name(labels, message):
    """Under XLA a label past the logits makes the loss NaN, and the step writes NaN weights."""
    import kbert

    model = kbert.BertClassifier(kbert.BertBackbone(BertConfig(**SMALL)), num_classes=2)
    model.compile(optimizer="adam", jit_compile=False)
    for call in (lambda: model.fit(packed(), labels, verbose=0),
                 lambda: model.evaluate(packed(), labels, verbose=0),
                 lambda: model.fit(packed(), [0, 1], validation_data=(packed(), labels))):
        with pytest.raises(ValueError, match=message):
            call()
    soft = np.array([[0.9, 0.1], [0.2, 0.8]], "float32")  # dense targets are the loss's business
    model.compile(optimizer="adam", loss=keras.losses.CategoricalCrossentropy(from_logits=True),
                  jit_compile=False)
    assert np.isfinite(model.fit(packed(), soft, verbose=0).history["loss"][0])
    weights = [w.copy() for w in model.get_weights()]
    assert all(np.isfinite(w).all() for w in weights)


def test_multiple_choice_labels_index_the_choices():
    import kbert

    model = kbert.BertMultipleChoice(kbert.BertBackbone(BertConfig(**SMALL)), num_choices=3)
    model.compile(optimizer="adam")
    x = {k: np.stack([v] * 3, axis=1) for k, v in packed().items()}
    with pytest.raises(ValueError, match=r"integers in \[0, 3\); got 3"):
        model.fit(x, np.array([0, 3]), verbose=0)
    model.fit(x, np.array([0, 2]), verbose=0)


@pytest.mark.slow
def test_token_labels_must_be_tag_ids():
    import kbert

    tokenizer = kbert.BertTokenizer(vocabulary=VOCAB, lowercase=True)
    model = kbert.BertTokenClassifier(kbert.BertBackbone(BertConfig(**SMALL)), num_classes=3,
                                      preprocessor=kbert.BertTokenPreprocessor(tokenizer, 16))
    model.compile(optimizer="adam")
    words = [["w1", "w2"], ["w3"]]
    with pytest.raises(ValueError, match=r"Sentence 1: Labels must be class ids, integers in "
                                         r"\[0, 3\); got 3 at \(0,\)"):
        model.fit(words, [[0, 2], [3]], verbose=0)
    with pytest.raises(ValueError, match=r"Sentence 0: .*got -100 at \(1,\)\. Hugging Face's "
                                         r"-100 marks a token to skip; here such a token takes "
                                         r"sample_weight 0"):
        model.fit(packed(), np.array([[0, -100] + [0] * 6, [0] * 8]), verbose=0)
    model.fit(words, [[0, 2], [1]], verbose=0)


def _dataset(x, *rest):
    import tensorflow as tf

    return tf.data.Dataset.from_tensor_slices((x, *rest) if rest else x).batch(2)


@pytest.mark.parametrize("change, message", [
    ({"token_ids": 50}, r"token_ids must be vocabulary ids, in \[0, 50\); got a larger value"),
    ({"segment_ids": -1}, r"segment_ids must be in \[0, 2\) .*; got a smaller value"),
    ({"padding_mask": 3}, "padding_mask must be 0 or 1; got a larger value"),
])
def test_datasets_of_packed_inputs_are_checked_batch_by_batch(change, message):
    """A tf.data dataset is read as the model runs: each batch is checked on its way in."""
    import tensorflow as tf

    import kbert

    model = kbert.BertClassifier(kbert.BertBackbone(BertConfig(**SMALL)), num_classes=2)
    model.compile(optimizer="adam", jit_compile=False)
    x = packed(rows=4)
    (key, value), = change.items()
    x[key][3, 5] = value  # in the second batch only
    for call in (lambda: model.predict(_dataset(x), verbose=0),
                 lambda: model.evaluate(_dataset(x, np.array([0, 1, 0, 1])), verbose=0),
                 lambda: model.fit(_dataset(x, np.array([0, 1, 0, 1])), verbose=0),
                 lambda: model.fit(_dataset(packed(), np.array([0, 1])), verbose=0,
                                   validation_data=_dataset(x, np.array([0, 1, 0, 1])))):
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            call()
    assert model.predict(_dataset(packed(rows=4)), verbose=0).shape == (4, 2)
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        model.backbone.predict(_dataset(x), verbose=0)


@pytest.mark.slow
@pytest.mark.parametrize("jit_compile", [XLA, False])
def test_dataset_labels_are_checked_against_the_head(jit_compile):
    import tensorflow as tf

    import kbert

    model = kbert.BertClassifier(kbert.BertBackbone(BertConfig(**SMALL)), num_classes=2)
    model.compile(optimizer="adam", jit_compile=jit_compile)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"labels must be class ids, in \[0, 2\); got a larger value"):
        model.fit(_dataset(packed(rows=4), np.array([0, 1, 2, 1])), verbose=0)
    # A float column (pandas' habit) holds ids too, checked alike: under XLA 2.0 trained NaN
    # into every weight.
    for labels, found in (([0, 1, 2, 1], "got a larger value"),
                          ([0, 1, 0.5, 1], "got a non-integer"), ([0, 1, np.nan, 1], "")):
        with pytest.raises(tf.errors.InvalidArgumentError, match="labels must be class ids"
                                                                 r", in \[0, 2\); " + found):
            model.fit(_dataset(packed(rows=4), np.array(labels, "float32")), verbose=0)
    before = [w.copy() for w in model.get_weights()]
    model.fit(_dataset(packed(rows=4), np.array([0, 1, 1, 0], "float32")), verbose=0)
    assert all(np.isfinite(w).all() for w in model.get_weights())
    assert any((a != b).any() for a, b in zip(before, model.get_weights()))
    tagger = kbert.BertTokenClassifier(kbert.BertBackbone(BertConfig(**SMALL)), num_classes=3)
    tagger.compile(optimizer="adam", jit_compile=jit_compile)
    tags = np.zeros((4, 8), "int64")
    tags[2, 1] = -100  # Hugging Face's ignore id: kbert weighs tokens instead
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"in \[0, 3\); got a smaller"):
        tagger.fit(_dataset(packed(rows=4), tags, np.ones((4, 8), "float32")), verbose=0)
    tags[2, 1] = 3
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"in \[0, 3\); got a larger"):
        tagger.fit(_dataset(packed(rows=4), tags.astype("float32")), verbose=0)


@pytest.mark.slow
@pytest.mark.parametrize("raw", [False, True])
def test_dataset_targets_must_be_finite_numbers(raw):
    """A NaN target trains on: loss NaN and every weight NaN after one step, no error. Labels
    of a dataset of raw text are checked as a packed dataset's are."""
    import tensorflow as tf

    import kbert

    tokenizer = kbert.BertTokenizer(vocabulary=VOCAB, lowercase=True)
    backbone = kbert.BertBackbone(BertConfig(**SMALL))
    model = kbert.BertClassifier(backbone, num_classes=1,
                                 preprocessor=kbert.BertPreprocessor(tokenizer, 8))
    model.compile(optimizer="sgd")
    x = tf.constant(["w1 w2", "w3", "w4 w5 w6", "w7"]) if raw else packed(rows=4)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="labels must be finite numbers; got NaN or infinity"):
        model.fit(_dataset(x, np.array([0.5, np.nan, 1.0, 2.0], "float32")), verbose=0)
    with pytest.raises(ValueError, match="labels must be numbers .*got string; map label names"):
        model.fit(_dataset(x, np.array(["good", "bad", "good", "bad"])), verbose=0)
    model.fit(_dataset(x, np.array([0.5, 0.0, 1.0, 2.0], "float32")), verbose=0)
    assert all(np.isfinite(w).all() for w in model.get_weights())


@pytest.mark.slow
def test_sample_weights_must_be_finite_numbers():
    """A NaN sample weight, like a NaN target, made the loss NaN and every weight NaN after one
    step, without an error: in arrays, raw text and datasets alike."""
    import tensorflow as tf

    import kbert

    tokenizer = kbert.BertTokenizer(vocabulary=VOCAB, lowercase=True)
    model = kbert.BertClassifier(kbert.BertBackbone(BertConfig(**SMALL)), num_classes=2,
                                 preprocessor=kbert.BertPreprocessor(tokenizer, 8))
    model.compile(optimizer="sgd")
    texts, labels = ["w1 w2", "w3", "w4 w5 w6", "w7"], np.array([0, 1, 1, 0])
    weights = np.array([1.0, np.nan, 1.0, 1.0], "float32")
    for x in (texts, packed(rows=4)):
        with pytest.raises(ValueError, match=r"sample_weight must be finite numbers; got nan "
                                             r"at \(1,\)"):
            model.fit(x, labels, sample_weight=list(weights), verbose=0)
        with pytest.raises(ValueError, match="sample_weight must be finite"):
            model.evaluate(x, labels, sample_weight=weights, verbose=0)
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match="sample_weight must be finite numbers; got NaN or infinity"):
            model.fit(_dataset(tf.constant(x) if x is texts else x, labels, weights), verbose=0)
    with pytest.raises(ValueError, match="sample_weight must be finite"):
        model.fit(texts, labels, validation_data=(texts, labels, weights), verbose=0)
    assert all(np.isfinite(w).all() for w in model.get_weights())


@pytest.mark.slow
def test_a_raw_text_dataset_checks_its_class_ids():
    import tensorflow as tf

    import kbert

    tokenizer = kbert.BertTokenizer(vocabulary=VOCAB, lowercase=True)
    model = kbert.BertClassifier(kbert.BertBackbone(BertConfig(**SMALL)), num_classes=2,
                                 preprocessor=kbert.BertPreprocessor(tokenizer, 8))
    model.compile(optimizer="sgd", jit_compile=True)  # XLA: a NaN loss, not TF's own error
    texts = tf.constant(["w1 w2", "w3", "w4 w5 w6", "w7"])
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"labels must be class ids, in \[0, 2\); got a larger value"):
        model.fit(_dataset(texts, np.array([0, 1, 2, 1])), verbose=0)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"in \[0, 2\); got a smaller"):
        model.evaluate(_dataset(texts, np.array([0, -1, 1, 1])), verbose=0)


def test_a_pretraining_dataset_checks_its_masked_positions():
    import tensorflow as tf

    import kbert

    model = kbert.BertPretrainer(kbert.BertBackbone(BertConfig(**SMALL)))
    x = {**packed(), "masked_positions": np.array([[1, 8], [0, 2]], "int32")}
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"masked_positions must be positions in the row, in \[0, seq\)"):
        model.predict(_dataset(x), verbose=0)


@pytest.mark.slow
def test_span_targets_must_be_positions_in_the_row():
    """A start or end past the row is a label past the logits: NaN weights under XLA."""
    import tensorflow as tf

    import kbert

    model = kbert.BertSpanLabeler(kbert.BertBackbone(BertConfig(**SMALL)))
    model.compile(optimizer="adam", jit_compile=False)
    x = packed(rows=4)
    y = {"start_logits": np.array([1, 2, 0, 3]), "end_logits": np.array([1, 4, 0, 8])}
    message = r"end_logits labels must be end positions in the row, "
    with pytest.raises(ValueError, match=message + r"integers in \[0, 8\); got 8 at \(3,\)"):
        model.fit(x, y, verbose=0)
    with pytest.raises(tf.errors.InvalidArgumentError, match=message + r"in \[0, seq\)"):
        model.fit(_dataset(x, y), verbose=0)
    y["end_logits"][3] = 7
    model.fit(_dataset(x, y), verbose=0)
    model.fit(x, y, verbose=0)
    assert all(np.isfinite(w).all() for w in model.get_weights())


@pytest.mark.slow
@pytest.mark.parametrize("source", ["arrays", "dataset", "generator"])
def test_tuple_span_labels_are_start_then_end_as_declared(source):
    """Keras pairs a tuple of labels with the outputs sorted by name (end_logits first), which
    trained a span model's end logits on start positions; kbert pairs them in the order the
    outputs are declared. Invariant: one step on (start, end) gives the weights one step on
    the dict gives, and differs from one on the swapped dict."""
    import kbert

    model = kbert.BertSpanLabeler(kbert.BertBackbone(
        BertConfig(**SMALL, hidden_dropout=0.0, attention_dropout=0.0)))
    start, end = np.array([1, 2, 0, 3]), np.array([4, 5, 0, 7])
    x = {**packed(rows=4), "token_ids": np.arange(32, dtype="int32").reshape(4, 8) % 50}
    model.compile(optimizer=keras.optimizers.SGD(1.0))  # stateless: one compile, one trace
    initial = model.get_weights()

    def one_step(labels, *weights):
        model.set_weights(initial)
        batch = (x, labels, *weights)
        data = {"arrays": lambda: dict(x=x, y=labels, sample_weight=(weights or [None])[0],
                                       batch_size=4),
                "dataset": lambda: dict(x=_dataset(*batch)),
                "generator": lambda: dict(x=(b for b in [batch]))}[source]()
        model.fit(**data, epochs=1, shuffle=False, verbose=0)
        return model.get_weights()

    by_name = one_step({"start_logits": start, "end_logits": end})
    swapped = one_step({"start_logits": end, "end_logits": start})
    for labels in [(start, end)] + ([] if source == "dataset" else [[start, end]]):  # tf.data
        # stacks a list
        got = one_step(labels)
        np.testing.assert_allclose(got[-2], by_name[-2], rtol=1e-6, atol=1e-7)
        assert not np.allclose(got[-2], swapped[-2])
    # Sample weights as a tuple pair with the outputs as the labels do.
    on_start, on_end = np.array([1, 0, 1, 1], "float32"), np.array([0, 1, 0, 1], "float32")
    weighted = one_step((start, end), {"start_logits": on_start, "end_logits": on_end})
    swapped = one_step((start, end), {"start_logits": on_end, "end_logits": on_start})
    got = one_step((start, end), (on_start, on_end))
    np.testing.assert_allclose(got[-2], weighted[-2], rtol=1e-6, atol=1e-7)
    assert not np.allclose(got[-2], swapped[-2])
    if source == "dataset":
        scores = [model.evaluate(labelled, return_dict=True, verbose=0) for labelled in (
            _dataset(x, (start, end)), _dataset(x, {"start_logits": start, "end_logits": end}))]
        assert scores[0] == scores[1]
    if source != "arrays":
        return
    model.set_weights(initial)  # by_name took one step on the whole batch
    model.train_on_batch(x, (start, end))
    np.testing.assert_allclose(model.get_weights()[-2], by_name[-2], rtol=1e-6, atol=1e-7)
    assert model.test_on_batch(x, (start, end)) == model.test_on_batch(
        x, {"start_logits": start, "end_logits": end})
    with pytest.raises(ValueError, match="end_logits labels must be end positions in the row"):
        model.fit(x, (start, np.array([4, 5, 0, 8])), verbose=0)
    with pytest.raises(ValueError, match="3 label arrays for the 2 outputs start_logits, "
                                         "end_logits"):
        model.fit(x, (start, end, end), verbose=0)


@pytest.mark.slow
def test_pretraining_targets_must_be_vocabulary_ids_and_nsp_labels():
    import tensorflow as tf

    import kbert

    model = kbert.BertPretrainer(kbert.BertBackbone(BertConfig(**SMALL)))
    model.compile(optimizer="adam", jit_compile=False)
    x = {**packed(rows=4), "masked_positions": np.array([[1, 2]] * 4, "int32")}
    y = {"mlm": np.full((4, 2), 7), "nsp": np.array([0, 1, 1, 0])}
    y["mlm"][2, 1] = 50
    mlm = r"mlm labels must be vocabulary ids, "
    with pytest.raises(ValueError, match=mlm + r"integers in \[0, 50\); got 50 at \(2, 1\)"):
        model.fit(x, y, verbose=0)
    with pytest.raises(tf.errors.InvalidArgumentError, match=mlm + r"in \[0, 50\)"):
        model.fit(_dataset(x, y), verbose=0)
    y["mlm"][2, 1] = 7
    y["nsp"][0] = -1
    with pytest.raises(ValueError, match=r"nsp labels must be next-sentence labels .*got -1"):
        model.evaluate(x, y, verbose=0)
    y["nsp"][0] = 1
    model.fit(x, y, verbose=0)
    assert all(np.isfinite(w).all() for w in model.get_weights())

    tokenizer = kbert.BertTokenizer(vocabulary=VOCAB, lowercase=True)
    raw = kbert.BertPretrainer(model.backbone, preprocessor=kbert.BertMaskedLMPreprocessor(
        tokenizer, sequence_length=16))
    raw.compile(optimizer="adam", jit_compile=False)
    with pytest.raises(ValueError, match=r"nsp labels must be next-sentence labels .*got 2"):
        raw.fit((["w1 w2", "w3"], ["w4", "w5 w6"]), np.array([0, 2]), verbose=0)
    soft = {"mlm": np.full((4, 2, 50), 1 / 50, "float32"), "nsp": y["nsp"]}  # a loss of one's own
    model.compile(optimizer="adam", jit_compile=False,
                  loss={"mlm": keras.losses.CategoricalCrossentropy(from_logits=True),
                        "nsp": keras.losses.SparseCategoricalCrossentropy(from_logits=True)},
                  weighted_metrics={"mlm": [], "nsp": []})
    assert np.isfinite(model.fit(x, soft, verbose=0).history["loss"][0])


@pytest.mark.parametrize("starts, ends, found", [
    ([3, 300], [5, 305], r"question\] \[w3\] .* \[300\] \[305\] \[in a context of\] \[5\]"),
    ([6, 0], [3, 2], r"question\] \[w1 w2\] .* \[6\] \[3\] \[in a context of\] \[11\]"),
])
def test_answer_spans_outside_their_context_are_refused(starts, ends, found):
    """Such a span covers no token, so its windows were left out as unmappable: `fit` trained
    on nothing and returned an empty history."""
    import tensorflow as tf

    import kbert

    tokenizer = kbert.BertTokenizer(vocabulary=VOCAB, lowercase=True)
    model = kbert.BertSpanLabeler(kbert.BertBackbone(BertConfig(**SMALL)),
                                  preprocessor=kbert.BertSpanPreprocessor(tokenizer, 16))
    model.compile(optimizer="adam")
    x = (["w1 w2", "w3"], ["w4 w5 w6 w7", "w8 w9"])
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="answer spans must lie in their context: 0 <= answer_start < "
                             "answer_end <= its length in characters .*" + found):
        model.fit(x, (np.array(starts), np.array(ends)), verbose=0)
    history = model.fit(x, (np.array([3, -1]), np.array([11, -1])), verbose=0).history
    assert np.isfinite(history["loss"][0])  # a span may end where its context ends


def test_answer_spans_count_characters_and_allow_an_empty_batch():
    import tensorflow as tf

    import kbert

    tokenizer = kbert.BertTokenizer(vocabulary=VOCAB + ["café"], lowercase=False)
    pre = kbert.BertSpanPreprocessor(tokenizer, 16)
    assert pre.windows(["w1"], ["café"], [0], [4])["start_positions"].numpy().tolist() == [3]
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"(?s)answer spans must lie.*\b5\b.*in a context of.*\b4\b"):
        pre.windows(["w1"], ["café"], [0], [5])  # 5 bytes, 4 characters
    empty = tf.constant([], tf.int64)
    inputs, labels = pre((tf.constant([], tf.string), tf.constant([], tf.string)), (empty, empty))
    assert inputs["token_ids"].shape == (0, 16) and labels["start_logits"].shape == (0,)


@pytest.mark.slow
def test_a_span_models_raw_text_takes_one_weight_a_question():
    """Each question's weight goes to all its windows, for the start and the end alike: with
    SGD one step is linear in the weights (the loss divides by the windows, weighed or not), so
    the steps of weights (1, 0) and (0, 1) add up to the step of (1, 1), and (2, 2) is twice it.
    A weight for each output is refused by name (the windows get one). A list of numbers is
    one weight a question, as an array is: a list as long as the outputs were read as a weight
    each."""
    import kbert

    tokenizer = kbert.BertTokenizer(vocabulary=VOCAB, lowercase=True)
    model = kbert.BertSpanLabeler(
        kbert.BertBackbone(BertConfig(**SMALL, hidden_dropout=0.0, attention_dropout=0.0)),
        preprocessor=kbert.BertSpanPreprocessor(tokenizer, 16, doc_stride=4, max_query_length=4))
    model.compile(optimizer=keras.optimizers.SGD(0.1))
    initial = model.get_weights()
    x = (["w1 w2", "w3"], [" ".join(f"w{i}" for i in range(5, 25)), "w4 w5 w6"])
    y = ([3, 0], [5, 2])  # the first context is long: several windows

    def step(weights):
        model.set_weights(initial)
        model.fit(x, y, sample_weight=weights, batch_size=64, verbose=0)
        return [w - w0 for w, w0 in zip(model.get_weights(), initial)]

    first, second, both, twice = (step(w) for w in ([1.0, 0.0], [0, 1], np.ones(2, "float32"),
                                                     np.full(2, 2.0)))
    for a, b, ab, aabb in zip(first, second, both, twice):
        np.testing.assert_allclose(a + b, ab, atol=1e-6)
        np.testing.assert_allclose(aabb, 2 * ab, atol=1e-6)
    assert not np.allclose(first[-2], second[-2])
    with pytest.raises(ValueError, match="one sample_weight a question"):
        model.fit(x, y, sample_weight=(np.ones(2), np.ones(2)), verbose=0)


def test_raw_inputs_that_disagree_on_their_examples_are_refused_by_name():
    """tf.data's own error ("Dimensions 3 and 2 are not compatible") named neither piece; the
    preprocessors check what `fit`, `evaluate` and `predict` hand them first."""
    import kbert

    tokenizer = kbert.BertTokenizer(vocabulary=VOCAB, lowercase=True)
    backbone = kbert.BertBackbone(BertConfig(**SMALL))
    clf = kbert.BertClassifier(backbone, num_classes=2,
                               preprocessor=kbert.BertPreprocessor(tokenizer, 16))
    qa = kbert.BertSpanLabeler(backbone, preprocessor=kbert.BertSpanPreprocessor(tokenizer, 16))
    tagger = kbert.BertTokenClassifier(backbone, num_classes=3,
                                       preprocessor=kbert.BertTokenPreprocessor(tokenizer, 16))
    for model in (clf, qa, tagger):
        model.compile(optimizer="adam")
    three = ["w1", "w2 w3", "w4"]
    counts = "The inputs hold different numbers of examples "
    for call, listing in [
            (lambda: clf.fit(three, [0, 1], verbose=0), r"\(x 3, y 2\)"),
            (lambda: clf.predict((three, three[:2]), verbose=0), r"\(x\[0\] 3, x\[1\] 2\)"),
            (lambda: clf.evaluate(three, [0, 1, 0], sample_weight=[1.0], verbose=0),
             r"\(x 3, y 3, sample_weight 1\)"),
            (lambda: qa.fit((three, three), ([0, 0, 0], [2, 2]), verbose=0),
             r"\(x\[0\] 3, x\[1\] 3, y\[0\] 3, y\[1\] 2\)"),
            (lambda: tagger.fit([["w1"], ["w2"]], [[0]], verbose=0), r"\(x 2, y 1\)")]:
        with pytest.raises(ValueError, match=counts + listing):
            call()
    with pytest.raises(TypeError, match="Give text \\(strings\\); got int64 values"):
        clf.predict([1, 2], verbose=0)


@pytest.mark.slow
def test_ragged_choices_and_non_finite_targets_are_refused_by_name():
    """numpy's "setting an array element with a sequence" (or Keras' shape error, for as many
    choices a question but not the model's) named no question; a NaN regression target trained
    without error and wrote NaN into every weight."""
    import kbert

    tokenizer = kbert.BertTokenizer(vocabulary=VOCAB, lowercase=True)
    backbone = kbert.BertBackbone(BertConfig(**SMALL))
    choices = kbert.BertMultipleChoice(backbone, num_choices=2,
                                       preprocessor=kbert.BertPreprocessor(tokenizer, 16))
    choices.compile(optimizer="adam")
    ragged = (["w1", "w2"], [["w3", "w4"], ["w5"]])
    with pytest.raises(ValueError, match=r"The question of row 1 has 1 choice\(s\); this model scores 2"):
        choices.fit(ragged, [0, 1], verbose=0)
    with pytest.raises(ValueError, match="every question needs as many choices"):
        choices.preprocessor.dataset(ragged)
    with pytest.raises(ValueError, match=r"The question of row 0 has 3 choice\(s\); this model scores 2"):
        choices.predict((["w1"], [["w3", "w4", "w5"]]), verbose=0)
    assert choices.predict((["w1"], [np.array(["w3", "w4"])]), verbose=0).shape == (1, 2)
    regression = kbert.BertClassifier(backbone, num_classes=1)
    regression.compile(optimizer="adam")
    weights = [w.copy() for w in regression.get_weights()]
    for labels, message in [([0.5, np.nan], r"finite numbers; got nan at \(1,\)"),
                            ([np.inf, 1.0], r"finite numbers; got inf at \(0,\)"),
                            (["0.5", "1"], "numbers, got dtype <U3")]:
        with pytest.raises(ValueError, match="Labels must be " + message):
            regression.fit(packed(), labels, verbose=0)
    assert all(np.array_equal(a, b) for a, b in zip(weights, regression.get_weights()))
    assert np.isfinite(regression.fit(packed(), np.array([0.5, 1.0]), verbose=0).history["loss"][0])


@pytest.mark.slow
def test_choice_counts_are_checked_in_arrays_tensors_ragged_tensors_and_datasets():
    """Only Python lists were counted: another number of choices in an array, a tensor or a
    dataset's batches failed with Keras' "Input 0 with name 'padding_mask' ... expected
    shape=(None, 2, None), found shape=(1, 3, 5)"; a ragged tensor of choices failed to pack."""
    import tensorflow as tf

    import kbert

    tokenizer = kbert.BertTokenizer(vocabulary=VOCAB, lowercase=True)
    model = kbert.BertMultipleChoice(kbert.BertBackbone(BertConfig(**SMALL)), num_choices=2,
                                     preprocessor=kbert.BertPreprocessor(tokenizer, 16))
    model.compile(optimizer="adam")
    three = [["w3", "w4", "w5"], ["w4", "w5", "w6"]]
    batches = tf.data.Dataset.from_tensor_slices(((["w1", "w2"], three), [0, 1])).batch(2)
    for call, shape in [
            (lambda: model.predict((np.array(["w1", "w2"]), np.array(three)), verbose=0),
             r"\(2, 3\)"),
            (lambda: model.predict((tf.constant(["w1", "w2"]), tf.constant(three)), verbose=0),
             r"\(2, 3\)"),
            (lambda: model.fit(batches, verbose=0), r"\(None, 3\)"),
            (lambda: model.evaluate(batches, verbose=0), r"\(None, 3\)")]:
        with pytest.raises(ValueError, match=rf"The choices have shape {shape}: 3 a question; "
                                             r"this model scores 2 a question \(num_choices\)"):
            call()
    with pytest.raises(ValueError, match=r"The question of row 1 has 1 choice\(s\); this model scores 2"):
        model.predict((["w1", "w2"], tf.ragged.constant([["w3", "w4"], ["w5"]])), verbose=0)
    listed = model.predict((["w1"], [["w3", "w4"]]), verbose=0)
    for choices in (np.array([["w3", "w4"]]), tf.ragged.constant([["w3", "w4"]])):
        np.testing.assert_allclose(model.predict((["w1"], choices), verbose=0), listed,
                                   rtol=1e-6)


def test_missing_text_is_refused_by_position():
    """A None, or pandas' NaN for a missing cell, became the text "None" or "nan"; a tagger's
    word lists met TensorFlow's "mixed types" error, and labels for other words than a
    sentence has the graph's check, neither of which names the sentence."""
    import kbert

    tokenizer = kbert.BertTokenizer(vocabulary=VOCAB, lowercase=True)
    backbone = kbert.BertBackbone(BertConfig(**SMALL))
    clf = kbert.BertClassifier(backbone, num_classes=2,
                               preprocessor=kbert.BertPreprocessor(tokenizer, 16))
    tagger = kbert.BertTokenClassifier(backbone, num_classes=3,
                                       preprocessor=kbert.BertTokenPreprocessor(tokenizer, 16))
    for call, message in [
            (lambda: clf.predict(["w1", None], verbose=0), r"got None at \(1,\)"),
            (lambda: clf.predict((["w1", "w2"], ["w3", np.nan]), verbose=0), r"got nan at \(1,\)"),
            (lambda: tagger.predict([["w1", None]], verbose=0), "Sentence 0: give words as "
                                                                "strings; got None at word 1"),
            (lambda: tagger.predict(["w1 w2", 7], verbose=0), "Sentence 1: give a string or a "
                                                              "list of words; got 7")]:
        with pytest.raises(TypeError, match=message):
            call()
    with pytest.raises(ValueError, match="Sentence 1 has 1 words and 2 labels: give one label "
                                         "per word"):
        tagger.fit([["w1", "w2"], ["w3"]], [[0, 1], [2, 0]], verbose=0)
    assert clf.predict(["w1", "w2 w3"], verbose=0).shape == (2, 2)


@pytest.mark.slow
def test_a_list_of_pairs_is_refused_rather_than_read_as_the_two_segments():
    """Hugging Face's tokenizer takes a list of (a, b) pairs; here a list of two of them was
    read as segments A and B, pairing each first text with the other pair's first text."""
    import kbert

    tokenizer = kbert.BertTokenizer(vocabulary=VOCAB, lowercase=True)
    pre = kbert.BertPreprocessor(tokenizer, 16)
    clf = kbert.BertClassifier(kbert.BertBackbone(BertConfig(**SMALL)), num_classes=2,
                               preprocessor=pre)
    pairs = [("w1", "w2"), ("w3", "w4")]
    with pytest.raises(ValueError, match=r"Give pairs as a tuple \(texts_a, texts_b\)"):
        pre(pairs)
    with pytest.raises(ValueError, match=r"The text has shape \(2, 2\), not one string an "
                                         r"example: give pairs as a tuple"):
        clf.predict(pairs, verbose=0)
    packed_pairs = pre((["w1", "w3"], ["w2", "w4"]))["token_ids"].numpy()
    w = {f"w{i}": VOCAB.index(f"w{i}") for i in range(1, 5)}
    assert packed_pairs[:, :5].tolist() == [[2, w["w1"], 3, w["w2"], 3],
                                            [2, w["w3"], 3, w["w4"], 3]]
    assert clf.predict((["w1", "w3"], ["w2", "w4"]), verbose=0).shape == (2, 2)


@pytest.mark.slow
def test_a_dataset_of_single_raw_examples_is_refused_by_name():
    """An unbatched dataset of raw text failed in the model with a shape error, and its trace
    relaxed the packing's function to any rank: a batched dataset then failed too. One of
    packed rows met Keras' shape error, which does not say what to do."""
    import tensorflow as tf

    import kbert

    tokenizer = kbert.BertTokenizer(vocabulary=VOCAB, lowercase=True)
    clf = kbert.BertClassifier(kbert.BertBackbone(BertConfig(**SMALL)), num_classes=2,
                               preprocessor=kbert.BertPreprocessor(tokenizer, 16))
    clf.compile(optimizer="adam")
    examples = tf.data.Dataset.from_tensor_slices((["w1 w2", "w3", "w4 w5 w6"], [0, 1, 0]))
    for call in (lambda: clf.fit(examples, verbose=0),
                 lambda: clf.predict(examples.map(lambda text, label: text), verbose=0)):
        with pytest.raises(ValueError, match=r"The dataset yields single examples .*call "
                                             r"\.batch\(32\) on it first"):
            call()
    assert np.isfinite(clf.fit(examples.batch(2), verbose=0).history["loss"][0])
    rows = tf.data.Dataset.from_tensor_slices((packed(rows=4), np.array([0, 1, 0, 1])))
    with pytest.raises(ValueError, match=r"The dataset yields single examples \(token_ids of "
                                         r"shape \(8,\)\); Keras takes batches"):
        clf.fit(rows, verbose=0)
    assert np.isfinite(clf.fit(rows.batch(2), verbose=0).history["loss"][0])


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["generator", "PyDataset"])
def test_streamed_batches_of_packed_inputs_are_checked_and_text_named(kind):
    """Keras reads generators and PyDatasets itself: with a preprocessor on the model they were
    taken for text and refused; their labels went unchecked (a class id past the head gave a
    NaN loss). Each batch is now checked as a dict of arrays is."""
    import kbert

    tokenizer = kbert.BertTokenizer(vocabulary=VOCAB, lowercase=True)
    model = kbert.BertClassifier(kbert.BertBackbone(BertConfig(**SMALL)), num_classes=2,
                                 preprocessor=kbert.BertPreprocessor(tokenizer, 8))
    model.compile(optimizer="sgd")
    texts = np.array(["w1 w2", "w3", "w4 w5 w6", "w7"])
    ids = {k: np.asarray(v) for k, v in model.preprocessor(texts).items()}

    class Batches(keras.utils.PyDataset):
        def __init__(self, batches):
            super().__init__()
            self.batches = batches

        def __len__(self):
            return len(self.batches)

        def __getitem__(self, index):
            return self.batches[index]

    def stream(*batches):
        return Batches(list(batches)) if kind == "PyDataset" else (b for b in batches)

    good = (ids, np.array([0, 1, 1, 0]))
    history = model.fit(stream(good, good), epochs=1, verbose=0).history
    assert np.isfinite(history["loss"]).all()
    assert np.isfinite(model.evaluate(stream(good), verbose=0)).all()
    with pytest.raises(ValueError, match=r"class ids, integers in \[0, 2\); got 5 at \(1,\)"):
        model.fit(stream(good, (ids, np.array([0, 5, 1, 1]))), verbose=0)
    with pytest.raises(ValueError, match=r"token_ids must be vocabulary ids"):
        model.fit(stream(({**ids, "token_ids": ids["token_ids"] + 50}, good[1])), verbose=0)
    with pytest.raises(TypeError, match="The batches hold text; a generator or PyDataset must "
                                        "yield packed inputs"):
        model.fit(stream((texts, good[1])), verbose=0)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["train_on_batch", "test_on_batch", "predict_on_batch"])
def test_the_on_batch_methods_name_text_they_cannot_take(method):
    """As keras-hub's, they take packed ids; Keras' own error counted "4 input tensors"."""
    import kbert

    tokenizer = kbert.BertTokenizer(vocabulary=VOCAB, lowercase=True)
    model = kbert.BertClassifier(kbert.BertBackbone(BertConfig(**SMALL)), num_classes=2,
                                 preprocessor=kbert.BertPreprocessor(tokenizer, 8))
    model.compile(optimizer="sgd")
    labels = () if method == "predict_on_batch" else (np.array([0, 1]),)
    texts = ["w1 w2", "w3"]
    with pytest.raises(ValueError, match=f"{method} takes packed inputs .* not text: pack a "
                                         "batch with the model's preprocessor"):
        getattr(model, method)(texts, *labels)
    with pytest.raises(ValueError, match="not text"):
        getattr(model, method)((np.array(texts), np.array(texts)), *labels)
    out = getattr(model, method)(dict(model.preprocessor(texts)), *labels)
    assert np.isfinite(out).all()
