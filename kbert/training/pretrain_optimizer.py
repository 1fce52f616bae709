"""The pre-training optimizer: BERT's AdamW recipe (`kbert.training.optimizer`) extended with
LAMB, a warmup given in steps, polynomial decay, gradient accumulation and loss scaling."""

from kbert.training.pretrain_config import OPTIMIZERS


def make_pretraining_optimizer(model, learning_rate, total_steps, optimizer="adamw",
                               warmup_steps=None, warmup_fraction=0.01, decay_power=1.0,
                               weight_decay=0.01, clipnorm=1.0, gradient_accumulation_steps=1,
                               loss_scale=False):
    """AdamW or LAMB with warmup + polynomial (power 1: linear) decay over `total_steps`
    updates, no weight decay on LayerNorm/bias (`no_decay_variables(model)`), global-norm
    clipping, optional gradient accumulation (the schedule still counts updates), and for
    float16 a loss-scale wrapper whose skipped steps count as steps."""
    from kbert.training.lamb import Lamb
    from kbert.training.optimizer import AdamW, LossScaleOptimizer, WarmupPolynomialDecay, \
        no_decay_variables

    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}.")
    if warmup_steps is None:
        warmup_steps = int(round(warmup_fraction * total_steps))
    warmup_steps = min(int(warmup_steps), int(total_steps))
    accumulation = gradient_accumulation_steps if gradient_accumulation_steps > 1 else None
    schedule = WarmupPolynomialDecay(learning_rate, total_steps, warmup_steps, decay_power,
                                     batches_per_step=accumulation or 1)
    common = dict(learning_rate=schedule, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                  global_clipnorm=clipnorm, gradient_accumulation_steps=accumulation)
    if optimizer == "adamw":
        opt = AdamW(weight_decay=weight_decay, **common)
    else:
        opt = Lamb(weight_decay_rate=weight_decay, **common)
    opt.exclude_from_weight_decay(var_list=no_decay_variables(model))
    if loss_scale:
        opt = LossScaleOptimizer(opt)
    return opt
