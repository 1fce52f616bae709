"""Task models holding a preprocessor take raw text in fit / evaluate / predict, as keras-hub's
tasks do; the raw-text path must give exactly what packing by hand gives, and survive save/load."""

import math

import keras
import numpy as np
import pytest

from kbert import BertBackbone
from kbert.models.classifier import BertClassifier
from kbert.models.feature_extractor import BertFeatureClassifier, BertFeatureExtractor
from kbert.models.multiple_choice import BertMultipleChoice
from kbert.text import BertPreprocessor
from tests.tasks.helpers import VOCAB, preprocessor

TEXTS = ["good film", "very dull movie", "fine", "bad", "what a good movie", "not good"]
LABELS = [1, 0, 1, 0, 1, 0]
PAIRS = (["what is it ?", "who is it ?", "why not ?"], ["a film", "the movie", "no"])
CHOICES = (["what is it ?", "who was it ?"], [["good", "bad", "dull"], ["yes", "no", "a b c"]])


@pytest.fixture
def backbone(tiny_config):
    """One block: what these tests check (raw text in = packed ids in, save/load) does not
    depend on depth, and each block adds seconds of graph tracing to every fit and predict."""
    keras.utils.set_random_seed(1)
    return BertBackbone(tiny_config.__class__(**{**tiny_config.to_dict(),
                                                 "vocab_size": len(VOCAB), "num_layers": 1}))


def _by_hand(model, x):
    """The model on inputs packed outside it (the id path)."""
    return model.predict(model.preprocessor(x), verbose=0)


@pytest.mark.slow
def test_classifier_fits_and_predicts_raw_strings(backbone, tmp_path):
    model = BertClassifier(backbone, num_classes=2, preprocessor=preprocessor(12))
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    # 48 steps in 4 epochs (each epoch restarts the tf.data pipeline: a second or so); seeds
    # 1-4 end at 0.02-0.13 of the first epoch's loss (36 steps: up to 0.75)
    history = model.fit(TEXTS * 16, LABELS * 16, batch_size=8, epochs=4, verbose=0)
    assert history.history["loss"][-1] < 0.5 * history.history["loss"][0]
    raw = model.predict(TEXTS, batch_size=4, verbose=0)
    np.testing.assert_allclose(raw, _by_hand(model, np.array(TEXTS)), atol=1e-5)
    assert model.evaluate(TEXTS, LABELS, verbose=0, return_dict=True)["accuracy"] >= 0.8

    model.save(tmp_path / "clf.keras")
    loaded = keras.saving.load_model(tmp_path / "clf.keras")
    assert loaded.preprocessor.tokenizer.get_vocabulary() == VOCAB
    assert loaded.preprocessor.sequence_length == 12 and loaded.preprocessor.tokenizer.lowercase
    np.testing.assert_allclose(loaded.predict(TEXTS, verbose=0), raw, atol=1e-6)


@pytest.mark.slow
def test_pairs_as_a_tuple_of_lists(backbone):
    model = BertClassifier(backbone, num_classes=3, preprocessor=preprocessor(16))
    model.compile(optimizer="adam")
    model.fit(PAIRS, [0, 2, 1], verbose=0, validation_data=(PAIRS, [0, 2, 1]))
    np.testing.assert_allclose(model.predict(PAIRS, verbose=0),
                               _by_hand(model, tuple(np.array(p) for p in PAIRS)), atol=1e-5)


@pytest.mark.slow
def test_a_dataset_of_pairs_nests_them(backbone):
    """A raw dataset's element is (x, y[, weight]) as Keras reads it: pairs are one level
    deeper. Elements (texts_a, texts_b) were texts labelled by texts, refused as "labels must
    be numbers" with advice to map label names only; now the message shows the nesting too,
    which works."""
    import tensorflow as tf

    model = BertClassifier(backbone, num_classes=3, preprocessor=preprocessor(16))
    model.compile()
    nested = tf.data.Dataset.from_tensor_slices((PAIRS,)).batch(2)
    np.testing.assert_allclose(model.predict(nested, verbose=0),
                               model.predict(PAIRS, verbose=0), atol=1e-5)
    labelled = tf.data.Dataset.from_tensor_slices((PAIRS, [0, 2, 1])).batch(2)
    assert model.evaluate(labelled, verbose=0) == pytest.approx(
        model.evaluate(PAIRS, [0, 2, 1], verbose=0))
    flat = tf.data.Dataset.from_tensor_slices(PAIRS).batch(2)
    for call in (model.predict, model.evaluate, model.fit):
        with pytest.raises(ValueError, match=r"map label names .* second texts of pairs.*"
                                             r"\(\(texts_a, texts_b\),\) to predict"):
            call(flat, verbose=0)


