"""The bounds a BERT configuration must keep, checked before anything is built: a size past
them is a typo or a hostile file, refused with a message naming the key, the value, the file and
what is allowed (`kbert.config` reads the files; keras-hub presets are checked here too)."""

import math
import numbers

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
INT_FIELDS = tuple(LIMITS)
RATE_FIELDS = ("hidden_dropout", "attention_dropout")
POSITIVE_FIELDS = ("initializer_range", "layer_norm_eps")


def pop_rates(kwargs):
    """The dropout rates (`RATE_FIELDS`) in `kwargs`, taken out of it: the fields a loader may
    change on a checkpoint's config, as no weight depends on them.

    Args:
        kwargs: a dict of keyword arguments, changed in place.

    Returns:
        A dict of the `hidden_dropout` and `attention_dropout` that `kwargs` held.

    Examples:
        >>> kwargs = {"attention_dropout": 0.0, "dtype": "float32"}
        >>> pop_rates(kwargs), kwargs
        ({'attention_dropout': 0.0}, {'dtype': 'float32'})
    """
    return {name: kwargs.pop(name) for name in RATE_FIELDS if name in kwargs}


def is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def field_problem(name, value):
    """What is wrong with one field's value (None when nothing is)."""
    if name in LIMITS:
        if not is_int(value) or not 1 <= value <= LIMITS[name]:
            return f"must be a positive integer of at most {LIMITS[name]:,}"
    elif name in RATE_FIELDS:
        if not is_real(value) or not 0.0 <= value < 1.0:
            return "must be a number in [0, 1)"
    elif name in POSITIVE_FIELDS:
        if not is_real(value) or not 0.0 < value < math.inf:
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
        problem = field_problem(name, value)
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


_KERAS_HUB_KEYS = {"vocab_size": "vocabulary_size", "hidden_size": "hidden_dim",
                   "num_layers": "num_layers", "num_heads": "num_heads",
                   "intermediate_size": "intermediate_dim", "hidden_dropout": "dropout",
                   "max_position_embeddings": "max_sequence_length",
                   "type_vocab_size": "num_segments"}


def check_keras_hub_config(values, source: str) -> dict:
    """The `BertConfig` fields of `values` (the "config" of a keras-hub BertBackbone preset's
    config.json, keras-hub's defaults filled in); raises `ConfigError` unless they are sizes
    `BertConfig` accepts: the same bounds, checked before keras-hub builds (and allocates)
    anything."""
    if not isinstance(values, dict):
        raise ConfigError(f"{source}: 'config' must be a JSON object, got {values!r}.")
    defaults = {"dropout": 0.1, "max_sequence_length": 512, "num_segments": 2}  # keras-hub's
    missing = sorted(k for k in _KERAS_HUB_KEYS.values()
                     if k not in values and k not in defaults)
    if missing:
        raise ConfigError(f"{source} lacks {missing}.")
    fields = {field: values.get(key, defaults.get(key))
              for field, key in _KERAS_HUB_KEYS.items()}
    fields["attention_dropout"] = fields["hidden_dropout"]  # keras-hub has one rate
    check_fields(fields, names={**_KERAS_HUB_KEYS, "attention_dropout": "dropout"},
                 source=source)
    return fields

def whole_number(name, value, least, what=None):
    """`value` as an int when it is an integer of at least `least` (numpy's integers too), else
    ValueError naming `name` (`what`: what it must be, in words)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
        raise ValueError(f"{name} must be {what or f'an integer >= {least}'}, got {value!r}.")
    return int(value)


class RowError(ValueError):
    """ValueError about row `row` (from 0) of a batch. `template` is the message with
    "{where}" for the row ("the question of {where} is blank"); `at(where)` words it for a
    caller that knows the row by another name ("line 7")."""

    def __init__(self, template, row):
        self.template, self.row = template, int(row)
        super().__init__(self.at(f"row {self.row}"))

    def at(self, where):
        return self.template.replace("{where}", where)  # not format: the text may hold braces

    def __reduce__(self):  # a picklable exception takes its constructor's arguments back
        return type(self), (self.template, self.row)
