"""BERT models: the backbone and the models built on it.

Importing this package registers every model class, so `keras.saving.load_model` finds them.
"""

from kbert.models.backbone import BertBackbone
from kbert.models.classifier import BertClassifier
from kbert.models.feature_extractor import BertFeatureClassifier, BertFeatureExtractor
from kbert.models.multiple_choice import BertMultipleChoice
from kbert.models.pretrainer import BertPretrainer
from kbert.models.span_labeler import BertSpanLabeler
from kbert.models.token_classifier import BertTokenClassifier
