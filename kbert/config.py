"""`BertConfig`: the sizes and numerics of one BERT model, its presets, and readers for the
configuration files of Hugging Face (`config.json`) and the original Google release
(`bert_config.json`)."""

import dataclasses
import json
import math
import numbers
import os

# Names that Hugging Face and Google write in `hidden_act`, mapped to kbert's two GELU forms.
# Google's own code only ever had the tanh approximation and called it "gelu"; Hugging Face
# calls the exact erf form "gelu" and the tanh form "gelu_new" (or "gelu_pytorch_tanh").
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
ACTIVATIONS = ("gelu", "gelu_tanh", "relu")


class ConfigError(ValueError):
    """A configuration value that cannot describe a BERT model."""


LIMITS = {
    "vocab_size": 2**20,
    "hidden_size": 2**14,
    "num_layers": 256,
    "num_heads": 2**10,
    "intermediate_size": 2**16,
    "max_position_embeddings": 2**16,
    "type_vocab_size": 2**10,
}
"""Upper bounds of the integer sizes. Every released BERT fits with room to spare (BERT-large:
1,024 hidden, 24 layers; Megatron-BERT 3.9B: 2,560 hidden, 48 layers; multilingual vocabularies
~250k; long-context encoders 8,192 positions); a size past them is a typo or a hostile file,
refused before any weight is allocated."""
MAX_PARAMETERS = 20_000_000_000
"""At most 20 billion encoder weights (80 GB of float32): five times the largest BERT-shaped
encoder published, and the bound the per-size limits alone do not give (256 layers at hidden
16,384 would be ~800 billion)."""
_INTS = tuple(LIMITS)
_RATES = ("hidden_dropout", "attention_dropout")
_POSITIVE = ("initializer_range", "layer_norm_eps")


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _field_problem(name, value):
    """What is wrong with one field's value (None when nothing is)."""
    if name in LIMITS:
        if not _is_int(value) or not 1 <= value <= LIMITS[name]:
            return f"must be a positive integer of at most {LIMITS[name]:,}"
    elif name in _RATES:
        if not _is_real(value) or not 0.0 <= value < 1.0:
            return "must be a number in [0, 1)"
    elif name in _POSITIVE:
        if not _is_real(value) or not 0.0 < value < math.inf:
            return "must be a finite positive number"
        if name == "layer_norm_eps" and value >= 1.0:
            return "must be below 1 (BERT's is 1e-12)"
    elif name == "hidden_act":
        if not isinstance(value, str) or value not in ACTIVATIONS:
            return f"must be one of {', '.join(ACTIVATIONS)}"
    return None


def parameter_count(values) -> int:
    """The number of encoder weights (embeddings, layers, pooler; no pre-training heads) of
    a config or a dict of its fields, computed without building anything."""
    get = values.get if isinstance(values, dict) else lambda k: getattr(values, k)
    h, i = get("hidden_size"), get("intermediate_size")
    embeddings = (get("vocab_size") + get("max_position_embeddings")
                  + get("type_vocab_size")) * h + 2 * h
    layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
    return embeddings + get("num_layers") * layer + h * h + h


def check_fields(values: dict, names: dict | None = None, source: str | None = None) -> None:
    """Raises `ConfigError` for the first field of `values` (BertConfig field → value) that
    cannot describe a BERT model: wrong type (a bool is not an int), out of `LIMITS`, NaN or
    infinite, or a model of more than `MAX_PARAMETERS` weights. `names` maps fields to the
    keys the file spells them with, `source` names the file; the message says the key, the
    value and what is allowed."""
    names = names or {}
    prefix = f"{source}: " if source else ""
    for name, value in values.items():
        problem = _field_problem(name, value)
        if problem:
            raise ConfigError(f"{prefix}{names.get(name, name)} {problem}, got {value!r}.")
    if values["hidden_size"] % values["num_heads"]:
        raise ConfigError(
            f"{prefix}{names.get('hidden_size', 'hidden_size')} ({values['hidden_size']}) must "
            f"be divisible by {names.get('num_heads', 'num_heads')} ({values['num_heads']}).")
    count = parameter_count(values)
    if count > MAX_PARAMETERS:
        raise ConfigError(f"{prefix}these sizes make a model of {count:,} weights, more than "
                          f"the {MAX_PARAMETERS:,} kbert accepts (kbert.config.MAX_PARAMETERS).")


