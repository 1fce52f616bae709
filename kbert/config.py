"""`BertConfig`: the sizes and numerics of one BERT model, its presets, and readers for the
configuration files of Hugging Face (`config.json`) and the original Google release
(`bert_config.json`)."""

import dataclasses
import json
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


@dataclasses.dataclass(frozen=True)
class BertConfig:
    """Sizes and numerics of a BERT encoder.

    `hidden_act` is "gelu" (exact, erf), "gelu_tanh" (the tanh approximation of Google's code)
    or "relu". Presets follow the paper and Google's small-model family:

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
        for name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size",
                     "max_position_embeddings", "type_vocab_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}.")
        if self.hidden_size % self.num_heads:
            raise ConfigError(
                f"hidden_size ({self.hidden_size}) must be divisible by num_heads "
                f"({self.num_heads}).")
        if self.hidden_act not in ACTIVATIONS:
            raise ConfigError(
                f"hidden_act must be one of {ACTIVATIONS}, got {self.hidden_act!r}.")
        for name in ("hidden_dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {getattr(self, name)!r}.")
        if self.initializer_range <= 0 or self.layer_norm_eps <= 0:
            raise ConfigError("initializer_range and layer_norm_eps must be positive.")

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
        values = _read_json(path_or_dict, "config.json")
        if values.get("model_type", "bert") != "bert":
            raise ConfigError(f"Not a BERT config: model_type is {values['model_type']!r}.")
        if values.get("position_embedding_type", "absolute") != "absolute":
            raise ConfigError("Only absolute position embeddings are BERT's; got "
                              f"{values['position_embedding_type']!r}.")
        return cls._from_common(values, _HF_ACTIVATIONS, "config.json")

    @classmethod
    def from_google_config(cls, path_or_dict) -> "BertConfig":
        """Reads an original Google `bert_config.json` (a path, its directory, or a dict)."""
        return cls._from_common(_read_json(path_or_dict, "bert_config.json"),
                                _GOOGLE_ACTIVATIONS, "bert_config.json")

    @classmethod
    def _from_common(cls, values: dict, activations: dict, source: str) -> "BertConfig":
        required = ["vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                    "intermediate_size"]
        missing = [k for k in required if k not in values]
        if missing:
            raise ConfigError(f"{source} lacks {missing}.")
        act = values.get("hidden_act", "gelu")
        if act not in activations:
            raise ConfigError(f"{source}: unsupported hidden_act {act!r}; "
                              f"supported: {sorted(activations)}.")
        return cls(
            vocab_size=values["vocab_size"],
            hidden_size=values["hidden_size"],
            num_layers=values["num_hidden_layers"],
            num_heads=values["num_attention_heads"],
            intermediate_size=values["intermediate_size"],
            hidden_act=activations[act],
            hidden_dropout=values.get("hidden_dropout_prob", 0.1),
            attention_dropout=values.get("attention_probs_dropout_prob", 0.1),
            max_position_embeddings=values.get("max_position_embeddings", 512),
            type_vocab_size=values.get("type_vocab_size", 2),
            initializer_range=values.get("initializer_range", 0.02),
            layer_norm_eps=values.get("layer_norm_eps", 1e-12),
        )

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


def _read_json(path_or_dict, filename: str) -> dict:
    if isinstance(path_or_dict, dict):
        return path_or_dict
    path = os.fspath(path_or_dict)
    if os.path.isdir(path):
        path = os.path.join(path, filename)
    try:
        with open(path, encoding="utf-8") as f:
            values = json.load(f)
    except FileNotFoundError:
        raise ConfigError(f"No config file at {path}.") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path} is not valid JSON: {e}.") from None
    if not isinstance(values, dict):
        raise ConfigError(f"{path} does not hold a JSON object.")
    return values


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
