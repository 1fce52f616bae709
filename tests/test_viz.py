"""Attention pictures from the real pretrained MiniLM."""

import pathlib

import keras
import matplotlib.image
import numpy as np
import pytest
import tensorflow as tf

import kbert
from kbert.training.finetune import finetune
from kbert.viz import attention_maps, heatmap_image, plot_attention, plot_seed_view, seed_view


@pytest.mark.slow
def test_attention_heatmap_png(tmp_path):
    backbone = kbert.BertBackbone.from_pretrained("minilm_l6_h384_uncased")
    pre = kbert.BertPreprocessor(kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased"),
                                 sequence_length=32)
    tokens, probs = attention_maps(backbone, pre, "The cat sat on the mat.", "It was tired.")
    assert tokens[0] == "[CLS]" and tokens.count("[SEP]") == 2 and "cat" in tokens
    assert probs.shape == (6, 12, len(tokens), len(tokens))
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-5)
    assert "attention_probs" not in backbone.output  # the caller's model is unchanged

    path = tmp_path / "attention.png"
    plot_attention(tokens, probs, layer=-1, heads=range(4), path=path)
    pixels = matplotlib.image.imread(path)
    assert pixels.shape[0] > 200 and pixels.shape[1] > 200
    assert pixels.std() > 0.05  # a real picture, not a blank canvas


@pytest.mark.slow
def test_seed_view_rebuilds_the_backbones_attention_weight(minilm_dir, tmp_path):
    pre = kbert.BertPreprocessor(kbert.BertTokenizer.from_pretrained(minilm_dir),
                                 sequence_length=24)
    reference = kbert.BertBackbone.from_pretrained(minilm_dir, output_attentions=True)
    text, pair = "The cat sat on the mat.", "It was tired."
    probs = reference(pre((tf.constant([text]), tf.constant([pair]))))["attention_probs"]
    for layer, head, query, key in ((0, 0, "[CLS]", "[SEP]"), (3, 7, "cat", "mat"),
                                    (5, 11, 9, 2)):
        view = seed_view(reference, pre, text, pair, layer, head, query, key)
        np.testing.assert_allclose(view.probs, np.asarray(probs[layer])[0, head, view.query],
                                   atol=1e-5)
        assert view.q.shape == view.k.shape == view.product.shape == (32,)
        np.testing.assert_allclose(view.dot, view.product.sum(), rtol=1e-12)
        np.testing.assert_allclose(view.scores[view.key], view.dot / np.sqrt(32), rtol=1e-12)
        assert view.length == 14 and (view.bias[:14] == 0).all() and (view.bias[14:] == -1e4).all()
    assert view.tokens[view.query] == "it" and view.tokens[view.key] == "cat"

    path = tmp_path / "seed.png"
    plot_seed_view(view, path)
    pixels = matplotlib.image.imread(path)
    assert pixels.shape[0] > 200 and pixels.shape[1] > 600
    assert pixels.std() > 0.05


def _images(log_dir):
    """{tag: {step: uint8 image}} of every image summary in `log_dir`'s event files."""
    images = {}
    for path in pathlib.Path(log_dir).glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                png = value.tensor.string_val[2]  # [width, height, PNG]
                images.setdefault(value.tag, {})[event.step] = tf.io.decode_png(png).numpy()
    return images


@pytest.mark.slow
def test_attention_images_go_to_tensorboard_while_finetuning(tmp_path):
    sentence = "The cat sat on the mat."
    finetune(task="sentiment", init="tiny", output_dir=tmp_path, steps=4, batch_size=8,
             max_train_examples=64, max_eval_examples=16, verbose=0,
             attention_sentence=sentence)
    images = _images(tmp_path / "logs" / "attention")
    assert sorted(images) == ["attention/layer_0", "attention/layer_1"]  # tiny: 2 layers
    assert all(sorted(steps) == [0, 1, 2, 3, 4] for steps in images.values())

    # The last picture is the trained model's attention: 9 tokens × 8 px, 2 heads side by side.
    model = keras.saving.load_model(tmp_path / "model.keras")
    tokens, probs = attention_maps(model.backbone, model.preprocessor, sentence)
    assert len(tokens) == 9
    for layer in range(2):
        final = images[f"attention/layer_{layer}"][4]
        assert final.shape == (72, 2 * 72 + 2, 3)
        assert final.std() > 10  # not a constant picture
        np.testing.assert_array_equal(final, heatmap_image(probs[layer]))
