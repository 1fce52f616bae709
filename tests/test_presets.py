"""The registry (`kbert.presets`): every kind of name means what it should, checked against the
checkpoint files themselves (safetensors, vocab.txt) rather than against the registry's own
readers."""

import shutil

import numpy as np
import pytest
import safetensors.numpy

from kbert import presets
from kbert.config import PRESETS, BertConfig
from kbert.models import BertBackbone
from kbert.models.pretrained import load_backbone_and_tokenizer

MINILM = "minilm_l6_h384_uncased"


@pytest.fixture(scope="module")
def minilm_files(minilm_dir):
    tensors = safetensors.numpy.load_file(str(minilm_dir / "model.safetensors"))
    vocab = (minilm_dir / "vocab.txt").read_text(encoding="utf-8").split("\n")
    return tensors, [t.strip() for t in vocab if t.strip()]


def _word_embeddings(backbone):
    return np.asarray(backbone.token_embedding.embeddings.numpy(), "float32")


@pytest.mark.slow
def test_a_weights_preset_and_its_directory_load_the_checkpoint(minilm_dir, minilm_files):
    tensors, vocab = minilm_files
    for name in (MINILM, minilm_dir, str(minilm_dir)):
        backbone, tokenizer = load_backbone_and_tokenizer(name)
        np.testing.assert_array_equal(_word_embeddings(backbone),
                                      tensors["embeddings.word_embeddings.weight"])
        assert tokenizer.get_vocabulary() == vocab and tokenizer.lowercase
        assert backbone.config.num_layers == 6 and backbone.config.hidden_size == 384
    assert presets.resolve_preset(MINILM).kind == "weights"
    assert presets.resolve_preset(minilm_dir).kind == "checkpoint"


def test_a_size_preset_is_that_shape_with_random_weights_and_berts_vocabulary(minilm_files):
    _, vocab = minilm_files
    backbone, tokenizer = load_backbone_and_tokenizer("mini", dtype="bfloat16")
    assert backbone.config == BertConfig.preset("mini")
    assert backbone.dtype_policy.name == "bfloat16"
    assert tokenizer.get_vocabulary() == vocab and tokenizer.lowercase
    # A fresh TruncatedNormal(0.02) table: nothing like MiniLM's, spread as initialised.
    assert abs(float(np.std(_word_embeddings(backbone))) - 0.02 * 0.88) < 2e-3


@pytest.mark.slow
def test_random_gives_the_checkpoints_shape_and_vocabulary_with_fresh_weights(
        minilm_dir, minilm_files):
    tensors, vocab = minilm_files
    for name in (f"random:{MINILM}", f"random:{minilm_dir}"):
        backbone, tokenizer = load_backbone_and_tokenizer(name, causal=True)
        assert backbone.config == presets.resolve_preset(MINILM).config
        assert backbone.causal
        table = _word_embeddings(backbone)
        assert table.shape == tensors["embeddings.word_embeddings.weight"].shape
        assert not np.allclose(table, tensors["embeddings.word_embeddings.weight"], atol=1e-2)
        assert tokenizer.get_vocabulary() == vocab
    assert presets.resolve_preset("random:tiny").config == BertConfig.preset("tiny")


def test_a_config_or_a_vocabulary_for_random_weights(tiny_config, minilm_dir):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(115)]
    backbone, tokenizer = load_backbone_and_tokenizer(tiny_config, vocabulary=tokens)
    assert backbone.config == tiny_config and tokenizer.vocabulary_size() == 120
    backbone, _ = load_backbone_and_tokenizer("tiny", vocabulary=tokens)
    assert backbone.config == BertConfig.preset("tiny", vocab_size=120)
    with pytest.raises(ValueError, match="vocab_size 30522; the vocabulary has 120"):
        load_backbone_and_tokenizer(f"random:{MINILM}", vocabulary=tokens)
    with pytest.raises(ValueError, match="its own vocabulary"):
        load_backbone_and_tokenizer(MINILM, vocabulary=tokens)


