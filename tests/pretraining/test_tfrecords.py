"""The streaming sharded TFRecord writer and the reader pipeline."""

import itertools
import json

import numpy as np
import pytest

from kbert.data.pretraining import MaskedLM, read_meta, tfrecord_dataset, write_tfrecords
from kbert.data.pretraining.documents import read_documents


def _documents(corpus_file, n=None):
    return itertools.islice(read_documents(corpus_file), n)


@pytest.mark.slow
def test_parallel_sharded_write_and_read(tmp_path, tokenizer, corpus_file):
    out = tmp_path / "dynamic"
    meta = write_tfrecords(_documents(corpus_file), out, tokenizer.get_vocabulary(),
                           sequence_length=64, num_shards=3, num_workers=2)
    assert meta == read_meta(out)
    assert sorted(p.name for p in out.glob("*.tfrecord")) == [
        f"shard-0000{i}-of-00003.tfrecord" for i in range(3)]
    assert not (out / ".staging").exists()
    assert meta["documents"] == 300 and meta["examples"] == sum(meta["examples_per_shard"])
    assert abs(meta["is_next_fraction"] - 0.5) < 0.05
    masker = MaskedLM.from_tokenizer(tokenizer, max_predictions=10)
    with pytest.raises(ValueError):
        tfrecord_dataset(out, 16)
    ds = tfrecord_dataset(out, 16, masker, seed=1)
    batches = list(ds.take(4).as_numpy_iterator())
    x, y, w = batches[0]
    assert x["token_ids"].shape == (16, 64) and x["masked_positions"].shape == (16, 10)
    assert y["nsp"].shape == (16,) and w["mlm"].shape == (16, 10)
    # Reading every record once gives back the written count.
    once = tfrecord_dataset(out, 1, masker, repeat=False, shuffle_buffer=0)
    assert sum(1 for _ in once) == meta["examples"]
    # A rerun skips finished shards and gives the same metadata.
    again = write_tfrecords(_documents(corpus_file), out, tokenizer.get_vocabulary(),
                            sequence_length=64, num_shards=3)
    assert again["examples"] == meta["examples"]


@pytest.mark.slow
def test_static_masks_are_fixed(tmp_path, tokenizer, corpus_file):
    out = tmp_path / "static"
    meta = write_tfrecords(_documents(corpus_file, 100), out, tokenizer.get_vocabulary(),
                           sequence_length=64, num_shards=2, static_masking=True, dupe_factor=2,
                           max_predictions=10)
    assert meta["static_masking"] and meta["max_predictions"] == 10
    ds = tfrecord_dataset(out, 8, repeat=False, shuffle_buffer=0, deterministic=True)
    first = [x["masked_positions"] for x, _, _ in ds.as_numpy_iterator()]
    second = [x["masked_positions"] for x, _, _ in ds.as_numpy_iterator()]
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    x, y, w = next(ds.as_numpy_iterator())
    masked = np.take_along_axis(x["token_ids"], x["masked_positions"], 1)[w["mlm"] > 0]
    assert (masked == tokenizer.mask_token_id).mean() > 0.5
    # dupe_factor=2: twice the pairs of one pass, differently masked.
    single = write_tfrecords(_documents(corpus_file, 100), tmp_path / "one",
                             tokenizer.get_vocabulary(), sequence_length=64, num_shards=2)
    assert meta["examples"] > 1.6 * single["examples"]
    assert json.loads((out / "dataset.json").read_text())["dupe_factor"] == 2


@pytest.mark.slow
def test_workers_tokenize_with_the_models_word_limit(tmp_path, tokenizer):
    """A word of 150 letters is [UNK] under Hugging Face's 100-character limit and pieces under
    Google's 200: the shards must follow the limit they are given, as the model's tokenizer."""
    long_word = "ab" * 75
    documents = [[f"First {long_word} sentence here.", "Second sentence."] * 3] * 4
    import tensorflow as tf

    unknowns = {}
    for limit in (100, 200):
        out = tmp_path / f"limit{limit}"
        write_tfrecords(documents, out, tokenizer.get_vocabulary(), sequence_length=64,
                        num_shards=1, max_chars_per_word=limit)
        ids = [tf.train.Example.FromString(record).features.feature["token_ids"].int64_list.value
               for shard in out.glob("*.tfrecord")
               for record in tf.data.TFRecordDataset(str(shard)).as_numpy_iterator()]
        unknowns[limit] = int(sum((np.asarray(row) == tokenizer.unk_token_id).sum()
                                  for row in ids))
    assert unknowns[100] > 0 and unknowns[200] == 0, unknowns
