from unittest import mock

import keras
import numpy as np
import pytest
import torch
import transformers

from kbert import BertBackbone, BertConfig
from tests.conftest import make_inputs


@pytest.mark.slow
@pytest.mark.parametrize("preset, approx", [("base", 110e6), ("large", 335e6)])
def test_parameter_counts_match_hugging_face(preset, approx):
    cfg = BertConfig.preset(preset)
    # Zeros for the truncated-normal draws, which are most of building large (14.5 -> 3.5 CPU
    # s): the count is the layers' shapes, as transformers' meta device counts its own.
    with mock.patch.object(keras.initializers.TruncatedNormal, "__call__",
                           lambda self, shape, dtype=None: keras.ops.zeros(shape, dtype)):
        ours = BertBackbone(cfg).count_params()
    with torch.device("meta"):
        hf = transformers.BertModel(transformers.BertConfig(**cfg.to_hf_config()))
    assert ours == sum(p.numel() for p in hf.parameters())
    assert abs(ours - approx) / approx < 0.01


def test_outputs(tiny_config):
    backbone = BertBackbone(tiny_config, output_hidden_states=True, output_attentions=True)
    out = backbone(make_inputs())
    assert out["sequence_output"].shape == (3, 10, 32)
    assert out["pooled_output"].shape == (3, 32)
    assert len(out["hidden_states"]) == tiny_config.num_layers + 1
    np.testing.assert_array_equal(out["hidden_states"][-1], out["sequence_output"])
    assert [p.shape for p in out["attention_probs"]] == [(3, 4, 10, 10)] * 2
    pooled = np.tanh(np.asarray(out["sequence_output"])[:, 0] @ backbone.pooler.kernel.numpy()
                     + backbone.pooler.bias.numpy())
    np.testing.assert_allclose(out["pooled_output"], pooled, atol=1e-6)


@pytest.mark.parametrize("options", [{}, {"causal": True}, {"output_attentions": True},
                                     {"output_hidden_states": True}])
def test_output_at_positions_is_the_sequence_output_there(tiny_config, options):
    """`output_positions` (how `BertPretrainer` calls its backbone) computes the last block at
    `[CLS]` and those positions apart, or gathers them where it cannot (causal, attention
    maps): either way the full output's rows, padding positions and repeats included, beside
    every output the backbone gives without positions."""
    backbone = BertBackbone(tiny_config, **options)
    x = make_inputs()
    positions = np.array([[0, 9, 3, 3], [4, 1, 7, 2], [9, 0, 5, 5]], "int32")
    out = backbone(x, output_positions=positions)
    want = backbone(x)
    assert set(out) == set(want) | {"output_at_positions"}
    np.testing.assert_allclose(out["output_at_positions"], np.take_along_axis(
        np.asarray(want["sequence_output"]), positions[..., None], axis=1), atol=2e-6)
    for key in want:
        np.testing.assert_allclose(out[key], want[key], atol=2e-6)
    spec = backbone.compute_output_spec(
        {k: keras.KerasTensor(v.shape, "int32") for k, v in x.items()},
        output_positions=keras.KerasTensor(positions.shape, "int32"))
    assert keras.tree.map_structure(lambda t: t.shape, spec) == keras.tree.map_structure(
        lambda t: tuple(t.shape), out)


def test_padding_changes_nothing_for_real_tokens(tiny_config):
    backbone = BertBackbone(tiny_config)
    x = make_inputs()
    other = {k: v.copy() for k, v in x.items()}
    other["token_ids"][1:, 5:] = 7  # garbage under the padding mask
    a, b = backbone(x), backbone(other)
    np.testing.assert_allclose(np.asarray(a["sequence_output"])[1:, :5],
                               np.asarray(b["sequence_output"])[1:, :5], atol=1e-6)
    np.testing.assert_allclose(a["pooled_output"], b["pooled_output"], atol=1e-6)
    # A batch of one unpadded row gives the same as that row inside a padded batch.
    single = backbone({k: v[1:2, :5] for k, v in x.items()})
    np.testing.assert_allclose(single["sequence_output"],
                               np.asarray(a["sequence_output"])[1:2, :5], atol=1e-5)


def test_causal_backbone_hides_the_future(tiny_config):
    backbone = BertBackbone(tiny_config, causal=True)
    x = make_inputs(batch=1)
    later = {k: v.copy() for k, v in x.items()}
    later["token_ids"][:, 6:] = 3
    a, b = backbone(x)["sequence_output"], backbone(later)["sequence_output"]
    np.testing.assert_allclose(np.asarray(a)[:, :6], np.asarray(b)[:, :6], atol=1e-6)


def test_save_and_load_keras_file(tiny_config, tmp_path):
    backbone = BertBackbone(tiny_config, output_hidden_states=True, output_attentions=True)
    backbone.save(tmp_path / "backbone.keras")
    loaded = keras.saving.load_model(tmp_path / "backbone.keras", safe_mode=True)
    assert isinstance(loaded, BertBackbone) and loaded.config == tiny_config
    x = make_inputs()
    a, b = backbone(x), loaded(x)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_array_equal(a[key], b[key])
    for p, q in zip(a["attention_probs"], b["attention_probs"]):
        np.testing.assert_array_equal(p, q)


def test_config_round_trip(tiny_config):
    backbone = BertBackbone(tiny_config, causal=True, name="enc")
    clone = BertBackbone.from_config(backbone.get_config())
    assert clone.get_config() == backbone.get_config()
    assert [w.path for w in clone.weights] == [w.path for w in backbone.weights]


def test_mixed_precision_policy(tiny_config):
    backbone = BertBackbone(tiny_config, dtype="mixed_bfloat16")
    out = backbone(make_inputs())
    assert out["sequence_output"].dtype == "bfloat16"
    assert backbone.embeddings.token_embedding.embeddings.dtype == "float32"
    # The policy is the model's too, so task heads and a saved model keep it.
    clone = BertBackbone.from_config(backbone.get_config())
    assert backbone.dtype_policy.name == clone.dtype_policy.name == "mixed_bfloat16"


def test_stable_layer_names(tiny_config):
    names = [layer.name for layer in BertBackbone(tiny_config).layers]
    for expected in ("embeddings", "transformer_layer_0", "transformer_layer_1", "pooler"):
        assert expected in names


def test_cls_alone_skips_the_batched_matmul_at_any_traced_length(tiny_config):
    """The last block's [CLS] query is a broadcast product, not a batched matmul, also when
    TensorFlow traces an unknown sequence length (where `x[:, :1]` has no static length):
    oneDNN's batched matmul at one query aborted and crashed CI workers in classifier fits.
    Two batched matmuls (scores, context) a full block call, none at [CLS]."""
    import tensorflow as tf

    backbone = BertBackbone(tiny_config)
    spec = tf.TensorSpec((None, None), tf.int32)
    graph = tf.function(lambda x: backbone(x)["pooled_output"]).get_concrete_function(
        {"token_ids": spec, "segment_ids": spec, "padding_mask": spec}).graph
    matmuls = [op for op in graph.get_operations()
               if op.type in ("Einsum", "BatchMatMulV2", "BatchMatMulV3")]
    assert len(matmuls) == 2 * tiny_config.num_layers
