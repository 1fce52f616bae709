"""`kbert.training.pretrain_data`: what a pre-training run reads from a text corpus."""

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
