"""The span labeler's SavedModel: question + context strings in, answers out, all in the graph,
equal to the Python path (windows → the Keras model → `kbert.data.squad.decode_answers`)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from kbert.data.squad import SquadExample
from tests.spans.reference_squad import decode_answers
from kbert.export import export_saved_model, serving_ops
from kbert.export.signatures import ServingModule
from kbert.models import BertBackbone, BertSpanLabeler
from kbert.text import BertPreprocessor
from kbert.text.span_preprocessor import BertSpanPreprocessor
from tests.spans.helpers import tiny_config, tokenizer

LONG = ("Peter Smith was born in 1990 and visited Paris, the capital of France, where the "
        "river Seine flows through the city; the Eiffel tower was built. ") * 5
CASES = [("Who visited Paris?", "Peter Smith visited Paris in 1990."),
         ("Where does the river flow?", LONG),
         ("What?", ""),
         ("When was the museum opened?", "The art museum in Berlin, Germany opened in 1990. "
          "Café 東京 😀 a cat sat on the mat."),
         ("who " * 40 + "?", LONG[:300])]


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(5)
    model = BertSpanLabeler(BertBackbone(tiny_config()))
    # Bigger head weights than the initializer's: logits far apart, no near-ties.
    kernel = model.span_head.kernel
    kernel.assign(np.random.default_rng(1).normal(size=kernel.shape).astype("float32"))
    return model


def expected_answers(model, pre, version, null_threshold=0.0):
    """The Python path: windows, the model on them cut to their longest row, numpy decoding."""
    questions, contexts = (tf.constant([c[i] for c in CASES]) for i in (0, 1))
    windows = {k: v.numpy() for k, v in pre((questions, contexts)).items()}
    longest = windows["padding_mask"].sum(1).max()
    out = model.predict_on_batch({k: windows[k][:, :longest]
                                  for k in ("token_ids", "segment_ids", "padding_mask")})
    pad = [(0, 0), (0, pre.sequence_length - longest)]
    start, end = (np.pad(np.asarray(out[k], "float32"), pad, constant_values=-1e4)
                  for k in ("start_logits", "end_logits"))
    examples = [SquadExample(str(i), q, c) for i, (q, c) in enumerate(CASES)]
    return decode_answers(examples, windows, start, end, version,
                          null_threshold=null_threshold)


def check(serve, model, pre, version, null_threshold=0.0):
    predictions, details = expected_answers(model, pre, version, null_threshold)
    out = serve(question=tf.constant([c[0] for c in CASES]),
                context=tf.constant([c[1] for c in CASES]))
    out = {k: v.numpy() for k, v in out.items()}
    assert sorted(out) == ["answer", "end_char", "null_score_diff", "score", "start_char"]
    assert [a.decode("utf-8") for a in out["answer"]] == list(predictions.values())
    assert out["start_char"].tolist() == [d["start"] for d in details.values()]
    assert out["end_char"].tolist() == [d["end"] for d in details.values()]
    scores = [-np.inf if d["score"] is None else d["score"] for d in details.values()]
    np.testing.assert_allclose(out["score"], scores, rtol=1e-5)
    return predictions


@pytest.mark.slow
def test_exported_span_labeler_answers_as_the_python_path(model, tmp_path):
    pre = BertPreprocessor(tokenizer(), sequence_length=96)  # lends tokenizer and length
    path = export_saved_model(model, tmp_path / "squad", preprocessor=pre, warmup_texts=[])
    loaded = tf.saved_model.load(str(path)).signatures
    spans = BertSpanPreprocessor(tokenizer(), 96)
    long_case = spans.windows(tf.constant([CASES[1][0]]), tf.constant([CASES[1][1]]))
    assert len(long_case["token_ids"]) > 1
    predictions = check(loaded["serving_default"], model, spans, "1.1")
    assert sum(p != "" for p in predictions.values()) >= 3
    # A question without a word piece asks nothing: refused, naming its row, as `kbert
    # predict` refuses it (tests/spans/test_finetune_spans.py), not answered with a span.
    for blank in ("", "  ", "\u200b"):
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"\[question of row\] \[1\] \[is blank"):
            loaded["serving_default"](question=tf.constant(["Who visited Paris?", blank]),
                                      context=tf.constant([CASES[0][1]] * 2))
    windows = spans.windows(tf.constant([CASES[0][0]]), tf.constant([CASES[0][1]]))
    logits = loaded["serve_token_ids"](**{k: windows[k] for k in
                                          ("token_ids", "segment_ids", "padding_mask")})
    np.testing.assert_allclose(logits["start_logits"].numpy(),
                               model.predict_on_batch(
                                   {k: windows[k] for k in ("token_ids", "segment_ids",
                                                            "padding_mask")})["start_logits"],
                               rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_version_2_with_a_threshold_and_a_span_preprocessor(model, tmp_path):
    pre = BertSpanPreprocessor(tokenizer(), 48, 16, max_query_length=16)
    _, details = expected_answers(model, pre, "1.1")
    diffs = sorted(d["null_score_diff"] for d in details.values()
                   if d["null_score_diff"] is not None)
    threshold = diffs[len(diffs) // 2]  # some questions answered, some not
    module = ServingModule(model, pre, squad_version="2.0", null_threshold=threshold)
    tf.saved_model.save(module, str(tmp_path), signatures=module.signatures())
    serving_ops.check_servable(tmp_path)
    serve = tf.saved_model.load(str(tmp_path)).signatures["serving_default"]
    predictions = check(serve, model, pre, "2.0", threshold)
    assert 0 < sum(p == "" for p in predictions.values()) < len(CASES)
    with pytest.raises(ValueError, match="squad_version"):
        ServingModule(model, pre, squad_version="3.0")
