"""Original google-research/bert checkpoints: real MiniLM weights through the TF1 format and back,
checked name by name, bit by bit, and numerically with Hugging Face's BertModel."""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from kbert.config import BertConfig
from kbert.convert.google import read_google_checkpoint, write_google_checkpoint
from kbert.convert.weights import CheckpointError, check_weights, expected_shapes
from kbert.data.sources import fetch

CKPT = "bert_model.ckpt"
DATA = CKPT + ".data-00000-of-00001"


# The Google names of a one-layer model with both heads, written out by hand (not derived from
# the converter's own mapping), with whether each is the transpose of the canonical array.
TINY_GOOGLE_NAMES = {
    "bert/embeddings/word_embeddings": ("embeddings.word_embeddings.weight", False),
    "bert/embeddings/position_embeddings": ("embeddings.position_embeddings.weight", False),
    "bert/embeddings/token_type_embeddings": ("embeddings.token_type_embeddings.weight", False),
    "bert/embeddings/LayerNorm/gamma": ("embeddings.LayerNorm.weight", False),
    "bert/embeddings/LayerNorm/beta": ("embeddings.LayerNorm.bias", False),
    "bert/encoder/layer_0/attention/self/query/kernel":
        ("encoder.layer.0.attention.self.query.weight", True),
    "bert/encoder/layer_0/attention/self/query/bias":
        ("encoder.layer.0.attention.self.query.bias", False),
    "bert/encoder/layer_0/attention/self/key/kernel":
        ("encoder.layer.0.attention.self.key.weight", True),
    "bert/encoder/layer_0/attention/self/key/bias":
        ("encoder.layer.0.attention.self.key.bias", False),
    "bert/encoder/layer_0/attention/self/value/kernel":
        ("encoder.layer.0.attention.self.value.weight", True),
    "bert/encoder/layer_0/attention/self/value/bias":
        ("encoder.layer.0.attention.self.value.bias", False),
    "bert/encoder/layer_0/attention/output/dense/kernel":
        ("encoder.layer.0.attention.output.dense.weight", True),
    "bert/encoder/layer_0/attention/output/dense/bias":
        ("encoder.layer.0.attention.output.dense.bias", False),
    "bert/encoder/layer_0/attention/output/LayerNorm/gamma":
        ("encoder.layer.0.attention.output.LayerNorm.weight", False),
    "bert/encoder/layer_0/attention/output/LayerNorm/beta":
        ("encoder.layer.0.attention.output.LayerNorm.bias", False),
    "bert/encoder/layer_0/intermediate/dense/kernel":
        ("encoder.layer.0.intermediate.dense.weight", True),
    "bert/encoder/layer_0/intermediate/dense/bias":
        ("encoder.layer.0.intermediate.dense.bias", False),
    "bert/encoder/layer_0/output/dense/kernel": ("encoder.layer.0.output.dense.weight", True),
    "bert/encoder/layer_0/output/dense/bias": ("encoder.layer.0.output.dense.bias", False),
    "bert/encoder/layer_0/output/LayerNorm/gamma":
        ("encoder.layer.0.output.LayerNorm.weight", False),
    "bert/encoder/layer_0/output/LayerNorm/beta": ("encoder.layer.0.output.LayerNorm.bias", False),
    "bert/pooler/dense/kernel": ("pooler.dense.weight", True),
    "bert/pooler/dense/bias": ("pooler.dense.bias", False),
    "cls/predictions/transform/dense/kernel": ("cls.predictions.transform.dense.weight", True),
    "cls/predictions/transform/dense/bias": ("cls.predictions.transform.dense.bias", False),
    "cls/predictions/transform/LayerNorm/gamma":
        ("cls.predictions.transform.LayerNorm.weight", False),
    "cls/predictions/transform/LayerNorm/beta": ("cls.predictions.transform.LayerNorm.bias", False),
    "cls/predictions/output_bias": ("cls.predictions.bias", False),
    "cls/seq_relationship/output_weights": ("cls.seq_relationship.weight", False),
    "cls/seq_relationship/output_bias": ("cls.seq_relationship.bias", False),
}

