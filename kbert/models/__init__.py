"""BERT models: the backbone and the models built on it."""

from kbert.models.backbone import BertBackbone
from kbert.models.pretrainer import BertPretrainer
