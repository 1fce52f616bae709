"""A small vocabulary and tokenizer for the pipeline and model tests."""

from kbert.text import BertPreprocessor, BertTokenizer

WORDS = ("a b c good bad film fine dull is was it the what who why yes no not very movie "
         "question answer choice one two three four ? . ,").split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS


def preprocessor(sequence_length=16):
    return BertPreprocessor(BertTokenizer(VOCAB, lowercase=True), sequence_length=sequence_length)


def token_id(word):
    return VOCAB.index(word)
