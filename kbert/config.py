"""`BertConfig`: the sizes and numerics of one BERT model, its presets, and readers for the
configuration files of Hugging Face (`config.json`) and the original Google release
(`bert_config.json`)."""

import dataclasses
import json
import os
from typing import Self

from kbert.config_checks import (  # noqa: F401  (part of kbert.config's API)
    ACTIVATIONS, INT_FIELDS, LIMITS, MAX_PARAMETERS, POSITIVE_FIELDS, RATE_FIELDS, ConfigError,
    check_fields, check_keras_hub_config, is_int, parameter_count, pop_rates)

INPUT_KEYS = ("token_ids", "segment_ids", "padding_mask")
"""The names of the backbone's inputs, and of every preprocessor's packed outputs."""

# Names that Hugging Face and Google write in `hidden_act`, mapped to kbert's two GELU forms.
# Google's own code only ever had the tanh approximation and called it "gelu"; Hugging Face
# calls the exact erf form "gelu" and the tanh form "gelu_new" (or "gelu_pytorch_tanh"). The
# first name of each form is the one kbert writes.
_HF_ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_tanh": "gelu_tanh",
    "relu": "relu",
}
# "gelu_exact" is kbert's own addition to bert_config.json: Google's modeling.py rejects the
# unknown name instead of silently computing the tanh form for an exact-GELU model.
_GOOGLE_ACTIVATIONS = {"gelu": "gelu_tanh", "gelu_exact": "gelu", "relu": "relu"}


