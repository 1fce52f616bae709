"""Checkpoints in the format of the original google-research/bert release.

Such a checkpoint is a directory holding `bert_config.json`, a TF1 name-based checkpoint
(`bert_model.ckpt.index` + `bert_model.ckpt.data-00000-of-00001`) and usually `vocab.txt`. Its
variables are named like `bert/encoder/layer_0/attention/self/query/kernel`; dense kernels are
[in, out] (the transpose of PyTorch's Linear weight), LayerNorm holds `gamma`/`beta`, and the
next-sentence head's `cls/seq_relationship/output_weights` is [2, H], not transposed.

`read_google_checkpoint` returns kbert's canonical weights (see `kbert.convert.weights`);
`write_google_checkpoint` writes them back in the same format, which the original
`modeling.py` and `tf.train.load_checkpoint` read. Optimizer slots and `global_step`, present in
checkpoints saved during training, are skipped when reading; a directory of such checkpoints
(`model.ckpt-N` and a `checkpoint` file, as run_classifier.py writes) is read at its latest.

The heads Google's fine-tuning scripts add (`TASK_HEADS`) travel too: `read_google_head` gives
one to `BertTask.from_pretrained`, and `write_google_checkpoint(task_head=...)` writes one, so
run_classifier.py / run_squad.py `--do_predict` can start from a kbert model.
"""

import glob
import json
import os
import re
import shutil

import numpy as np

from kbert.atomic import atomic_directory
from kbert.config import BertConfig, ConfigError
from kbert.convert.weights import (CheckpointError, HEAD_GROUPS, check_finite, check_shapes,
                                   check_weights, expected_shapes)
from kbert.text.tokenizer_files import load_vocabulary

CONFIG_FILE = "bert_config.json"
CHECKPOINT_NAME = "bert_model.ckpt"
VOCAB_FILE = "vocab.txt"

TASK_HEADS = {
    "run_classifier.py": ("output_weights", "output_bias"),
    "run_squad.py": ("cls/squad/output_weights", "cls/squad/output_bias"),
}
"""The heads of google-research/bert's fine-tuning scripts: (weights, bias) variable names. Both
make the weights [outputs, hidden] and compute `matmul(x, output_weights, transpose_b=True) +
output_bias` (`create_model`: run_classifier.py on the pooled output, run_squad.py on every
token, start logits from row 0 and end logits from row 1)."""

_HEAD_VARIABLES = {name for names in TASK_HEADS.values() for name in names}

# Variables of a training checkpoint that are not model weights.
_IGNORED_SUFFIXES = ("/adam_m", "/adam_v", "/Adam", "/Adam_1")
_IGNORED_NAMES = ("global_step", "beta1_power", "beta2_power", "_CHECKPOINTABLE_OBJECT_GRAPH")


def google_name(name: str) -> tuple[str, bool]:
    """The Google variable name of canonical weight `name`, and whether its array is the
    transpose of the canonical one."""
    special = {
        "cls.predictions.bias": "cls/predictions/output_bias",
        "cls.seq_relationship.weight": "cls/seq_relationship/output_weights",
        "cls.seq_relationship.bias": "cls/seq_relationship/output_bias",
    }
    if name in special:
        return special[name], False
    *path, leaf = name.split(".")
    path = "/".join(path)
    path = re.sub(r"layer/(\d+)", r"layer_\1", path)
    if not path.startswith("cls/"):
        path = "bert/" + path
    if path.endswith("LayerNorm"):
        return f"{path}/{'gamma' if leaf == 'weight' else 'beta'}", False
    if path.endswith("_embeddings"):
        return path, False
    return f"{path}/{'kernel' if leaf == 'weight' else 'bias'}", leaf == "weight"


def _google_table(config: BertConfig) -> dict[str, tuple[str, bool, tuple]]:
    """{google name: (canonical name, transposed, google shape)} for a model with both heads."""
    table = {}
    for name, shape in expected_shapes(config, heads=True).items():
        gname, transposed = google_name(name)
        table[gname] = (name, transposed, tuple(reversed(shape)) if transposed else shape)
    return table


