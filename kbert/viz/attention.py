"""Attention heatmaps: for one sentence (or pair), which token each token attends to, per layer
and head, as the softmax probabilities the backbone actually computed."""

import numpy as np


def _viewer(backbone, **outputs):
    """A copy of `backbone` that also returns `outputs` (e.g. output_attentions=True), so the
    caller's model is left as it is. Refresh its weights with `set_weights` to follow training."""
    from kbert.models.backbone import BertBackbone

    viewer = BertBackbone.from_config({**backbone.get_config(), **outputs})
    viewer.set_weights(backbone.get_weights())
    return viewer


def _encode(preprocessor, text, text_pair=None):
    """(inputs for one example, its tokens at every position, number of real tokens)."""
    import tensorflow as tf

    texts = tf.constant([text])
    inputs = preprocessor((texts, tf.constant([text_pair])) if text_pair is not None else texts)
    tokens = [preprocessor.tokenizer.id_to_token(i) for i in np.asarray(inputs["token_ids"])[0]]
    return inputs, tokens, int(np.asarray(inputs["padding_mask"]).sum())


def _probabilities(viewer, inputs, length):
    """[layers, heads, length, length] attention of `viewer` (built with output_attentions)."""
    return np.stack([np.asarray(p)[0, :, :length, :length]
                     for p in viewer(inputs)["attention_probs"]])


def attention_maps(backbone, preprocessor, text, text_pair=None):
    """Computes a backbone's attention probabilities on one sentence or sentence pair.

    The probabilities are the softmax weights the backbone computes, read from a copy of it
    built from its config and weights, so the caller's model is left as it is.

    Args:
      backbone: a `kbert.BertBackbone`.
      preprocessor: the `kbert.BertPreprocessor` that packs the input.
      text: the sentence.
      text_pair: the second sentence of a pair, or None.

    Returns:
      (tokens, probabilities): the n real tokens of the packed input (padding removed), and a
      numpy array [layers, heads, n, n] whose row i holds how token i attends to each token.

    Examples:
        >>> import kbert
        >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat"]
        >>> preprocessor = kbert.BertPreprocessor(kbert.BertTokenizer(vocabulary), sequence_length=8)
        >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny", vocab_size=len(vocabulary)))
        >>> tokens, probs = kbert.viz.attention_maps(backbone, preprocessor, "the cat sat")
        >>> tokens, probs.shape
        (['[CLS]', 'the', 'cat', 'sat', '[SEP]'], (2, 2, 5, 5))
        >>> bool(abs(probs.sum(axis=-1) - 1).max() < 1e-5)
        True
    """
    inputs, tokens, length = _encode(preprocessor, text, text_pair)
    return tokens[:length], _probabilities(_viewer(backbone, output_attentions=True), inputs,
                                           length)


def plot_attention(tokens, probs, layer=-1, heads=None, path=None, columns=4):
    """Plots the attention of one layer as a grid of heatmaps, one per head.

    In each heatmap a row is a query token and a column a key token. The figure is built
    without pyplot, so the caller's matplotlib backend stays as it is.

    Args:
      tokens: the tokens, as `attention_maps` returns them.
      probs: the probabilities [layers, heads, n, n], as `attention_maps` returns them.
      layer: the layer to plot (negative counts from the last).
      heads: the heads to plot (default: all).
      path: a file to write the figure to as a PNG, or None.
      columns: the heatmaps in a row of the grid.

    Returns:
      The `matplotlib.figure.Figure`.

    Examples:
        >>> import pathlib, tempfile
        >>> import kbert
        >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat"]
        >>> preprocessor = kbert.BertPreprocessor(kbert.BertTokenizer(vocabulary), sequence_length=8)
        >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny", vocab_size=len(vocabulary)))
        >>> tokens, probs = kbert.viz.attention_maps(backbone, preprocessor, "the cat sat")
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "attention.png"
        >>> figure = kbert.viz.plot_attention(tokens, probs, layer=0, path=path)
        >>> len(figure.axes), path.is_file()
        (2, True)
    """
    from matplotlib.figure import Figure  # not pyplot: the caller's backend stays as it is

    maps = probs[layer]
    heads = list(range(maps.shape[0])) if heads is None else list(heads)
    rows = -(-len(heads) // columns)
    size = 0.18 * len(tokens) + 1.5
    fig = Figure(figsize=(size * min(columns, len(heads)), size * rows))
    axes = fig.subplots(rows, min(columns, len(heads)), squeeze=False)
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
