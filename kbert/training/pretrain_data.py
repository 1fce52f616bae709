"""The data step of `pretrain()`: training and held-out pairs from text or TFRecords, and the
most-frequent-token baseline the held-out MLM accuracy is compared with.

Held out are whole documents: for text, a seeded random choice of them; for TFRecords, the last
shard (shards are disjoint sets of documents).
"""

import dataclasses
import os
import pathlib
import random
from collections.abc import Callable

import numpy as np


@dataclasses.dataclass
class PretrainData:
    """`train(seed)` makes the (repeating, masked) training dataset; `heldout` is the fixed,
    materialised evaluation set; `counts` the training documents' token counts (None for
    TFRecords); `source` what metrics.json records as the corpus."""

    train: Callable
    heldout: object
    train_examples: int
    counts: np.ndarray | None
    source: str


def is_tfrecord_dir(corpus):
    return corpus is not None and (pathlib.Path(os.fspath(corpus)) / "dataset.json").is_file()


def pretraining_data(config, tokenizer, masker, replicas=1) -> PretrainData:
    """The run's data, from TFRecords or from text as `config.corpus` is; the held-out
    examples a multiple of `replicas`, so that every batch splits over them."""
    read = _tfrecord_data if is_tfrecord_dir(config.corpus) else _text_data
    data = read(config, tokenizer, masker)
    batches = max(1, config.eval_examples // config.batch_size)
    data.heldout = _materialize(finish(data.heldout.take(batches), config.nsp),
                                config.batch_size, replicas)
    return data


def finish(dataset, nsp):
    """Without NSP the model has one output: drop the NSP labels and weights."""
    if nsp:
        return dataset
    return dataset.map(lambda x, y, w: (x, {"mlm": y["mlm"]}, {"mlm": w["mlm"]}))


def _tfrecord_data(config, tokenizer, masker):
    from kbert.data.pretraining.tfrecords import read_meta, tfrecord_dataset, tfrecord_files

    corpus, batch_size = config.corpus, config.batch_size
    meta = read_meta(corpus)
    if meta["sequence_length"] != config.sequence_length:
        raise ValueError(f"The TFRecords at {corpus} have sequence_length "
                         f"{meta['sequence_length']}, not {config.sequence_length}.")
    files = tfrecord_files(corpus)
    if len(files) < 2:
        raise ValueError("TFRecord input needs at least two shards (the last is held out).")
    train_files, heldout_files = files[:-1], files[-1:]
    per_shard = dict(zip(files, meta["examples_per_shard"]))

    def train(data_seed):
        return tfrecord_dataset(train_files if len(train_files) > 1 else train_files[0],
                                batch_size, masker, seed=data_seed)

    heldout = tfrecord_dataset(heldout_files[0], batch_size, masker, seed=config.seed + 1,
                               repeat=False, shuffle_buffer=0, deterministic=True,
                               drop_remainder=False)
    return PretrainData(train, heldout, sum(per_shard[f] for f in train_files), None,
                        str(corpus))


def _text_data(config, tokenizer, masker):
    from kbert.data.pretraining import pairs
    from kbert.data.pretraining.documents import corpus_documents, tokenize_documents
    from kbert.data.pretraining.pipeline import SHUFFLE_BUFFER, pretraining_dataset

    documents = list(tokenize_documents(
        corpus_documents(config.corpus, config.corpus_format), tokenizer))
    held = heldout_split(len(documents), config.heldout_documents, config.seed)
    train_docs = [d for i, d in enumerate(documents) if i not in held]
    heldout_docs = [d for i, d in enumerate(documents) if i in held]
    del documents
    length, nsp, short = config.sequence_length, config.nsp, config.short_seq_prob
    train_examples = sum(1 for _ in pairs.corpus_pairs(
        train_docs, length, random.Random(config.seed), short, nsp))
    counts = np.bincount(np.concatenate([s for d in train_docs for s in d]),
                         minlength=tokenizer.vocabulary_size())

    # A shuffle buffer beyond one pass over the corpus would only mix passes, and the first
    # step waits for it to fill: for a corpus of a few hundred pairs, 10,000 is dozens of
    # passes made in Python (8 s before step 1 of a small run).
    buffer = max(1, min(SHUFFLE_BUFFER, train_examples))

    def train(data_seed):
        return pretraining_dataset(train_docs, tokenizer, masker, length, config.batch_size,
                                   seed=data_seed, shuffle_buffer=buffer, short_seq_prob=short,
                                   nsp=nsp)

    heldout = pretraining_dataset(heldout_docs, tokenizer, masker, length, config.batch_size,
                                  seed=config.seed + 1, repeat=False, shuffle_buffer=0,
                                  short_seq_prob=short, nsp=nsp, drop_remainder=False)
    source = "wikipedia" if config.corpus is None else str(config.corpus)
    return PretrainData(train, heldout, train_examples, counts, source)


def heldout_split(n_documents, heldout_documents, seed):
    """The indices of the held-out documents (default 5%, at most 500, at least one)."""
    if heldout_documents is None:
        heldout_documents = min(500, max(1, n_documents // 20))
    heldout_documents = min(int(heldout_documents), n_documents - 1)
    if heldout_documents < 1:
        raise ValueError(f"The corpus holds {n_documents} document(s); it needs at least two "
                         "(one is held out). In a file of one sentence a line, a blank line "
                         "ends a document; a file of prose is one document.")
    indices = list(range(n_documents))
    random.Random(seed + 99).shuffle(indices)
    return set(indices[:heldout_documents])


def _materialize(dataset, batch_size, replicas):
    """The (finite) dataset's examples, computed once and cut to a multiple of `replicas`, as
    a dataset of known length: the same held-out pairs and masks at every evaluation."""
    import tensorflow as tf

    batches = list(dataset.as_numpy_iterator())
    count = sum(len(inputs["token_ids"]) for inputs, *_ in batches)
    kept = count - count % replicas
    if not kept:
        raise ValueError(f"The held-out documents make {count} training pairs, fewer than the "
                         f"{replicas} replica(s) to score them: the corpus needs more "
                         "documents, or longer ones.")
    joined = tf.nest.map_structure(lambda *parts: np.concatenate(parts)[:kept], *batches)
    return tf.data.Dataset.from_tensor_slices(joined).batch(batch_size)


def most_frequent_baseline(heldout, counts, train, special):
    """Accuracy on the held-out predictions of always answering the most frequent token of the
    training data (token counts of the training documents, or, for TFRecords, of the MLM
    targets of 50 training batches), and that token's id."""
    if counts is None:
        ids = [y["mlm"].numpy()[w["mlm"].numpy() > 0] for _, y, w in train.take(50)]
        counts = np.bincount(np.concatenate(ids).astype(np.int64))
    counts = counts.copy()
    for token in special:
        if token < len(counts):
            counts[token] = 0
    top = int(np.argmax(counts))
    hits = total = 0.0
    for _, y, w in heldout:
        weights = w["mlm"].numpy()
        hits += float(((y["mlm"].numpy() == top) * weights).sum())
        total += float(weights.sum())
    return hits / max(total, 1.0), top
