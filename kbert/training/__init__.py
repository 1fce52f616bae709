"""Training utilities: BERT's optimizer recipe and the fine-tuning driver."""

from kbert.training.finetune import finetune, lr_sweep
from kbert.training.optimizer import LinearWarmupLinearDecay, make_optimizer, no_decay_variables

__all__ = ["LinearWarmupLinearDecay", "make_optimizer", "no_decay_variables", "finetune",
           "lr_sweep"]
