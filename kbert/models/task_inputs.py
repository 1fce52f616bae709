"""The input path of a task model's `fit`, `evaluate` and `predict`: what it was given (raw
text, packed arrays, a dataset, a generator), the checks it runs before Keras reads the data,
how tuple labels pair with several outputs, and the Keras warnings it hides when nothing is
wrong.

The checks stop what would train silently wrong: under XLA an id beyond the embedding tables
reads a clamped row, and a label beyond the logits makes the loss NaN, neither an error. A
TensorFlow dataset is checked batch by batch as it is read (`kbert.tensorflow_inputs`).
"""

import contextlib
import functools
import math
import warnings

import keras
import numpy as np

from kbert.config import INPUT_KEYS
from kbert.models import xla
from kbert.models.input_limits import (check_class_labels, check_numeric_labels,
                                       check_output_labels, check_packed_inputs,
                                       check_preprocessor, model_limits)


# --- what the input is ---------------------------------------------------------------------------

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


def is_raw_text(model, x):
    """Whether `model` packs `x` itself: it holds a preprocessor, and `x` is neither packed nor
    a stream of batches."""
    return (model.preprocessor is not None and x is not None and not is_packed(x)
            and not is_stream(x))


def text_dataset(model, x, *args, **kwargs):
    """The batches `model`'s preprocessor packs of raw `x` (its `dataset` method, with `args`
    and `kwargs`), each cut to its longest row (rounded up to a few sizes where XLA runs
    them)."""
    if holds_nothing(x):  # else an error about float64 ([] has no type) or Keras' own
        raise ValueError("The input holds no examples (no text to pack).")
    # Checked when built too; a `sequence_length` set since could outrun the positions.
    check_preprocessor(model_limits(model.backbone), model.preprocessor)
    packed = model.preprocessor.dataset(x, *args, pad_to_multiple_of=xla.pad_multiple(model),
                                        **kwargs)
    # A dataset's labels are seen batch by batch, as a packed dataset's are; arrays' were
    # checked whole before.
    return model._check(packed)[0] if hasattr(x, "element_spec") else packed


def packed_for_fit(model, x, y, batch_size, sample_weight, validation_data, shuffle,
                   validation_split):
    """`fit`'s data checked, with raw text (and raw validation text) packed by `model`.

    Args:
        model: a `BertTask`.
        x, y, batch_size, sample_weight, validation_data, shuffle, validation_split: `fit`'s.

    Returns:
        (the raw text trained on, or None for packed inputs; the datasets packed here; Keras'
        `fit` arguments x, y, batch_size, sample_weight, validation_data, shuffle and
        validation_split, as a dict).
    """
    if shuffle is None:  # a dataset or stream is shuffled by its maker; Keras ignores it
        shuffle = not (hasattr(x, "element_spec") or is_stream(x))
    x, y = model._check(x, y)
    sample_weight = checked_weights(model, sample_weight)
    validation_data = checked_validation_data(model, validation_data)
    rows = batch_size or 32
    packed_here = []
    text = x if is_raw_text(model, x) else None
    if text is not None:
        if validation_split and validation_data is None:
            if hasattr(x, "element_spec"):
                raise ValueError("validation_split holds out the last examples of lists or "
                                 "arrays; a Dataset cannot be cut: give validation_data.")
            (x, x_val), (y, y_val), (sample_weight, w_val) = (
                split_off(v, validation_split) for v in (x, y, sample_weight))
            validation_data = (x_val, y_val, w_val)
        validation_split = 0.0  # Keras splits arrays only, not the dataset made here
        x = model._text_dataset(x, y, sample_weight, rows, shuffle)
        y = sample_weight = batch_size = None
        shuffle = False  # done in the dataset, which Keras would not reshuffle
        packed_here.append(x)
    first = validation_data[0] if isinstance(validation_data, tuple) else validation_data
    if validation_data is not None and is_raw_text(model, first):
        parts = validation_data if isinstance(validation_data, tuple) else (validation_data,)
        if len(parts) < 2 and not hasattr(parts[0], "element_spec"):
            raise ValueError("validation_data is (x, y) or (x, y, sample_weight): a score "
                             "needs labels.")
        validation_data = model._text_dataset(*parts, batch_size=rows)
        packed_here.append(validation_data)
    return text, packed_here, {"x": x, "y": y, "batch_size": batch_size,
                               "sample_weight": sample_weight,
                               "validation_data": validation_data, "shuffle": shuffle,
                               "validation_split": validation_split}


# --- labels of several outputs -------------------------------------------------------------------

def by_output(outputs, values, what="label"):
    """`values` (a tuple or list, one per output) as a dict by output name, in the order
    `outputs` (the model's output dict) declares them: a span model's `(start, end)`, as
    Hugging Face's `start_positions, end_positions`. Keras would pair a tuple with the outputs
    sorted by name, and so train end logits on start positions, silently. Anything else is
    returned as it is, and a list of numbers is one array (a weight or label an example)."""
    if not (isinstance(values, (tuple, list)) and isinstance(outputs, dict)
            and len(outputs) > 1):
        return values
    if values and all(v is not None and np.ndim(v) == 0 and not isinstance(v, (str, bytes))
                      for v in values):
        return np.asarray(values)
    if len(values) != len(outputs):
        raise ValueError(f"{len(values)} {what} arrays for the {len(outputs)} outputs "
                         f"{', '.join(outputs)}: give one per output, in that order, or a "
                         "dict by output name.")
    return dict(zip(outputs, values))


