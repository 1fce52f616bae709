"""The left-to-right model of the paper's "LTR & No NSP" ablation: the next-token objective, the
causal backbone against transformers' `is_decoder` BertModel, and its checkpoints."""

import json

import numpy as np
import pytest
import torch
import transformers

import kbert
from kbert.convert import CheckpointError, refuse_causal, save_google, save_hf
from kbert.text.next_token import NextTokenLM

CLS, SEP, PAD, MASK = 2, 3, 0, 4


def test_next_token_targets_are_the_following_real_tokens():
    ids = np.array([[CLS, 11, 12, SEP, 13, SEP, PAD, PAD],
                    [CLS, 21, 22, 23, 24, 25, 26, SEP]], "int32")
    features = {"token_ids": ids, "segment_ids": np.zeros_like(ids),
                "padding_mask": (ids != PAD).astype("int32")}
    inputs, targets, weights = NextTokenLM([CLS, SEP, PAD, MASK])(features, seed=[0, 1])
    np.testing.assert_array_equal(inputs["token_ids"], ids)  # nothing corrupted
    np.testing.assert_array_equal(inputs["masked_positions"], [list(range(7))] * 2)
    # Position i predicts token i + 1; [SEP], [PAD] (and [CLS], [MASK]) are never targets.
    np.testing.assert_array_equal(targets["mlm"], [[11, 12, 0, 13, 0, 0, 0],
                                                   [21, 22, 23, 24, 25, 26, 0]])
    np.testing.assert_array_equal(weights["mlm"], [[1, 1, 0, 1, 0, 0, 0],
                                                   [1, 1, 1, 1, 1, 1, 0]])


@pytest.fixture(scope="module")
def causal_pair(tmp_path_factory):
    """A random causal backbone saved as Hugging Face, and transformers' model of that file."""
    cfg = kbert.BertConfig(vocab_size=60, hidden_size=24, num_layers=2, num_heads=3,
                           intermediate_size=48, max_position_embeddings=32)
    backbone = kbert.BertBackbone(cfg, causal=True)
    rng = np.random.default_rng(3)
    for variable in backbone.weights:
        variable.assign(rng.normal(scale=0.2, size=variable.shape))
    path = tmp_path_factory.mktemp("ltr") / "hf"
    save_hf(backbone, path)
    return backbone, path, transformers.BertModel.from_pretrained(str(path)).eval()


def _inputs():
    ids = np.array([[2, 7, 8, 9, 10, 3, 0, 0], [2, 17, 18, 19, 20, 21, 22, 3]], "int32")
    return {"token_ids": ids, "segment_ids": np.zeros_like(ids),
            "padding_mask": (ids != 0).astype("int32")}


def test_causal_backbone_matches_transformers_is_decoder(causal_pair):
    """transformers runs an `is_decoder` BertModel under a causal mask; kbert's causal backbone
    gives its hidden states, and pools the last real token with the same pooler weights."""
    backbone, path, reference = causal_pair
    assert json.loads((path / "config.json").read_text())["is_decoder"] is True
    x = _inputs()
    ours = backbone(x)
    with torch.no_grad():
        ref = reference(input_ids=torch.from_numpy(x["token_ids"].astype("int64")),
                        attention_mask=torch.from_numpy(x["padding_mask"].astype("int64")))
    hidden = ref.last_hidden_state.numpy()
    real = x["padding_mask"].astype(bool)
    np.testing.assert_allclose(np.asarray(ours["sequence_output"])[real], hidden[real],
                               atol=1e-5)
    last = hidden[np.arange(2), x["padding_mask"].sum(1) - 1]  # rows 5 and 7
    with torch.no_grad():
        pooled = reference.pooler.activation(reference.pooler.dense(torch.from_numpy(last)))
    np.testing.assert_allclose(ours["pooled_output"], pooled.numpy(), atol=1e-5)


def test_causal_pooled_output_ignores_padding_and_sees_everything(causal_pair):
    backbone = causal_pair[0]
    x = _inputs()
    garbage = {k: v.copy() for k, v in x.items()}
    garbage["token_ids"][0, 6:] = 9  # under the padding mask
    np.testing.assert_allclose(backbone(x)["pooled_output"], backbone(garbage)["pooled_output"],
                               atol=1e-6)
    changed = {k: v.copy() for k, v in x.items()}
    changed["token_ids"][0, 1] = 30  # the first word: the last token sees it
    assert not np.allclose(backbone(x)["pooled_output"][0], backbone(changed)["pooled_output"][0])


def test_causal_checkpoint_loads_causal_and_refuses_bidirectional_formats(causal_pair, tmp_path):
    backbone, path, _ = causal_pair
    loaded = kbert.BertBackbone.from_pretrained(str(path))
    assert loaded.causal
    np.testing.assert_allclose(loaded(_inputs())["pooled_output"],
                               backbone(_inputs())["pooled_output"], atol=1e-6)
    assert not kbert.BertBackbone.from_pretrained(str(path), causal=False).causal
    with pytest.raises(ValueError, match="bidirectional only"):
        save_google(backbone, tmp_path / "google")
    for fmt in ("google", "keras_hub"):
        with pytest.raises(CheckpointError, match="is_decoder"):
            refuse_causal(path, fmt)
    refuse_causal(path, "huggingface")  # kept as is_decoder
