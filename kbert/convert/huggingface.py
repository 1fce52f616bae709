"""Hugging Face BERT directories (config.json + model.safetensors) in and out.

Reading normalises the names that real checkpoints carry (a "bert." prefix, TF-era
"gamma"/"beta", the `position_ids` buffer, the tied decoder copy) into the canonical format.
Pickled PyTorch files (`pytorch_model.bin`) are refused unless the caller opts in: unpickling a
file can run arbitrary code.
"""

import json
import pathlib
import shutil

import numpy as np
import safetensors.numpy

from kbert.atomic import atomic_directory
from kbert.config import BertConfig
from kbert.convert.weights import CheckpointError, check_weights

_BUFFERS = ("embeddings.position_ids",)


def read_hf_checkpoint(path, allow_pickle=False):
    """Returns (BertConfig, canonical weights) from a Hugging Face BERT directory."""
    path = pathlib.Path(path)
    if not (path / "config.json").is_file():
        raise CheckpointError(f"{path}: no config.json; not a Hugging Face model directory.")
    config = BertConfig.from_hf_config(path / "config.json")
    raw = _read_tensors(path, allow_pickle)
    weights = _canonical_names(raw, path)
    check_weights(weights, config, source=str(path))
    return config, weights


def _read_tensors(path: pathlib.Path, allow_pickle: bool) -> dict:
    single, index = path / "model.safetensors", path / "model.safetensors.index.json"
    try:
        if single.is_file():
            return safetensors.numpy.load_file(str(single))
        if index.is_file():
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
            tensors = {}
            for shard in shards:
                tensors.update(safetensors.numpy.load_file(str(path / shard)))
            return tensors
    except (OSError, ValueError, KeyError, safetensors.SafetensorError) as e:
        raise CheckpointError(f"{path}: cannot read the safetensors weights: {e}") from None
    pickled = path / "pytorch_model.bin"
    if pickled.is_file():
        if not allow_pickle:
            raise CheckpointError(
                f"{pickled} is a pickle file, which can run arbitrary code when loaded. Convert "
                "it to model.safetensors, or pass allow_pickle=True if you trust its source.")
        import torch  # only needed for this opt-in path

        state = torch.load(pickled, map_location="cpu", weights_only=True)
        return {k: v.float().numpy() for k, v in state.items()}
    raise CheckpointError(f"{path}: no model.safetensors (or sharded index) found.")


def _canonical_names(raw: dict, path) -> dict:
    weights = {}
    for name, value in raw.items():
        name = name.removeprefix("bert.")
        if name.endswith(".gamma"):
            name = name[: -len("gamma")] + "weight"
        elif name.endswith(".beta"):
            name = name[: -len("beta")] + "bias"
        if name in _BUFFERS:
            continue
        weights[name] = np.asarray(value, dtype="float32")
    decoder = weights.pop("cls.predictions.decoder.weight", None)
    if decoder is not None and not np.array_equal(decoder, weights.get(
            "embeddings.word_embeddings.weight")):
        raise CheckpointError(f"{path}: the MLM decoder is not tied to the word embeddings; "
                              "BERT ties them and kbert cannot hold an untied decoder.")
    decoder_bias = weights.pop("cls.predictions.decoder.bias", None)
    if decoder_bias is not None:
        weights.setdefault("cls.predictions.bias", decoder_bias)
    return weights


def write_hf_checkpoint(path, config: BertConfig, weights: dict, vocab_file=None,
                        overwrite=False) -> pathlib.Path:
    """Writes config.json, model.safetensors (and vocab.txt) to `path`, atomically.

    Without head weights the layout is `BertModel`'s; with them, `BertForPreTraining`'s (names
    under "bert.", decoder tied). An existing `path` holding other files than a previous
    checkpoint is only replaced with `overwrite=True`.
    """
    check_weights(weights, config, source="the weights to write")
    path = pathlib.Path(path)
    has_heads = any(n.startswith("cls.") for n in weights)
    hf_config = config.to_hf_config()
    if has_heads:
        hf_config["architectures"] = ["BertForPreTraining"]
        tensors = {(n if n.startswith("cls.") else f"bert.{n}"): w for n, w in weights.items()}
    else:
        tensors = dict(weights)
    owned = ("config.json", "model.safetensors", "vocab.txt")
    with atomic_directory(path, owned_files=owned, overwrite=overwrite) as staging:
        (staging / "config.json").write_text(json.dumps(hf_config, indent=2) + "\n")
        safetensors.numpy.save_file(
            {n: np.ascontiguousarray(w, dtype="float32") for n, w in tensors.items()},
            str(staging / "model.safetensors"), metadata={"format": "pt"})
        if vocab_file is not None:
            shutil.copyfile(vocab_file, staging / "vocab.txt")
    return path
