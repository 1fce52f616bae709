"""Hugging Face BERT directories (config.json + model.safetensors) in and out.

Reading normalises the names that real checkpoints carry (a "bert." prefix, TF-era
"gamma"/"beta", the `position_ids` buffer, the tied decoder copy) into the canonical format.
Weights must be floating point: float32, float16, bfloat16 and float64 are read and converted
to float32 (the canonical dtype); an integer or boolean tensor, or one holding NaN or infinity,
is refused by name, never silently cast. A sharded checkpoint's index may only name shard files
beside it. Pickled PyTorch files (`pytorch_model.bin`) are refused unless the caller opts in:
unpickling a file can run arbitrary code.
"""

import json
import os
import pathlib
import shutil
import warnings

import numpy as np
import safetensors
import safetensors.numpy

from kbert.atomic import atomic_directory
from kbert.config import BertConfig
from kbert.convert.weights import CheckpointError, check_finite, check_weights
from kbert.outputs import umask
from kbert.text.tokenizer_files import load_vocabulary

_BUFFERS = ("embeddings.position_ids",)
FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")
"""The dtypes a weight may have on disk; all are read as float32."""
INDEX_FILE = "model.safetensors.index.json"

TASK_CLASSES = {
    "BertForSequenceClassification": ("classifier", True),
    "BertForTokenClassification": ("classifier", False),
    "BertForMultipleChoice": ("classifier", True),
    "BertForQuestionAnswering": ("qa_outputs", False),
}
"""transformers' BERT task classes → (the name of their one head Linear, whether they keep the
encoder's pooler): modeling_bert.py builds the token and span classes with
`add_pooling_layer=False`."""


def read_hf_checkpoint(path, allow_pickle=False):
    """Reads a Hugging Face BERT directory as a config and canonical weights.

    A fine-tuned task class's head is left out (`kbert.convert.task_heads` reads it); a class
    saved without a pooler (token, span and language-model classes) gets one drawn at random.

    Args:
      path: a directory with config.json and model.safetensors (sharded or not), or
        pytorch_model.bin with `allow_pickle`.
      allow_pickle: read pytorch_model.bin (unpickling runs code: trusted files only).

    Returns:
      (`BertConfig`, weights): float32 numpy arrays under kbert's canonical names, the
      pre-training heads included where the checkpoint has them.

    Examples:
        >>> import pathlib, tempfile
        >>> import kbert
        >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny"))
        >>> path = kbert.convert.save_hf(backbone, pathlib.Path(tempfile.mkdtemp()) / "hf")
        >>> config, weights = kbert.convert.read_hf_checkpoint(path)
        >>> config.vocab_size, weights["pooler.dense.weight"].shape
        (30522, (128, 128))
    """
    path = pathlib.Path(path)
    if not (path / "config.json").is_file():
        raise CheckpointError(f"{path}: no config.json; not a Hugging Face model directory.")
    config = BertConfig.from_hf_config(path / "config.json")
    # A fine-tuned task class's head is not the encoder's (`read_task_head` reads it).
    architecture = checkpoint_architecture(path)
    head = head_tensor_names(architecture)
    raw = {n: t for n, t in _read_tensors(path, allow_pickle).items() if n not in head}
    weights = _canonical_names(raw, path)
    if architecture and not TASK_CLASSES[architecture][1]:
        weights = {**_drawn_pooler(config), **weights}
    elif is_language_model(path) and "pooler.dense.weight" not in weights:
        warnings.warn(f"{path} holds no pooler (transformers' language-model classes build "
                      "none): a pooler is drawn at random, which fine-tuning on "
                      "pooled_output trains, as transformers does.", stacklevel=2)
        weights = {**_drawn_pooler(config), **weights}
    check_weights(weights, config, source=str(path))
    return config, weights


def checkpoint_architecture(path):
    """The transformers task class (one of `TASK_CLASSES`) a directory's config.json names, or
    None."""
    names = config_object(path).get("architectures")
    return next((name for name in names or () if name in TASK_CLASSES), None)


def head_tensor_names(architecture):
    """The names of a transformers task class's head tensors (empty for other classes)."""
    if architecture not in TASK_CLASSES:
        return set()
    return {f"{TASK_CLASSES[architecture][0]}.weight", f"{TASK_CLASSES[architecture][0]}.bias"}


def is_language_model(path):
    """Whether a directory's config.json names `BertForMaskedLM` or `BertLMHeadModel`, whose
    encoder transformers builds with `add_pooling_layer=False` (what its run_mlm.py saves):
    such a checkpoint holds no pooler."""
    names = config_object(path).get("architectures") or ()
    return any(name in ("BertForMaskedLM", "BertLMHeadModel") for name in names)


def is_decoder(path):
    """Whether a directory's config.json marks a left-to-right (`is_decoder`) model."""
    return config_object(path).get("is_decoder") is True


