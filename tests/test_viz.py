"""Attention pictures from the real pretrained MiniLM."""

import matplotlib.image
import numpy as np

import kbert
from kbert.viz import attention_maps, plot_attention


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
