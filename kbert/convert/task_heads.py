"""Fine-tuned task models in and out of the `transformers` classes for their tasks.

kbert's task heads are one dense layer (after dropout) over the same input as Hugging Face's
(`pooled_output`, every token's `sequence_output`, each choice's `pooled_output`), so each is
that class's one Linear layer:

    BertClassifier       -> BertForSequenceClassification (num_classes=1: regression)
    BertTokenClassifier  -> BertForTokenClassification
    BertMultipleChoice   -> BertForMultipleChoice
    BertSpanLabeler      -> BertForQuestionAnswering (start, end = its two outputs; kbert sets
                            padding positions to -1e4, transformers leaves them)

The token and span classes have no pooler, so its weights are not written; read back, a
checkpoint of theirs gets a freshly drawn pooler (unused by those heads), as transformers gives
one. `read_task_head` reads a head for `BertTask.from_pretrained`, from transformers' classes,
from keras-hub's one BERT task, `BertTextClassifier` (a `BertClassifier`'s head), and from the
checkpoints of Google's run_classifier.py and run_squad.py (`GOOGLE_TASK_HEADS`: their variable
names; `kbert.convert.google` reads and writes them).

Duck-typed by class name and layer name, so this format code imports no model class.
"""

import dataclasses
import json
import pathlib

import numpy as np

# kbert class -> (transformers class, kbert's head Dense layer, its transformers name, pooler)
HF_TASK_CLASSES = {
    "BertClassifier": ("BertForSequenceClassification", "classifier", "classifier", True),
    "BertTokenClassifier": ("BertForTokenClassification", "classifier", "classifier", False),
    "BertMultipleChoice": ("BertForMultipleChoice", "choice_scorer", "classifier", True),
    "BertSpanLabeler": ("BertForQuestionAnswering", "span_logits", "qa_outputs", False),
}

LABELLED = ("BertClassifier", "BertTokenClassifier")  # heads with num_classes and label names

# The heads of google-research/bert's fine-tuning scripts, by the kbert class that holds them:
# (kbert's Dense layer, the head's two variables). Both scripts make the weights
# [outputs, hidden] and compute `matmul(x, output_weights, transpose_b=True) + output_bias`
# (run_classifier.py `create_model` on the pooled output; run_squad.py `create_model` on every
# token, start logits from row 0 and end logits from row 1).
GOOGLE_TASK_HEADS = {
    "BertClassifier": ("classifier", "output_weights", "output_bias"),
    "BertSpanLabeler": ("span_logits", "cls/squad/output_weights", "cls/squad/output_bias"),
}


@dataclasses.dataclass
class TaskHead:
    """What a task model adds to a Hugging Face checkpoint: its class, the head's tensors
    (HF names, HF layout), config entries (label count and names), and whether the class
    keeps the encoder's pooler."""

    architecture: str
    tensors: dict
    config: dict
    pooler: bool


def task_head(model, label_names=None):
    """The `TaskHead` of a kbert task model; None for a backbone or a pretrainer (whose heads
    `kbert.convert.mapping` writes). `label_names` (in id order) default to the model's own."""
    kind = type(model).__name__
    if not hasattr(model, "backbone") or hasattr(model, "mlm_head"):
        return None
    if kind not in HF_TASK_CLASSES:
        raise ValueError(f"A {kind} has no Hugging Face task class that kbert writes (it writes "
                         f"{', '.join(HF_TASK_CLASSES)}); save its encoder with "
                         "save_hf(model.backbone, ...).")
    if model.backbone.causal:
        raise ValueError("A left-to-right task model reads its pooled output at the last real "
                         "token; transformers' task classes read [CLS], so it would answer "
                         "differently there. Save its encoder with save_hf(model.backbone).")
    if any(layer.name == "bilstm" for layer in model.layers):
        raise ValueError("A feature-based BertTokenClassifier (BiLSTM head) has no Hugging Face "
                         "class; save its encoder with save_hf(model.backbone, ...).")
    architecture, layer_name, hf_name, pooler = HF_TASK_CLASSES[kind]
    kernel, bias = (np.asarray(w, "float32") for w in model.get_layer(layer_name).get_weights())
    config = {}
    if kind in LABELLED:
        labels = kernel.shape[1]
        names = list(label_names or getattr(model, "label_names", None) or [])
        if names and len(names) != labels:
            raise ValueError(f"{len(names)} label names for a head of {labels} classes.")
        config["num_labels"] = labels
        if names:
            config["id2label"] = {str(i): str(n) for i, n in enumerate(names)}
            config["label2id"] = {str(n): i for i, n in enumerate(names)}
        if kind == "BertClassifier":
            config["problem_type"] = ("regression" if labels == 1
                                      else "single_label_classification")
    return TaskHead(architecture, {f"{hf_name}.weight": kernel.T, f"{hf_name}.bias": bias},
                    config, pooler)


def google_task_head(model) -> dict[str, np.ndarray]:
    """{Google variable name: array} of a fine-tuned `BertClassifier` or `BertSpanLabeler`'s
    head, as Google's fine-tuning scripts name and shape it (`GOOGLE_TASK_HEADS`). Duck-typed
    by class and layer name: no model class is imported."""
    kind = type(model).__name__
    if kind not in GOOGLE_TASK_HEADS:
        raise ValueError(f"Google's fine-tuning scripts have heads for classification "
                         f"(run_classifier.py) and SQuAD (run_squad.py) only, not a {kind}; "
                         "save its encoder with save_google(model.backbone, ...), or the whole "
                         "model with save_hf.")
    layer, weights_name, bias_name = GOOGLE_TASK_HEADS[kind]
    kernel, bias = (np.asarray(w, np.float32) for w in model.get_layer(layer).get_weights())
    return {weights_name: kernel.T, bias_name: bias}


