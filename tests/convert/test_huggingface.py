"""kbert against Hugging Face transformers (PyTorch) on the real pretrained MiniLM."""

import json
import shutil
import warnings

import keras
import numpy as np
import pytest
import safetensors.numpy
import torch
import transformers

import kbert
from kbert.convert import (CheckpointError, get_backbone_weights, read_hf_checkpoint, save_google,
                           save_hf)

SENTENCES = [
    ("The quick brown fox jumps over the lazy dog.", "It was not amused by the fox."),
    ("BERT reads text in both directions at once.", "Short."),
    ("Paris is the capital of France.", None),
    ("In 1905 Einstein published four papers that changed physics forever.", None),
]


@pytest.fixture(scope="module")
def hf_tokenizer(minilm_dir):
    return transformers.BertTokenizerFast.from_pretrained(str(minilm_dir))


@pytest.fixture(scope="module")
def reference(minilm_dir):
    return transformers.BertModel.from_pretrained(str(minilm_dir)).eval()


@pytest.fixture(scope="module")
def backbone():
    return kbert.BertBackbone.from_pretrained("minilm_l6_h384_uncased")


def _encode(tokenizer, pairs):
    firsts = [a for a, _ in pairs]
    seconds = [b for _, b in pairs]
    enc = tokenizer(firsts, seconds if all(seconds) else None, padding=True, return_tensors="np")
    return enc, {"token_ids": enc["input_ids"].astype("int32"),
                 "segment_ids": enc["token_type_ids"].astype("int32"),
                 "padding_mask": enc["attention_mask"].astype("int32")}


def _hf_outputs(model, enc):
    with torch.no_grad():
        out = model(**{k: torch.from_numpy(v) for k, v in enc.items()})
    return out.last_hidden_state.numpy(), out.pooler_output.numpy()


@pytest.mark.parametrize("pairs", [
    [p for p in SENTENCES if p[1]],       # paired, padded
    [(a, None) for a, _ in SENTENCES],    # single, padded
], ids=["pairs", "single"])
def test_matches_transformers_on_real_weights(backbone, reference, hf_tokenizer, pairs):
    enc, x = _encode(hf_tokenizer, pairs)
    assert enc["attention_mask"].min() == 0, "the batch must contain padding"
    sequence, pooled = _hf_outputs(reference, enc)
    out = backbone(x)
    assert np.abs(np.asarray(out["sequence_output"]) - sequence).max() <= 1e-4
    assert np.abs(np.asarray(out["pooled_output"]) - pooled).max() <= 1e-4


def test_hidden_states_and_attention_match_transformers(minilm_dir, hf_tokenizer):
    reference = transformers.BertModel.from_pretrained(
        str(minilm_dir), attn_implementation="eager").eval()  # eager returns the probabilities
    backbone = kbert.BertBackbone.from_pretrained(minilm_dir, output_hidden_states=True,
                                                  output_attentions=True)
    enc, x = _encode(hf_tokenizer, SENTENCES[:2])
    with torch.no_grad():
        ref = reference(**{k: torch.from_numpy(v) for k, v in enc.items()},
                        output_hidden_states=True, output_attentions=True)
    out = backbone(x)
    for ours, theirs in zip(out["hidden_states"], ref.hidden_states, strict=True):
        assert np.abs(np.asarray(ours) - theirs.numpy()).max() <= 1e-4
    real_keys = enc["attention_mask"][:, None, None, :].astype(bool)
    for ours, theirs in zip(out["attention_probs"], ref.attentions, strict=True):
        diff = np.where(real_keys, np.asarray(ours) - theirs.numpy(), 0)
        assert np.abs(diff).max() <= 1e-5


