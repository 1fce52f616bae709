"""The text pipeline: in-graph WordPiece tokenization, BERT input packing, vocabulary training."""

from kbert.text.preprocessor import BertPreprocessor
from kbert.text.tokenizer import BertTokenizer
from kbert.text.vocab import train_vocabulary

__all__ = ["BertPreprocessor", "BertTokenizer", "train_vocabulary"]