def fine_tuned_kind(path):
    """The kbert task class (e.g. "BertClassifier") whose fine-tuned head the checkpoint
    directory `path` holds: a transformers task class in config.json, keras-hub's
    `BertTextClassifier` in task.json, or the head of Google's run_classifier.py /
    run_squad.py; None for an encoder."""
    path = pathlib.Path(path)
    if (path / "task.json").is_file():
        task = _json_object(path / "task.json")
        return "BertClassifier" if task.get("class_name") == "BertTextClassifier" else None
    if (path / "bert_config.json").is_file():
        from kbert.convert.google import google_head_kind

        return google_head_kind(path)
    architecture = _architecture(_hf_config(path))
    return next((kind for kind, (hf, *_) in HF_TASK_CLASSES.items() if hf == architecture), None)


def hf_label_names(path):
    """The label names of a transformers classifier directory's `id2label`, in id order; None
    where it has none or only transformers' placeholders ("LABEL_0", ...)."""
    id2label = _json_object(pathlib.Path(path) / "config.json").get("id2label")
    if not isinstance(id2label, dict) or not id2label:
        return None
    names = [id2label.get(str(i)) for i in range(len(id2label))]
    if not all(isinstance(n, str) for n in names) or names == [f"LABEL_{i}" for i in
                                                                 range(len(names))]:
        return None
    return names


def checkpoint_architecture(path):
    """The task class a Hugging Face directory's config.json names (one of
    `HF_TASK_CLASSES`' transformers classes), or None."""
    return _architecture(_hf_config(path))


def _hf_config(path):
    """The object in `path`/config.json; None where there is none (readers of the weights
    report a bad file)."""
    return _json_object(pathlib.Path(path) / "config.json") or None


def _json_object(path):
    """The JSON object in `path`; {} where there is none or it is not one (the readers of the
    checkpoint report a bad file)."""
    try:
        value = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def is_language_model(path):
    """Whether a Hugging Face directory's config.json names `BertForMaskedLM` or
    `BertLMHeadModel`, whose encoder transformers builds with `add_pooling_layer=False` (what
    its run_mlm.py saves, for one): such a checkpoint holds no pooler."""
    names = (_hf_config(path) or {}).get("architectures") or ()
    return any(name in ("BertForMaskedLM", "BertLMHeadModel") for name in names)


def is_decoder(path):
    """Whether a Hugging Face directory's config.json marks a left-to-right (`is_decoder`)
    model."""
    return (_hf_config(path) or {}).get("is_decoder") is True


def _architecture(config):
    known = {hf for hf, *_ in HF_TASK_CLASSES.values()}
    return next((a for a in (config or {}).get("architectures") or () if a in known), None)


def head_tensor_names(architecture):
    """The names of a transformers task class's head tensors (empty for other classes)."""
    for hf, _, hf_name, _ in HF_TASK_CLASSES.values():
        if hf == architecture:
            return {f"{hf_name}.weight", f"{hf_name}.bias"}
    return set()


def has_pooler(architecture):
    return all(pooler for hf, *_, pooler in HF_TASK_CLASSES.values() if hf == architecture)


@dataclasses.dataclass
class ReadHead:
    """A task head read from a checkpoint, in kbert's layout: the Dense layer it fills, its
    [kernel, bias], the constructor arguments it implies, and the sequence length its inputs
    were packed to where the checkpoint says (keras-hub's preprocessor does)."""

    layer: str
    weights: list
    kwargs: dict
    sequence_length: int | None = None


def read_task_head(path, kind, allow_pickle=False):
    """The head that the Hugging Face directory (keras-hub preset, Google checkpoint) `path`
    holds for kbert class `kind` (e.g. "BertClassifier"), or None when it holds none of that
    task (a plain encoder, or another task's head: the caller then builds a new head)."""
    if (pathlib.Path(path) / "task.json").is_file():
        return _keras_hub_head(path, kind)
    if (pathlib.Path(path) / "bert_config.json").is_file():
        return _google_head(path, kind)
    config = _hf_config(path)
    if kind not in HF_TASK_CLASSES or _architecture(config) != HF_TASK_CLASSES[kind][0]:
        return None
    architecture, layer, hf_name, _ = HF_TASK_CLASSES[kind]
    from kbert.convert.huggingface import read_tensors

    tensors = read_tensors(path, names=head_tensor_names(architecture), allow_pickle=allow_pickle)
    kernel = tensors[f"{hf_name}.weight"].T
    bias = tensors[f"{hf_name}.bias"]
    kwargs = {}
    if kind in LABELLED:
        kwargs["num_classes"] = kernel.shape[1]
        names = [config.get("id2label", {}).get(str(i)) for i in range(kernel.shape[1])]
        if kind == "BertTokenClassifier" and all(names):
            kwargs["label_names"] = names
    return ReadHead(layer, [kernel, bias], kwargs)


def _keras_hub_head(path, kind):
    """A keras-hub `BertTextClassifier` preset's head, for a `BertClassifier`."""
    from kbert.convert.keras_hub_classifier import read_classifier_head

    read = read_classifier_head(path) if kind == "BertClassifier" else None
    if read is None:
        return None
    head, length = read
    return ReadHead("classifier", [head.kernel, head.bias],
                    {"num_classes": head.kernel.shape[1]}, length)


def _google_head(path, kind):
    """The classifier or SQuAD head a Google fine-tuning script left in its checkpoint."""
    from kbert.convert.google import read_google_head

    read = read_google_head(path, kind)
    if read is None:
        return None
    layer, weights = read
    kwargs = {"num_classes": weights[0].shape[1]} if kind == "BertClassifier" else {}
    return ReadHead(layer, weights, kwargs)
