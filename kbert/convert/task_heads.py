"""Fine-tuned task heads in and out of the checkpoints of transformers, Google and keras-hub.

kbert's task heads are one dense layer (after dropout) over the same input as Hugging Face's
(`pooled_output`, every token's `sequence_output`, each choice's `pooled_output`), so each is
that class's one Linear layer. Each task model class says where its head sits in each format
with a `CheckpointHeads` (its `checkpoint_heads` attribute); this module reads that
declaration and imports no model class.

The token and span classes of transformers have no pooler, so its weights are not written; read
back, a checkpoint of theirs gets a freshly drawn pooler (unused by those heads), as
transformers gives one.
"""

import dataclasses
import json
import pathlib

import numpy as np

from kbert.convert import google, huggingface
from kbert.convert.keras_hub_classifier import read_classifier_head


@dataclasses.dataclass(frozen=True)
class CheckpointHeads:
    """Where a task model's head sits in each checkpoint format.

    Args:
        layer: the name of kbert's head `Dense` layer.
        huggingface: transformers' task class (a key of `huggingface.TASK_CLASSES`).
        google: the google-research/bert fine-tuning script whose head it is (a key of
            `google.TASK_HEADS`), or None.
        keras_hub: keras-hub's task class holding the same head, or None.
        labelled: whether the head has `num_classes` outputs with label names.

    Examples:
        >>> CheckpointHeads("classifier", "BertForSequenceClassification").pooler
        True
    """

    layer: str
    huggingface: str
    google: str | None = None
    keras_hub: str | None = None
    labelled: bool = False

    @property
    def pooler(self):
        """Whether transformers' class keeps the encoder's pooler."""
        return huggingface.TASK_CLASSES[self.huggingface][1]

    def holds(self, found):
        """Whether `found` (`checkpoint_head`'s (format, name)) is this task's head."""
        return found is not None and getattr(self, found[0]) == found[1]


@dataclasses.dataclass
class HfHead:
    """What a task model adds to a Hugging Face checkpoint: its class, the head's tensors
    (HF names, HF layout), config entries (label count and names), and whether the class
    keeps the encoder's pooler."""

    architecture: str
    tensors: dict
    config: dict
    pooler: bool


@dataclasses.dataclass
class ReadHead:
    """A task head read from a checkpoint, in kbert's layout: the Dense layer it fills, its
    [kernel, bias], the constructor arguments it implies, and the sequence length its inputs
    were packed to where the checkpoint says (keras-hub's preprocessor does)."""

    layer: str
    weights: list
    kwargs: dict
    sequence_length: int | None = None


def heads_of(model):
    """The `CheckpointHeads` of a task model's class; None for a backbone or a pretrainer
    (whose heads `kbert.convert.mapping` writes)."""
    if not hasattr(model, "backbone") or hasattr(model, "mlm_head"):
        return None
    return getattr(type(model), "checkpoint_heads", None)


def task_head(model, label_names=None):
    """The `HfHead` of a kbert task model; None for a backbone or a pretrainer.
    `label_names` (in id order) default to the model's own."""
    if not hasattr(model, "backbone") or hasattr(model, "mlm_head"):
        return None
    heads = heads_of(model)
    if heads is None:
        raise ValueError(f"A {type(model).__name__} has no Hugging Face task class; save its "
                         "encoder with save_hf(model.backbone, ...).")
    if model.backbone.causal:
        raise ValueError("A left-to-right task model reads its pooled output at the last real "
                         "token; transformers' task classes read [CLS], so it would answer "
                         "differently there. Save its encoder with save_hf(model.backbone).")
    if any(layer.name == "bilstm" for layer in model.layers):
        raise ValueError("A feature-based BertTokenClassifier (BiLSTM head) has no Hugging Face "
                         "class; save its encoder with save_hf(model.backbone, ...).")
    hf_name = huggingface.TASK_CLASSES[heads.huggingface][0]
    kernel, bias = (np.asarray(w, "float32") for w in model.get_layer(heads.layer).get_weights())
    config = {}
    if heads.labelled:
        labels = kernel.shape[1]
        names = list(label_names or getattr(model, "label_names", None) or [])
        if names and len(names) != labels:
            raise ValueError(f"{len(names)} label names for a head of {labels} classes.")
        config["num_labels"] = labels
        if names:
            config["id2label"] = {str(i): str(n) for i, n in enumerate(names)}
            config["label2id"] = {str(n): i for i, n in enumerate(names)}
        if heads.huggingface == "BertForSequenceClassification":
            config["problem_type"] = ("regression" if labels == 1
                                      else "single_label_classification")
    return HfHead(heads.huggingface, {f"{hf_name}.weight": kernel.T, f"{hf_name}.bias": bias},
                    config, heads.pooler)


