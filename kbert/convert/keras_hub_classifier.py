"""keras-hub's one BERT task, `BertTextClassifier` (pooled output -> dropout -> Dense "logits"),
as a fine-tuned kbert `BertClassifier` holds it: written into a preset by
`kbert.convert.keras_hub.write_keras_hub_preset`, read back by `read_classifier_head`."""

import dataclasses
import json
import os

import numpy as np

from kbert.convert.weights import CheckpointError


@dataclasses.dataclass
class ClassifierHead:
    """What keras-hub's `BertTextClassifier` adds to its backbone (pooled output -> dropout ->
    the Dense layer "logits"), as a fine-tuned kbert `BertClassifier` holds it: the Dense
    layer's kernel [hidden, num_classes] and bias, and the dropout rate."""

    kernel: np.ndarray
    bias: np.ndarray
    dropout: float


def text_classifier(backbone, head: ClassifierHead, tokenizer, sequence_length):
    """keras-hub's `BertTextClassifier` on `backbone` holding `head`; with a tokenizer, its
    preprocessor packs `sequence_length` tokens (keras-hub's round-robin truncation of a pair
    keeps what Google's longest-first one keeps)."""
    import keras_hub

    kernel = np.asarray(head.kernel, np.float32)
    if kernel.ndim != 2 or kernel.shape[0] != backbone.hidden_dim:
        raise ValueError(f"a classifier head's kernel must be [{backbone.hidden_dim}, classes], "
                         f"got {list(kernel.shape)}.")
    preprocessor = None
    if tokenizer is not None:
        if not isinstance(sequence_length, int) or sequence_length < 2:
            raise ValueError("a classifier preset with a tokenizer needs the sequence length "
                             f"its inputs are packed to (an integer >= 2), got "
                             f"{sequence_length!r}.")
        preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
            tokenizer, sequence_length=sequence_length)
    task = keras_hub.models.BertTextClassifier(
        backbone, num_classes=kernel.shape[1], preprocessor=preprocessor, dropout=head.dropout)
    task.get_layer("logits").set_weights([kernel, np.asarray(head.bias, np.float32)])
    return task


def read_classifier_head(directory) -> tuple[ClassifierHead, int | None] | None:
    """The head of a keras-hub `BertTextClassifier` preset (a task.json naming that class) and
    the sequence length its preprocessor packs (None without one); None for a backbone preset
    or another keras-hub task. keras-hub builds the task, in Keras' safe mode, to read it."""
    path = os.path.join(directory, "task.json")
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            task = json.load(f)
        class_name, config = task.get("class_name"), task["config"]
        activation = config.get("activation") or "linear"
    except (OSError, ValueError, AttributeError, KeyError, TypeError) as e:
        raise CheckpointError(f"keras-hub preset {directory}: cannot read {path}: "
                              f"{type(e).__name__}: {e}") from None
    if class_name != "BertTextClassifier":
        return None
    if activation != "linear":
        raise CheckpointError(f"keras-hub preset {directory}: its classifier applies "
                              f"{activation!r} to the logits; kbert's BertClassifier outputs "
                              "raw logits (train it with from_logits=True).")
    import keras_hub

    try:
        classifier = keras_hub.models.BertTextClassifier.from_preset(os.fspath(directory))
    except Exception as e:  # h5py, Keras and keras-hub raise many kinds
        raise CheckpointError(f"keras-hub preset {directory}: cannot load its "
                              f"BertTextClassifier: {type(e).__name__}: {e}") from None
    kernel, bias = classifier.get_layer("logits").get_weights()
    length = getattr(classifier.preprocessor, "sequence_length", None)
    return ClassifierHead(kernel, bias, float(classifier.dropout)), length