TINY = BertConfig(vocab_size=50, hidden_size=8, num_layers=1, num_heads=2, intermediate_size=12,
                  max_position_embeddings=16, hidden_act="gelu_tanh")


def random_weights(config, heads, seed=0):
    rng = np.random.default_rng(seed)
    return {name: rng.normal(size=shape).astype(np.float32)
            for name, shape in expected_shapes(config, heads=heads).items()}


def read_raw(directory):
    """{Google name: array} of every variable of the checkpoint in `directory`."""
    reader = tf.train.load_checkpoint(os.path.join(directory, CKPT))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def write_raw(directory, variables, config_from):
    """A checkpoint directory holding exactly `variables`, with the config of `config_from`."""
    os.makedirs(directory)
    names = sorted(variables)
    tf.raw_ops.SaveV2(prefix=os.path.join(directory, CKPT), tensor_names=names,
                      shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(variables[n]) for n in names])
    shutil.copy(os.path.join(config_from, "bert_config.json"), directory)
    return directory


@pytest.fixture(scope="module")
def minilm():
    directory = fetch("minilm")
    from safetensors.numpy import load_file
    weights = load_file(str(directory / "model.safetensors"))
    weights.pop("embeddings.position_ids")  # a buffer of HF's, not a weight
    return directory, BertConfig.from_hf_config(directory), weights


@pytest.fixture(scope="module")
def minilm_ckpt(minilm, tmp_path_factory):
    directory, config, weights = minilm
    target = tmp_path_factory.mktemp("google") / "minilm"
    write_google_checkpoint(target, config, weights, vocab_file=directory / "vocab.txt")
    return target


@pytest.fixture(scope="module")
def tiny_ckpt(tmp_path_factory):
    weights = random_weights(TINY, heads=True)
    target = tmp_path_factory.mktemp("google") / "tiny"
    write_google_checkpoint(target, TINY, weights)
    return target, weights


def test_minilm_round_trip_is_bit_identical(minilm, minilm_ckpt):
    directory, config, weights = minilm
    assert sorted(os.listdir(minilm_ckpt)) == sorted([
        "bert_config.json", CKPT + ".index", DATA, "vocab.txt"])
    assert not [p for p in os.listdir(minilm_ckpt.parent) if p.startswith(".")]  # no temp dirs
    read_config, read_weights = read_google_checkpoint(minilm_ckpt)
    assert read_config == config
    assert read_config.hidden_act == "gelu"  # exact GELU survives the trip...
    with open(minilm_ckpt / "bert_config.json") as f:
        assert json.load(f)["hidden_act"] == "gelu_exact"  # ...as kbert's extension name
    assert set(read_weights) == set(weights)
    for name, value in weights.items():
        assert read_weights[name].dtype == np.float32
        np.testing.assert_array_equal(read_weights[name], value, err_msg=name)
    assert (minilm_ckpt / "vocab.txt").read_bytes() == (directory / "vocab.txt").read_bytes()
    # The prefix form of the path reads the same checkpoint.
    _, again = read_google_checkpoint(minilm_ckpt / CKPT)
    np.testing.assert_array_equal(again["pooler.dense.weight"], weights["pooler.dense.weight"])


