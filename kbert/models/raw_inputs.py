"""Raw text or packed inputs: how a task model tells which it was given, and how it cuts raw
text as Keras' `validation_split` cuts arrays."""

import math

import keras

from kbert.models.backbone import INPUT_KEYS


def dataset_parts(spec):
    """(inputs, labels) of a dataset's `element_spec`: `inputs`, `(inputs,)`, `(inputs,
    labels)` or `(inputs, labels, weights)`; labels None where there are none."""
    if not isinstance(spec, tuple):
        return spec, None
    return spec[0], spec[1] if len(spec) > 1 else None


def is_packed(x):
    """Whether `x` already holds model inputs (a dict of ids, or a dataset of them)."""
    if isinstance(x, dict):
        return INPUT_KEYS[0] in x
    spec = getattr(x, "element_spec", None)
    if spec is not None:
        inputs = dataset_parts(spec)[0]
        return isinstance(inputs, dict) and INPUT_KEYS[0] in inputs
    return False


def split_off(data, fraction):
    """(the first part, the last `fraction`) of `data`, a sequence or a tuple of them (pairs,
    questions and choices), cut where Keras' `validation_split` cuts arrays: before any
    shuffling, at floor(n * (1 - fraction))."""
    if data is None:
        return None, None
    if isinstance(data, tuple):
        parts = [split_off(part, fraction) for part in data]
        return tuple(p[0] for p in parts), tuple(p[1] for p in parts)
    at = math.floor(len(data) * (1.0 - fraction))
    if not 0 < at < len(data):
        raise ValueError(f"validation_split={fraction} leaves no training or no validation "
                         f"examples of {len(data)}.")
    return data[:at], data[at:]


def holds_nothing(x):
    """Whether raw `x` (texts, or a tuple of them) has no example; a dataset is not read."""
    first = x[0] if isinstance(x, tuple) and x else x
    shape = getattr(first, "shape", None)
    if shape is not None:
        return len(shape) > 0 and shape[0] == 0
    return isinstance(first, (list, tuple)) and len(first) == 0


def holds_text(x):
    """Whether `x` is text: a string, or lists, tuples, arrays or tensors that hold strings."""
    for leaf in keras.tree.flatten(x):
        dtype = getattr(leaf, "dtype", None)
        if isinstance(leaf, (str, bytes)) or getattr(dtype, "kind", None) in ("U", "S") or (
                getattr(dtype, "name", None) == "string"):
            return True
    return False