@pytest.mark.slow
def test_utf8_bytes_read_as_the_same_text(backbone):
    """tf.data's `as_numpy_iterator` gives text as UTF-8 bytes; those with non-ASCII
    characters failed with `UnicodeDecodeError: 'ascii' codec`."""
    model = BertClassifier(backbone, num_classes=2, preprocessor=preprocessor(12))
    texts = ["GOOD café", "naïve — film ✓", "bad"]
    as_bytes = [t.encode("utf-8") for t in texts]
    np.testing.assert_array_equal(model.predict(as_bytes, verbose=0),
                                  model.predict(texts, verbose=0))
    np.testing.assert_array_equal(model.predict([texts[0], as_bytes[1], texts[2]], verbose=0),
                                  model.predict(texts, verbose=0))


@pytest.mark.slow
def test_multiple_choice_takes_one_list_of_choices_per_question(backbone, tmp_path):
    model = BertMultipleChoice(backbone, num_choices=3, preprocessor=preprocessor(12))
    model.compile(optimizer="adam")
    model.fit(CHOICES, [0, 1], verbose=0)
    raw = model.predict(CHOICES, verbose=0)
    assert raw.shape == (2, 3)
    packed = model.preprocessor((np.array(CHOICES[0]), np.array(CHOICES[1])))
    assert tuple(packed["token_ids"].shape) == (2, 3, 12)
    # each choice packed as the pair (question, choice)
    pair = model.preprocessor((np.array(["who was it ?"]), np.array(["a b c"])))
    np.testing.assert_array_equal(packed["token_ids"][1, 2], pair["token_ids"][0])
    np.testing.assert_allclose(raw, model.predict(packed, verbose=0), atol=1e-5)
    model.save(tmp_path / "mc.keras")
    np.testing.assert_allclose(keras.saving.load_model(tmp_path / "mc.keras").predict(
        CHOICES, verbose=0), raw, atol=1e-6)


@pytest.mark.slow
def test_feature_classifier_is_a_task_with_a_preprocessor(backbone, tmp_path):
    model = BertFeatureClassifier(backbone, num_classes=2, layers=(-2, -1), lstm_units=4,
                                  preprocessor=preprocessor(12))
    model.compile(optimizer="adam")
    model.fit(TEXTS, LABELS, verbose=0)
    model.save(tmp_path / "fc.keras")
    loaded = keras.saving.load_model(tmp_path / "fc.keras")
    np.testing.assert_allclose(loaded.predict(TEXTS, verbose=0),
                               model.predict(TEXTS, verbose=0), atol=1e-6)


@pytest.mark.slow
def test_packed_inputs_still_pass_through(backbone):
    model = BertClassifier(backbone, num_classes=2, preprocessor=preprocessor(12))
    packed = model.preprocessor(np.array(TEXTS))
    np.testing.assert_allclose(model.predict(packed, verbose=0),
                               model.predict(TEXTS, verbose=0), atol=1e-5)


def test_a_single_string_is_refused_with_a_clear_error(backbone):
    model = BertClassifier(backbone, num_classes=2, preprocessor=preprocessor(12))
    with pytest.raises(TypeError, match="list of strings"):
        model.predict("good film")


def _a_classifier_run(tmp_path):
    """A run directory holding a tiny classifier."""
    from kbert.runs import RunDirectory

    from kbert.config import BertConfig

    model = BertClassifier(BertBackbone(BertConfig.preset("tiny")), num_classes=2)
    RunDirectory(tmp_path / "run").save(model, {"task": "toy", "kind": "classification",
                                                "settings": {}}, {})
    return tmp_path / "run"