def test_minilm_variables_have_google_names_and_layouts(minilm, minilm_ckpt):
    _, config, weights = minilm
    variables = dict(tf.train.list_variables(str(minilm_ckpt / CKPT)))
    assert len(variables) == 5 + 16 * config.num_layers + 2
    assert all(name.startswith("bert/") for name in variables)
    reader = tf.train.load_checkpoint(str(minilm_ckpt / CKPT))
    for layer in (0, config.num_layers - 1):
        p = f"bert/encoder/layer_{layer}/"
        assert variables[p + "intermediate/dense/kernel"] == [384, 1536]  # [in, out]
        assert variables[p + "output/dense/kernel"] == [1536, 384]
        np.testing.assert_array_equal(
            reader.get_tensor(p + "attention/self/query/kernel"),
            weights[f"encoder.layer.{layer}.attention.self.query.weight"].T)
        np.testing.assert_array_equal(
            reader.get_tensor(p + "output/LayerNorm/gamma"),
            weights[f"encoder.layer.{layer}.output.LayerNorm.weight"])
    assert variables["bert/embeddings/word_embeddings"] == [30522, 384]


def test_tiny_with_heads_has_exactly_the_google_names(tiny_ckpt):
    target, weights = tiny_ckpt
    raw = read_raw(target)
    assert set(raw) == set(TINY_GOOGLE_NAMES)
    for gname, (name, transposed) in TINY_GOOGLE_NAMES.items():
        expected = weights[name].T if transposed else weights[name]
        np.testing.assert_array_equal(raw[gname], expected, err_msg=gname)
    assert raw["cls/seq_relationship/output_weights"].shape == (2, 8)  # not transposed
    config, read = read_google_checkpoint(target)
    assert config == TINY and config.hidden_act == "gelu_tanh"
    assert set(read) == set(weights)
    for name in weights:
        np.testing.assert_array_equal(read[name], weights[name])


def test_optimizer_slots_and_global_step_are_ignored(tiny_ckpt, tmp_path):
    target, weights = tiny_ckpt
    raw = read_raw(target)
    for name in list(raw):
        raw[name + "/adam_m"] = np.zeros_like(raw[name])
        raw[name + "/adam_v"] = np.ones_like(raw[name])
    raw["global_step"] = np.array(1000000, dtype=np.int64)
    _, read = read_google_checkpoint(write_raw(tmp_path / "training", raw, target))
    assert set(read) == set(weights)
    np.testing.assert_array_equal(read["cls.predictions.bias"], weights["cls.predictions.bias"])


def test_heads_are_optional_per_group(tiny_ckpt, tmp_path):
    target, weights = tiny_ckpt
    raw = read_raw(target)
    encoder_only = {n: v for n, v in raw.items() if not n.startswith("cls/")}
    _, read = read_google_checkpoint(write_raw(tmp_path / "encoder", encoder_only, target))
    assert not any(n.startswith("cls.") for n in read)
    no_nsp = {n: v for n, v in raw.items() if not n.startswith("cls/seq_relationship/")}
    _, read = read_google_checkpoint(write_raw(tmp_path / "mlm", no_nsp, target))
    assert "cls.predictions.bias" in read and "cls.seq_relationship.weight" not in read
    partial = dict(raw)
    del partial["cls/predictions/output_bias"]
    with pytest.raises(CheckpointError, match="missing.*cls/predictions/output_bias"):
        read_google_checkpoint(write_raw(tmp_path / "partial", partial, target))


def test_a_pretrainer_goes_on_from_the_heads_there_are(tiny_ckpt, tmp_path):
    """Continued pre-training starts from the checkpoint's heads, as run_pretraining.py's
    init_checkpoint restores cls/*: each head group the checkpoint holds, and only those."""
    from kbert.convert import load_pretraining_heads
    from kbert.convert.mapping import head_slots, read_slots
    from kbert.models import BertBackbone, BertPretrainer

    target, weights = tiny_ckpt
    model = BertPretrainer(BertBackbone(TINY))
    assert load_pretraining_heads(model, target) == ["masked LM", "next sentence"]
    loaded = read_slots(head_slots(model.mlm_head, model.nsp_head))
    assert sorted(loaded) == sorted(n for n in weights if n.startswith("cls."))
    for name, value in loaded.items():
        np.testing.assert_array_equal(value, weights[name])

    no_nsp = {n: v for n, v in read_raw(target).items()
              if not n.startswith("cls/seq_relationship/")}
    model = BertPretrainer(BertBackbone(TINY))
    fresh = model.nsp_head.get_weights()
    assert load_pretraining_heads(model, write_raw(tmp_path / "mlm", no_nsp, target)) == [
        "masked LM"]
    np.testing.assert_array_equal(model.mlm_head.output_bias.numpy(),
                                  weights["cls.predictions.bias"])
    for kept, before in zip(model.nsp_head.get_weights(), fresh):
        np.testing.assert_array_equal(kept, before)
    without_nsp = BertPretrainer(BertBackbone(TINY), use_nsp=False)
    assert load_pretraining_heads(without_nsp, target) == ["masked LM"]


