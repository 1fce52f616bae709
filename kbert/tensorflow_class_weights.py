"""A tagger's class weights (`kbert.models.class_weights`) applied to its labels, as graph ops
(the models' own code is `keras.ops` only): for label arrays, and for a tf.data dataset of
`(inputs, tag labels[, weights])` batches."""

import tensorflow as tf


def tag_weights(labels, table, weights=None):
    """Each label's weight in `table` (float32 [classes]) times `weights` (one a token, or one
    a sentence)."""
    weight = tf.gather(tf.constant(table), tf.cast(labels, tf.int32))
    if weights is not None:
        given = tf.cast(weights, weight.dtype)
        extra = tf.ones([tf.rank(weight) - tf.rank(given)], tf.int32)
        weight *= tf.reshape(given, tf.concat([tf.shape(given), extra], 0))
    return weight


def class_weighted_dataset(dataset, table):
    """`dataset` with each batch's weights replaced by `tag_weights` of its labels."""
    if not (isinstance(dataset.element_spec, tuple) and len(dataset.element_spec) >= 2):
        raise ValueError("class_weight weighs labels: the dataset yields no labels.")
    weigh = lambda inputs, labels, *weights: (  # noqa: E731
        inputs, labels, tag_weights(labels, table, *weights))
    return dataset.map(weigh, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
