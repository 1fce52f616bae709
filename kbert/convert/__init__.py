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
    """Names the format of a checkpoint.

    Args:
      path: a checkpoint directory, or the prefix of a Google checkpoint
        (".../bert_model.ckpt").

    Returns:
      "huggingface" (config.json), "google" (bert_config.json, or a prefix with its .index
      file) or "keras_hub" (a keras-hub preset's config.json).

    Raises:
      CheckpointError: `path` holds no checkpoint of these formats.

    Example:

    >>> import pathlib, tempfile
    >>> import kbert
    >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny"))
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> kbert.convert.detect_format(kbert.convert.save_hf(backbone, folder / "hf"))
    'huggingface'
    >>> kbert.convert.detect_format(kbert.convert.save_google(backbone, folder / "google"))
    'google'
    """
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
    """Reads a checkpoint of any supported format as a config and canonical weights.

    Args:
      path: a Hugging Face directory, a Google checkpoint directory or prefix, or a keras-hub
        preset directory (`detect_format`).
      allow_pickle: read a Hugging Face directory's pytorch_model.bin (unpickling runs code:
        trusted files only); without it only safetensors are read.

    Returns:
      (`BertConfig`, weights): the weights as a dict of float32 numpy arrays under kbert's
      canonical names (`kbert.convert.weights`), the pre-training heads included where the
      checkpoint has them.

    Example:

    >>> import pathlib, tempfile
    >>> import kbert
    >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny"))
    >>> path = kbert.convert.save_hf(backbone, pathlib.Path(tempfile.mkdtemp()) / "hf")
    >>> config, weights = kbert.convert.read_checkpoint(path)
    >>> config.num_layers, weights["embeddings.word_embeddings.weight"].shape
    (2, (30522, 128))
    """
    fmt = detect_format(path)
    if fmt == "google":
        return read_google_checkpoint(path)
    if fmt == "keras_hub":
        from kbert.convert.keras_hub import from_keras_hub

        return from_keras_hub(str(path))
    return read_hf_checkpoint(path, allow_pickle=allow_pickle)


def read_config(path):
    """Reads the `BertConfig` of a checkpoint, without reading its weights.

    Args:
      path: a checkpoint of any supported format (`detect_format`).

    Returns:
      The checkpoint's `BertConfig`.

    Example:

    >>> import pathlib, tempfile
    >>> import kbert
    >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny"))
    >>> path = kbert.convert.save_google(backbone, pathlib.Path(tempfile.mkdtemp()) / "g")
    >>> config = kbert.convert.read_config(path)
    >>> config.hidden_size, config.num_layers
    (128, 2)
    """
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
    """Tells whether a checkpoint is a left-to-right (causal) model.

    Args:
      path: a checkpoint of any supported format.

    Returns:
      True for a Hugging Face checkpoint marked `is_decoder`; the Google and keras-hub formats
      have no causal BERT.

    Example:

    >>> import pathlib, tempfile
    >>> import kbert
    >>> causal = kbert.BertBackbone(kbert.BertConfig.preset("tiny"), causal=True)
    >>> path = kbert.convert.save_hf(causal, pathlib.Path(tempfile.mkdtemp()) / "hf")
    >>> kbert.convert.is_causal(path)
    True
    """
    return detect_format(path) == "huggingface" and is_decoder(path)


def refuse_causal(path, fmt):
    """Refuses to convert a left-to-right checkpoint to a format that would run it
    bidirectionally.

    Args:
      path: the checkpoint to convert.
      fmt: the target format ("huggingface", "google", "keras_hub", ...).

    Raises:
      CheckpointError: the checkpoint is causal (`is_causal`) and `fmt` is not "huggingface".

    Example:

    >>> import pathlib, tempfile
    >>> import kbert
    >>> causal = kbert.BertBackbone(kbert.BertConfig.preset("tiny"), causal=True)
    >>> path = kbert.convert.save_hf(causal, pathlib.Path(tempfile.mkdtemp()) / "hf")
    >>> kbert.convert.refuse_causal(path, "huggingface")
    >>> kbert.convert.refuse_causal(path, "google")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kbert.convert.weights.CheckpointError: ... is a left-to-right (is_decoder) model; ...
    """
    if is_causal(path) and fmt != "huggingface":
        raise CheckpointError(f"{path} is a left-to-right (is_decoder) model; the {fmt} format "
                              "has no causal BERT, so it would run bidirectionally there.")