@pytest.mark.parametrize("change, pattern", [
    ("missing", r"missing \(1\): bert/encoder/layer_0/output/dense/bias"),
    ("unknown", r"unexpected \(1\): bert/encoder/layer_0/attention/self/extra"),
    ("misshaped", r"mis-shaped \(1\): bert/encoder/layer_0/intermediate/dense/kernel "
                  r"\(expected \[8, 12\], got \[12, 8\]\)"),
])
def test_variables_that_do_not_fit_are_named(tiny_ckpt, tmp_path, change, pattern):
    target, _ = tiny_ckpt
    raw = read_raw(target)
    if change == "missing":
        del raw["bert/encoder/layer_0/output/dense/bias"]
    elif change == "unknown":
        raw["bert/encoder/layer_0/attention/self/extra"] = np.zeros(3, np.float32)
    else:
        name = "bert/encoder/layer_0/intermediate/dense/kernel"
        raw[name] = np.ascontiguousarray(raw[name].T)
    with pytest.raises(CheckpointError, match=pattern):
        read_google_checkpoint(write_raw(tmp_path / change, raw, target))


def test_config_that_does_not_fit_the_variables(tiny_ckpt, tmp_path):
    target, _ = tiny_ckpt
    copy = shutil.copytree(target, tmp_path / "copy")
    config = json.loads((copy / "bert_config.json").read_text())
    config["intermediate_size"] = 16
    (copy / "bert_config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"mis-shaped \(3\)"):
        read_google_checkpoint(copy)


def test_missing_and_corrupt_files_are_named(tiny_ckpt, tmp_path):
    target, _ = tiny_ckpt

    def broken(name, damage):
        copy = shutil.copytree(target, tmp_path / name)
        damage(copy)
        return copy

    no_config = broken("no_config", lambda d: (d / "bert_config.json").unlink())
    with pytest.raises(CheckpointError, match=r"no_config/bert_config\.json is missing"):
        read_google_checkpoint(no_config)

    no_data = broken("no_data", lambda d: (d / DATA).unlink())
    with pytest.raises(CheckpointError, match=r"no_data/bert_model\.ckpt\.data-00000-of-00001"):
        read_google_checkpoint(no_data)

    no_index = broken("no_index", lambda d: (d / (CKPT + ".index")).unlink())
    with pytest.raises(CheckpointError, match=r"no_index/bert_model\.ckpt\.index is missing"):
        read_google_checkpoint(no_index)

    def truncate(d):
        data = (d / DATA).read_bytes()
        (d / DATA).write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"truncated/bert_model\.ckpt\.data-00000-of-00001"):
        read_google_checkpoint(broken("truncated", truncate))

    def flip(d):
        data = bytearray((d / DATA).read_bytes())
        data[100:140] = bytes(255 - b for b in data[100:140])
        (d / DATA).write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"(?s)flipped/bert_model\.ckpt\.data.*[Cc]hecksum"):
        read_google_checkpoint(broken("flipped", flip))

    def garble_index(d):
        (d / (CKPT + ".index")).write_bytes(b"not an sstable at all")
    with pytest.raises(CheckpointError, match=r"garbled/bert_model\.ckpt\.index"):
        read_google_checkpoint(broken("garbled", garble_index))

    with pytest.raises(CheckpointError, match="nowhere"):
        read_google_checkpoint(tmp_path / "nowhere")


