"""`kbert.training.pretrain_data`: what a pre-training run reads from a text corpus."""

import pytest

from kbert.data.pretraining import pairs
from kbert.data.pretraining.pipeline import SHUFFLE_BUFFER
from kbert.training.pretrain import _masker
from kbert.training.pretrain_config import PretrainConfig
from kbert.training.pretrain_data import pretraining_data


def test_a_small_corpus_fills_the_shuffle_buffer_with_one_pass(corpus_file, tokenizer,
                                                               monkeypatch):
    """A run's first batch waits for the shuffle buffer: on a corpus smaller than the buffer
    that is one pass of pairs (and the few the batch takes), not 10,000 pairs made over dozens
    of passes in Python."""
    config = PretrainConfig(corpus=corpus_file, sequence_length=64, batch_size=8,
                            eval_examples=8, steps=1, output_dir="unused")
    data = pretraining_data(config, tokenizer, _masker(config, tokenizer))
    assert 100 < data.train_examples < SHUFFLE_BUFFER
    drawn = []
    examples = pairs.examples

    def counted(*args, **kwargs):
        for example in examples(*args, **kwargs):
            drawn.append(1)
            yield example

    monkeypatch.setattr(pairs, "examples", counted)
    next(iter(data.train(0)))
    assert data.train_examples <= len(drawn) <= data.train_examples + 64  # + tf.data's read-ahead


@pytest.mark.slow
def test_held_out_pairs_fewer_than_a_batch_are_all_scored(tokenizer, tmp_path):
    """A small corpus's held-out documents may make fewer pairs than a batch: they are scored
    in one smaller batch (training batches stay full), not dropped with the run refused."""
    from kbert.data.pretraining import corpus_documents, tokenize_documents
    from kbert.training.pretrain_data import heldout_split

    corpus = tmp_path / "small.txt"
    words = "the cat sat on a mat and a dog ran to the park with a red ball".split()
    corpus.write_text("\n\n".join("\n".join(" ".join(words[(d + s) % 7:][:9]) + "."
                                            for s in range(5)) for d in range(100)) + "\n")
    config = PretrainConfig(corpus=corpus, sequence_length=32, batch_size=16, steps=1,
                            output_dir="unused")
    data = pretraining_data(config, tokenizer, _masker(config, tokenizer))
    documents = list(tokenize_documents(corpus_documents(corpus, config.corpus_format),
                                        tokenizer))
    held = [documents[i] for i in sorted(heldout_split(len(documents), None, config.seed))]
    expected = sum(1 for _ in pairs.examples(
        held, 32, tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id,
        seed=(config.seed + 1) * 1_000_003, short_seq_prob=config.short_seq_prob))
    assert 3 <= expected < config.batch_size
    (batch,) = list(data.heldout)
    assert batch[0]["token_ids"].shape == (expected, 32)
    assert next(iter(data.train(0)))[0]["token_ids"].shape == (16, 32)
    # under a strategy every batch must split over the replicas: the pairs are cut to a multiple
    replicas = expected - 1
    (batch,) = list(pretraining_data(config, tokenizer, _masker(config, tokenizer),
                                     replicas).heldout)
    assert batch[0]["token_ids"].shape[0] == expected - expected % replicas
    with pytest.raises(ValueError, match=f"make {expected} training pairs, fewer than the "
                                         f"{expected + 1} replica"):
        pretraining_data(config, tokenizer, _masker(config, tokenizer), expected + 1)
