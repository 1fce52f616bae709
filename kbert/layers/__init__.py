"""BERT's building blocks as Keras 3 layers (keras.ops only, so every backend runs them)."""

from kbert.layers.embeddings import BertEmbeddings
from kbert.layers.encoder_block import TransformerEncoderBlock, attention_bias
from kbert.layers.dropout import Dropout
from kbert.layers.mlm_head import MaskedLMHead