def _ignored(name: str) -> bool:
    return name in _IGNORED_NAMES or name.endswith(_IGNORED_SUFFIXES)


def _tf():
    try:
        import tensorflow as tf
    except ImportError as e:  # pragma: no cover - TF is a dependency of kbert
        raise ImportError("Reading or writing Google TF1 checkpoints needs TensorFlow.") from e
    return tf


def _resolve(path) -> tuple[str, str]:
    """(directory, checkpoint prefix) for a checkpoint directory or a checkpoint prefix."""
    path = os.fspath(path)
    if os.path.isdir(path):
        prefix = os.path.join(path, CHECKPOINT_NAME)
        if os.path.exists(prefix + ".index"):
            return path, prefix
        latest = _latest(path)
        if latest is not None:
            return path, latest
        indexes = sorted(glob.glob(os.path.join(glob.escape(path), "*.index")))
        if len(indexes) != 1:
            found = f" (found {', '.join(indexes)}; pass one prefix)" if indexes else ""
            raise CheckpointError(f"No TF checkpoint in {path}: {prefix}.index is "
                                  f"missing{found}.")
        return path, indexes[0][: -len(".index")]
    prefix = re.sub(r"\.(index|data-\d+-of-\d+)$", "", path)
    if not os.path.exists(prefix + ".index"):
        raise CheckpointError(f"No TF checkpoint at {path}: {prefix}.index is missing.")
    return os.path.dirname(prefix) or ".", prefix


def _latest(directory) -> str | None:
    """The newest checkpoint a training run's `checkpoint` file names in `directory`, if any
    (TF1 Estimators keep several `model.ckpt-N`)."""
    if not os.path.isfile(os.path.join(directory, "checkpoint")):
        return None
    try:
        latest = _tf().train.latest_checkpoint(directory)
    except Exception:  # a damaged state file: fall back to looking for one checkpoint
        return None
    return latest if latest and os.path.exists(latest + ".index") else None


def _data_files(prefix: str) -> list[str]:
    shards = glob.glob(glob.escape(prefix) + ".data-*-of-*")
    if not shards:
        raise CheckpointError(f"TF checkpoint {prefix}: the data file "
                              f"{prefix}.data-00000-of-00001 is missing.")
    total = int(re.search(r"-of-(\d+)$", shards[0]).group(1))
    expected = [f"{prefix}.data-{i:05d}-of-{total:05d}" for i in range(total)]
    missing = [f for f in expected if not os.path.exists(f)]
    if missing:
        raise CheckpointError(f"TF checkpoint {prefix}: data file(s) missing: "
                              f"{', '.join(missing)}.")
    return expected


def _first_line(error) -> str:
    message = getattr(error, "message", None) or str(error)
    return message.strip().splitlines()[0] if message.strip() else type(error).__name__


