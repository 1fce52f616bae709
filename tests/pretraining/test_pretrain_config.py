"""`PretrainConfig`: bad settings fail before any work with an error naming the setting, and
`pretrain(config=...)` is the same run as `pretrain(output_dir, **fields)`."""

import pytest

from kbert.config import BertConfig
from kbert.training.pretrain_config import PretrainConfig
from tests.pretraining.test_pretrain import SMALL


@pytest.mark.parametrize("fields, message", [
    (dict(), "exactly one of `steps` and `epochs`"),
    (dict(steps=3, epochs=1), "exactly one of `steps` and `epochs`"),
    (dict(steps=0), "steps must be a positive integer"),
    (dict(steps=2.5), "steps must be a positive integer"),
    (dict(steps=3, batch_size=-1), "batch_size must be a positive integer"),
    (dict(steps=3, learning_rate=0), "learning_rate must be positive"),
    (dict(steps=3, optimizer="sgd"), "optimizer must be one of"),
    (dict(steps=3, mask_rate=1.5), r"mask_rate must be in \(0, 1\)"),
    (dict(steps=3, warmup_fraction=2), r"warmup_fraction must be a number in \[0, 1\]"),
    (dict(steps=3, mixed_precision="fp8"), "mixed_precision must be one of"),
    (dict(steps=3, corpus_format="xml"), "corpus_format must be one of"),
    (dict(steps=3, profile_batches=(5, 2)), "profile_batches must be"),
    (dict(steps=3, preset="minilm_l6_h384_uncased"), "pass it as `init`"),
    (dict(steps=3, init="minilm_l6_h384_uncased", vocabulary=["[PAD]"]), "`init` brings"),
    (dict(steps=3, init="x", bert_config=BertConfig(**SMALL)), "not both"),
    (dict(steps=3, causal=True, whole_word=True), "masking settings"),
    (dict(steps=3, causal=True, max_predictions=20), "masking settings"),
])
def test_bad_settings_name_the_problem(fields, message):
    with pytest.raises(ValueError, match=message):
        PretrainConfig("out", **fields)


def test_unknown_presets_list_the_registry():
    with pytest.raises(FileNotFoundError, match="size presets: tiny.*weights presets"):
        PretrainConfig("out", steps=3, preset="gigantic")


def test_derived_settings():
    config = PretrainConfig("out", steps=3, sequence_length=512)
    assert config.predictions == 77 and config.policy is None and config.model_name == "mini"
    assert PretrainConfig("out", steps=3).predictions == 20  # the paper's 20 at length 128
    assert PretrainConfig("out", steps=3, mixed_precision="bf16").policy == "mixed_bfloat16"
    # A left-to-right LM predicts at every position but the last.
    assert PretrainConfig("out", steps=3, causal=True, nsp=False).predictions == 127


@pytest.mark.slow
def test_a_config_object_runs_the_same_training_as_keywords(tmp_path, corpus_file):
    from kbert.training.pretrain import pretrain

    fields = dict(bert_config=BertConfig(**SMALL), corpus=corpus_file, steps=2, batch_size=4,
                  sequence_length=32, learning_rate=1e-3, warmup_steps=1, eval_examples=8,
                  verbose=0, save_model=False)
    by_object = pretrain(config=PretrainConfig(tmp_path / "a", **fields))
    fields["config"] = fields.pop("bert_config")  # the keyword form's name for the shape
    by_keywords = pretrain(tmp_path / "b", **fields)
    assert by_object["steps"] == by_keywords["steps"] == 2
    assert by_object["weights_sha256"] == by_keywords["weights_sha256"]
    assert by_object["run"] == by_keywords["run"]
    with pytest.raises(TypeError, match="not both"):
        pretrain(tmp_path / "c", config=PretrainConfig(tmp_path / "c", steps=1))