def load_backbone(cls, path, allow_pickle=False, **kwargs):
    """Builds a backbone from a checkpoint, holding its weights.

    The caller names the class (keras-hub's habit), so this format reader never imports the
    model code. Names such as "minilm_l6_h384_uncased" are resolved by `kbert.presets`
    (`kbert.BertBackbone.from_pretrained`), not here.

    Args:
      cls: the backbone class: a `kbert.BertBackbone`, or a class with its constructor and
        layer names.
      path: a checkpoint of any supported format (`detect_format`).
      allow_pickle: read a Hugging Face directory's pytorch_model.bin (trusted files only).
      **kwargs: constructor arguments of `cls`. `causal` defaults to the checkpoint's
        (`is_causal`); dropout rates (`hidden_dropout`, `attention_dropout`) replace the
        checkpoint's.

    Returns:
      `cls(config, **kwargs)` with the checkpoint's config and weights.

    Example:

    >>> import pathlib, tempfile
    >>> import kbert
    >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny"))
    >>> path = kbert.convert.save_hf(backbone, pathlib.Path(tempfile.mkdtemp()) / "hf")
    >>> loaded = kbert.convert.load_backbone(kbert.BertBackbone, path, hidden_dropout=0.0)
    >>> loaded.config.num_layers, loaded.config.hidden_dropout, loaded.causal
    (2, 0.0, False)
    """
    config, weights = read_checkpoint(path, allow_pickle=allow_pickle)
    config = config.with_rates_from(kwargs)
    kwargs.setdefault("causal", is_causal(path))
    backbone = cls(config, **kwargs)
    set_backbone_weights(backbone, weights, source=str(path))
    return backbone


def load_pretraining_heads(pretrainer, path, allow_pickle=False) -> list[str]:
    """Fills a `BertPretrainer`'s pre-training heads from a checkpoint that holds them.

    Continued pre-training goes on from a checkpoint's heads, as Google's run_pretraining.py
    and transformers' `from_pretrained` do. transformers' `BertForPreTraining` and Google's
    release hold both heads, `BertForMaskedLM` the masked LM's; a keras-hub preset has
    neither. A head the checkpoint lacks keeps its fresh weights. The checkpoint is read
    whole, once more than the backbone needed.

    Args:
      pretrainer: a `kbert.BertPretrainer`.
      path: a checkpoint of any supported format.
      allow_pickle: read a Hugging Face directory's pytorch_model.bin (trusted files only).

    Returns:
      The names of the heads loaded: "masked LM", "next sentence".

    Example:

    >>> import pathlib, tempfile
    >>> import kbert
    >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny"))
    >>> trained = kbert.BertPretrainer(backbone)
    >>> path = kbert.convert.save_hf(trained, pathlib.Path(tempfile.mkdtemp()) / "hf")
    >>> fresh = kbert.BertPretrainer(kbert.convert.load_backbone(kbert.BertBackbone, path))
    >>> sorted(kbert.convert.load_pretraining_heads(fresh, path))
    ['masked LM', 'next sentence']
    """
    if detect_format(path) == "keras_hub":
        return []
    _, weights = read_checkpoint(path, allow_pickle=allow_pickle)
    return [HEAD_NAMES[prefix] for prefix in set_head_weights(pretrainer, weights)]


