"""Writes a kbert model as a checkpoint of Hugging Face, the original Google release or
keras-hub: its encoder, its pre-training heads and a fine-tuned task head where the format has
one (`kbert.convert.task_heads`)."""

import contextlib
import pathlib
import tempfile

from kbert.convert.google import write_google_checkpoint
from kbert.convert.huggingface import write_hf_checkpoint
from kbert.convert.mapping import get_backbone_weights, head_slots, read_slots
from kbert.convert.task_heads import google_task_head, task_head


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

    Examples:
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

    Examples:
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

    Examples:
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
        heads = getattr(type(model), "checkpoint_heads", None)
        if heads is None or heads.keras_hub is None:
            raise ValueError(f"keras-hub's one BERT task class is BertTextClassifier; a "
                             f"{type(model).__name__} has none there. Save its encoder with "
                             "save_keras_hub(model.backbone, ...).")
        kernel, bias = model.get_layer(heads.layer).get_weights()
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
    backbone = getattr(model, "backbone", model)
    weights = get_backbone_weights(backbone)
    if hasattr(model, "mlm_head"):
        weights.update(read_slots(head_slots(model.mlm_head, model.nsp_head)))
    return backbone.config, weights