# --- the checks ----------------------------------------------------------------------------------

def checked_inputs(model, x, y=None):
    """`(x, y)` of `model` (a `BertTask`) checked: packed arrays against what its backbone
    embeds (`check_packed_inputs`) and labels against what its head scores (its
    `_check_labels`, or `label_ranges` for dict labels); tuple labels of several outputs
    become a dict (`by_output`). A dataset of packed inputs, or a generator, is returned
    wrapped, so that each batch is checked as it is read (`kbert.tensorflow_inputs`)."""
    if isinstance(x, dict):
        check_packed_inputs(model_limits(model.backbone), x)
        y = by_output(model.output, y)
        check_output_labels(y, x.get("token_ids"), model.label_ranges)
    elif is_packed(x) and hasattr(x, "map"):  # a dataset, read batch by batch
        from kbert.tensorflow_inputs import checked_dataset  # TensorFlow, on demand

        inputs, labels = dataset_parts(x.element_spec)
        if inputs[INPUT_KEYS[0]].shape.rank == len(model.input[INPUT_KEYS[0]].shape) - 1:
            raise ValueError(f"The dataset yields single examples ({INPUT_KEYS[0]} of shape "
                             f"{inputs[INPUT_KEYS[0]].shape}); Keras takes batches: call "
                             ".batch(32) on it first.")
        return checked_dataset(x, model_limits(model.backbone),
                               model._dataset_label_classes(labels), model.label_ranges,
                               functools.partial(by_output, model.output)), y
    elif is_stream(x):  # Keras reads it; each batch is checked as a dict of arrays is
        return checked_stream(x, functools.partial(checked_inputs, model),
                              functools.partial(by_output, model.output, what="sample weight")), y
    model._check_labels(y)
    return x, y


def checked_weights(model, sample_weight):
    """`sample_weight` of `model`'s `fit` or `evaluate`, a tuple of several outputs' as a dict
    (`by_output`), each array finite: a NaN weight makes the loss NaN, and the step writes NaN
    into every weight."""
    weights = by_output(model.output, sample_weight, "sample weight")
    for key, value in weights.items() if isinstance(weights, dict) else [(None, weights)]:
        check_numeric_labels(value, "sample_weight" + ("" if key is None else f"[{key!r}]"))
    return weights


def checked_validation_data(model, validation_data):
    """`fit`'s `validation_data` checked as `fit`'s own data is: `(x, y[, sample_weight])`
    (also as a list, as Keras reads it), or a dataset or generator."""
    if (isinstance(validation_data, list) and len(validation_data) in (2, 3)
            and not any(isinstance(v, (str, bytes)) for v in validation_data)):
        validation_data = tuple(validation_data)  # as Keras reads [x, y(, sample_weight)]
    if not isinstance(validation_data, tuple):
        return model._check(validation_data)[0]
    checked = model._check(*validation_data[:2] or (None,))
    return (*checked[:len(validation_data[:2])],
            *(checked_weights(model, w) for w in validation_data[2:]))


def check_labels(y, label_classes):
    """Array labels: class ids below `label_classes`, or numbers where it is None."""
    if label_classes is not None:
        check_class_labels(y, label_classes)
    else:
        check_numeric_labels(y)


def sparse_label_classes(spec, label_classes):
    """`label_classes` when a dataset's labels (`spec`: a TensorSpec) are sparse class ids,
    [batch] or [batch, 1] numbers (floats too: a float column's ids), else None (not
    checked)."""
    rank = getattr(getattr(spec, "shape", None), "rank", None)
    sparse = rank == 1 or (rank == 2 and spec.shape[-1] == 1)
    if label_classes is None or not sparse or not is_number(spec.dtype):
        return None
    return label_classes


def is_number(dtype):
    """Whether a TensorSpec's dtype holds numbers that may be ids: integers or floats."""
    return dtype.is_integer or dtype.is_floating


# --- warnings that mean nothing here -------------------------------------------------------------

# A head that reads the sequence output (spans, tags, masked LM alone) leaves the backbone's
# pooler without a gradient, and Keras warns of it in every `fit`. Any other variable without
# a gradient is still named.
POOLER_WITHOUT_GRADIENT = (r"Gradients do not exist for variables \['pooler/kernel', "
                           r"'pooler/bias'\] ")


@contextlib.contextmanager
def expected_warnings_hidden(packed_here, steps):
    """Hides the pooler's missing gradient, and Keras' "Your input ran out of data", which it
    gives whenever a dataset of unknown length ends, as if it had been cut short. The windows a
    span preprocessor makes of raw text are such a dataset (their number is known only once the
    contexts are tokenized): that warning is hidden where `steps` is None (the data decides the
    epoch) and `packed_here` (the datasets the model packed from raw text) holds one. With
    `steps` given, running out is a real problem, and the warning stays."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=POOLER_WITHOUT_GRADIENT)
        if steps is None and any(int(d.cardinality()) == -2 for d in packed_here):
            warnings.filterwarnings("ignore", message="Your input ran out of data",
                                    category=UserWarning)
        yield