def read_google_checkpoint(path) -> tuple[BertConfig, dict[str, np.ndarray]]:
    """Reads an original Google (TF1) BERT checkpoint as a config and canonical weights.

    Any float dtype is converted to float32; an integer variable, or one holding NaN or
    infinity, is refused by name.

    Args:
      path: the checkpoint's directory (holding bert_config.json and bert_model.ckpt.*), or
        the checkpoint prefix itself, with bert_config.json beside it.

    Returns:
      (`BertConfig`, weights): float32 numpy arrays under kbert's canonical names, the
      pre-training heads included when the checkpoint has them.

    Raises:
      CheckpointError: a missing or corrupt file, or variables that do not fit the config
        (listing missing, unexpected and mis-shaped names).

    Examples:
        >>> import pathlib, tempfile
        >>> import kbert
        >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny"))
        >>> path = kbert.convert.save_google(backbone, pathlib.Path(tempfile.mkdtemp()) / "g")
        >>> config, weights = kbert.convert.read_google_checkpoint(path)
        >>> config.num_layers, weights["embeddings.word_embeddings.weight"].shape
        (2, (30522, 128))
    """
    directory, prefix = _resolve(path)
    config_path = os.path.join(directory, CONFIG_FILE)
    if not os.path.isfile(config_path):
        raise CheckpointError(f"TF checkpoint {prefix}: {config_path} is missing.")
    try:
        config = BertConfig.from_google_config(config_path)
    except ConfigError as e:
        raise CheckpointError(str(e)) from None  # it names the file
    data_files = _data_files(prefix)

    tf = _tf()
    try:
        reader = tf.train.load_checkpoint(prefix)
        shapes = reader.get_variable_to_shape_map()
        dtypes = reader.get_variable_to_dtype_map()
    except Exception as e:  # the reader maps TF errors to assorted Python types
        raise CheckpointError(f"Cannot read TF checkpoint index {prefix}.index: "
                              f"{_first_line(e)}") from None

    table = _google_table(config)
    found = {name: tuple(shape) for name, shape in shapes.items()
             if not _ignored(name) and name not in _HEAD_VARIABLES}  # `read_google_head`'s
    check_shapes(found, {g: entry[2] for g, entry in table.items()},
                 optional_groups=[g.replace(".", "/") for g in HEAD_GROUPS],
                 source=f"TF checkpoint {prefix}", what=f"the model of {config_path}")

    weights = {}
    for gname in found:
        name, transposed, _ = table[gname]
        if not tf.as_dtype(dtypes[gname]).is_floating:
            raise CheckpointError(f"TF checkpoint {prefix}: {gname} has dtype "
                                  f"{tf.as_dtype(dtypes[gname]).name}, not a float.")
        try:
            value = reader.get_tensor(gname)
        except Exception as e:  # the reader maps TF errors to assorted Python types
            raise CheckpointError(f"Cannot read {gname} from TF checkpoint data "
                                  f"{', '.join(data_files)}: {_first_line(e)}") from None
        value = check_finite(np.asarray(value, dtype=np.float32), gname,
                             f"TF checkpoint {prefix}")
        weights[name] = np.ascontiguousarray(value.T if transposed else value)
    check_weights(weights, config, source=f"TF checkpoint {prefix}")
    return config, weights