@dataclasses.dataclass(frozen=True)
class BertConfig:
    """The sizes and numerics of a BERT encoder: what a `BertBackbone` is built from.

    A frozen dataclass whose fields are checked when it is made: a value that cannot describe a
    BERT model raises `ConfigError` (sizes are bounded by `LIMITS`, the whole model by
    `MAX_PARAMETERS`). `BertConfig.preset` gives the paper's sizes and Google's small models;
    `dataclasses.replace(config, ...)` makes a changed copy.

    Args:
        vocab_size: int. The number of WordPiece ids (rows of the token embedding).
        hidden_size: int. The width of every hidden state; divisible by `num_heads`.
        num_layers: int. The number of Transformer blocks.
        num_heads: int. The attention heads of each block.
        intermediate_size: int. The width of each block's feed-forward layer.
        hidden_act: str. The feed-forward activation: "gelu" (exact, erf), "gelu_tanh" (the
            tanh approximation of Google's code) or "relu".
        hidden_dropout: float in [0, 1). The dropout rate of the embeddings and of each
            block's sublayer outputs.
        attention_dropout: float in [0, 1). The dropout rate of the attention probabilities.
        max_position_embeddings: int. The longest sequence the model has positions for.
        type_vocab_size: int. The number of segment ids (2: sentences A and B).
        initializer_range: float. The standard deviation of new weights' truncated normal.
        layer_norm_eps: float. The epsilon of every layer normalization.

    Examples:
        >>> import kbert
        >>> config = kbert.BertConfig.preset("tiny")
        >>> config.num_layers, config.hidden_size, config.num_heads, config.head_size
        (2, 128, 2, 64)
        >>> config = kbert.BertConfig(num_layers=6, hidden_size=384, num_heads=12,
        ...                           intermediate_size=1536)
        >>> config.head_size, config.vocab_size, config.hidden_act
        (32, 30522, 'gelu')
        >>> kbert.BertConfig(hidden_size=100, num_heads=12)
        Traceback (most recent call last):
        ...
        kbert.config_checks.ConfigError: hidden_size (100) must be divisible by num_heads (12).
    """

    vocab_size: int = 30522
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout: float = 0.1
    attention_dropout: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12

    def __post_init__(self):
        check_fields(dataclasses.asdict(self))
        for name in INT_FIELDS:  # numpy integers become plain ints (JSON, get_config)
            object.__setattr__(self, name, int(getattr(self, name)))
        for name in RATE_FIELDS + POSITIVE_FIELDS:
            object.__setattr__(self, name, float(getattr(self, name)))

    def check_sequence_length(self, sequence_length, name="sequence_length") -> None:
        """Raises `ConfigError` unless `sequence_length` fits this model's positions.

        The position embedding has `max_position_embeddings` rows: a longer input has no
        position to embed.

        Args:
            sequence_length: the packed length to check, a positive integer.
            name: what the error message calls the length.

        Examples:
            >>> import kbert
            >>> config = kbert.BertConfig.preset("tiny")
            >>> config.check_sequence_length(512)
            >>> config.check_sequence_length(1024)  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            kbert.config_checks.ConfigError: sequence_length 1024 is longer than the model's 512 ...
        """
        if not is_int(sequence_length) or sequence_length < 1:
            raise ConfigError(f"{name} must be a positive integer, got {sequence_length!r}.")
        if sequence_length > self.max_position_embeddings:
            raise ConfigError(f"{name} {sequence_length} is longer than the model's "
                              f"{self.max_position_embeddings} positions "
                              "(max_position_embeddings).")

    @property
    def head_size(self) -> int:
        """The width of one attention head, `hidden_size // num_heads`."""
        return self.hidden_size // self.num_heads

    @classmethod
    def preset(cls, name: str, **overrides) -> Self:
        """The config of a size preset, for a model with random weights.

        The presets (`PRESETS`) are the paper's "base" and "large" and Google's small models
        "tiny", "mini", "small" and "medium", all on the uncased 30,522-token vocabulary.
        Pretrained checkpoints and every other name kbert builds from are in one registry,
        `kbert.presets` (`BertBackbone.from_pretrained` reads them).

        Args:
            name: the size preset's name.
            **overrides: fields to change, e.g. `hidden_dropout=0.0`.

        Returns:
            A `BertConfig`. An unknown name raises `ConfigError`.

        Examples:
            >>> import kbert
            >>> kbert.BertConfig.preset("base").num_layers
            12
            >>> config = kbert.BertConfig.preset("mini", hidden_dropout=0.0)
            >>> config.num_layers, config.hidden_size, config.hidden_dropout
            (4, 256, 0.0)
        """
        if name not in PRESETS:
            raise ConfigError(f"Unknown size preset {name!r}; choose one of: "
                              f"{', '.join(PRESETS)} (checkpoints and weights presets: "
                              f"kbert.models.pretrained.load_backbone_and_tokenizer).")
        return dataclasses.replace(PRESETS[name], **overrides)

    def with_rates_from(self, kwargs: dict) -> Self:
        """This config with the dropout rates that `kwargs` holds, taken out of it.

        Args:
            kwargs: a dict of keyword arguments; its `hidden_dropout` and `attention_dropout`
                are removed.

        Returns:
            A `BertConfig` (this one when `kwargs` holds no rate).

        Examples:
            >>> import kbert
            >>> kwargs = {"hidden_dropout": 0.0, "num_classes": 2}
            >>> kbert.BertConfig.preset("tiny").with_rates_from(kwargs).hidden_dropout
            0.0
            >>> kwargs
            {'num_classes': 2}
        """
        rates = pop_rates(kwargs)
        return dataclasses.replace(self, **rates) if rates else self

    def to_dict(self) -> dict:
        """The fields as a dict (JSON-ready; `from_dict` reads it back).

        Examples:
            >>> import kbert
            >>> kbert.BertConfig.preset("tiny").to_dict()["num_heads"]
            2
        """
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> Self:
        """A config from `to_dict`'s dict; missing fields take their defaults.

        Args:
            values: field name → value. An unknown field raises `ConfigError`.

        Returns:
            A `BertConfig`.

        Examples:
            >>> import kbert
            >>> config = kbert.BertConfig.preset("tiny")
            >>> kbert.BertConfig.from_dict(config.to_dict()) == config
            True
        """
        unknown = set(values) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ConfigError(f"Unknown BertConfig fields: {sorted(unknown)}.")
        return cls(**values)

    @classmethod
    def from_hf_config(cls, path_or_dict) -> Self:
        """A config from a Hugging Face BERT `config.json`.

        Hugging Face's "gelu" is the exact GELU; its "gelu_new" and "gelu_pytorch_tanh" are
        the tanh form ("gelu_tanh" here). Keys other than the sizes and numerics (labels,
        `architectures`) are ignored; only `model_type` "bert" with absolute positions is read.

        Args:
            path_or_dict: the file's path, a directory holding `config.json`, or its contents
                as a dict.

        Returns:
            A `BertConfig`. A missing or invalid file, or a value that cannot describe a BERT
            model, raises `ConfigError`.

        Examples:
            >>> import kbert
            >>> config = kbert.BertConfig.from_hf_config({
            ...     "model_type": "bert", "vocab_size": 30522, "hidden_size": 384,
            ...     "num_hidden_layers": 6, "num_attention_heads": 12, "intermediate_size": 1536,
            ...     "hidden_act": "gelu_new"})
            >>> config.num_layers, config.num_heads, config.hidden_act
            (6, 12, 'gelu_tanh')
        """
        values, source = _read_json(path_or_dict, "config.json")
        if values.get("model_type", "bert") != "bert":
            raise ConfigError(f"{source}: not a BERT config: model_type is "
                              f"{values['model_type']!r}.")
        if values.get("position_embedding_type", "absolute") != "absolute":
            raise ConfigError(f"{source}: only absolute position embeddings are BERT's; got "
                              f"{values['position_embedding_type']!r}.")
        return cls._from_common(values, _HF_ACTIVATIONS, source)

    @classmethod
    def from_google_config(cls, path_or_dict) -> Self:
        """A config from the original Google release's `bert_config.json`.

        Google's "gelu" is the tanh approximation ("gelu_tanh" here); "gelu_exact" (which
        `to_google_config` writes) is the exact form.

        Args:
            path_or_dict: the file's path, a directory holding `bert_config.json`, or its
                contents as a dict.

        Returns:
            A `BertConfig`. A missing or invalid file, or a value that cannot describe a BERT
            model, raises `ConfigError`.

        Examples:
            >>> import kbert
            >>> config = kbert.BertConfig.from_google_config({
            ...     "vocab_size": 30522, "hidden_size": 128, "num_hidden_layers": 2,
            ...     "num_attention_heads": 2, "intermediate_size": 512, "hidden_act": "gelu"})
            >>> config == kbert.BertConfig.preset("tiny", hidden_act="gelu_tanh")
            True
        """
        values, source = _read_json(path_or_dict, "bert_config.json")
        return cls._from_common(values, _GOOGLE_ACTIVATIONS, source)

    @classmethod
    def _from_common(cls, values: dict, activations: dict, source: str) -> Self:
        """The fields from a file's keys, each checked (and named as the file names it)."""
        missing = [k for k in _REQUIRED_KEYS if k not in values]
        if missing:
            raise ConfigError(f"{source} lacks {missing}.")
        act = values.get("hidden_act", "gelu")
        if not isinstance(act, str) or act not in activations:
            raise ConfigError(f"{source}: hidden_act must be one of {sorted(activations)}, "
                              f"got {act!r}.")
        fields = {field: values.get(key, _FILE_DEFAULTS.get(key))
                  for field, key in _FILE_KEYS.items()}
        fields["hidden_act"] = activations[act]
        check_fields(fields, names=_FILE_KEYS, source=source)
        return cls(**fields)

    def to_hf_config(self) -> dict:
        """The Hugging Face `config.json` contents for this model (a `BertModel`).

        Returns:
            A JSON-ready dict; `from_hf_config` reads it back.

        Examples:
            >>> import kbert
            >>> hf = kbert.BertConfig.preset("tiny").to_hf_config()
            >>> hf["num_hidden_layers"], hf["hidden_act"]
            (2, 'gelu')
            >>> kbert.BertConfig.from_hf_config(hf) == kbert.BertConfig.preset("tiny")
            True
        """
        return {"architectures": ["BertModel"], "model_type": "bert",
                **self._file_values(_HF_ACTIVATIONS), "pad_token_id": 0,
                "position_embedding_type": "absolute"}

    def to_google_config(self) -> dict:
        """The original Google release's `bert_config.json` contents for this model.

        Its "gelu" is the tanh form; an exact-GELU model is written as "gelu_exact", so that no
        reader computes the wrong function. The file has no `layer_norm_eps` (Google's is
        1e-12).

        Returns:
            A JSON-ready dict; `from_google_config` reads it back.

        Examples:
            >>> import kbert
            >>> kbert.BertConfig.preset("tiny").to_google_config()["hidden_act"]
            'gelu_exact'
        """
        values = self._file_values(_GOOGLE_ACTIVATIONS)
        del values["layer_norm_eps"]
        return values

    def _file_values(self, activations: dict) -> dict:
        """The fields under the keys both files use, `hidden_act` by its first name in
        `activations`."""
        values = {key: getattr(self, field) for field, key in _FILE_KEYS.items()}
        values["hidden_act"] = next(name for name, ours in activations.items()
                                    if ours == self.hidden_act)
        return values


