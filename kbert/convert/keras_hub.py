"""Conversion between keras-hub's `BertBackbone` and kbert's canonical weights.

keras-hub's BERT differs from a general BERT config in a few fixed ways, which the conversion
makes explicit:
- its feed-forward activation is always the tanh approximation of GELU, so a backbone read from
  keras-hub has `hidden_act="gelu_tanh"`, and its LayerNorm epsilon is always 1e-12;
- it has one `dropout` rate, used for both the hidden and the attention dropout;
- a keras-hub preset holds only the backbone: the masked-LM and next-sentence heads of BERT
  pre-training are not part of it. `from_keras_hub` therefore returns no head weights, and
  `to_keras_hub` leaves out any head weights it is given. A fine-tuned classifier's head goes
  out as keras-hub's `BertTextClassifier` (`kbert.convert.keras_hub_classifier`), the one BERT
  task keras-hub has;
- its WordPiece tokenizer's `strip_accents` defaults to False, where Google's uncased BERT
  strips accents: a preset written here states it (by default, as `lowercase`).

Attention projections are `EinsumDense` layers whose kernels keep the heads as their own axis:
query/key/value kernels are [H, heads, head_size] with [heads, head_size] biases, and the output
projection is [heads, head_size, H].
"""

import json
import os
import warnings

import numpy as np

from kbert.config import BertConfig, ConfigError, check_keras_hub_config
from kbert.convert.keras_hub_classifier import ClassifierHead, text_classifier
from kbert.convert.weights import CheckpointError, check_weights, expected_shapes

PRESET_CONFIG = "config.json"
PRESET_WEIGHTS = "model.weights.h5"
KERAS_HUB_LAYER_NORM_EPS = 1e-12


def _variables(backbone) -> list[tuple[str, object, bool]]:
    """(canonical name, keras variable, transposed) for every weight of a keras-hub backbone.

    "transposed" means the Keras kernel, flattened to 2-D, is [in, out] where the canonical
    array is [out, in]; reshaping between the head-split and flat forms keeps the element order.
    """
    layer = backbone.get_layer
    table = [
        ("embeddings.word_embeddings.weight", layer("token_embedding").embeddings, False),
        ("embeddings.position_embeddings.weight",
         layer("position_embedding").position_embeddings, False),
        ("embeddings.token_type_embeddings.weight", layer("segment_embedding").embeddings, False),
        ("embeddings.LayerNorm.weight", layer("embeddings_layer_norm").gamma, False),
        ("embeddings.LayerNorm.bias", layer("embeddings_layer_norm").beta, False),
    ]

    def dense(name, keras_layer):
        table.append((f"{name}.weight", keras_layer.kernel, True))
        table.append((f"{name}.bias", keras_layer.bias, False))

    def norm(name, keras_layer):
        table.append((f"{name}.weight", keras_layer.gamma, False))
        table.append((f"{name}.bias", keras_layer.beta, False))

    for i in range(backbone.num_layers):
        block = layer(f"transformer_layer_{i}")
        attention = block._self_attention_layer
        p = f"encoder.layer.{i}."
        dense(p + "attention.self.query", attention.query_dense)
        dense(p + "attention.self.key", attention.key_dense)
        dense(p + "attention.self.value", attention.value_dense)
        dense(p + "attention.output.dense", attention.output_dense)
        norm(p + "attention.output.LayerNorm", block._self_attention_layer_norm)
        dense(p + "intermediate.dense", block._feedforward_intermediate_dense)
        dense(p + "output.dense", block._feedforward_output_dense)
        norm(p + "output.LayerNorm", block._feedforward_layer_norm)
    dense("pooler.dense", layer("pooled_dense"))
    return table


def _config_of(backbone) -> BertConfig:
    return BertConfig(
        vocab_size=backbone.vocabulary_size,
        hidden_size=backbone.hidden_dim,
        num_layers=backbone.num_layers,
        num_heads=backbone.num_heads,
        intermediate_size=backbone.intermediate_dim,
        hidden_act="gelu_tanh",
        hidden_dropout=backbone.dropout,
        attention_dropout=backbone.dropout,
        max_position_embeddings=backbone.max_sequence_length,
        type_vocab_size=backbone.num_segments,
        layer_norm_eps=float(backbone.get_layer("embeddings_layer_norm").epsilon),
    )