@dataclasses.dataclass(frozen=True)
class BertConfig:
    """Sizes and numerics of a BERT encoder.

    `hidden_act` is "gelu" (exact, erf), "gelu_tanh" (the tanh approximation of Google's code)
    or "relu". Sizes are bounded by `LIMITS` and `MAX_PARAMETERS`. Presets follow the paper and
    Google's small-model family:

    >>> BertConfig.preset("base").num_layers
    12
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
        for name in _INTS:  # numpy integers become plain ints (JSON, get_config)
            object.__setattr__(self, name, int(getattr(self, name)))
        for name in _RATES + _POSITIVE:
            object.__setattr__(self, name, float(getattr(self, name)))

    def check_sequence_length(self, sequence_length, name="sequence_length") -> None:
        """Raises `ConfigError` unless `sequence_length` fits this model's positions (the
        embedding table has `max_position_embeddings` rows; a longer input has no position)."""
        if not _is_int(sequence_length) or sequence_length < 1:
            raise ConfigError(f"{name} must be a positive integer, got {sequence_length!r}.")
        if sequence_length > self.max_position_embeddings:
            raise ConfigError(f"{name} {sequence_length} is longer than the model's "
                              f"{self.max_position_embeddings} positions "
                              "(max_position_embeddings).")

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_heads

    @classmethod
    def preset(cls, name: str, **overrides) -> "BertConfig":
        """The config of a size preset (`PRESETS`). Pretrained checkpoints and every other name
        kbert builds from are in the one registry, `kbert.presets`."""
        if name not in PRESETS:
            raise ConfigError(f"Unknown size preset {name!r}; choose one of: "
                              f"{', '.join(PRESETS)} (checkpoints and weights presets: "
                              f"kbert.presets.load_backbone_and_tokenizer).")
        return dataclasses.replace(PRESETS[name], **overrides)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "BertConfig":
        unknown = set(values) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ConfigError(f"Unknown BertConfig fields: {sorted(unknown)}.")
        return cls(**values)

    @classmethod
    def from_hf_config(cls, path_or_dict) -> "BertConfig":
        """Reads a Hugging Face BERT `config.json` (a path, a directory holding it, or a dict)."""
        values, source = _read_json(path_or_dict, "config.json")
        if values.get("model_type", "bert") != "bert":
            raise ConfigError(f"{source}: not a BERT config: model_type is "
                              f"{values['model_type']!r}.")
        if values.get("position_embedding_type", "absolute") != "absolute":
            raise ConfigError(f"{source}: only absolute position embeddings are BERT's; got "
                              f"{values['position_embedding_type']!r}.")
        return cls._from_common(values, _HF_ACTIVATIONS, source)

    @classmethod
    def from_google_config(cls, path_or_dict) -> "BertConfig":
        """Reads an original Google `bert_config.json` (a path, its directory, or a dict)."""
        values, source = _read_json(path_or_dict, "bert_config.json")
        return cls._from_common(values, _GOOGLE_ACTIVATIONS, source)

    @classmethod
    def _from_common(cls, values: dict, activations: dict, source: str) -> "BertConfig":
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
        """The Hugging Face `config.json` contents for this model."""
        return {
            "architectures": ["BertModel"],
            "model_type": "bert",
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads,
            "intermediate_size": self.intermediate_size,
            "hidden_act": {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu"}[self.hidden_act],
            "hidden_dropout_prob": self.hidden_dropout,
            "attention_probs_dropout_prob": self.attention_dropout,
            "max_position_embeddings": self.max_position_embeddings,
            "type_vocab_size": self.type_vocab_size,
            "initializer_range": self.initializer_range,
            "layer_norm_eps": self.layer_norm_eps,
            "pad_token_id": 0,
            "position_embedding_type": "absolute",
        }

    def to_google_config(self) -> dict:
        """The original release's `bert_config.json`. Its "gelu" is the tanh form; an exact-GELU
        model is written as "gelu_exact" so that no reader computes the wrong function."""
        return {
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads,
            "intermediate_size": self.intermediate_size,
            "hidden_act": {"gelu_tanh": "gelu", "gelu": "gelu_exact", "relu": "relu"}[self.hidden_act],
            "hidden_dropout_prob": self.hidden_dropout,
            "attention_probs_dropout_prob": self.attention_dropout,
            "max_position_embeddings": self.max_position_embeddings,
            "type_vocab_size": self.type_vocab_size,
            "initializer_range": self.initializer_range,
        }


_KERAS_HUB_KEYS = {"vocab_size": "vocabulary_size", "hidden_size": "hidden_dim",
                   "num_layers": "num_layers", "num_heads": "num_heads",
                   "intermediate_size": "intermediate_dim", "hidden_dropout": "dropout",
                   "max_position_embeddings": "max_sequence_length",
                   "type_vocab_size": "num_segments"}


def check_keras_hub_config(values, source: str) -> None:
    """Raises `ConfigError` unless `values` (the "config" of a keras-hub BertBackbone preset's
    config.json) has sizes `BertConfig` accepts: the same bounds, checked before keras-hub
    builds (and allocates) anything."""
    if not isinstance(values, dict):
        raise ConfigError(f"{source}: 'config' must be a JSON object, got {values!r}.")
    defaults = {"dropout": 0.1, "max_sequence_length": 512, "num_segments": 2}  # keras-hub's
    missing = sorted(k for k in _KERAS_HUB_KEYS.values()
                     if k not in values and k not in defaults)
    if missing:
        raise ConfigError(f"{source} lacks {missing}.")
    fields = {field: values.get(key, defaults.get(key))
              for field, key in _KERAS_HUB_KEYS.items()}
    check_fields({**fields, "attention_dropout": fields["hidden_dropout"]},
                 names={**_KERAS_HUB_KEYS, "attention_dropout": "dropout"}, source=source)


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


# Google's paper sizes (BASE, LARGE) and its family of small models (Turc et al., 2019), whose
# heads are hidden/64; all use the uncased 30,522-token WordPiece vocabulary.
PRESETS = {
    "tiny": _sized(2, 128, 2),
    "mini": _sized(4, 256, 4),
    "small": _sized(4, 512, 8),
    "medium": _sized(8, 512, 8),
    "base": _sized(12, 768, 12),
    "large": _sized(24, 1024, 16),
}