@pytest.mark.slow
def test_from_pretrained_builds_backbone_preprocessor_and_head(minilm_dir, tmp_path):
    model = BertClassifier.from_pretrained("minilm_l6_h384_uncased", num_classes=3,
                                           sequence_length=32)
    reference = BertBackbone.from_pretrained(minilm_dir)
    for a, b in zip(model.backbone.weights, reference.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert model.num_classes == 3 and model.preprocessor.sequence_length == 32
    assert model.preprocessor.tokenizer.get_vocabulary() == (
        (minilm_dir / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1])
    assert model.predict(["a great film"], verbose=0).shape == (1, 3)
    # keras-hub's `preprocessor=None` (packed ids in) and a preprocessor of one's own: were
    # "got multiple values for keyword argument 'preprocessor'"
    bare = BertClassifier.from_pretrained("tiny", num_classes=2, preprocessor=None)
    assert bare.preprocessor is None
    own = BertPreprocessor(model.preprocessor.tokenizer, sequence_length=8)
    assert BertClassifier.from_pretrained("minilm_l6_h384_uncased", num_classes=2,
                                          preprocessor=own).preprocessor is own
    with pytest.raises(ValueError, match="with preprocessor= given, set it on that one"):
        BertClassifier.from_pretrained("tiny", preprocessor=own, sequence_length=16)
    with pytest.raises(ValueError, match=r"You must call `compile\(\)`"):  # was AttributeError
        bare.fit({k: np.ones((2, 4), "int32") for k in ("token_ids", "segment_ids",
                                                        "padding_mask")}, np.array([0, 1]))
    from kbert.models.pretrainer import BertPretrainer
    from kbert.text import BertMaskedLMPreprocessor

    pretrainer = BertPretrainer.from_pretrained("tiny", use_nsp=False, sequence_length=32)
    assert isinstance(pretrainer.preprocessor, BertMaskedLMPreprocessor)
    with pytest.warns(UserWarning, match="holds no masked LM head"):  # MiniLM: an encoder
        BertPretrainer.from_pretrained("minilm_l6_h384_uncased", use_nsp=False)
    extractor = BertFeatureExtractor.from_pretrained("minilm_l6_h384_uncased", layers=-1,
                                                     sequence_length=16)
    features = extractor.predict(["a great film"], verbose=0)  # batches cut to their longest
    np.testing.assert_allclose(features, model.backbone.predict(  # the last layer's states
        extractor.preprocessor(["a great film"]), verbose=0)["sequence_output"][:, :5],
        atol=1e-5)
    assert features.shape == (1, 5, 384)  # [CLS] a great film [SEP]
    from kbert.config import BertConfig

    from_config = BertClassifier.from_pretrained(  # a BertConfig: random weights, that size
        BertConfig.preset("tiny"), num_classes=2)
    assert from_config.backbone.config == BertConfig.preset("tiny")
    run = _a_classifier_run(tmp_path)
    loaded = BertClassifier.from_pretrained(run)  # a run is loaded as saved
    assert isinstance(loaded, BertClassifier) and loaded.num_classes == 2
    with pytest.raises(TypeError, match="holds a BertClassifier, not a BertPretrainer"):
        BertPretrainer.from_pretrained(run)
    with pytest.raises(ValueError, match="cannot apply"):
        BertClassifier.from_pretrained(run, num_classes=3)


@pytest.mark.slow
@pytest.mark.parametrize("x, y", [(TEXTS, LABELS), (PAIRS, [0, 2, 1])])
def test_validation_split_holds_out_the_last_examples_as_keras_does(backbone, x, y):
    """Keras splits only arrays; raw text becomes a dataset, so kbert cuts it first, where Keras
    cuts: the last floor(n * split) examples before shuffling, scored at each epoch's end."""
    model = BertClassifier(backbone, num_classes=3, preprocessor=preprocessor(16))
    model.compile(optimizer="adam", metrics=["accuracy"])
    batches = []
    log = keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: batches.append(b))
    history = model.fit(x, y, validation_split=0.34, batch_size=1, verbose=0, callbacks=[log])
    n = len(y)
    kept = math.floor(n * (1 - 0.34))  # Keras' array_slicing.train_validation_split
    assert len(batches) == kept  # one example a batch
    held_x = tuple(p[kept:] for p in x) if isinstance(x, tuple) else x[kept:]
    scores = model.evaluate(held_x, y[kept:], verbose=0, return_dict=True)
    assert history.history["val_loss"][0] == pytest.approx(scores["loss"], rel=1e-5)
    with pytest.raises(ValueError, match="validation_split=0.9 leaves no training or no "
                                         "validation examples"):
        model.fit(x, y, validation_split=0.9, verbose=0)


