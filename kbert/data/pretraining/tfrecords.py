"""Sharded TFRecord pre-training data: a streaming, memory-bounded writer and a reader pipeline.

Writing (`write_tfrecords`) runs in two passes so that no process ever holds the corpus:

1. the calling process streams the documents once and deals them round-robin into
   `num_shards` plain-text files (Google's one-sentence-per-line format) in a staging folder:
   constant memory, whatever the corpus size;
2. each shard is then turned into `shard-XXXXX-of-YYYYY.tfrecord` independently — by
   `num_workers` processes in parallel (spawned, each with its own TensorFlow) or in the calling
   process when `num_workers=1`: tokenize the shard's documents, make `dupe_factor` passes of
   segment pairs (NotNext segments drawn from the same shard, as Google's script draws them from
   the files one run reads), shuffle the shard, optionally mask (static masking), write the
   file under a temporary name and rename it. Memory is bounded by one shard per worker;
   choose `num_shards` so that a shard is small (the default aims at ~2,000 documents).

`dataset.json` beside the shards records what was written (sequence length, static masking,
examples per shard, the IsNext share). A finished shard is skipped when the writer is run again
(restartable); the staging folder is removed at the end.

Records hold fixed-length int64 features `token_ids`, `segment_ids`, `padding_mask` and
`next_sentence_label`; with static masking also `masked_positions`, `masked_ids` and float
`masked_weights` (and `token_ids` already corrupted), like Google's files.

Reading (`tfrecord_dataset`): files shuffled, read by a parallel `interleave`, records shuffled,
batched, parsed batch-wise by a parallel `map`, masked (dynamic masking, unless the files
carry static masks), prefetched.
"""

import json
import multiprocessing
import os
import pathlib
import random
import shutil

import numpy as np

from kbert.text.tokenizer_files import MAX_CHARS_PER_WORD, load_vocabulary

META = "dataset.json"


def _shard_name(index, num_shards):
    return f"shard-{index:05d}-of-{num_shards:05d}.tfrecord"


