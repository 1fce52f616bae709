"""Checkpoints in and out: Hugging Face, the original Google TF1 release, and keras-hub.

Every format is read into, and written from, one canonical dict (`kbert.convert.weights`);
`kbert.convert.mapping` moves that dict in and out of kbert's layers. This module reads a
checkpoint into a model; `kbert.convert.saving` writes a model as one.
"""

import json
import pathlib

from kbert.convert.google import read_google_checkpoint, write_google_checkpoint
from kbert.convert.huggingface import is_decoder, read_hf_checkpoint, write_hf_checkpoint
from kbert.convert.mapping import get_backbone_weights, set_backbone_weights, set_head_weights
from kbert.convert.saving import save_google, save_hf, save_keras_hub
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

    Examples:
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

    Examples:
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

    Examples:
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

    Examples:
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

    Examples:
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

    Examples:
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

    Examples:
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


__all__ = [
    "CheckpointError", "detect_format", "read_checkpoint", "read_config", "load_backbone",
    "load_pretraining_heads",
    "is_causal", "refuse_causal", "save_hf", "save_google", "save_keras_hub",
    "read_hf_checkpoint", "write_hf_checkpoint", "read_google_checkpoint",
    "write_google_checkpoint", "get_backbone_weights", "set_backbone_weights",
]