def save_hf(model, path, vocab_file=None, overwrite=False, tokenizer=None, label_names=None):
    """Saves a kbert model as a Hugging Face `transformers` checkpoint directory.

    A `BertBackbone` becomes a `BertModel`, a `BertPretrainer` a `BertForPreTraining` (heads
    included), and a fine-tuned `BertClassifier`, `BertTokenClassifier`, `BertMultipleChoice`
    or `BertSpanLabeler` the `transformers` class for its task (`kbert.convert.task_heads`).
    A causal backbone is marked `is_decoder`. The directory is written atomically.

    Args:
      model: the model to save.
      path: the directory to write (config.json, model.safetensors, ...).
      vocab_file: a vocab.txt to copy in (without `tokenizer`).
      overwrite: replace a `path` holding other files than a previous checkpoint's.
      tokenizer: a `kbert.BertTokenizer`, whose vocabulary, casing and word limit are written
        too (vocab.txt, tokenizer_config.json).
      label_names: a classifier's class names, in id order, as `id2label` (default: the
        model's).

    Returns:
      `path`, as a `pathlib.Path`.

    Example:

    >>> import json, pathlib, tempfile
    >>> import kbert
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "good", "bad", "film"]
    >>> config = kbert.BertConfig.preset("tiny", vocab_size=len(vocabulary))
    >>> classifier = kbert.BertClassifier(kbert.BertBackbone(config), num_classes=2)
    >>> path = kbert.convert.save_hf(classifier, pathlib.Path(tempfile.mkdtemp()) / "hf",
    ...                              tokenizer=kbert.BertTokenizer(vocabulary),
    ...                              label_names=["negative", "positive"])
    >>> sorted(p.name for p in path.iterdir())
    ['config.json', 'model.safetensors', 'tokenizer_config.json', 'vocab.txt']
    >>> hf_config = json.loads((path / "config.json").read_text())
    >>> hf_config["architectures"], hf_config["id2label"]
    (['BertForSequenceClassification'], {'0': 'negative', '1': 'positive'})
    """
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
    """Saves a kbert model as an original Google (TF1) BERT checkpoint directory.

    A `BertBackbone` or `BertPretrainer` (heads included) is written as Google's release is;
    a fine-tuned `BertClassifier` or `BertSpanLabeler` with the head of run_classifier.py or
    run_squad.py (`kbert.convert.google`). A causal model has no Google form.

    Args:
      model: the model to save.
      path: the directory to write (bert_config.json, bert_model.ckpt.*).
      vocab_file: a vocab.txt to copy in (without `tokenizer`).
      overwrite: replace a `path` holding other files than a Google checkpoint's.
      tokenizer: a `kbert.BertTokenizer`, whose vocabulary (vocab.txt) and casing
        (`do_lower_case`, `strip_accents` in bert_config.json) are written too.

    Returns:
      `path`, as an absolute path string.

    Example:

    >>> import pathlib, tempfile
    >>> import kbert
    >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny"))
    >>> path = kbert.convert.save_google(backbone, pathlib.Path(tempfile.mkdtemp()) / "g")
    >>> sorted(p.name for p in pathlib.Path(path).iterdir())
    ['bert_config.json', 'bert_model.ckpt.data-00000-of-00001', 'bert_model.ckpt.index']
    """
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
    """Saves a kbert model as a keras-hub preset directory (needs the `keras-hub` package).

    A `BertBackbone` (or a `BertPretrainer`'s encoder) becomes a keras-hub `BertBackbone`
    preset, a fine-tuned `BertClassifier` a `BertTextClassifier` preset whose preprocessor
    takes raw text (`keras_hub.models.TextClassifier.from_preset(path)`). Other task models
    and causal models have no keras-hub form.

    Args:
      model: the model to save.
      path: the preset directory to write.
      tokenizer: a `kbert.BertTokenizer` (default: the model's preprocessor's), written as
        keras-hub's tokenizer.
      sequence_length: a classifier preprocessor's length (default: the model's
        preprocessor's).
      overwrite: replace a `path` holding other files than a previous preset's.
      allow_approximation: keras-hub computes tanh-GELU only; allow saving a model with
        another activation (exact GELU, as in BERT) that keras-hub then approximates
        (`kbert.convert.keras_hub`).

    Returns:
      `path`.

    Example:

    >>> import pathlib, tempfile
    >>> import kbert
    >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny"))
    >>> path = kbert.convert.save_keras_hub(backbone, pathlib.Path(tempfile.mkdtemp()) / "kh",
    ...                                     allow_approximation=True)
    >>> kbert.convert.detect_format(path)
    'keras_hub'
    """
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
