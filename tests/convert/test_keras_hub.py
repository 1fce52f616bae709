"""keras-hub BertBackbone ↔ canonical weights, checked against Hugging Face's BertModel."""

import json
import os

import keras
import keras_hub
import numpy as np
import pytest

from kbert.config import BertConfig, ConfigError
from kbert.convert import read_config
from kbert.convert.keras_hub import from_keras_hub, to_keras_hub
from kbert.convert.weights import CheckpointError, expected_shapes


def random_backbone(seed=0):
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=100, num_layers=2, num_heads=4, hidden_dim=64, intermediate_dim=96,
        max_sequence_length=32, num_segments=3)
    # Every variable random (no zero biases, no unit gammas), so that a mix-up shows.
    rng = np.random.default_rng(seed)
    for variable in backbone.weights:
        scale = 0.5 if "gamma" in variable.path else 0.1
        offset = 1.0 if "gamma" in variable.path else 0.0
        variable.assign(offset + scale * rng.standard_normal(tuple(variable.shape)))
    return backbone


def random_inputs(seed=1):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, 100, size=(3, 16)).astype("int32")
    mask = np.ones_like(ids)
    mask[1, 11:], mask[2, 4:] = 0, 0
    ids[mask == 0] = 0
    segments = np.zeros_like(ids)
    segments[:, 6:] = 1
    segments[0, 12:] = 2
    return {"token_ids": ids, "segment_ids": segments * mask, "padding_mask": mask}


def keras_outputs(backbone, inputs):
    out = backbone(inputs, training=False)
    return {k: keras.ops.convert_to_numpy(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def backbone():
    return random_backbone()


@pytest.fixture(scope="module")
def converted(backbone):
    return from_keras_hub(backbone)


def test_config_and_names(converted):
    config, weights = converted
    assert config == BertConfig(vocab_size=100, hidden_size=64, num_layers=2, num_heads=4,
                                intermediate_size=96, hidden_act="gelu_tanh",
                                hidden_dropout=0.1, attention_dropout=0.1,
                                max_position_embeddings=32, type_vocab_size=3,
                                layer_norm_eps=1e-12)
    assert config.to_hf_config()["hidden_act"] == "gelu_new"
    shapes = expected_shapes(config, heads=False)
    assert {k: v.shape for k, v in weights.items()} == shapes  # no heads: keras-hub has none
    assert all(v.dtype == np.float32 for v in weights.values())


def test_outputs_match_hugging_face(backbone, converted):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config, weights = converted
    hf_config = transformers.BertConfig(**config.to_hf_config())
    hf_config._attn_implementation = "eager"
    model = transformers.BertModel(hf_config).eval()
    result = model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()},
                                   strict=False)
    assert not result.unexpected_keys
    assert set(result.missing_keys) <= {"embeddings.position_ids"}  # a buffer, not a weight

    inputs = random_inputs()
    want = keras_outputs(backbone, inputs)
    with torch.no_grad():
        got = model(input_ids=torch.from_numpy(inputs["token_ids"]).long(),
                    token_type_ids=torch.from_numpy(inputs["segment_ids"]).long(),
                    attention_mask=torch.from_numpy(inputs["padding_mask"]).long())
    keep = inputs["padding_mask"].astype(bool)
    seq_diff = np.abs(got.last_hidden_state.numpy()[keep] - want["sequence_output"][keep]).max()
    pooled_diff = np.abs(got.pooler_output.numpy() - want["pooled_output"]).max()
    assert seq_diff <= 1e-5 and pooled_diff <= 1e-5, (seq_diff, pooled_diff)
    assert np.abs(want["sequence_output"]).max() > 0.1  # a non-trivial output

    # With exact GELU instead, Hugging Face's model drifts: the activation form matters.
    hf_config.hidden_act = "gelu"
    exact = transformers.BertModel(hf_config).eval()
    exact.load_state_dict(model.state_dict())
    with torch.no_grad():
        drift = exact(input_ids=torch.from_numpy(inputs["token_ids"]).long(),
                      token_type_ids=torch.from_numpy(inputs["segment_ids"]).long(),
                      attention_mask=torch.from_numpy(inputs["padding_mask"]).long())
    assert np.abs(drift.last_hidden_state.numpy()[keep]
                  - want["sequence_output"][keep]).max() > 1e-5


