"""BERT pre-training data: documents → segment pairs with NSP labels → masked batches.

* `documents`: reading corpora, sentence splitting, batched tokenization.
* `pairs`: sentence packing into segment pairs and next-sentence labels (Google's algorithm).
* `masking`: the masked-LM corruption as graph ops (dynamic or static, whole-word option).
* `pipeline`: the on-the-fly `tf.data` pipeline.
* `tfrecords`: the streaming sharded TFRecord writer and its reader pipeline.
"""

from kbert.data.pretraining.documents import (
    corpus_documents,
    read_documents,
    split_sentences,
    tokenize_documents,
    wikipedia_documents,
    write_documents,
)
from kbert.data.pretraining.masking import MaskedLM, dynamic_masking_dataset
from kbert.data.pretraining.pairs import IS_NEXT, NOT_NEXT, nsp_balance
from kbert.data.pretraining.pipeline import pretraining_dataset
from kbert.data.pretraining.tfrecords import read_meta, tfrecord_dataset, write_tfrecords

__all__ = [
    "IS_NEXT", "NOT_NEXT", "MaskedLM", "corpus_documents", "dynamic_masking_dataset",
    "nsp_balance", "pretraining_dataset", "read_documents", "read_meta", "split_sentences",
    "tfrecord_dataset", "tokenize_documents", "wikipedia_documents", "write_documents",
    "write_tfrecords",
]