def write_google_checkpoint(path, config: BertConfig, weights, vocab_file=None, *,
                            overwrite: bool = False, lowercase: bool | None = None,
                            strip_accents: bool | None = None, task_head=None) -> str:
    """Writes canonical weights as an original Google (TF1) BERT checkpoint directory.

    The directory holds bert_config.json, bert_model.ckpt.{index,data-00000-of-00001} and,
    with `vocab_file`, vocab.txt; the pre-training heads are written when `weights` holds
    them. It is assembled next to `path` and renamed into place, so a reader never sees half a
    checkpoint. `save_google` calls it for a model.

    Args:
      path: the directory to write. An existing one is replaced when it is empty or holds
        only a Google checkpoint's files; one with other files only with `overwrite=True`.
      config: the weights' `BertConfig`.
      weights: canonical weights (`read_checkpoint`, `get_backbone_weights`).
      vocab_file: a vocab.txt to copy in.
      overwrite: replace a `path` holding other files.
      lowercase, strip_accents: written into bert_config.json as `do_lower_case` and
        `strip_accents`, which kbert reads back (Google's format otherwise keeps the casing
        only in the directory's name; its `BertConfig.from_dict` ignores them).
      task_head: a fine-tuned head, {Google variable name: array}
        (`kbert.convert.task_heads.google_task_head`).

    Returns:
      `path`, as an absolute path string.

    Examples:
        >>> import pathlib, tempfile
        >>> import kbert
        >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny"))
        >>> weights = kbert.convert.get_backbone_weights(backbone)
        >>> path = kbert.convert.write_google_checkpoint(pathlib.Path(tempfile.mkdtemp()) / "g",
        ...                                              backbone.config, weights, lowercase=True)
        >>> kbert.convert.read_config(path).num_layers
        2
    """
    check_weights(weights, config, source="weights to write")
    path = os.path.abspath(os.fspath(path))
    if vocab_file is not None and not os.path.isfile(vocab_file):
        raise CheckpointError(f"Vocabulary file {vocab_file} does not exist.")
    if vocab_file is not None:
        load_vocabulary(vocab_file)  # checked as a tokenizer reads it, before anything is written
    tf = _tf()
    owned = (CONFIG_FILE, VOCAB_FILE, "checkpoint", CHECKPOINT_NAME + ".*")
    with atomic_directory(path, owned_files=owned, overwrite=overwrite) as tmp:
        names, tensors = [], []
        for name in sorted(weights):
            gname, transposed = google_name(name)
            value = np.asarray(weights[name], dtype=np.float32)
            names.append(gname)
            tensors.append(tf.constant(np.ascontiguousarray(value.T if transposed else value)))
        for gname, value in (task_head or {}).items():
            names.append(gname)
            tensors.append(tf.constant(np.ascontiguousarray(value, dtype=np.float32)))
        with tf.device("/cpu:0"):
            tf.raw_ops.SaveV2(prefix=os.path.join(tmp, CHECKPOINT_NAME), tensor_names=names,
                              shape_and_slices=[""] * len(names), tensors=tensors)
        google_config = config.to_google_config()
        if lowercase is not None:
            google_config["do_lower_case"] = bool(lowercase)
        if strip_accents is not None:
            google_config["strip_accents"] = bool(strip_accents)
        with open(os.path.join(tmp, CONFIG_FILE), "w", encoding="utf-8") as f:
            json.dump(google_config, f, indent=2)
            f.write("\n")
        if vocab_file is not None:
            shutil.copyfile(vocab_file, os.path.join(tmp, VOCAB_FILE))
    return path


def google_head_kind(path) -> str | None:
    """The fine-tuning script (a key of `TASK_HEADS`) whose head the checkpoint at `path`
    holds, or None; a checkpoint that cannot be read is left for its reader to report."""
    try:
        names = set(_tf().train.load_checkpoint(_resolve(path)[1]).get_variable_to_shape_map())
    except Exception:  # CheckpointError or the reader's assorted errors
        return None
    return next((script for script, (weights, _) in TASK_HEADS.items() if weights in names),
                None)


def read_google_head(path, script) -> list[np.ndarray] | None:
    """[kernel, bias] in kbert's layout of the head that Google's fine-tuning `script` (a key
    of `TASK_HEADS`) left in the checkpoint at `path`; None where there is none."""
    names = TASK_HEADS[script]
    directory, prefix = _resolve(path)
    config = BertConfig.from_google_config(os.path.join(directory, CONFIG_FILE))
    try:
        reader = _tf().train.load_checkpoint(prefix)
        shapes = reader.get_variable_to_shape_map()
        if not all(name in shapes for name in names):
            return None
        weights, bias = (np.asarray(reader.get_tensor(name), np.float32) for name in names)
    except Exception as e:  # the reader maps TF errors to assorted Python types
        raise CheckpointError(f"Cannot read {' and '.join(names)} from TF checkpoint {prefix}: "
                              f"{_first_line(e)}") from None
    spans = script == "run_squad.py"
    rows = "2" if spans else "num_classes"
    outputs = 2 if spans else weights.shape[0] if weights.ndim == 2 else 0
    if outputs < 1 or weights.shape != (outputs, config.hidden_size) or bias.shape != (outputs,):
        raise CheckpointError(f"TF checkpoint {prefix}: {names[0]} is {list(weights.shape)} and "
                              f"{names[1]} {list(bias.shape)}; a {script} head is "
                              f"[{rows}, {config.hidden_size}] and [{rows}].")
    for name, value in zip(names, (weights, bias)):
        check_finite(value, name, f"TF checkpoint {prefix}")
    return [np.ascontiguousarray(weights.T), bias]
