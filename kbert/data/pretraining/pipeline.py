"""On-the-fly pre-training input: documents → pairs → batches → masks, as one `tf.data` pipeline.

Documents are tokenized once (in-graph tokenizer, batched) and held as token-id arrays; a
Python generator makes the segment pairs (`kbert.data.pretraining.pairs`, a new pairing and a new
document order every pass over the corpus), `tf.data` shuffles and batches them, and the masking
runs as graph ops in a parallel `map` (`kbert.data.pretraining.masking`), so every epoch sees
new pairs and new masks. This suits corpora that fit in memory once tokenized (the Wikipedia
text is ~1M tokens, 4 MB); larger ones go through `kbert.data.pretraining.tfrecords`.
"""

import itertools

import numpy as np
import tensorflow as tf

from kbert.data.pretraining import pairs
from kbert.data.pretraining.masking import dynamic_masking_dataset
from kbert.text.datasets import prefetched

SHUFFLE_BUFFER = 10_000  # pairs; `pretrain` uses one pass of a smaller corpus instead


def feature_signature(sequence_length):
    spec = tf.TensorSpec([sequence_length], tf.int32)
    return {"token_ids": spec, "segment_ids": spec, "padding_mask": spec,
            "next_sentence_label": tf.TensorSpec([], tf.int32)}


def pair_dataset(documents, sequence_length, cls_id, sep_id, pad_id=0, seed=0, repeat=True,
                 short_seq_prob=0.1, nsp=True, balance_nsp=True):
    """Unbatched, unmasked examples from tokenized `documents` (lists of id arrays); with
    `repeat`, endlessly, each pass with its own pairing (seeded by `seed` and the pass)."""
    documents = [[np.asarray(s, np.int32) for s in d] for d in documents if len(d)]
    if not documents:
        raise ValueError("No documents with tokens to make pre-training pairs from.")

    def generate():
        passes = itertools.count() if repeat else range(1)
        for epoch in passes:
            yield from pairs.examples(documents, sequence_length, cls_id, sep_id, pad_id,
                                      seed=seed * 1_000_003 + epoch,
                                      short_seq_prob=short_seq_prob, nsp=nsp,
                                      balance_nsp=balance_nsp)

    return tf.data.Dataset.from_generator(generate,
                                          output_signature=feature_signature(sequence_length))


def pretraining_dataset(documents, tokenizer, masker, sequence_length=128, batch_size=32,
                        seed=0, repeat=True, shuffle_buffer=SHUFFLE_BUFFER, short_seq_prob=0.1,
                        nsp=True, balance_nsp=True, drop_remainder=True):
    """Batches `(inputs, targets, sample_weights)` ready for `BertPretrainer.fit`.

    `documents`: tokenized documents (see `kbert.data.pretraining.documents.
    tokenize_documents`). `masker`: a `MaskedLM`. Batches have exactly `batch_size` rows,
    except, with `drop_remainder=False`, a smaller last one (a held-out set scores every pair).
    """
    ds = pair_dataset(documents, sequence_length, tokenizer.cls_token_id,
                      tokenizer.sep_token_id, tokenizer.pad_token_id, seed=seed, repeat=repeat,
                      short_seq_prob=short_seq_prob, nsp=nsp, balance_nsp=balance_nsp)
    if shuffle_buffer:
        ds = ds.shuffle(shuffle_buffer, seed=seed)
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    return prefetched(dynamic_masking_dataset(ds, masker, seed))
