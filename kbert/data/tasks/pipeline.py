"""The tf.data input pipeline: batch strings, preprocess in the graph, pad dynamically."""


import numpy as np


def _columns(examples, kind):
    texts = [t for t, _ in examples]
    labels = np.asarray([y for _, y in examples],
                        "float32" if kind == "regression" else "int32")
    if kind == "multiple_choice":
        features = (np.asarray([q for q, _ in texts], object),
                    np.asarray([list(c) for _, c in texts], object))
    elif isinstance(texts[0], tuple):
        features = tuple(np.asarray(column, object) for column in zip(*texts))
    else:
        features = (np.asarray(texts, object),)
    return features, labels


def _bucket_boundaries(features, count=8):
    from kbert.text.datasets import bucket_edges

    lengths = sum(np.char.str_len(f.astype(str)).reshape(len(f), -1).sum(-1) for f in features)
    return bucket_edges(lengths, count)


def make_dataset(examples, preprocessor, batch_size=32, kind="classification", shuffle=False,
                 bucket=False, repeat=False, seed=0, pad_to_multiple_of=1):
    """A tf.data pipeline of `(inputs, labels)` batches for a model.

    Raw strings flow through the pipeline; each batch is tokenized and packed in the graph by
    `preprocessor` (a `BertPreprocessor`) and then cut to the longest real sequence in the
    batch. `bucket=True` batches texts of similar character length together (8 buckets at the
    length quantiles), which cuts padding further; use it for training only (it reorders).
    `pad_to_multiple_of=m` rounds each batch's length up to a multiple of m (at most
    `sequence_length`), so that an XLA-compiled model sees a few shapes, not one per length.
    Multiple-choice examples give inputs shaped [batch, num_choices, seq], each choice packed
    as the pair (question, choice) by the preprocessor.
    """
    import tensorflow as tf

    from kbert.text.datasets import prefetched
    from kbert.text.preprocessor_base import traced
    from kbert.text.trim import trim_to_longest

    features, labels = _columns(examples, kind)
    dataset = tf.data.Dataset.from_tensor_slices((features, labels))
    if shuffle:
        dataset = dataset.shuffle(len(labels), seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    if bucket:
        boundaries = _bucket_boundaries(features)

        def length(texts, _):
            return tf.cast(sum(tf.reduce_sum(tf.strings.length(t)) for t in texts), tf.int32)

        dataset = dataset.bucket_by_sequence_length(
            length, boundaries, [batch_size] * (len(boundaries) + 1), drop_remainder=False)
    else:
        dataset = dataset.batch(batch_size)

    def pack(texts, y):
        inputs = texts[0] if len(texts) == 1 else tuple(texts)
        return trim_to_longest(traced(preprocessor)(inputs), pad_to_multiple_of), y

    return prefetched(dataset.map(pack, num_parallel_calls=tf.data.AUTOTUNE))