def read_preset_config(directory) -> BertConfig:
    """The `BertConfig` of a keras-hub preset directory from its config.json alone (no model
    is built): what `from_keras_hub` gives for it, read as cheaply as a Hugging Face config."""
    fields = _preset_fields(os.fspath(directory))
    return BertConfig(**fields, hidden_act="gelu_tanh", layer_norm_eps=KERAS_HUB_LAYER_NORM_EPS)


def _preset_fields(directory: str) -> dict:
    """The checked `BertConfig` fields of a preset directory that holds both of its files."""
    config_path = os.path.join(directory, PRESET_CONFIG)
    weights_path = os.path.join(directory, PRESET_WEIGHTS)
    if not os.path.isdir(directory):
        raise CheckpointError(f"No keras-hub preset directory at {directory}.")
    for path in (config_path, weights_path):
        if not os.path.isfile(path):
            raise CheckpointError(f"keras-hub preset {directory}: {path} is missing.")
    try:
        with open(config_path, encoding="utf-8") as f:
            preset = json.load(f)
        class_name = preset.get("class_name")
    except (OSError, ValueError, AttributeError, RecursionError) as e:
        raise CheckpointError(f"keras-hub preset {directory}: cannot read {config_path}: "
                              f"{type(e).__name__}: {e}") from None
    if class_name != "BertBackbone":
        raise CheckpointError(f"keras-hub preset {directory}: {config_path} describes "
                              f"{class_name!r}, not a BertBackbone.")
    return check_keras_hub_config(preset.get("config"), config_path)


def _load_preset(directory: str):
    import keras_hub

    _preset_fields(directory)  # sizes checked before keras-hub builds (and allocates) the model
    weights_path = os.path.join(directory, PRESET_WEIGHTS)
    try:
        return keras_hub.models.BertBackbone.from_preset(directory)
    except Exception as e:  # h5py, Keras and keras-hub raise many kinds
        raise CheckpointError(f"keras-hub preset {directory}: cannot load {weights_path}: "
                              f"{type(e).__name__}: {e}") from None


def from_keras_hub(backbone_or_preset_dir) -> tuple[BertConfig, dict[str, np.ndarray]]:
    """Config and canonical float32 weights of a keras-hub BERT.

    Accepts a `keras_hub.models.BertBackbone`, a keras-hub task holding one as `.backbone`
    (e.g. `BertTextClassifier`), or a local preset directory written by `save_to_preset`
    (`config.json` + `model.weights.h5`). Head weights are never returned: keras-hub's backbone
    has none (see the module docstring).
    """
    import keras_hub

    obj = backbone_or_preset_dir
    if isinstance(obj, (str, os.PathLike)):
        backbone = _load_preset(os.fspath(obj))
    else:
        backbone = getattr(obj, "backbone", obj)
        if not isinstance(backbone, keras_hub.models.BertBackbone):
            raise TypeError("from_keras_hub needs a keras_hub.models.BertBackbone, a task "
                            f"holding one, or a preset directory; got {type(obj).__name__}.")
    config = _config_of(backbone)
    shapes = expected_shapes(config)
    weights = {}
    for name, variable, transposed in _variables(backbone):
        value = np.asarray(variable.numpy(), dtype=np.float32)
        shape = shapes[name]
        if transposed:
            value = value.reshape(shape[::-1]).T
        weights[name] = np.ascontiguousarray(value.reshape(shape))
    check_weights(weights, config, heads=False, source="keras-hub backbone")
    return config, weights