def test_hf_round_trip_is_lossless(minilm_dir, backbone, tmp_path):
    save_hf(backbone, tmp_path / "out", vocab_file=minilm_dir / "vocab.txt")
    original = safetensors.numpy.load_file(str(minilm_dir / "model.safetensors"))
    written = safetensors.numpy.load_file(str(tmp_path / "out" / "model.safetensors"))
    original.pop("embeddings.position_ids", None)
    assert set(written) == set(original)
    for name, value in original.items():
        np.testing.assert_array_equal(written[name], value, err_msg=name)
    assert json.loads((tmp_path / "out" / "config.json").read_text())["hidden_act"] == "gelu"
    assert (tmp_path / "out" / "vocab.txt").read_bytes() == (minilm_dir / "vocab.txt").read_bytes()
    # transformers itself loads the export with nothing missing or left over.
    model, info = transformers.BertModel.from_pretrained(str(tmp_path / "out"),
                                                         output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]


def test_google_checkpoint_of_the_same_weights_gives_the_same_outputs(
        minilm_dir, backbone, hf_tokenizer, tmp_path):
    save_google(backbone, tmp_path / "google", vocab_file=minilm_dir / "vocab.txt")
    assert (tmp_path / "google" / "bert_model.ckpt.index").is_file()
    loaded = kbert.BertBackbone.from_pretrained(tmp_path / "google")
    assert loaded.config == backbone.config
    _, x = _encode(hf_tokenizer, SENTENCES)
    a, b = backbone(x), loaded(x)
    np.testing.assert_array_equal(a["sequence_output"], b["sequence_output"])
    np.testing.assert_array_equal(a["pooled_output"], b["pooled_output"])


def test_keras_hub_preset_loads_with_the_same_outputs(tmp_path):
    import keras_hub

    hub = keras_hub.models.BertBackbone(vocabulary_size=90, num_layers=2, num_heads=2,
                                        hidden_dim=16, intermediate_dim=32, max_sequence_length=24)
    rng = np.random.default_rng(0)
    for variable in hub.weights:
        variable.assign(rng.normal(scale=0.3, size=variable.shape))
    hub.save_to_preset(str(tmp_path / "preset"))
    ours = kbert.BertBackbone.from_pretrained(tmp_path / "preset")
    assert ours.config.hidden_act == "gelu_tanh"
    ids = rng.integers(1, 90, (2, 7)).astype("int32")
    mask = np.array([[1] * 7, [1] * 4 + [0] * 3], "int32")
    x = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": mask}
    theirs, mine = hub(x), ours(x)
    real = mask[..., None].astype(bool)
    diff = np.where(real, np.asarray(mine["sequence_output"]) - np.asarray(theirs["sequence_output"]), 0)
    assert np.abs(diff).max() <= 1e-5
    np.testing.assert_allclose(mine["pooled_output"], theirs["pooled_output"], atol=1e-5)


def test_pretraining_heads_match_transformers_bert_for_pretraining(tmp_path):
    """Heads exported from a BertPretrainer load into transformers' BertForPreTraining and
    give the same MLM and NSP logits: an independent check of the head mapping and tying."""
    cfg = kbert.BertConfig(vocab_size=70, hidden_size=24, num_layers=2, num_heads=3,
                           intermediate_size=48, max_position_embeddings=32)
    pretrainer = kbert.BertPretrainer(kbert.BertBackbone(cfg))
    rng = np.random.default_rng(1)
    for variable in pretrainer.weights:
        variable.assign(rng.normal(scale=0.2, size=variable.shape))
    save_hf(pretrainer, tmp_path / "pt")
    hf, info = transformers.BertForPreTraining.from_pretrained(str(tmp_path / "pt"),
                                                               output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    ids = rng.integers(1, 70, (2, 9)).astype("int32")
    x = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids),
         "masked_positions": np.array([[1, 4], [8, 0]], "int32")}
    ours = pretrainer.predict(x, verbose=0)
    with torch.no_grad():
        ref = hf.eval()(input_ids=torch.from_numpy(ids.astype("int64")))
    mlm_ref = np.take_along_axis(ref.prediction_logits.numpy(),
                                 x["masked_positions"][..., None], axis=1)
    np.testing.assert_allclose(ours["mlm"], mlm_ref, atol=1e-4)
    np.testing.assert_allclose(ours["nsp"], ref.seq_relationship_logits.numpy(), atol=1e-5)