def google_task_head(model) -> dict[str, np.ndarray]:
    """{Google variable name: array} of a fine-tuned model's head, as Google's fine-tuning
    scripts name and shape it (`google.TASK_HEADS`)."""
    heads = heads_of(model)
    if heads is None or heads.google is None:
        raise ValueError(f"Google's fine-tuning scripts have heads for classification "
                         f"(run_classifier.py) and SQuAD (run_squad.py) only, not a "
                         f"{type(model).__name__}; save its encoder with "
                         "save_google(model.backbone, ...), or the whole model with save_hf.")
    weights_name, bias_name = google.TASK_HEADS[heads.google]
    kernel, bias = (np.asarray(w, np.float32) for w in model.get_layer(heads.layer).get_weights())
    return {weights_name: kernel.T, bias_name: bias}


def checkpoint_head(path):
    """(format, name) of the fine-tuned head the checkpoint directory `path` holds:
    ("keras_hub", keras-hub's task class), ("google", the fine-tuning script) or
    ("huggingface", transformers' task class); None for an encoder. `CheckpointHeads.holds`
    says whose it is."""
    path = pathlib.Path(path)
    if (path / "task.json").is_file():
        try:
            task = json.loads((path / "task.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # the preset's reader reports a bad file
        name = task.get("class_name") if isinstance(task, dict) else None
        return ("keras_hub", name) if isinstance(name, str) else None
    if (path / "bert_config.json").is_file():
        script = google.google_head_kind(path)
        return None if script is None else ("google", script)
    architecture = huggingface.checkpoint_architecture(path)
    return None if architecture is None else ("huggingface", architecture)


def read_task_head(path, heads, allow_pickle=False):
    """The head that the checkpoint directory `path` (transformers, keras-hub, Google) holds
    for a task declared by `heads` (a `CheckpointHeads`), or None when it holds none of that
    task (a plain encoder, or another task's head: the caller then builds a new head)."""
    path = pathlib.Path(path)
    if heads is None:
        return None
    if (path / "task.json").is_file():
        read = read_classifier_head(path) if heads.keras_hub else None
        if read is None:
            return None
        head, length = read
        return ReadHead(heads.layer, [head.kernel, head.bias],
                        {"num_classes": head.kernel.shape[1]}, length)
    if (path / "bert_config.json").is_file():
        weights = google.read_google_head(path, heads.google) if heads.google else None
        if weights is None:
            return None
        kwargs = {"num_classes": weights[0].shape[1]} if heads.labelled else {}
        return ReadHead(heads.layer, weights, kwargs)
    if huggingface.checkpoint_architecture(path) != heads.huggingface:
        return None
    hf_name = huggingface.TASK_CLASSES[heads.huggingface][0]
    tensors = huggingface.read_tensors(path, names=huggingface.head_tensor_names(
        heads.huggingface), allow_pickle=allow_pickle)
    kernel, bias = tensors[f"{hf_name}.weight"].T, tensors[f"{hf_name}.bias"]
    kwargs = {}
    if heads.labelled:
        kwargs["num_classes"] = kernel.shape[1]
        id2label = huggingface.config_object(path).get("id2label", {})
        names = [id2label.get(str(i)) for i in range(kernel.shape[1])]
        if heads.huggingface == "BertForTokenClassification" and all(names):
            kwargs["label_names"] = names
    return ReadHead(heads.layer, [kernel, bias], kwargs)