def write_tfrecords(documents, output_dir, vocabulary, lowercase=True, sequence_length=128,
                    num_shards=None, num_workers=1, dupe_factor=1, static_masking=False,
                    mask_rate=0.15, max_predictions=20, whole_word=False, seed=12345,
                    short_seq_prob=0.1, balance_nsp=True, docs_per_shard=2000,
                    max_chars_per_word=MAX_CHARS_PER_WORD, strip_accents=None):
    """Writes `documents` (any iterable of sentence lists; consumed once, streaming) as sharded
    TFRecords in `output_dir`; returns the metadata dict also written to `dataset.json`.

    `vocabulary`: a vocab.txt path or a token list (a `BertTokenizer` is built from it in each
    worker, with `lowercase`, `strip_accents` and `max_chars_per_word`: pass the model's
    tokenizer's). `num_shards=None` counts the documents in the staging pass and picks
    `ceil(n / docs_per_shard)`. `static_masking=True` stores `dupe_factor` differently masked
    copies (Google's recipe); otherwise records are unmasked and masked at read time.
    `num_workers > 1` spawns processes: a script calling it needs the usual
    `if __name__ == "__main__":` guard (console entry points such as `kbert` have it).
    """
    output_dir = pathlib.Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    staging = output_dir / ".staging"
    vocabulary = load_vocabulary(vocabulary)
    buckets = num_shards or 64
    count = _stage_documents(documents, staging, buckets)
    if count == 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise ValueError("write_tfrecords: the corpus has no documents.")
    if num_shards is None:  # regroup the 64 buckets into the wanted number of shards
        num_shards = max(1, min(buckets, -(-count // docs_per_shard)))
        groups = [list(range(i, buckets, num_shards)) for i in range(num_shards)]
    else:
        groups = [[i] for i in range(num_shards)]
    jobs = [dict(index=i, num_shards=num_shards, inputs=[str(staging / f"docs-{b:05d}.txt")
                                                       for b in group],
                 output=str(output_dir / _shard_name(i, num_shards)), vocabulary=vocabulary,
                 lowercase=lowercase, strip_accents=strip_accents,
                 max_chars_per_word=max_chars_per_word, sequence_length=sequence_length,
                 dupe_factor=dupe_factor,
                 static_masking=static_masking, mask_rate=mask_rate,
                 max_predictions=max_predictions, whole_word=whole_word, seed=seed,
                 short_seq_prob=short_seq_prob, balance_nsp=balance_nsp)
            for i, group in enumerate(groups)]
    # Pass 2: one shard per job, independently.
    if num_workers and num_workers > 1 and len(jobs) > 1:
        context = multiprocessing.get_context("spawn")
        with context.Pool(min(num_workers, len(jobs))) as pool:
            results = pool.map(_write_shard, jobs, chunksize=1)
    else:
        results = [_write_shard(job) for job in jobs]
    shutil.rmtree(staging, ignore_errors=True)
    examples = sum(r["examples"] for r in results)
    meta = {
        "format": "kbert-pretraining-v1",
        "sequence_length": sequence_length,
        "num_shards": num_shards,
        "documents": count,
        "examples": examples,
        "examples_per_shard": [r["examples"] for r in results],
        "is_next_fraction": sum(r["is_next"] for r in results) / max(examples, 1),
        "dupe_factor": dupe_factor,
        "static_masking": bool(static_masking),
        "max_predictions": max_predictions if static_masking else None,
        "whole_word": bool(whole_word),
        "vocabulary_size": len(vocabulary),
        "seed": seed,
    }
    tmp = output_dir / (META + ".tmp")
    tmp.write_text(json.dumps(meta, indent=2))
    os.replace(tmp, output_dir / META)
    return meta


def _stage_documents(documents, staging, buckets):
    """Pass 1: deals the documents round-robin into `buckets` staging text files (one sentence
    per line, a blank line after each document), in constant memory; returns their number."""
    staging.mkdir(exist_ok=True)
    files = [open(staging / f"docs-{i:05d}.txt", "w", encoding="utf-8") for i in range(buckets)]
    count = 0
    try:
        for count, document in enumerate(documents, 1):
            f = files[(count - 1) % buckets]
            for sentence in document:
                sentence = " ".join(str(sentence).split())
                if sentence:
                    f.write(sentence + "\n")
            f.write("\n")
    finally:
        for f in files:
            f.close()
    return count


def _write_shard(job):
    """Pass 2 for one shard (runs in a worker process)."""
    import tensorflow as tf

    from kbert.data.pretraining import pairs
    from kbert.data.pretraining.documents import read_documents, tokenize_documents
    from kbert.data.pretraining.masking import MaskedLM
    from kbert.text.tokenizer import BertTokenizer

    output = pathlib.Path(job["output"])
    done = output.with_suffix(".done")
    if output.exists() and done.exists():  # written by an earlier, interrupted run
        return json.loads(done.read_text())
    tokenizer = BertTokenizer(vocabulary=job["vocabulary"], lowercase=job["lowercase"],
                              strip_accents=job["strip_accents"],
                              max_chars_per_word=job["max_chars_per_word"])
    documents = list(tokenize_documents(read_documents(job["inputs"], format="sentences"),
                                        tokenizer))
    rows = []
    for dupe in range(job["dupe_factor"]):
        rows.extend(pairs.examples(
            documents, job["sequence_length"], tokenizer.cls_token_id, tokenizer.sep_token_id,
            tokenizer.pad_token_id, seed=hash((job["seed"], job["index"], dupe)) & 0x7FFFFFFF,
            short_seq_prob=job["short_seq_prob"], balance_nsp=job["balance_nsp"]))
    random.Random(job["seed"] * 7919 + job["index"]).shuffle(rows)
    masker = None
    if job["static_masking"]:
        masker = MaskedLM.from_tokenizer(tokenizer, mask_rate=job["mask_rate"],
                                         max_predictions=job["max_predictions"],
                                         whole_word=job["whole_word"])
    tmp = output.with_name(output.name + ".tmp")
    with tf.io.TFRecordWriter(str(tmp)) as writer:
        for start in range(0, len(rows), 512):
            batch = {k: np.stack([r[k] for r in rows[start:start + 512]]) for k in rows[0]}
            if masker is not None:
                seed = tf.constant([job["seed"] + job["index"], start], tf.int32)
                ids, positions, masked_ids, weights = (
                    t.numpy() for t in masker.mask(batch["token_ids"], batch["padding_mask"],
                                                   seed))
                batch.update(token_ids=ids, masked_positions=positions, masked_ids=masked_ids,
                             masked_weights=weights)
            for i in range(len(batch["token_ids"])):
                writer.write(_serialize({k: v[i] for k, v in batch.items()}))
    os.replace(tmp, output)
    result = {"examples": len(rows),
              "is_next": sum(1 for r in rows if r["next_sentence_label"] == pairs.IS_NEXT)}
    done.write_text(json.dumps(result))
    return result


def _serialize(row):
    import tensorflow as tf

    feature = {}
    for key, value in row.items():
        value = np.atleast_1d(value)
        if value.dtype.kind == "f":
            feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=value))
        else:
            feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=value))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def read_meta(path):
    """The `dataset.json` of a TFRecord folder (or of the folder of a shard file)."""
    path = pathlib.Path(path)
    meta = path / META if path.is_dir() else path.parent / META
    return json.loads(meta.read_text())