@pytest.mark.parametrize("hf_class", ["BertForPreTraining", "BertForMaskedLM"])
def test_a_pretrainer_from_a_checkpoint_has_its_heads(hf_class, tmp_path):
    """`BertPretrainer.from_pretrained` (and so `kbert pretrain --init`) goes on from the heads
    a transformers checkpoint holds: its MLM (and NSP) logits are transformers' own. A
    `BertForMaskedLM` (what transformers' run_mlm.py saves) has no pooler and no NSP head."""
    config = transformers.BertConfig(vocab_size=70, hidden_size=24, num_hidden_layers=2,
                                     num_attention_heads=3, intermediate_size=48,
                                     max_position_embeddings=32)
    torch.manual_seed(0)
    hf = getattr(transformers, hf_class)(config).eval()
    with torch.no_grad():  # off the initial ones and zeros, so that every mapping shows
        for parameter in hf.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.2)
    hf.save_pretrained(tmp_path / "hf")
    (tmp_path / "hf" / "vocab.txt").write_text("\n".join(
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(65)]) + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours = kbert.BertPretrainer.from_pretrained(str(tmp_path / "hf"))
    said = [str(w.message) for w in caught if "holds no" in str(w.message)]
    if hf_class == "BertForMaskedLM":  # the NSP head starts afresh, and says so
        assert any("holds no pooler" in m for m in said), said
        assert [m for m in said if "head" in m] == [
            f"{tmp_path / 'hf'} holds no next sentence head: the pre-trainer's starts from "
            "random weights, so it predicts noise until pre-trained."]
    else:
        assert said == []
    ids = np.random.default_rng(1).integers(5, 70, (2, 9)).astype("int32")
    x = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids),
         "masked_positions": np.array([[1, 4], [8, 0]], "int32")}
    out = ours.predict(x, verbose=0)
    with torch.no_grad():
        ref = hf(input_ids=torch.from_numpy(ids.astype("int64")))
    logits = ref.prediction_logits if hf_class == "BertForPreTraining" else ref.logits
    np.testing.assert_allclose(
        out["mlm"], np.take_along_axis(logits.numpy(), x["masked_positions"][..., None], 1),
        atol=1e-4)
    if hf_class == "BertForPreTraining":
        np.testing.assert_allclose(out["nsp"], ref.seq_relationship_logits.numpy(), atol=1e-5)


def test_refuses_pickle_unless_asked(minilm_dir, tmp_path):
    target = tmp_path / "pickled"
    target.mkdir()
    shutil.copy(minilm_dir / "config.json", target)
    state = {k: torch.from_numpy(v) for k, v in
             safetensors.numpy.load_file(str(minilm_dir / "model.safetensors")).items()}
    torch.save(state, target / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="pickle"):
        kbert.BertBackbone.from_pretrained(target)
    loaded = kbert.BertBackbone.from_pretrained(target, allow_pickle=True)
    assert loaded.count_params() > 22_000_000


def _copy_with(minilm_dir, tmp_path, edit):
    target = tmp_path / "edited"
    target.mkdir()
    shutil.copy(minilm_dir / "config.json", target)
    weights = safetensors.numpy.load_file(str(minilm_dir / "model.safetensors"))
    edit(weights)
    safetensors.numpy.save_file(weights, str(target / "model.safetensors"))
    return target


def test_missing_extra_and_misshaped_weights_are_listed(minilm_dir, tmp_path):
    def edit(w):
        del w["encoder.layer.3.output.dense.bias"]
        w["encoder.layer.9.attention.self.query.weight"] = np.zeros((384, 384), "float32")
        w["pooler.dense.weight"] = np.zeros((384, 10), "float32")

    with pytest.raises(CheckpointError) as error:
        read_hf_checkpoint(_copy_with(minilm_dir, tmp_path, edit))
    message = str(error.value)
    assert "missing (1): encoder.layer.3.output.dense.bias" in message
    assert "unexpected (1): encoder.layer.9.attention.self.query.weight" in message
    assert "pooler.dense.weight (expected [384, 384], got [384, 10])" in message


