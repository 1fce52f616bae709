"""Checkpoints in and out: Hugging Face, the original Google TF1 release, and keras-hub.

Every format is read into, and written from, one canonical dict (`kbert.convert.weights`);
`kbert.convert.mapping` moves that dict in and out of kbert's layers.
"""

import contextlib
import json
import pathlib
import tempfile

from kbert.convert.google import read_google_checkpoint, write_google_checkpoint
from kbert.convert.huggingface import is_decoder, read_hf_checkpoint, write_hf_checkpoint
from kbert.convert.mapping import get_backbone_weights, set_backbone_weights, set_head_weights
from kbert.convert.task_heads import google_task_head, task_head
from kbert.convert.weights import MLM_HEAD, NSP_HEAD, CheckpointError

HEAD_NAMES = {MLM_HEAD: "masked LM", NSP_HEAD: "next sentence"}


def detect_format(path) -> str:
    """"huggingface", "google" or "keras_hub" for a checkpoint directory (or Google prefix)."""
    path = pathlib.Path(path)
    if path.is_dir():
        if (path / "bert_config.json").is_file():
            return "google"
        config = path / "config.json"
        if config.is_file():
            try:
                is_keras_hub = "keras_hub" in json.loads(config.read_text()).get("module", "")
            except (ValueError, AttributeError):
                raise CheckpointError(f"{config} is not a valid JSON object.") from None
            return "keras_hub" if is_keras_hub else "huggingface"
    elif pathlib.Path(f"{path}.index").is_file():
        return "google"
    raise CheckpointError(
        f"{path}: no checkpoint recognised. Expected a Hugging Face directory (config.json + "
        "model.safetensors), an original Google one (bert_config.json + bert_model.ckpt.*) "
        "or a keras-hub preset directory (config.json + model.weights.h5).")


def read_checkpoint(path, allow_pickle=False):
    """(BertConfig, canonical weights) from a checkpoint in any supported format."""
    fmt = detect_format(path)
    if fmt == "google":
        return read_google_checkpoint(path)
    if fmt == "keras_hub":
        from kbert.convert.keras_hub import from_keras_hub

        return from_keras_hub(str(path))
    return read_hf_checkpoint(path, allow_pickle=allow_pickle)


def read_config(path):
    """The `BertConfig` of a checkpoint, without reading its weights."""
    from kbert.config import BertConfig, ConfigError

    path = pathlib.Path(path)
    fmt = detect_format(path)
    directory = path if path.is_dir() else path.parent
    try:
        if fmt == "keras_hub":
            from kbert.convert.keras_hub import read_preset_config

            return read_preset_config(path)
        if fmt == "google":
            return BertConfig.from_google_config(directory / "bert_config.json")
        return BertConfig.from_hf_config(directory / "config.json")
    except ConfigError as e:
        raise CheckpointError(str(e)) from None  # it names the file


def is_causal(path) -> bool:
    """Whether the checkpoint at `path` is a left-to-right model (Hugging Face `is_decoder`;
    the Google and keras-hub formats have none)."""
    return detect_format(path) == "huggingface" and is_decoder(path)


def refuse_causal(path, fmt):
    """A left-to-right checkpoint cannot become a format that would run it bidirectionally."""
    if is_causal(path) and fmt != "huggingface":
        raise CheckpointError(f"{path} is a left-to-right (is_decoder) model; the {fmt} format "
                              "has no causal BERT, so it would run bidirectionally there.")


def load_backbone(cls, path, allow_pickle=False, **kwargs):
    """`cls(config, **kwargs)` built from the checkpoint at `path`, holding its weights; causal
    when the checkpoint is (`is_causal`) unless `causal` is given. Dropout rates in `kwargs`
    (`hidden_dropout`, `attention_dropout`) replace the checkpoint's.

    The caller names the class (keras-hub's habit), so this format reader never imports the
    model code; `cls` needs a `BertBackbone`'s constructor and layer names. Names such as
    "minilm_l6_h384_uncased" are resolved a floor up, by `kbert.presets`.
    """
    config, weights = read_checkpoint(path, allow_pickle=allow_pickle)
    config = config.with_rates_from(kwargs)
    kwargs.setdefault("causal", is_causal(path))
    backbone = cls(config, **kwargs)
    set_backbone_weights(backbone, weights, source=str(path))
    return backbone


def load_pretraining_heads(pretrainer, path, allow_pickle=False) -> list[str]:
    """Fills a `BertPretrainer`'s masked-LM and next-sentence heads from the checkpoint at
    `path` where it holds them (transformers' `BertForPreTraining` has both, `BertForMaskedLM`
    the first, Google's release both; a keras-hub preset has neither), as Google's
    run_pretraining.py and transformers' `from_pretrained` go on from a checkpoint's heads.
    Returns the names of the heads loaded ("masked LM", "next sentence"); one the checkpoint
    lacks keeps its fresh weights. Reads the checkpoint whole, once more than the backbone did:
    a cost paid once at the start of a pre-training run."""
    if detect_format(path) == "keras_hub":
        return []
    _, weights = read_checkpoint(path, allow_pickle=allow_pickle)
    return [HEAD_NAMES[prefix] for prefix in set_head_weights(pretrainer, weights)]