def tfrecord_files(path):
    path = pathlib.Path(path)
    if path.is_dir():
        files = sorted(str(p) for p in path.glob("shard-*.tfrecord"))
    else:
        import glob

        files = sorted(glob.glob(str(path)))
    if not files:
        raise FileNotFoundError(f"No pre-training TFRecord shards at {path}.")
    return files


def tfrecord_dataset(path, batch_size, masker=None, seed=0, repeat=True, shuffle_buffer=10_000,
                     cycle_length=4, deterministic=None, drop_remainder=True):
    """Batches `(inputs, targets, sample_weights)` for `BertPretrainer.fit` from the shards at
    `path` (a folder written by `write_tfrecords`, or a glob of shard files).

    Unmasked shards need `masker` (a `MaskedLM`, dynamic masking with new masks every epoch,
    or a `NextTokenLM`); statically masked shards are used as written. `deterministic=False` lets the interleave and
    maps return elements out of order, for speed. With `drop_remainder=False` the last batch
    may be smaller (a held-out set scores every example).
    """
    import tensorflow as tf

    from kbert.data.pretraining.masking import dynamic_masking_dataset, to_fit_arguments
    from kbert.text.datasets import prefetched
    from kbert.text.next_token import NextTokenLM

    meta = read_meta(path if pathlib.Path(path).is_dir() else tfrecord_files(path)[0])
    length = meta["sequence_length"]
    static = meta["static_masking"]
    if not static and masker is None:
        raise ValueError("These TFRecords are not masked: pass a MaskedLM as `masker`.")
    if static and isinstance(masker, NextTokenLM):
        raise ValueError(f"The TFRecords at {path} hold fixed [MASK] corruption; a "
                         "left-to-right LM needs shards written without static masking.")
    spec = {k: tf.io.FixedLenFeature([length], tf.int64)
            for k in ("token_ids", "segment_ids", "padding_mask")}
    spec["next_sentence_label"] = tf.io.FixedLenFeature([1], tf.int64)
    if static:
        p = meta["max_predictions"]
        spec.update(masked_positions=tf.io.FixedLenFeature([p], tf.int64),
                    masked_ids=tf.io.FixedLenFeature([p], tf.int64),
                    masked_weights=tf.io.FixedLenFeature([p], tf.float32))

    def parse(records):
        parsed = tf.io.parse_example(records, spec)
        out = {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in parsed.items()}
        out["next_sentence_label"] = out["next_sentence_label"][:, 0]
        return out

    files = tfrecord_files(path)
    ds = tf.data.Dataset.from_tensor_slices(files)
    if shuffle_buffer:
        ds = ds.shuffle(len(files), seed=seed)
    if repeat:
        ds = ds.repeat()
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=min(cycle_length, len(files)),
                       num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
    if shuffle_buffer:
        ds = ds.shuffle(shuffle_buffer, seed=seed)
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
    if static:
        ds = ds.map(lambda f: to_fit_arguments(f, f["token_ids"], f["masked_positions"],
                                               f["masked_ids"], f["masked_weights"]),
                    num_parallel_calls=tf.data.AUTOTUNE)
    else:
        ds = dynamic_masking_dataset(ds, masker, seed)
    return prefetched(ds)