def to_keras_hub(config: BertConfig, weights, *, allow_approximation: bool = False,
                 dtype=None):
    """A `keras_hub.models.BertBackbone` holding canonical `weights` of `config`.

    keras-hub always computes tanh-GELU with LayerNorm epsilon 1e-12. A config with another
    activation or epsilon raises `ConfigError`, unless `allow_approximation=True`, which warns
    and builds the backbone anyway (its outputs then differ slightly from the original model's).
    Pre-training head weights in `weights` are checked and then left out. The single keras-hub
    dropout rate is `config.hidden_dropout`.
    """
    import keras_hub

    check_weights(weights, config, source="weights for keras-hub")
    differences = []
    if config.hidden_act != "gelu_tanh":
        differences.append(f"hidden_act {config.hidden_act!r} (keras-hub: 'gelu_tanh')")
    if config.layer_norm_eps != KERAS_HUB_LAYER_NORM_EPS:
        differences.append(f"layer_norm_eps {config.layer_norm_eps} (keras-hub: "
                           f"{KERAS_HUB_LAYER_NORM_EPS})")
    if differences:
        message = ("keras-hub's BertBackbone cannot compute this model exactly: "
                   + "; ".join(differences) + ".")
        if not allow_approximation:
            raise ConfigError(message + " Pass allow_approximation=True "
                              "to convert anyway.")
        warnings.warn(message, stacklevel=2)

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size,
        num_layers=config.num_layers,
        num_heads=config.num_heads,
        hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size,
        dropout=config.hidden_dropout,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size,
        dtype=dtype,
    )
    for name, variable, transposed in _variables(backbone):
        value = np.asarray(weights[name], dtype=np.float32)
        if transposed:
            value = value.T
        variable.assign(value.reshape(tuple(variable.shape)))
    return backbone


PRESET_FILES = (PRESET_CONFIG, PRESET_WEIGHTS, "metadata.json", "tokenizer.json",
                "preprocessor.json", "task.json", "task.weights.h5", "assets")
"""What keras-hub's `save_to_preset` writes: a directory holding only these is a previous
preset, which a new one may replace without `overwrite`."""


def write_keras_hub_preset(dest, config: BertConfig, weights, *, vocabulary=None,
                           lowercase=True, strip_accents=None,
                           classifier: ClassifierHead | None = None,
                           sequence_length=None, allow_approximation=False, overwrite=False):
    """Writes canonical `weights` of `config` as a keras-hub preset directory `dest`; returns it.

    With `vocabulary` (a token list or a vocab.txt path, `config.vocab_size` tokens) the preset
    also holds keras-hub's tokenizer (tokenizer.json + assets/tokenizer/vocabulary.txt), so that
    `keras_hub.models.BertTextClassifier.from_preset(dest)` and `BertTokenizer.from_preset` load
    it whole. With a `classifier` head it is a `BertTextClassifier` preset (task.json,
    task.weights.h5; with a vocabulary also its preprocessor at `sequence_length`), which
    `keras_hub.models.TextClassifier.from_preset(dest)` loads fine-tuned. The conversion runs
    first (`to_keras_hub`: a refused one raises before anything on disk changes), then the
    preset is assembled beside `dest` and renamed into place once complete
    (`kbert.atomic.atomic_directory`). An existing `dest` is replaced when it holds only a
    previous preset's files; one with other files only with `overwrite=True`.
    """
    from kbert.atomic import atomic_directory

    backbone = to_keras_hub(config, weights, allow_approximation=allow_approximation)
    tokenizer = None if vocabulary is None else _tokenizer(
        vocabulary, lowercase, lowercase if strip_accents is None else strip_accents, config)
    task = None
    if classifier is not None:
        task = text_classifier(backbone, classifier, tokenizer, sequence_length)
    with atomic_directory(dest, owned_files=PRESET_FILES, overwrite=overwrite) as staging:
        if task is not None:
            task.save_to_preset(str(staging))  # backbone, preprocessor and tokenizer with it
        else:
            backbone.save_to_preset(str(staging))
            if tokenizer is not None:
                tokenizer.save_to_preset(str(staging))
    return dest


def _tokenizer(vocabulary, lowercase, strip_accents, config):
    """keras-hub's `BertTokenizer` on a vocabulary checked as kbert checks its own, with
    `strip_accents` stated (keras-hub's default keeps accents, which for Google's uncased
    vocabularies turns "Café" into [UNK])."""
    import keras_hub

    from kbert.text.tokenizer_files import load_vocabulary

    tokens = load_vocabulary(vocabulary)
    if len(tokens) != config.vocab_size:
        raise ConfigError(f"the vocabulary has {len(tokens)} tokens but the model's "
                          f"vocab_size is {config.vocab_size}.")
    return keras_hub.models.BertTokenizer(vocabulary=tokens, lowercase=lowercase,
                                          strip_accents=strip_accents)