def _read_json(path_or_dict, filename: str) -> tuple[dict, str]:
    """(the JSON object, a name for messages) of a dict, a file or a directory holding
    `filename`. Refused with `ConfigError`: a missing, unreadable, oversized or invalid file,
    one nested too deep for Python's parser, and JSON that is not an object."""
    if isinstance(path_or_dict, dict):
        return path_or_dict, filename
    path = os.fspath(path_or_dict)
    if os.path.isdir(path):
        path = os.path.join(path, filename)
    try:
        if os.path.getsize(path) > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path} is {os.path.getsize(path):,} bytes; a config file is "
                              f"at most {MAX_CONFIG_BYTES:,}.")
        with open(path, encoding="utf-8") as f:
            values = json.load(f)
    except FileNotFoundError:
        raise ConfigError(f"No config file at {path}.") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"Cannot read {path}: {e}.") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path} is not valid JSON: {e}.") from None
    except RecursionError:
        raise ConfigError(f"{path} is nested too deeply to be a config file.") from None
    if not isinstance(values, dict):
        raise ConfigError(f"{path} does not hold a JSON object.")
    return values, path


MAX_CONFIG_BYTES = 16 * 2**20
"""A config.json is a few hundred bytes (a few MB with a huge label map); past this it is not
one, and is not read into memory."""
_FILE_KEYS = {  # BertConfig field → the key Hugging Face and Google write
    "vocab_size": "vocab_size", "hidden_size": "hidden_size",
    "num_layers": "num_hidden_layers", "num_heads": "num_attention_heads",
    "intermediate_size": "intermediate_size", "hidden_act": "hidden_act",
    "hidden_dropout": "hidden_dropout_prob",
    "attention_dropout": "attention_probs_dropout_prob",
    "max_position_embeddings": "max_position_embeddings", "type_vocab_size": "type_vocab_size",
    "initializer_range": "initializer_range", "layer_norm_eps": "layer_norm_eps",
}
_REQUIRED_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                  "intermediate_size")
_FILE_DEFAULTS = {"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
                  "max_position_embeddings": 512, "type_vocab_size": 2,
                  "initializer_range": 0.02, "layer_norm_eps": 1e-12}


def _sized(layers, hidden, heads):
    return BertConfig(num_layers=layers, hidden_size=hidden, num_heads=heads,
                      intermediate_size=4 * hidden)


# Google's paper sizes (BASE, LARGE) and its family of small models (Turc et al.,
# https://arxiv.org/abs/1908.08962), whose heads are hidden/64; all use the uncased
# 30,522-token WordPiece vocabulary.
PRESETS = {
    "tiny": _sized(2, 128, 2),
    "mini": _sized(4, 256, 4),
    "small": _sized(4, 512, 8),
    "medium": _sized(8, 512, 8),
    "base": _sized(12, 768, 12),
    "large": _sized(24, 1024, 16),
}
