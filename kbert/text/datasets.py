"""Raw Python / numpy inputs → tf.data batches that a preprocessor packs in the graph.

This is how a task model with a preprocessor takes `fit(["a great film", ...], labels)`, as
keras-hub's tasks do: strings stay strings until the batch is packed inside tf.data.
"""

import keras
import numpy as np

from kbert import compat
from kbert.text.tf_libs import tf
from kbert.text.trim import trim_to_longest
from kbert.text.utf8 import without_lone_surrogates


def as_tensor_data(x):
    """Strings (a list, array or tensor), a tuple of them (a pair), or `(questions, choices)`
    with choices a list of lists → what `tf.data.Dataset.from_tensor_slices` takes."""
    if isinstance(x, tuple):
        return tuple(as_tensor_data(part) for part in x)
    if isinstance(x, dict):
        return {k: as_tensor_data(v) for k, v in x.items()}
    if isinstance(x, (tf.Tensor, tf.RaggedTensor)):
        return x
    if isinstance(x, str):
        raise TypeError("Give a list of strings (a batch), not a single string.")
    if hasattr(x, "__next__") or isinstance(x, keras.utils.PyDataset):
        raise TypeError(f"Raw text comes as lists, arrays or a tf.data.Dataset, not as a "
                        f"{type(x).__name__} (`tf.data.Dataset.from_generator` wraps one).")
    # A copy: lone surrogates are replaced in it, never in the caller's (or pandas' read-only) array.
    array = np.array(x, dtype=object if _holds_text(x) else None)
    if array.size and array.dtype != object:
        raise TypeError(f"Give text (strings); got {array.dtype} values.")
    if array.dtype == object:
        _check_all_text(array)  # str or bytes, which TensorFlow keeps as they are (UTF-8)
    return array


def _check_all_text(array):
    """A missing value (None, or pandas' NaN) would become the text "None" or "nan"; rows of
    different lengths (numpy keeps them as lists) the text of a list. A str with lone
    surrogates is replaced in `array` (`without_lone_surrogates`)."""
    for i, value in enumerate(array.flat):
        if isinstance(value, str) and not value.isascii():  # what TensorFlow cannot take
            array.flat[i] = without_lone_surrogates(value)
        if isinstance(value, (str, bytes)):
            continue
        if isinstance(value, (list, tuple, np.ndarray)):
            raise ValueError("The text has rows of different lengths (multiple choice: every "
                             "question needs as many choices).")
        where = tuple(int(n) for n in np.unravel_index(i, array.shape))
        raise TypeError(f"Give text (strings); got {value!r} at {where}.")


def check_example_counts(**parts):
    """Raises ValueError unless every piece of the raw `parts` (name: a list, array or tensor,
    or a tuple or dict of them; None is left out) holds one entry per example. tf.data's own
    error ("Dimensions 3 and 2 are not compatible") names neither piece."""
    counts = {}
    for name, part in parts.items():
        for path, leaf in _leaves(name, part):
            shape = getattr(leaf, "shape", None)
            if shape is not None and len(shape) and shape[0] is not None:
                counts[path] = int(shape[0])
            elif isinstance(leaf, (list, tuple)):
                counts[path] = len(leaf)
    if len(set(counts.values())) > 1:
        listing = ", ".join(f"{path} {n}" for path, n in counts.items())
        raise ValueError(f"The inputs hold different numbers of examples ({listing}): give "
                         "one entry per example in each.")


def _leaves(name, part):
    if part is None:
        return []
    if isinstance(part, tuple):
        return [leaf for i, p in enumerate(part) for leaf in _leaves(f"{name}[{i}]", p)]
    if isinstance(part, dict):
        return [leaf for k, p in part.items() for leaf in _leaves(f"{name}[{k!r}]", p)]
    return [(name, part)]


def _holds_text(x):
    first = x
    while isinstance(first, (list, tuple, np.ndarray)) and len(first):
        first = first[0]
    return isinstance(first, (str, bytes))


def _labels(y):
    if y is None or isinstance(y, (tf.Tensor, tf.RaggedTensor, dict)):
        return y
    return np.asarray(y)


def batched_dataset(x, y, sample_weight, pack, batch_size=32, shuffle=False, seed=None):
    """tf.data of `pack(x, y, sample_weight)` batches (pieces that are None are left out).

    `x` is raw input (see `as_tensor_data`) or a `tf.data.Dataset` already yielding batches of
    raw `(x, y, sample_weight)` (or `x` alone), which is then only packed."""
    if isinstance(x, tf.data.Dataset):
        if y is not None or sample_weight is not None:
            raise ValueError("With a tf.data.Dataset as x, labels and sample weights come from "
                             "the dataset: do not pass y or sample_weight.")
        _check_batched(x)
        dataset = x
    else:
        check_example_counts(x=x, y=y, sample_weight=sample_weight)
        texts = as_tensor_data(x)
        if isinstance(texts, np.ndarray) and texts.ndim == 2 and texts.shape[1] > 1:
            raise ValueError(f"The text has shape {texts.shape}, not one string an example: "
                             "give pairs as a tuple (texts_a, texts_b) of two lists, not a list "
                             "of pairs.")
        parts = tuple(p for p in (texts, _labels(y), _labels(sample_weight)) if p is not None)
        dataset = tf.data.Dataset.from_tensor_slices(parts)
        if shuffle:
            dataset = dataset.shuffle(int(dataset.cardinality()), seed=seed,
                                      reshuffle_each_iteration=True)
        dataset = dataset.batch(batch_size)
    if isinstance(dataset.element_spec, tuple):
        packed = dataset.map(pack, num_parallel_calls=tf.data.AUTOTUNE)
    else:
        packed = dataset.map(lambda x: pack(x)[0], num_parallel_calls=tf.data.AUTOTUNE)
    return prefetched(packed)