def hf_label_names(path):
    """The label names of a directory's `id2label`, in id order; None where it has none or
    only transformers' placeholders ("LABEL_0", ...)."""
    id2label = config_object(path).get("id2label")
    if not isinstance(id2label, dict) or not id2label:
        return None
    names = [id2label.get(str(i)) for i in range(len(id2label))]
    if not all(isinstance(n, str) for n in names) or names == [f"LABEL_{i}" for i in
                                                                 range(len(names))]:
        return None
    return names


def config_object(path):
    """The JSON object in `path`/config.json; {} where there is none or it is not one (the
    readers of the weights report a bad file)."""
    try:
        value = json.loads((pathlib.Path(path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def read_tensors(path, names, allow_pickle=False):
    """The tensors `names` of a Hugging Face directory as float32 (dtype and values checked);
    from safetensors files only those are read."""
    raw = _read_tensors(pathlib.Path(path), allow_pickle, names=set(names))
    missing = sorted(set(names) - set(raw))
    if missing:
        raise CheckpointError(f"{path}: no tensor {', '.join(missing)}.")
    return {n: _float32(raw[n], n, path) for n in names}


def _drawn_pooler(config):
    """A pooler for a checkpoint of a class without one (token, span), drawn as BERT
    initialises it (truncation aside; seed fixed): those heads never read it."""
    rng = np.random.default_rng(0)
    size = config.hidden_size
    return {"pooler.dense.weight": (rng.normal(size=(size, size)) * config.initializer_range
                                    ).astype("float32"),
            "pooler.dense.bias": np.zeros(size, "float32")}


def _read_tensors(path: pathlib.Path, allow_pickle: bool, names=None) -> dict:
    """Every tensor of the directory, or those in `names` (a set)."""
    single, index = path / "model.safetensors", path / INDEX_FILE
    if single.is_file() or index.is_file():
        files = [single] if single.is_file() else shard_files(index)
        tensors = {}
        for file in files:
            try:
                if names is None:
                    tensors.update(safetensors.numpy.load_file(str(file)))
                else:
                    with safetensors.safe_open(str(file), framework="numpy") as f:
                        tensors.update({n: f.get_tensor(n) for n in f.keys() if n in names})
            except (OSError, ValueError, safetensors.SafetensorError) as e:
                raise CheckpointError(f"{file}: cannot read the safetensors weights: "
                                      f"{e}") from None
        if index.is_file() and not single.is_file() and names is None:
            _check_index_names(index, tensors)
        return tensors
    pickled = path / "pytorch_model.bin"
    if pickled.is_file():
        if not allow_pickle:
            raise CheckpointError(
                f"{pickled} is a pickle file, which can run arbitrary code when loaded. Convert "
                "it to model.safetensors, or pass allow_pickle=True if you trust its source.")
        import torch  # only needed for this opt-in path

        state = torch.load(pickled, map_location="cpu", weights_only=True)
        return {k: (v.float() if v.is_floating_point() else v).numpy() for k, v in state.items()}
    raise CheckpointError(f"{path}: no model.safetensors (or sharded index) found.")


def shard_files(index: pathlib.Path) -> list[pathlib.Path]:
    """The shard files a sharded checkpoint's index names. Its `weight_map` must map tensor
    names to plain file names: a shard is looked up beside the index only, so an entry such as
    "../x" or "/etc/x" cannot make the reader open a file outside the checkpoint."""
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map")
    except (OSError, UnicodeDecodeError, ValueError, RecursionError, AttributeError) as e:
        raise CheckpointError(f"{index} is not a JSON object: {e}") from None
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointError(f"{index}: weight_map must be a non-empty object of tensor name "
                              f"→ shard file name, got {type(weight_map).__name__}.")
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or not _plain_file_name(shard):
            raise CheckpointError(
                f"{index}: weight_map[{name!r}] = {shard!r} is not a file name; shards lie "
                "beside the index (no folders, no '..', no absolute paths).")
    files = [index.parent / shard for shard in sorted(set(weight_map.values()))]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise CheckpointError(f"{index} names shard file(s) that do not exist: "
                              f"{', '.join(missing)}.")
    return files


def _plain_file_name(name: str) -> bool:
    return (name not in ("", ".", "..") and "/" not in name and "\\" not in name
            and "\0" not in name and ":" not in name)


def _check_index_names(index, tensors):
    """The shards must hold exactly the tensors the index lists."""
    listed = set(json.loads(index.read_text(encoding="utf-8"))["weight_map"])
    unlisted, absent = sorted(set(tensors) - listed), sorted(listed - set(tensors))
    if unlisted or absent:
        raise CheckpointError(f"{index} does not match its shards: " + "; ".join(
            f"{what}: {', '.join(names[:5])}" for what, names in
            (("in no shard", absent), ("not in the index", unlisted)) if names) + ".")


def _canonical_names(raw: dict, path) -> dict:
    weights = {}
    for original, value in raw.items():
        name = original.removeprefix("bert.")
        if name.endswith(".gamma"):
            name = name[: -len("gamma")] + "weight"
        elif name.endswith(".beta"):
            name = name[: -len("beta")] + "bias"
        if name in _BUFFERS:
            continue
        weights[name] = _float32(value, original, path)
    decoder = weights.pop("cls.predictions.decoder.weight", None)
    if decoder is not None and not np.array_equal(decoder, weights.get(
            "embeddings.word_embeddings.weight")):
        raise CheckpointError(f"{path}: the MLM decoder is not tied to the word embeddings; "
                              "BERT ties them and kbert cannot hold an untied decoder.")
    decoder_bias = weights.pop("cls.predictions.decoder.bias", None)
    if decoder_bias is not None:
        weights.setdefault("cls.predictions.bias", decoder_bias)
    return weights


def _float32(value, name, path):
    value = np.asarray(value)
    if value.dtype.name not in FLOAT_DTYPES:
        raise CheckpointError(f"{path}: tensor {name!r} has dtype {value.dtype.name}; "
                              f"weights must be floating point ({', '.join(FLOAT_DTYPES)}).")
    return check_finite(value.astype("float32"), name, path)


def _with_user_mode(path):
    """Gives the file `path` the mode a new file of the user's gets (0644 under umask 022):
    safetensors writes its files 0600, which other users and groups the umask admits cannot
    read."""
    os.chmod(path, 0o666 & ~umask())


def write_hf_checkpoint(path, config: BertConfig, weights: dict, vocab_file=None,
                        overwrite=False, tokenizer_config=None,
                        causal=False, task_head=None) -> pathlib.Path:
    """Writes canonical weights as a Hugging Face BERT directory, atomically.

    Without head weights the layout is `BertModel`'s; with them, `BertForPreTraining`'s (names
    under "bert.", decoder tied); with a `task_head` (`kbert.convert.task_heads.HfHead`),
    that task's class (`BertForSequenceClassification`, ...). `save_hf` calls it for a model.

    Args:
      path: the directory to write.
      config: the weights' `BertConfig`.
      weights: canonical weights (`read_checkpoint`, `get_backbone_weights`).
      vocab_file: a vocab.txt to copy in.
      overwrite: replace a `path` holding other files than a previous checkpoint's.
      tokenizer_config: tokenizer_config.json's settings (e.g. `do_lower_case`): the casing
        and word limit the model was trained with, which a vocabulary alone cannot tell.
      causal: mark a left-to-right model as `is_decoder`, which `transformers` runs causally.
      task_head: a fine-tuned head (`kbert.convert.task_heads.HfHead`).

    Returns:
      `path`, as a `pathlib.Path`.

    Examples:
        >>> import pathlib, tempfile
        >>> import kbert
        >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny"))
        >>> weights = kbert.convert.get_backbone_weights(backbone)
        >>> path = kbert.convert.write_hf_checkpoint(pathlib.Path(tempfile.mkdtemp()) / "hf",
        ...                                          backbone.config, weights)
        >>> sorted(p.name for p in path.iterdir())
        ['config.json', 'model.safetensors']
    """
    check_weights(weights, config, source="the weights to write")
    if vocab_file is not None:
        load_vocabulary(vocab_file)  # checked as a tokenizer reads it, before anything is written
    path = pathlib.Path(path)
    has_heads = any(n.startswith("cls.") for n in weights)
    hf_config = config.to_hf_config()
    if causal:
        hf_config["is_decoder"] = True
    if task_head is not None:
        hf_config.update({"architectures": [task_head.architecture], **task_head.config})
        tensors = {**{f"bert.{n}": w for n, w in weights.items()
                      if task_head.pooler or not n.startswith("pooler.")}, **task_head.tensors}
    elif has_heads:
        hf_config["architectures"] = ["BertForPreTraining"]
        tensors = {(n if n.startswith("cls.") else f"bert.{n}"): w for n, w in weights.items()}
    else:
        tensors = dict(weights)
    owned = ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json")
    with atomic_directory(path, owned_files=owned, overwrite=overwrite) as staging:
        (staging / "config.json").write_text(json.dumps(hf_config, indent=2) + "\n")
        safetensors.numpy.save_file(
            {n: np.ascontiguousarray(w, dtype="float32") for n, w in tensors.items()},
            str(staging / "model.safetensors"), metadata={"format": "pt"})
        _with_user_mode(staging / "model.safetensors")
        if vocab_file is not None:
            shutil.copyfile(vocab_file, staging / "vocab.txt")
        if tokenizer_config is not None:
            (staging / "tokenizer_config.json").write_text(
                json.dumps({"tokenizer_class": "BertTokenizer", **tokenizer_config}, indent=2)
                + "\n")
    return path