def test_prefixed_and_tf_era_names_are_understood(minilm_dir, tmp_path):
    def edit(w):
        for name in list(w):
            value = w.pop(name)
            name = name.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
                "LayerNorm.bias", "LayerNorm.beta")
            w[f"bert.{name}"] = value

    config, weights = read_hf_checkpoint(_copy_with(minilm_dir, tmp_path, edit))
    assert "embeddings.LayerNorm.weight" in weights and config.num_layers == 6


def test_corrupt_or_absent_checkpoints(minilm_dir, tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    shutil.copy(minilm_dir / "config.json", bad)
    (bad / "model.safetensors").write_bytes(b"\x00\x01garbage")
    with pytest.raises(CheckpointError, match="cannot read the safetensors"):
        kbert.BertBackbone.from_pretrained(bad)
    with pytest.raises(CheckpointError, match="no checkpoint recognised"):
        kbert.BertBackbone.from_pretrained(tmp_path)
    with pytest.raises(FileNotFoundError, match="size preset without weights"):
        kbert.BertBackbone.from_pretrained("base")
    with pytest.raises(FileNotFoundError, match="minilm_l6_h384_uncased"):
        kbert.BertBackbone.from_pretrained("no/such/dir")


def test_backbone_weights_round_trip_through_the_canonical_dict(tiny_config):
    a, b = kbert.BertBackbone(tiny_config), kbert.BertBackbone(tiny_config)
    kbert.convert.set_backbone_weights(b, get_backbone_weights(a))
    for x, y in zip(a.weights, b.weights):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    assert keras.ops.all(a.weights[0].value == b.weights[0].value)


def test_writes_are_atomic_and_never_wipe_unrelated_files(tiny_config, tmp_path):
    backbone = kbert.BertBackbone(tiny_config)
    target = tmp_path / "export"
    save_hf(backbone, target)
    save_hf(backbone, target)  # replacing a previous checkpoint is fine
    (target / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        save_hf(backbone, target)
    assert (target / "notes.txt").read_text() == "mine"

    weights = get_backbone_weights(backbone)
    weights["pooler.dense.bias"] = np.zeros(3, "float32")  # fails the shape check
    with pytest.raises(CheckpointError):
        kbert.convert.write_hf_checkpoint(tmp_path / "never", tiny_config, weights)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]  # no staging left behind


@pytest.mark.slow
def test_a_saved_tokenizer_keeps_its_casing_and_word_limit(minilm_dir, tmp_path):
    """A model saved with its tokenizer (as `kbert pretrain` does) reads back with the same
    casing and word limit, in kbert and in transformers; a vocabulary alone could not say."""
    from kbert.models.pretrained import load_backbone_and_tokenizer
    from kbert.text.tokenizer import BertTokenizer

    backbone, uncased = load_backbone_and_tokenizer(str(minilm_dir))
    vocabulary = uncased.get_vocabulary()
    for lowercase, limit in ((False, 200), (True, 150)):
        tokenizer = BertTokenizer(vocabulary, lowercase=lowercase, max_chars_per_word=limit)
        save_hf(backbone, tmp_path / "saved", tokenizer=tokenizer, overwrite=True)
        loaded = kbert.BertTokenizer.from_pretrained(str(tmp_path / "saved"))
        assert (loaded.lowercase, loaded.max_chars_per_word) == (lowercase, limit)
        assert loaded.get_vocabulary() == vocabulary
        hf = transformers.AutoTokenizer.from_pretrained(tmp_path / "saved")
        assert (hf.tokenize("Paris")[0] == "paris") == lowercase