def save_hf(model, path, vocab_file=None, overwrite=False, tokenizer=None, label_names=None):
    """Writes a `BertBackbone` (or a `BertPretrainer`, heads included) as a Hugging Face
    directory; with a `BertTokenizer`, its vocabulary, casing and word limit too. A fine-tuned
    `BertClassifier`, `BertTokenClassifier`, `BertMultipleChoice` or `BertSpanLabeler` becomes
    the `transformers` class for its task, with `label_names` (default: the model's) as `id2label`
    (`kbert.convert.task_heads`)."""
    causal = _is_causal_model(model)
    head = task_head(model, label_names)
    if tokenizer is None:
        return write_hf_checkpoint(path, *_config_and_weights(model), vocab_file=vocab_file,
                                   overwrite=overwrite, causal=causal, task_head=head)
    settings = {"do_lower_case": bool(tokenizer.lowercase),
                "strip_accents": bool(tokenizer.strip_accents),
                "max_input_chars_per_word": int(tokenizer.max_chars_per_word)}
    with _vocabulary_file(tokenizer) as vocab:
        return write_hf_checkpoint(path, *_config_and_weights(model), vocab_file=vocab,
                                   overwrite=overwrite, tokenizer_config=settings,
                                   causal=causal, task_head=head)


def save_google(model, path, vocab_file=None, overwrite=False, tokenizer=None):
    """Writes a `BertBackbone` (or `BertPretrainer`) in the original Google TF1 layout; a
    fine-tuned `BertClassifier` or `BertSpanLabeler` with the head of run_classifier.py or
    run_squad.py (`kbert.convert.google`). With a `BertTokenizer`, its vocabulary and casing."""
    if _is_causal_model(model):
        raise ValueError("A causal (left-to-right) model has no original Google form: Google's "
                         "BERT is bidirectional only. Save it with save_hf (is_decoder).")
    head = None
    if hasattr(model, "backbone") and not hasattr(model, "mlm_head"):
        head = google_task_head(model)
    if tokenizer is None:
        return write_google_checkpoint(path, *_config_and_weights(model), vocab_file=vocab_file,
                                       overwrite=overwrite, task_head=head)
    with _vocabulary_file(tokenizer) as vocab:
        return write_google_checkpoint(path, *_config_and_weights(model), vocab_file=vocab,
                                       overwrite=overwrite, task_head=head,
                                       lowercase=tokenizer.lowercase,
                                       strip_accents=tokenizer.strip_accents)


def save_keras_hub(model, path, tokenizer=None, sequence_length=None, overwrite=False,
                   allow_approximation=False):
    """Writes a `BertBackbone` (or a `BertPretrainer`'s encoder) as a keras-hub `BertBackbone`
    preset, and a fine-tuned `BertClassifier` as a keras-hub `BertTextClassifier` preset;
    `tokenizer` and `sequence_length` (defaults: the model's preprocessor's) make its
    preprocessor, so `keras_hub.models.TextClassifier.from_preset(path)` takes raw text.
    keras-hub computes tanh-GELU only: another activation needs `allow_approximation`
    (`kbert.convert.keras_hub`)."""
    from kbert.convert.keras_hub import write_keras_hub_preset
    from kbert.convert.keras_hub_classifier import ClassifierHead

    if _is_causal_model(model):
        raise ValueError("A causal (left-to-right) model has no keras-hub form: keras-hub's "
                         "BertBackbone is bidirectional only.")
    preprocessor = getattr(model, "preprocessor", None)
    tokenizer = tokenizer or getattr(preprocessor, "tokenizer", None)
    classifier = None
    if hasattr(model, "backbone") and not hasattr(model, "mlm_head"):
        if type(model).__name__ != "BertClassifier":
            raise ValueError(f"keras-hub's one BERT task class is BertTextClassifier; a "
                             f"{type(model).__name__} has none there. Save its encoder with "
                             "save_keras_hub(model.backbone, ...).")
        kernel, bias = model.get_layer("classifier").get_weights()
        classifier = ClassifierHead(kernel, bias, model.dropout)
        sequence_length = sequence_length or getattr(preprocessor, "sequence_length", None)
    return write_keras_hub_preset(
        path, *_config_and_weights(model),
        vocabulary=None if tokenizer is None else tokenizer.get_vocabulary(),
        lowercase=True if tokenizer is None else bool(tokenizer.lowercase),
        strip_accents=None if tokenizer is None else bool(tokenizer.strip_accents),
        classifier=classifier, sequence_length=sequence_length,
        allow_approximation=allow_approximation, overwrite=overwrite)


@contextlib.contextmanager
def _vocabulary_file(tokenizer):
    """The tokenizer's vocabulary as a vocab.txt in a temporary directory, for the writers
    that copy one into the checkpoint."""
    with tempfile.TemporaryDirectory() as scratch:
        vocab = pathlib.Path(scratch) / "vocab.txt"
        vocab.write_text("\n".join(tokenizer.get_vocabulary()) + "\n", encoding="utf-8")
        yield vocab


def _is_causal_model(model):
    """Whether a backbone (or a pretrainer's) is left-to-right."""
    return bool(getattr(getattr(model, "backbone", model), "causal", False))


def _config_and_weights(model):
    """Duck-typed: a backbone, or a pretrainer (anything with `backbone`, `mlm_head` and
    `nsp_head`), so this module needs no model class."""
    from kbert.convert.mapping import head_slots, read_slots

    backbone = getattr(model, "backbone", model)
    weights = get_backbone_weights(backbone)
    if hasattr(model, "mlm_head"):
        weights.update(read_slots(head_slots(model.mlm_head, model.nsp_head)))
    return backbone.config, weights


__all__ = [
    "CheckpointError", "detect_format", "read_checkpoint", "read_config", "load_backbone",
    "load_pretraining_heads",
    "is_causal", "refuse_causal", "save_hf", "save_google", "save_keras_hub",
    "read_hf_checkpoint", "write_hf_checkpoint", "read_google_checkpoint",
    "write_google_checkpoint", "get_backbone_weights", "set_backbone_weights",
]
