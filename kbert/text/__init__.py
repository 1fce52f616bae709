"""The text pipeline: in-graph WordPiece tokenization, BERT input packing (sentences, pairs,
choices; SQuAD windows; word-aligned tags; masked-LM inputs; blanks to fill), vocabulary
training."""

from kbert.text.fill_mask_preprocessor import BertFillMaskPreprocessor
from kbert.text.masked_lm_preprocessor import BertMaskedLMPreprocessor
from kbert.text.preprocessor import BertPreprocessor
from kbert.text.span_preprocessor import BertSpanPreprocessor
from kbert.text.token_preprocessor import BertTokenPreprocessor
from kbert.text.tokenizer import BertTokenizer
from kbert.text.vocab import train_vocabulary