def _check_batched(dataset):
    """A dataset of raw text must yield batches, as one of packed inputs must for Keras: one of
    single examples (scalars) failed in the model with a shape error, and its trace left the
    packing's function relaxed to any rank, so that a batched dataset failed after it."""
    leaves = tf.nest.flatten(dataset.element_spec)
    if any(getattr(leaf, "shape", None) is not None and leaf.shape.rank == 0 for leaf in leaves):
        raise ValueError(f"The dataset yields single examples ({dataset.element_spec}); a "
                         "dataset of raw text must yield batches: call .batch(32) on it first.")


def prefetched(dataset):
    """`dataset` prefetched, with tf.data's autotuning thread off
    (`kbert.compat.without_autotune`): without it, every `fit`, `evaluate` or
    `predict` over a dataset could end with up to a minute of nothing (a 20-batch `fit` whose
    last step ended at 6.7 s returned at 10.2 s, in 4 of 7 such calls; none with it off)."""
    return compat.without_autotune(dataset.prefetch(tf.data.AUTOTUNE))


def _cut(pad_to_multiple_of):
    """Cuts `(inputs, *targets)` to the inputs' longest row; per-token targets ([b, seq])
    follow, per-row ones ([b]) stay."""

    def cut(x, *rest):
        x = trim_to_longest(x, pad_to_multiple_of)
        length = tf.shape(x["padding_mask"])[-1]
        rest = tf.nest.map_structure(lambda r: r[:, :length] if r.shape.rank >= 2 else r, rest)
        return (x,) + tuple(rest)

    return cut


def bucket_edges(lengths, buckets=8):
    """Boundaries for `bucket_by_sequence_length`: `buckets` groups split at the quantiles of
    `lengths`, so each holds about as many rows."""
    edges = np.quantile(lengths, np.linspace(0, 1, buckets + 1)[1:-1])
    return sorted({int(e) + 1 for e in edges})


def length_bucketed(arrays, padding_mask, batch_size, seed, pad_to_multiple_of=1, buckets=8):
    """An endless, shuffled tf.data of already-packed rows `arrays` = (inputs dict, *targets),
    batched with rows of similar length (`buckets` groups at the length quantiles), each batch
    cut to its longest row: less padding per step than random batches."""
    lengths = np.asarray(padding_mask).sum(-1)
    edges = bucket_edges(lengths, buckets)
    dataset = tf.data.Dataset.from_tensor_slices(arrays)
    dataset = dataset.shuffle(len(lengths), seed=seed, reshuffle_each_iteration=True).repeat()
    dataset = dataset.bucket_by_sequence_length(
        lambda x, *rest: tf.reduce_sum(x["padding_mask"]), edges,
        [batch_size] * (len(edges) + 1))
    return prefetched(dataset.map(_cut(pad_to_multiple_of), num_parallel_calls=tf.data.AUTOTUNE))


def random_batches(arrays, batch_size, seed, pad_to_multiple_of=1):
    """An endless, shuffled tf.data of already-packed rows `arrays` = (inputs dict, *targets),
    each batch drawn uniformly (as Hugging Face's and Google's loops draw them) and cut to its
    longest row. More padding per step than `length_bucketed`, but a batch's rows are not
    chosen by length, which a per-batch token-mean loss notices: see `ConllTask`."""
    rows = len(arrays[0]["padding_mask"])
    dataset = tf.data.Dataset.from_tensor_slices(arrays)
    dataset = dataset.shuffle(rows, seed=seed, reshuffle_each_iteration=True).repeat()
    return prefetched(dataset.batch(batch_size).map(
        _cut(pad_to_multiple_of), num_parallel_calls=tf.data.AUTOTUNE))


def length_order(padding_mask):
    """Row indices shortest first (stable), for evaluation passes whose order does not matter
    or is restored afterwards (`np.argsort(order)` undoes it). Batches cut to their longest row
    then carry little padding (`benchmarks/README.md`, "Evaluation in length order")."""
    return np.argsort(np.asarray(padding_mask).sum(axis=1), kind="stable")


def packed_batches(features, batch_size=64, pad_to_multiple_of=1):
    """Already-packed `features` (a dict of arrays, or a tuple (inputs dict, *targets) whose
    per-token targets are cut with the inputs) in order, in batches cut to their longest row
    (rounded up to `pad_to_multiple_of`): for evaluation loops whose outputs keep the sequence
    axis, and validation passes."""
    dataset = tf.data.Dataset.from_tensor_slices(features).batch(batch_size)
    if isinstance(features, tuple):
        return prefetched(dataset.map(_cut(pad_to_multiple_of)))
    return prefetched(dataset.map(lambda x: trim_to_longest(x, pad_to_multiple_of)))
