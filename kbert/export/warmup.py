"""TensorFlow Serving warm-up requests for an export (`assets.extra/tf_serving_warmup_requests`):
the model server replays them at load, so the first user request does not pay for tracing.
The texts fill every text input of the `serving_default` signature, whatever the task, and
the same inputs go to `serve_examples` (and to a classifier's Classify or Regress API) as
tf.Examples."""

import warnings

import numpy as np
import tensorflow as tf

from kbert.export.signatures import EXAMPLES_INPUT

DEFAULT_WARMUP_TEXTS = (
    "The movie was a delight from start to finish.",
    "I would not recommend this to anyone.",
    "A quiet, patient film that rewards attention.",
    "What time does the museum open on Sundays?",
)
# A masked LM's: with blanks, so that warming up runs its head on some.
FILL_MASK_WARMUP_TEXTS = (
    "The movie was a [MASK] from start to finish.",
    "I would not [MASK] this to anyone.",
    "A quiet, [MASK] film that rewards [MASK].",
    "What time does the museum [MASK] on Sundays?",
)


def texts_for(module, warmup_texts):
    """The texts of the warm-up requests: `warmup_texts`, or the defaults when it is None (none
    when the TF Serving API package that writes them is missing, with a warning)."""
    if not module.text_inputs:
        if warmup_texts:
            raise ValueError("warmup_texts need a text signature: pass a preprocessor.")
        return []
    defaults = FILL_MASK_WARMUP_TEXTS if module.task.name == "fill_mask" \
        else DEFAULT_WARMUP_TEXTS
    texts = list(defaults if warmup_texts is None else warmup_texts)
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


def serialized_examples(inputs):
    """`serve_examples`' input for the request `inputs` (name → strings [batch] or [batch, n]):
    one serialized tf.Example per row, a bytes feature per input."""
    rows = len(next(iter(inputs.values())))
    examples = []
    for row in range(rows):
        feature = {name: tf.train.Feature(bytes_list=tf.train.BytesList(
            value=np.atleast_1d(values[row]).tolist())) for name, values in inputs.items()}
        examples.append(tf.train.Example(
            features=tf.train.Features(feature=feature)).SerializeToString())
    return np.array(examples, dtype=object)


def write_requests(path, module, texts, model_name):
    """A TFRecord of `PredictionLog`s for TF Serving's warm-up: `serving_default` with one text
    and with all of them, so both the batch-1 and the batched paths are traced and loaded,
    `serve_examples` with all of them, and a classifier's Classify (or Regress) API too."""
    from tensorflow_serving.apis import (classification_pb2, model_pb2, predict_pb2,
                                         prediction_log_pb2, regression_pb2)

    def spec(signature):
        return model_pb2.ModelSpec(name=model_name, signature_name=signature)

    examples = serialized_examples(request_inputs(module, texts))
    batches = [texts[:1]] + ([texts] if len(texts) > 1 else [])
    predictions = [("serving_default", request_inputs(module, batch)) for batch in batches]
    predictions.append(("serve_examples", {EXAMPLES_INPUT: examples}))
    logs = []
    for signature, inputs in predictions:
        request = predict_pb2.PredictRequest(model_spec=spec(signature))
        for key, value in inputs.items():
            request.inputs[key].CopyFrom(tf.make_tensor_proto(value, dtype=tf.string))
        logs.append(prediction_log_pb2.PredictionLog(
            predict_log=prediction_log_pb2.PredictLog(request=request)))
    api = module.classify_signature
    if api:
        request_cls, log_field, log_cls = {
            "classify": (classification_pb2.ClassificationRequest, "classify_log",
                         prediction_log_pb2.ClassifyLog),
            "regress": (regression_pb2.RegressionRequest, "regress_log",
                        prediction_log_pb2.RegressLog)}[api]
        request = request_cls(model_spec=spec(api))
        for example in examples:
            request.input.example_list.examples.add().ParseFromString(example)
        logs.append(prediction_log_pb2.PredictionLog(**{log_field: log_cls(request=request)}))
    with tf.io.TFRecordWriter(str(path)) as writer:
        for log in logs:
            writer.write(log.SerializeToString())