@pytest.mark.parametrize("empty", [[], np.array([], str), ([], []), ()])
def test_no_text_is_a_clear_error(backbone, empty):
    model = BertClassifier(backbone, num_classes=2, preprocessor=preprocessor(12))
    model.compile(optimizer="adam")
    for call in (lambda: model.predict(empty, verbose=0), lambda: model.fit(empty, [])):
        with pytest.raises(ValueError, match="The input holds no examples"):
            call()


@pytest.mark.slow
def test_what_fit_cannot_do_with_raw_text_is_named(backbone):
    """A raw-text Dataset and validation_split ('_BatchDataset' object is not subscriptable),
    validation texts without labels ("None values not supported"), and a preprocessor whose
    sequence_length was set beyond the positions after the model was built (under XLA it read
    clamped positions and answered)."""
    import tensorflow as tf

    model = BertClassifier(backbone, num_classes=2, preprocessor=preprocessor(12))
    model.compile(optimizer="adam")
    dataset = tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)).batch(2)
    with pytest.raises(ValueError, match="a Dataset cannot be cut: give validation_data"):
        model.fit(dataset, validation_split=0.5, verbose=0)
    for validation in ((TEXTS,), TEXTS):
        with pytest.raises(ValueError, match=r"validation_data is \(x, y\) or .*needs labels"):
            model.fit(TEXTS, LABELS, validation_data=validation, verbose=0)
    model.fit(TEXTS, LABELS, validation_data=dataset, verbose=0)  # a dataset holds its labels
    model.fit(TEXTS, LABELS, validation_data=[TEXTS, LABELS], verbose=0)  # a list, as Keras
    model.preprocessor.sequence_length = backbone.config.max_position_embeddings + 1
    with pytest.raises(ValueError, match="sequence_length=65 exceeds the model's 64 positions"):
        model.predict(TEXTS, verbose=0)


@pytest.mark.slow
def test_a_span_model_takes_raw_text_without_keras_warnings(backbone):
    """Raw questions become a dataset of windows whose number Keras cannot know beforehand, and
    Keras warned "Your input ran out of data" at its end in every fit, evaluate and predict.
    That warning is kept where it means something: more `steps_per_epoch` than the data has.
    Keras' warning that the pooler gets no gradient is not shown either, but one naming any
    other variable is."""
    import re
    import warnings

    from kbert.models.task_inputs import POOLER_WITHOUT_GRADIENT

    from kbert.models.span_labeler import BertSpanLabeler
    from kbert.text import BertSpanPreprocessor

    model = BertSpanLabeler(backbone, preprocessor=BertSpanPreprocessor(
        preprocessor(12).tokenizer, 16, doc_stride=4, max_query_length=4))
    model.compile(optimizer="adam")
    x = (["what is it ?", "who ?"], ["a good film , not a dull movie at all", "no"])
    y = ([2, 0], [6, 2])
    calls = {"fit": lambda **kw: model.fit(x, y, validation_data=(x, y), verbose=0, **kw),
             "evaluate": lambda: model.evaluate(x, y, verbose=0),
             "predict": lambda: model.predict(x, verbose=0)}
    for name, call in calls.items():
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            call()
        assert not [w for w in seen if "ran out of data" in str(w.message)], name
        # Nor the pooler's missing gradient: a span head reads the sequence output alone.
        assert not [w for w in seen if "Gradients do not exist" in str(w.message)], name
    with pytest.warns(UserWarning, match="ran out of data"):
        calls["fit"](steps_per_epoch=5)
    message = "Gradients do not exist for variables {} when minimizing the loss."
    assert re.match(POOLER_WITHOUT_GRADIENT, message.format("['pooler/kernel', 'pooler/bias']"))
    assert not re.match(POOLER_WITHOUT_GRADIENT,
                        message.format("['pooler/kernel', 'pooler/bias', 'span_logits/bias']"))


@pytest.mark.slow
def test_span_predictions_on_raw_text_are_one_array_of_windows(backbone):
    """`predict` on raw questions joins its batches' logits: each batch cut to its own longest
    window made them a RaggedTensor once there were several batches (numpy's argmax failed).
    Rows are the preprocessor's windows at full length, as the model gives them one by one."""
    import numpy as np

    from kbert.models.span_labeler import BertSpanLabeler
    from kbert.text import BertSpanPreprocessor

    pre = BertSpanPreprocessor(preprocessor(12).tokenizer, 16, doc_stride=4, max_query_length=4)
    model = BertSpanLabeler(backbone, preprocessor=pre)
    x = (["what is it ?", "who ?", "why ?"], ["a good film , not a dull movie at all", "no",
                                             "a film"])
    out = model.predict(x, batch_size=2, verbose=0)
    windows = pre.windows(*x)
    expected = model.predict_on_batch({k: windows[k] for k in
                                       ("token_ids", "segment_ids", "padding_mask")})
    for key in ("start_logits", "end_logits"):
        assert isinstance(out[key], np.ndarray) and out[key].shape == (len(windows["token_ids"]),
                                                                       16)
        np.testing.assert_allclose(out[key], expected[key], atol=1e-5)


