"""Masking for the pre-training pipeline: dynamic masking over a stream of batches.

The masking op itself (`MaskedLM`, BERT's 15% / 80-10-10 corruption, and `to_fit_arguments`)
lives in `kbert.text.masking`, below this layer, so that the raw-text
`BertMaskedLMPreprocessor` uses the same op.

`dynamic_masking_dataset` seeds each batch by its index in the (repeated) stream, so every epoch
gets fresh masks (RoBERTa's dynamic masking) and a rerun gets the same ones. Static masking
(Google's original: masks fixed when the data is written, `dupe_factor` copies with different
masks) applies the same op once in `kbert.data.pretraining.tfrecords`.
"""

import tensorflow as tf

from kbert.text.masking import MaskedLM, to_fit_arguments

__all__ = ["MaskedLM", "to_fit_arguments", "dynamic_masking_dataset"]


def dynamic_masking_dataset(dataset, masker, seed=0):
    """`dataset` of batched feature dicts → batches masked afresh every time they are produced
    (stateless masks seeded by (seed, batch index in the stream))."""
    def apply(index, features):
        batch_seed = tf.stack([tf.cast(seed, tf.int32), tf.cast(index, tf.int32)])
        return masker(features, batch_seed)

    return dataset.enumerate().map(apply, num_parallel_calls=tf.data.AUTOTUNE)
