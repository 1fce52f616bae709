"""Attention heatmaps: for one sentence (or pair), which token each token attends to, per layer
and head, as the softmax probabilities the backbone actually computed."""

import numpy as np


def attention_maps(backbone, preprocessor, text, text_pair=None):
    """(tokens, probabilities [layers, heads, n, n]) for one input, padding removed.

    `backbone` is any `BertBackbone`; a copy that also returns attention probabilities is built
    from its config and weights, so the caller's model is left as it is.
    """
    import tensorflow as tf

    from kbert.models.backbone import BertBackbone

    config = {**backbone.get_config(), "output_attentions": True}
    viewer = BertBackbone.from_config(config)
    viewer.set_weights(backbone.get_weights())
    texts = tf.constant([text])
    inputs = preprocessor((texts, tf.constant([text_pair])) if text_pair is not None else texts)
    length = int(np.asarray(inputs["padding_mask"]).sum())
    probs = np.stack([np.asarray(p)[0, :, :length, :length]
                      for p in viewer(inputs)["attention_probs"]])
    ids = np.asarray(inputs["token_ids"])[0, :length]
    tokens = [preprocessor.tokenizer.id_to_token(i) for i in ids]
    return tokens, probs


def plot_attention(tokens, probs, layer=-1, heads=None, path=None, columns=4):
    """A grid of heatmaps (one per head of `layer`): row = query token, column = key token.
    Returns the matplotlib figure; with `path`, also writes it as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    maps = probs[layer]
    heads = list(range(maps.shape[0])) if heads is None else list(heads)
    rows = -(-len(heads) // columns)
    size = 0.18 * len(tokens) + 1.5
    fig, axes = plt.subplots(rows, min(columns, len(heads)), squeeze=False,
                             figsize=(size * min(columns, len(heads)), size * rows))
    for ax in axes.flat:
        ax.axis("off")
    for ax, head in zip(axes.flat, heads):
        ax.axis("on")
        ax.imshow(maps[head], cmap="viridis", vmin=0.0, vmax=1.0)
        ax.set_title(f"layer {layer % probs.shape[0]}, head {head}", fontsize=8)
        ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=6)
        ax.set_yticks(range(len(tokens)), tokens, fontsize=6)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