@pytest.mark.slow
def test_span_answers_by_output_name_are_the_tuple(backbone):
    """`{"start_logits": starts, "end_logits": ends}`, the span model's output names (as Keras
    pairs dict targets), trains as `(starts, ends)` does: in `fit` / `evaluate` on raw text and
    through `dataset.map(preprocessor)`. It failed in `fit` ("Cannot convert 'start_logits'")."""
    import tensorflow as tf

    from kbert.models.span_labeler import BertSpanLabeler
    from kbert.text import BertSpanPreprocessor

    pre = BertSpanPreprocessor(preprocessor(12).tokenizer, 16, doc_stride=4, max_query_length=4)
    model = BertSpanLabeler(backbone, preprocessor=pre)
    model.compile()
    x = (["what is it ?", "who ?"], ["a good film , not a dull movie at all", "no"])
    starts, ends = [2, 0], [6, 2]
    by_name = {"start_logits": starts, "end_logits": ends}
    score = lambda y: model.evaluate(x, y, verbose=0, return_dict=True)  # noqa: E731
    assert score(by_name) == pytest.approx(score((starts, ends)))
    pairs = tf.data.Dataset.from_tensor_slices((x, (starts, ends))).batch(2).map(pre)
    named = tf.data.Dataset.from_tensor_slices((x, by_name)).batch(2).map(pre)
    for (a, ya), (b, yb) in zip(pairs, named):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
        for key in ya:
            np.testing.assert_array_equal(ya[key], yb[key])
    model.fit(x, by_name, epochs=1, verbose=0)
    model.fit(tf.data.Dataset.from_tensor_slices((x, by_name)).batch(2), verbose=0)


@pytest.mark.slow
def test_span_losses_by_output_equal_the_packed_windows(backbone):
    """Raw questions' windows are counted once, so Keras knows the dataset's size: over one of
    unknown size it ran one more, empty step, which its per-output loss trackers counted, and
    `start_logits_loss` came out n/(n + 1) of its value (n batches)."""
    from kbert.models.span_labeler import BertSpanLabeler
    from kbert.text import BertSpanPreprocessor

    pre = BertSpanPreprocessor(preprocessor(12).tokenizer, 16, doc_stride=4, max_query_length=4)
    model = BertSpanLabeler(backbone, preprocessor=pre)
    model.compile()
    x = (["what is it ?", "who ?", "why not ?"],
         ["a good film , not a dull movie at all", "no", "a film"])
    y = ([2, 0, 0], [6, 2, 1])
    windows = pre.windows(*x, *y)
    keep = windows["unmappable"].numpy() == 0
    inputs = {k: windows[k].numpy()[keep] for k in ("token_ids", "segment_ids", "padding_mask")}
    targets = {"start_logits": windows["start_positions"].numpy()[keep],
               "end_logits": windows["end_positions"].numpy()[keep]}
    assert len(targets["start_logits"]) > 2  # several batches of 2
    packed = model.evaluate(inputs, targets, batch_size=2, verbose=0, return_dict=True)
    raw = model.evaluate(x, y, batch_size=2, verbose=0, return_dict=True)
    assert raw == pytest.approx(packed, rel=1e-5)


@pytest.mark.slow
def test_text_as_a_column_and_as_a_list_in_any_order(backbone):
    """Strings [n, 1] (`df[["text"]].values`) and then [n] (or the reverse) on one model: the
    traced packing relaxed to an unknown rank and refused both from then on."""
    model = BertClassifier(backbone, num_classes=2, preprocessor=preprocessor(12))
    column = model.predict(np.array(TEXTS)[:, None], verbose=0)
    np.testing.assert_allclose(model.predict(TEXTS, verbose=0), column, atol=1e-6)
    np.testing.assert_allclose(model.predict(np.array(TEXTS)[:, None], verbose=0), column,
                               atol=1e-6)
