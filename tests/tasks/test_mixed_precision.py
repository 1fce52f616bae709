"""Fine-tuning under mixed precision: the policy reaches every layer, weights stay float32,
float16 gets loss scaling, and the saved model scores exactly as the trained one did."""

import keras
import numpy as np
import pytest

from kbert.data.tasks.pipeline import make_dataset
from kbert.tasks import get_spec
from kbert.training import finetune, make_optimizer
from kbert.training.optimizer import LossScaleOptimizer
from kbert.training.optimizer import dtype_policy
from tests.tasks.test_finetune import toy_task


def test_short_names_map_to_keras_policies():
    assert dtype_policy(None) is None and dtype_policy("fp32") is None
    assert dtype_policy("bf16") == "mixed_bfloat16" and dtype_policy("fp16") == "mixed_float16"
    with pytest.raises(ValueError, match="'int8'"):
        dtype_policy("int8")


def test_finetune_rejects_an_unknown_precision_before_building(tmp_path):
    with pytest.raises(ValueError, match="mixed_precision must be one of"):
        finetune(toy_task(), init="tiny", output_dir=tmp_path, steps=1, mixed_precision="fp8")


def test_loss_scaling_wraps_the_adamw():
    optimizer = make_optimizer(1e-4, total_steps=10, loss_scale=True)
    assert isinstance(optimizer, LossScaleOptimizer)
    assert optimizer.inner_optimizer.weight_decay == 0.01


def test_a_float16_backbone_gets_loss_scaling_wherever_the_model_is_built(tiny_config):
    """The task takes its backbone's policy: `compile` wraps a plain optimizer in Keras' loss
    scaling, as it does for any mixed_float16 model, and `make_optimizer(model=...)` in kbert's.
    Built by `from_pretrained(..., dtype="mixed_float16")` or by hand, the task kept float32,
    and its float16 gradients went unscaled."""
    from kbert import BertBackbone, BertClassifier

    model = BertClassifier(BertBackbone(tiny_config, dtype="mixed_float16"), num_classes=2)
    assert model.dtype_policy.name == "mixed_float16"
    model.compile(optimizer="adam")
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    model.compile(optimizer=make_optimizer(1e-4, total_steps=10, model=model))
    assert isinstance(model.optimizer, LossScaleOptimizer)  # kbert's: skipped steps count
    plain = BertClassifier(BertBackbone(tiny_config, dtype="mixed_bfloat16"), num_classes=2)
    assert not isinstance(make_optimizer(1e-4, total_steps=10, model=plain),
                          keras.optimizers.LossScaleOptimizer)  # bfloat16 needs none


@pytest.mark.slow
@pytest.mark.parametrize("precision, policy", [("bf16", "mixed_bfloat16"),
                                               ("fp16", "mixed_float16")])
def test_finetune_computes_in_half_precision_with_float32_weights(tmp_path, precision, policy):
    task = toy_task()
    metrics = finetune(task, init="tiny", output_dir=tmp_path, steps=6, batch_size=8,
                       sequence_length=16, verbose=0, mixed_precision=precision)
    assert metrics["settings"]["mixed_precision"] == policy
    assert np.isfinite(metrics["final_train_loss"])

    model = keras.saving.load_model(tmp_path / "model.keras")
    assert {layer.dtype_policy.name for layer in model.layers if layer.weights} == {policy}
    assert {w.dtype for w in model.weights} == {"float32"}
    inputs, _ = next(iter(make_dataset(task.splits["test"], model.preprocessor, 8)))
    assert keras.backend.standardize_dtype(model(inputs).dtype) == policy[len("mixed_"):]
    # The saved weights give back the scores the trained model had.
    assert get_spec(task).evaluate(model, task.splits["test"])[0] == metrics["test"]