def test_write_checks_weights_and_replaces_atomically(tiny_ckpt, tmp_path):
    _, weights = tiny_ckpt
    bad = dict(weights)
    bad["pooler.dense.bias"] = np.zeros(9, np.float32)
    del bad["embeddings.LayerNorm.bias"]
    with pytest.raises(CheckpointError) as info:
        write_google_checkpoint(tmp_path / "bad", TINY, bad)
    assert "embeddings.LayerNorm.bias" in str(info.value)
    assert "pooler.dense.bias (expected [8], got [9])" in str(info.value)
    assert not os.listdir(tmp_path)  # nothing left behind

    target = tmp_path / "ckpt"
    write_google_checkpoint(target, TINY, weights)
    other = random_weights(TINY, heads=False, seed=1)
    write_google_checkpoint(target, TINY, other)  # a previous checkpoint is simply replaced
    assert os.listdir(tmp_path) == ["ckpt"]
    _, read = read_google_checkpoint(target)
    assert set(read) == set(other)  # the heads of the replaced checkpoint are gone
    np.testing.assert_array_equal(read["pooler.dense.weight"], other["pooler.dense.weight"])

    (target / "notes.txt").write_text("not part of a checkpoint")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        write_google_checkpoint(target, TINY, weights)
    assert (target / "notes.txt").exists()
    write_google_checkpoint(target, TINY, weights, overwrite=True)
    assert not (target / "notes.txt").exists()
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]


def test_check_weights_head_modes():
    encoder = random_weights(TINY, heads=False)
    full = random_weights(TINY, heads=True)
    check_weights(encoder, TINY)
    check_weights(full, TINY)
    check_weights(full, TINY, heads=True)
    with pytest.raises(CheckpointError, match=r"missing \(7\)"):
        check_weights(encoder, TINY, heads=True)
    with pytest.raises(CheckpointError, match=r"unexpected \(7\)"):
        check_weights(full, TINY, heads=False)
    assert issubclass(CheckpointError, ValueError)


def test_hugging_face_model_from_google_checkpoint_matches_original(minilm, minilm_ckpt):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    directory, _, _ = minilm
    config, weights = read_google_checkpoint(minilm_ckpt)

    # Reference: Hugging Face's own loader on the original safetensors checkpoint.
    reference = transformers.BertModel.from_pretrained(
        str(directory), attn_implementation="eager").eval()
    hf_config = transformers.BertConfig(**config.to_hf_config())
    hf_config._attn_implementation = "eager"
    model = transformers.BertModel(hf_config, add_pooling_layer=True).eval()
    result = model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()},
                                   strict=False)
    assert not result.unexpected_keys
    assert set(result.missing_keys) <= {"embeddings.position_ids"}  # a buffer, not a weight

    rng = np.random.default_rng(0)
    ids = rng.integers(1000, config.vocab_size, size=(3, 20))
    ids[:, 0], mask = 101, np.ones_like(ids)
    mask[1, 12:], mask[2, 5:] = 0, 0
    segments = np.zeros_like(ids)
    segments[:, 10:] = 1
    inputs = {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(mask),
              "token_type_ids": torch.from_numpy(segments)}
    with torch.no_grad():
        want, got = reference(**inputs), model(**inputs)
    keep = mask.astype(bool)
    seq_want = want.last_hidden_state.numpy()[keep]
    np.testing.assert_allclose(got.last_hidden_state.numpy()[keep], seq_want, atol=1e-6, rtol=0)
    np.testing.assert_allclose(got.pooler_output.numpy(), want.pooler_output.numpy(),
                               atol=1e-6, rtol=0)
    assert np.abs(seq_want).max() > 0.1  # a real, non-trivial output
