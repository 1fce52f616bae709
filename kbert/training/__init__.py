"""Training utilities: BERT's optimizer recipe and the fine-tuning driver."""

from kbert.training.finetune import finetune, lr_sweep
from kbert.training.lamb import Lamb, WarmupPolynomialDecay
from kbert.training.optimizer import LinearWarmupLinearDecay, make_optimizer, no_decay_variables
from kbert.training.pretrain import pretrain

__all__ = ["LinearWarmupLinearDecay", "make_optimizer", "no_decay_variables", "finetune",
           "lr_sweep", "pretrain", "Lamb", "WarmupPolynomialDecay"]