def test_a_google_checkpoint_resolves_from_its_directory_or_prefix(minilm_dir, tmp_path):
    from kbert.convert import read_checkpoint, write_google_checkpoint

    config, weights = read_checkpoint(minilm_dir)
    write_google_checkpoint(tmp_path / "g", config, weights, vocab_file=minilm_dir / "vocab.txt")
    for name in (tmp_path / "g", tmp_path / "g" / "bert_model.ckpt"):
        preset = presets.resolve_preset(name)
        assert preset.config == config and preset.vocabulary == tmp_path / "g" / "vocab.txt"
    backbone = presets.load_backbone(tmp_path / "g" / "bert_model.ckpt", BertBackbone)
    np.testing.assert_array_equal(_word_embeddings(backbone),
                                  weights["embeddings.word_embeddings.weight"])


def test_a_folder_with_only_a_vocabulary_serves_a_tokenizer(minilm_dir, tmp_path):
    import kbert

    shutil.copy(minilm_dir / "vocab.txt", tmp_path)
    (tmp_path / "tokenizer_config.json").write_text('{"do_lower_case": false}')
    assert kbert.BertTokenizer.from_pretrained(tmp_path).lowercase is False
    with pytest.raises(Exception, match="no checkpoint recognised"):
        load_backbone_and_tokenizer(tmp_path)


def test_unknown_names_list_every_preset():
    with pytest.raises(FileNotFoundError) as error:
        load_backbone_and_tokenizer("bert_huge")
    for name in [*PRESETS, *presets.WEIGHT_PRESETS, "random:"]:
        assert name in str(error.value)
    with pytest.raises(TypeError, match="a string, a path or a BertConfig"):
        presets.resolve_preset(12)


def test_from_pretrained_wants_weights_and_resolve_keeps_its_contract(minilm_dir):
    import kbert

    for name in ("base", f"random:{MINILM}"):
        with pytest.raises(FileNotFoundError, match="load_backbone_and_tokenizer"):
            kbert.BertBackbone.from_pretrained(name)
    assert presets.resolve(MINILM) == minilm_dir
    with pytest.raises(FileNotFoundError, match="size preset without weights"):
        presets.resolve("base")


@pytest.mark.slow
def test_from_pretrained_sets_dropout_rates_and_refuses_unknown_keywords(minilm_dir):
    """Keras' functional constructor drops unknown keywords silently; kbert's models refuse
    them, and the encoder's dropout rates are set through `from_pretrained` instead."""
    import kbert
    from tests.conftest import make_inputs

    with pytest.raises(TypeError, match=r"dropout\..*hidden_dropout, attention_dropout"):
        kbert.BertBackbone.from_pretrained(MINILM, dropout=0.0)
    with pytest.raises(TypeError, match="num_class"):
        kbert.BertClassifier.from_pretrained(MINILM, num_class=3)

    backbone = kbert.BertBackbone.from_pretrained(MINILM, hidden_dropout=0.0,
                                                  attention_dropout=0.0)
    assert (backbone.config.hidden_dropout, backbone.config.attention_dropout) == (0.0, 0.0)
    inputs = make_inputs(vocab_size=backbone.config.vocab_size)
    trained = backbone(inputs, training=True)["sequence_output"]
    np.testing.assert_array_equal(trained, backbone(inputs, training=False)["sequence_output"])
    reference = kbert.BertBackbone.from_pretrained(MINILM)
    assert reference.config.hidden_dropout == 0.1  # the checkpoint's own rate is kept
    assert not np.allclose(reference(inputs, training=True)["sequence_output"], trained)

    classifier = kbert.BertClassifier.from_pretrained(MINILM, num_classes=3,
                                                      attention_dropout=0.0)
    assert classifier.backbone.config.attention_dropout == 0.0
    assert classifier.backbone.config.hidden_dropout == 0.1
