"""TensorFlow Serving warm-up requests for an export (`assets.extra/tf_serving_warmup_requests`):
the model server replays them at load, so the first user request does not pay for tracing.
The texts fill every text input of the `serving_default` signature, whatever the task."""

import warnings

import numpy as np
import tensorflow as tf

DEFAULT_WARMUP_TEXTS = (
    "The movie was a delight from start to finish.",
    "I would not recommend this to anyone.",
    "A quiet, patient film that rewards attention.",
    "What time does the museum open on Sundays?",
)


def texts_for(module, warmup_texts):
    """The texts of the warm-up requests: `warmup_texts`, or the defaults when it is None (none
    when the TF Serving API package that writes them is missing, with a warning)."""
    if module.serve_text is None:
        if warmup_texts:
            raise ValueError("warmup_texts need a text signature: pass a preprocessor.")
        return []
    texts = list(DEFAULT_WARMUP_TEXTS if warmup_texts is None else warmup_texts)
    if texts and warmup_texts is None:
        try:
            import tensorflow_serving.apis  # noqa: F401
        except ImportError:
            warnings.warn("No TF Serving warm-up requests written: the tensorflow-serving-api "
                          "package is not installed.")
            return []
    return texts


def request_inputs(module, texts):
    """The `serving_default` inputs (name → numpy array) of one warm-up request."""
    texts = np.array([str(t).encode("utf-8") for t in texts], dtype=object)
    if module.text_inputs == ("question", "context"):
        # Each text asked about the next one: an answer span, or none, either way.
        return {"question": texts, "context": np.roll(texts, -1)}
    if module.num_choices:
        # The texts are used as the question and, rotated, as its choices.
        choices = np.stack([np.roll(texts, -(i + 1)) for i in range(module.num_choices)], 1)
        return {"text": texts, "choices": choices}
    if module.sentence_pair:
        return {"text": texts, "text_pair": np.roll(texts, -1)}
    return {"text": texts}


def write_requests(path, module, texts, model_name):
    """A TFRecord of `PredictionLog`s for TF Serving's warm-up: one request with one text and
    one with all of them, so both the batch-1 and the batched paths are traced and loaded."""
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    batches = [texts[:1]] + ([texts] if len(texts) > 1 else [])
    with tf.io.TFRecordWriter(str(path)) as writer:
        for batch in batches:
            request = predict_pb2.PredictRequest(
                model_spec=model_pb2.ModelSpec(name=model_name,
                                               signature_name="serving_default"))
            for key, value in request_inputs(module, batch).items():
                request.inputs[key].CopyFrom(tf.make_tensor_proto(value, dtype=tf.string))
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request))
            writer.write(log.SerializeToString())
