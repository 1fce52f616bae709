import json

import pytest

from kbert.config import BertConfig, ConfigError


def test_presets_follow_the_paper_and_small_family():
    base, large = BertConfig.preset("base"), BertConfig.preset("large")
    assert (base.num_layers, base.hidden_size, base.num_heads) == (12, 768, 12)
    assert (large.num_layers, large.hidden_size, large.num_heads) == (24, 1024, 16)
    for name, (layers, hidden) in {"tiny": (2, 128), "mini": (4, 256), "small": (4, 512),
                                   "medium": (8, 512)}.items():
        cfg = BertConfig.preset(name)
        assert (cfg.num_layers, cfg.hidden_size) == (layers, hidden)
        assert cfg.intermediate_size == 4 * hidden and cfg.head_size == 64
        assert (cfg.vocab_size, cfg.max_position_embeddings, cfg.type_vocab_size) == (
            30522, 512, 2)


def test_preset_overrides():
    assert BertConfig.preset("tiny", hidden_dropout=0.0).hidden_dropout == 0.0


@pytest.mark.parametrize("kwargs, message", [
    ({"hidden_size": 100, "num_heads": 12}, "divisible"),
    ({"num_layers": 0}, "num_layers must be a positive integer"),
    ({"vocab_size": -5}, "vocab_size must be a positive integer"),
    ({"hidden_size": 64.0}, "hidden_size must be a positive integer"),
    ({"hidden_act": "swish"}, "hidden_act"),
    ({"hidden_dropout": 1.0}, "hidden_dropout"),
])
def test_bad_values_are_rejected(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        BertConfig(**kwargs)


def test_unknown_preset_lists_the_choices():
    with pytest.raises(ConfigError, match="tiny, mini, small, medium, base, large"):
        BertConfig.preset("huge")


def test_reads_the_real_hf_config(minilm_dir):
    cfg = BertConfig.from_hf_config(minilm_dir)
    assert (cfg.num_layers, cfg.hidden_size, cfg.num_heads, cfg.intermediate_size) == (
        6, 384, 12, 1536)
    assert cfg.hidden_act == "gelu"  # HF "gelu" is the exact form


@pytest.mark.parametrize("hf_name, ours", [("gelu", "gelu"), ("gelu_new", "gelu_tanh"),
                                           ("gelu_pytorch_tanh", "gelu_tanh")])
def test_hf_activation_names(hf_name, ours):
    values = {**BertConfig().to_hf_config(), "hidden_act": hf_name}
    assert BertConfig.from_hf_config(values).hidden_act == ours


def test_google_gelu_is_the_tanh_form(tmp_path):
    google = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
              "num_attention_heads": 12, "intermediate_size": 3072, "hidden_act": "gelu",
              "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
              "max_position_embeddings": 512, "type_vocab_size": 2, "initializer_range": 0.02}
    (tmp_path / "bert_config.json").write_text(json.dumps(google))
    cfg = BertConfig.from_google_config(tmp_path)
    assert cfg == BertConfig.preset("base", hidden_act="gelu_tanh")
    assert cfg.to_google_config() == google


@pytest.mark.parametrize("act", ["gelu", "gelu_tanh", "relu"])
def test_config_files_round_trip(act):
    cfg = BertConfig.preset("mini", hidden_act=act, layer_norm_eps=1e-6)
    assert BertConfig.from_hf_config(cfg.to_hf_config()) == cfg
    assert BertConfig.from_google_config(cfg.to_google_config()) == cfg.__class__(
        **{**cfg.to_dict(), "layer_norm_eps": 1e-12})  # bert_config.json has no eps field
    assert BertConfig.from_dict(cfg.to_dict()) == cfg


def test_bad_config_files(tmp_path):
    with pytest.raises(ConfigError, match="No config file"):
        BertConfig.from_hf_config(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        BertConfig.from_hf_config(tmp_path)
    with pytest.raises(ConfigError, match="lacks"):
        BertConfig.from_hf_config({"hidden_size": 10})
    with pytest.raises(ConfigError, match="model_type"):
        BertConfig.from_hf_config({**BertConfig().to_hf_config(), "model_type": "gpt2"})
    with pytest.raises(ConfigError, match="Unknown BertConfig fields"):
        BertConfig.from_dict({"hidden": 3})