def test_round_trip_is_identical(backbone, converted):
    config, weights = converted
    rebuilt = to_keras_hub(config, weights)
    assert rebuilt.get_config()["num_segments"] == 3
    before = {v.path: v.numpy() for v in backbone.weights}
    after = {v.path: v.numpy() for v in rebuilt.weights}
    assert before.keys() == after.keys()
    for path in before:
        np.testing.assert_array_equal(after[path], before[path], err_msg=path)
    inputs = random_inputs(seed=2)
    want, got = keras_outputs(backbone, inputs), keras_outputs(rebuilt, inputs)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_array_equal(got[key], want[key])
    _, again = from_keras_hub(rebuilt)
    for name in weights:
        np.testing.assert_array_equal(again[name], weights[name])


@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")  # Keras' saver
def test_a_presets_config_is_read_without_building_its_model(backbone, converted, tmp_path,
                                                             monkeypatch):
    """What `kbert finetune --init PRESET` checks first (the sequence length against the
    positions) costs a JSON read, not a second load of the model."""
    backbone.save_to_preset(str(tmp_path / "preset"))
    monkeypatch.setattr(keras_hub.models.BertBackbone, "from_preset",
                        lambda *args, **kwargs: pytest.fail("the model was built"))
    assert read_config(tmp_path / "preset") == converted[0]


@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")  # Keras' saver
def test_preset_directory(backbone, converted, tmp_path):
    config, weights = converted
    preset = tmp_path / "preset"
    backbone.save_to_preset(str(preset))
    read_config, read = from_keras_hub(preset)
    assert read_config == config
    for name in weights:
        np.testing.assert_array_equal(read[name], weights[name])

    with pytest.raises(CheckpointError, match=r"model\.weights\.h5 is missing"):
        os.makedirs(tmp_path / "empty")
        (tmp_path / "empty" / "config.json").write_text(
            (preset / "config.json").read_text())
        from_keras_hub(tmp_path / "empty")
    other = tmp_path / "other"
    os.makedirs(other)
    (other / "model.weights.h5").write_bytes((preset / "model.weights.h5").read_bytes())
    (other / "config.json").write_text(json.dumps({"model_type": "bert"}))  # an HF config
    with pytest.raises(CheckpointError, match="not a BertBackbone"):
        from_keras_hub(other)
    (preset / "model.weights.h5").write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match=r"model\.weights\.h5"):
        from_keras_hub(preset)
    with pytest.raises(TypeError):
        from_keras_hub(42)


def test_mis_shaped_or_incomplete_weights(converted):
    config, weights = converted
    bad = dict(weights)
    bad["encoder.layer.1.attention.self.key.weight"] = np.zeros((64, 63), np.float32)
    with pytest.raises(CheckpointError,
                       match=r"encoder\.layer\.1\.attention\.self\.key\.weight \(expected "
                             r"\[64, 64\], got \[64, 63\]\)"):
        to_keras_hub(config, bad)
    bad = {k: v for k, v in weights.items() if k != "pooler.dense.bias"}
    with pytest.raises(CheckpointError, match=r"missing \(1\): pooler\.dense\.bias"):
        to_keras_hub(config, bad)


def test_heads_are_left_out_and_numerics_are_guarded(converted):
    config, weights = converted
    rng = np.random.default_rng(3)
    heads = {name: rng.standard_normal(shape).astype(np.float32)
             for name, shape in expected_shapes(config, heads=True).items()
             if name.startswith("cls.")}
    rebuilt = to_keras_hub(config, {**weights, **heads})
    _, again = from_keras_hub(rebuilt)
    assert set(again) == set(weights)

    exact = BertConfig(**{**config.to_dict(), "hidden_act": "gelu"})
    with pytest.raises(ConfigError, match="allow_approximation"):
        to_keras_hub(exact, weights)
    with pytest.warns(UserWarning, match="hidden_act 'gelu'"):
        to_keras_hub(exact, weights, allow_approximation=True)
