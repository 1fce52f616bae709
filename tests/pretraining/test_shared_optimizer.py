"""Pre-training builds its optimizer with fine-tuning's `make_optimizer`. The values pinned here
are what the former `make_pretraining_optimizer` returned for the same settings (recorded before
it was removed); the formulas next to them are the schedule of the module docstring."""

import keras
import pytest

from kbert import BertBackbone, BertPretrainer
from kbert.optimizers import AdamW, Lamb
from kbert.training.optimizer import LossScaleOptimizer, make_optimizer

BATCHES = (0, 1, 5, 9, 10, 29, 30, 31, 59, 60, 150, 299, 300, 400)
# (make_optimizer's pre-training keywords, class, inner class, learning rate at BATCHES)
CASES = [
    (dict(optimizer="lamb", warmup_fraction=0.1, decay_power=2.0, gradient_accumulation_steps=3),
     Lamb, Lamb,
     [0.0, 0.0, 2e-4, 6e-4, 6e-4, 1.8e-3, 2e-3, 2e-3, 1.62e-3, 1.5802469570e-3, 6.172840367e-4,
      2.469149e-7, 0.0, 0.0]),
    (dict(optimizer="adamw", warmup_steps=25, loss_scale=True),
     LossScaleOptimizer, AdamW,
     [0.0, 8e-5, 4e-4, 7.2e-4, 8e-4, 1.8933333922e-3, 1.8666667165e-3, 1.8400001572e-3,
      1.0933333542e-3, 1.0666666785e-3, 0.0, 0.0, 0.0, 0.0]),
    (dict(optimizer="adamw", warmup_steps=500, decay_power=0.5),  # warmup capped at the total
     AdamW, AdamW,
     [0.0, 2e-5, 1e-4, 1.8e-4, 2e-4, 5.8e-4, 6e-4, 6.2e-4, 1.18e-3, 1.2e-3, 0.0, 0.0, 0.0, 0.0]),
]


def _formula(batch, peak, total, warmup, power, per_step):
    step = batch // per_step
    if step < warmup:
        return peak * step / warmup
    progress = min(max((step - warmup) / max(total - warmup, 1), 0.0), 1.0)
    return peak * (1 - progress) ** power


@pytest.fixture(scope="module")
def pretrainer():
    from kbert.config import BertConfig

    config = BertConfig(vocab_size=120, hidden_size=32, num_layers=2, num_heads=4,
                        intermediate_size=64, max_position_embeddings=64)
    return BertPretrainer(BertBackbone(config))


@pytest.mark.parametrize("options, cls, inner_cls, pinned", CASES)
def test_shared_builder_gives_the_former_pretraining_optimizer(pretrainer, options, cls,
                                                               inner_cls, pinned):
    opt = make_optimizer(2e-3, 100, model=pretrainer, **options)
    inner = opt.inner_optimizer if isinstance(opt, LossScaleOptimizer) else opt
    assert type(opt) is cls and type(inner) is inner_cls
    schedule = inner._learning_rate
    values = [float(keras.ops.convert_to_numpy(schedule(b))) for b in BATCHES]
    assert values == pytest.approx(pinned, rel=1e-6, abs=1e-9)
    c = schedule.get_config()
    by_hand = [_formula(b, 2e-3, 100, c["warmup_steps"], c["power"], c["batches_per_step"])
               for b in BATCHES]
    assert values == pytest.approx(by_hand, rel=1e-5, abs=1e-9)
    accumulation = options.get("gradient_accumulation_steps")
    assert inner.gradient_accumulation_steps == accumulation
    assert inner.global_clipnorm == 1.0
    assert (inner.weight_decay_rate if inner_cls is Lamb else inner.weight_decay) == 0.01

    inner.build(pretrainer.trainable_variables)
    kept = sorted(v.path for v in pretrainer.trainable_variables if not inner._use_weight_decay(v))
    assert len(pretrainer.trainable_variables) == 38
    assert kept == NO_DECAY  # the former builder's list for this model


def test_unknown_optimizer_is_refused_by_name():
    with pytest.raises(ValueError, match="'sgd'"):
        make_optimizer(1e-3, 10, optimizer="sgd")


NO_DECAY = sorted(
    ["embeddings/layer_norm/beta", "embeddings/layer_norm/gamma", "mlm_head/layer_norm/beta",
     "mlm_head/layer_norm/gamma", "mlm_head/output_bias", "mlm_head/transform_dense/bias",
     "nsp_head/bias", "pooler/bias"]
    + [f"transformer_layer_{i}/{name}" for i in (0, 1) for name in (
        "attention_layer_norm/beta", "attention_layer_norm/gamma", "attention_output/bias",
        "attention_qkv/bias", "intermediate/bias", "output/bias", "output_layer_norm/beta",
        "output_layer_norm/gamma")])
