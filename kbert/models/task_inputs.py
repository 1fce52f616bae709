"""The checks a task model's `fit` / `evaluate` / `predict` run on packed inputs and labels
before Keras reads them: under XLA an id beyond the embedding tables reads a clamped row, and a
label beyond the logits makes the loss NaN, neither an error."""

import functools

from kbert.config import INPUT_KEYS
from kbert.models.input_limits import (check_class_labels, check_numeric_labels,
                                       check_output_labels, check_packed_inputs, model_limits)
from kbert.models.output_pairing import by_output
from kbert.models.raw_inputs import checked_stream, dataset_parts, is_packed, is_stream


def checked_inputs(model, x, y=None):
    """`(x, y)` of `model` (a `BertTask`) checked: packed arrays against what its backbone
    embeds (`check_packed_inputs`) and labels against what its head scores (its
    `_check_labels`, or `label_ranges` for dict labels); tuple labels of several outputs
    become a dict (`by_output`). A dataset of packed inputs, or a generator, is returned
    wrapped, so that each batch is checked as it is read (`kbert.tensorflow_input_checks`)."""
    if isinstance(x, dict):
        check_packed_inputs(model_limits(model.backbone), x)
        y = by_output(model.output, y)
        check_output_labels(y, x.get("token_ids"), model.label_ranges)
    elif is_packed(x) and hasattr(x, "map"):  # a dataset, read batch by batch
        from kbert.tensorflow_input_checks import checked_dataset

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
