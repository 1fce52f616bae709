"""Training utilities: BERT's optimizer recipe and the fine-tuning driver."""

from kbert.training.finetune import finetune
from kbert.training.lr_sweep import lr_sweep
from kbert.optimizers import Lamb
from kbert.training.optimizer import WarmupPolynomialDecay, make_optimizer, no_decay_variables
from kbert.training.pretrain import pretrain

__all__ = ["WarmupPolynomialDecay", "make_optimizer", "no_decay_variables", "Lamb", "finetune",
           "lr_sweep", "pretrain"]
