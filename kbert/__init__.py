"""kbert: BERT for Keras 3 and TensorFlow."""

from kbert.config import BertConfig
from kbert.models import BertBackbone, BertPretrainer

__version__ = "0.1.0"
