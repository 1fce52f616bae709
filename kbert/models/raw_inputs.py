"""Raw text or packed inputs: how a task model tells which it was given, and how it cuts raw
text as Keras' `validation_split` cuts arrays."""

import math

import keras

from kbert.config import INPUT_KEYS


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


def text_pairs(x):
    """Whether raw text `x` holds sentence pairs: a tuple `(texts_a, texts_b)`, or a dataset
    whose inputs are one (a list of strings is a batch of single sentences)."""
    spec = getattr(x, "element_spec", None)
    if spec is not None:
        inputs = dataset_parts(spec)[0]
        return isinstance(inputs, tuple) and len(inputs) == 2
    return isinstance(x, tuple) and len(x) == 2


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


_PACKING_METHOD = {"train_on_batch": "fit", "test_on_batch": "evaluate",
                   "predict_on_batch": "predict"}


def refuse_text_batch(x, method):
    """The `*_on_batch` methods take packed ids, as keras-hub's do: Keras' own error for
    strings counts "4 input tensors" where the model wants 3 named ones."""
    if holds_text(x):
        raise ValueError(f"{method} takes packed inputs (a dict of {', '.join(INPUT_KEYS)}), "
                         "not text: pack a batch with the model's preprocessor "
                         f"(`model.preprocessor(texts)`), or give the text to "
                         f"{_PACKING_METHOD[method]}, which packs it.")


def is_stream(x):
    """Whether `x` is a Python generator (or other iterator) or a `keras.utils.PyDataset`:
    batches Keras reads itself, which a task model cannot pack."""
    return hasattr(x, "__next__") or isinstance(x, keras.utils.PyDataset)


def checked_stream(x, check, weights):
    """`x` (`is_stream`) with `check(inputs, labels)` → (inputs, labels) and `weights(sample
    weights)` applied to every batch, after TypeError if a batch holds text, not packed
    inputs."""
    if isinstance(x, keras.utils.PyDataset):
        return _CheckedPyDataset(x, lambda batch: _checked_batch(batch, check, weights))
    return (_checked_batch(batch, check, weights) for batch in x)


def _checked_batch(batch, check, weights):
    parts = batch if isinstance(batch, tuple) else (batch,)
    if holds_text(parts[0]):
        raise TypeError(f"The batches hold text; a generator or PyDataset must yield packed "
                        f"inputs (dicts of {', '.join(INPUT_KEYS)}): pack each batch with the "
                        "model's preprocessor (`model.preprocessor(texts)`), or give the text "
                        "as lists, arrays or a TensorFlow Dataset (`Dataset."
                        "from_generator`), which the model packs.")
    checked = check(parts[0], parts[1] if len(parts) > 1 else None)
    return ((*checked[:len(parts)], *map(weights, parts[2:])) if isinstance(batch, tuple)
            else checked[0])


class _CheckedPyDataset(keras.utils.PyDataset):
    """A `PyDataset` whose batches are checked as they are read, with its workers."""

    def __init__(self, inner, check_batch):
        super().__init__(workers=inner.workers, use_multiprocessing=inner.use_multiprocessing,
                         max_queue_size=inner.max_queue_size)
        self.inner, self.check_batch = inner, check_batch

    def __len__(self):
        return len(self.inner)

    @property
    def num_batches(self):
        return self.inner.num_batches

    def __getitem__(self, index):
        return self.check_batch(self.inner[index])

    def on_epoch_begin(self):
        self.inner.on_epoch_begin()

    def on_epoch_end(self):
        self.inner.on_epoch_end()
