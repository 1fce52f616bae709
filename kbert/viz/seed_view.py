"""The seed view: how one attention weight is made.

For query token i and key token j of one head: q and k are that head's slices of the block's
fused query/key/value projection of the block's input; q×k element-wise, summed, is q·k; divided
by sqrt(head size), plus the padding bias, it is one score of row i; the softmax of the whole row
is the weight the model attends with. It is computed here in numpy from the block's weights,
apart from the block's own code, so a test can hold it against what the backbone computes.
"""

import dataclasses
import math

import keras
import numpy as np

from kbert.viz.attention import _encode, _viewer

# Google BERT's additive score for a key a query may not see (as in kbert.layers.encoder_block).
MASKED_SCORE = -10000.0


@dataclasses.dataclass
class SeedView:
    """One attention weight, from the vectors up (`seed_view` computes it).

    Rows cover every position of the packed input, padding included (`length` of them are
    real tokens); `weight` is the attention weight of `query` on `key`.
    """

    tokens: list  # token at every position
    length: int
    layer: int
    head: int
    query: int  # positions
    key: int
    q: np.ndarray  # [head_size] the query token's query vector for this head
    k: np.ndarray  # [head_size] the key token's key vector
    product: np.ndarray  # q × k, element-wise
    dot: float  # q · k
    bias: np.ndarray  # [seq] 0 where the query may attend, MASKED_SCORE elsewhere
    scores: np.ndarray  # [seq] q · k_j / sqrt(head_size) + bias_j, for every key j
    probs: np.ndarray  # [seq] softmax of the scores: the row of attention weights

    @property
    def weight(self):
        return float(self.probs[self.key])


def _position(tokens, token):
    """A position given as an int, or as a token string (its first occurrence)."""
    if isinstance(token, str):
        if token not in tokens:
            raise ValueError(f"{token!r} is not a token of the input; its tokens are {tokens}.")
        return tokens.index(token)
    return int(token)


def seed_view(backbone, preprocessor, text, text_pair=None, layer=0, head=0, query="[CLS]",
              key="[SEP]"):
    """Computes how one attention weight is made, from the query and key vectors up.

    The arithmetic runs in numpy (float64) from the block's weights, apart from the block's
    own code, so it can be checked against what the backbone computes (`attention_maps`).

    Args:
      backbone: a `kbert.BertBackbone`.
      preprocessor: the `kbert.BertPreprocessor` that packs the input.
      text: the sentence.
      text_pair: the second sentence of a pair, or None.
      layer: the encoder block (negative counts from the last).
      head: the attention head of that block.
      query: the attending token: a position, or a token string (its first occurrence).
      key: the attended token: a position, or a token string (its first occurrence).

    Returns:
      A `SeedView`: q, k, q×k, q·k, the padding bias, the row of scores and its softmax.

    Examples:
        >>> import kbert
        >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat"]
        >>> preprocessor = kbert.BertPreprocessor(kbert.BertTokenizer(vocabulary), sequence_length=8)
        >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny", vocab_size=len(vocabulary)))
        >>> view = kbert.viz.seed_view(backbone, preprocessor, "the cat sat", query="[CLS]",
        ...                            key="cat")
        >>> view.query, view.key, view.length, view.q.shape
        (0, 2, 5, (64,))
        >>> tokens, probs = kbert.viz.attention_maps(backbone, preprocessor, "the cat sat")
        >>> bool(abs(view.weight - probs[0, 0, 0, 2]) < 1e-5)
        True
    """
    if not 0 <= head < backbone.config.num_heads:
        raise ValueError(f"head must be in [0, {backbone.config.num_heads}), got {head}.")
    inputs, tokens, length = _encode(preprocessor, text, text_pair)
    layer %= backbone.config.num_layers
    query, key = _position(tokens, query), _position(tokens, key)
    states = _viewer(backbone, output_hidden_states=True)(inputs)["hidden_states"]
    hidden = keras.ops.convert_to_numpy(states[layer])[0].astype("float64")  # the block's input

    block = backbone.encoder_blocks[layer]
    kernel, bias = (keras.ops.convert_to_numpy(w).astype("float64")
                    for w in (block.qkv_dense.kernel, block.qkv_dense.bias))
    size = block.head_size
    # Output features of the fused projection are laid out as [q | k | v] × heads × head_size.
    q_cols = slice(head * size, (head + 1) * size)
    k_cols = slice(kernel.shape[0] + head * size, kernel.shape[0] + (head + 1) * size)
    q = hidden[query] @ kernel[:, q_cols] + bias[q_cols]
    keys = hidden @ kernel[:, k_cols] + bias[k_cols]  # [seq, head_size]

    allowed = np.asarray(inputs["padding_mask"])[0].astype(bool)
    if backbone.causal:
        allowed &= np.arange(len(tokens)) <= query
    score_bias = np.where(allowed, 0.0, MASKED_SCORE)
    scores = keys @ q / math.sqrt(size) + score_bias
    exp = np.exp(scores - scores.max())
    return SeedView(tokens=tokens, length=length, layer=layer, head=head, query=query, key=key,
                    q=q, k=keys[key], product=q * keys[key], dot=float(np.dot(q, keys[key])),
                    bias=score_bias, scores=scores, probs=exp / exp.sum())


def plot_seed_view(view, path=None):
    """Plots a `SeedView`: the vectors, the arithmetic and the softmax row.

    q, k and q×k are drawn as colour strips (red > 0 > blue), with the arithmetic to the
    weight beside the softmax row over the real tokens, the chosen key in orange. The figure
    is built without pyplot, so the caller's matplotlib backend stays as it is.

    Args:
      view: the `SeedView` to draw.
      path: a file to write the figure to as a PNG, or None.

    Returns:
      The `matplotlib.figure.Figure`.

    Examples:
        >>> import kbert
        >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat"]
        >>> preprocessor = kbert.BertPreprocessor(kbert.BertTokenizer(vocabulary), sequence_length=8)
        >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny", vocab_size=len(vocabulary)))
        >>> view = kbert.viz.seed_view(backbone, preprocessor, "the cat sat", key="cat")
        >>> figure = kbert.viz.plot_seed_view(view)
        >>> len(figure.axes)
        5
    """
    from matplotlib.figure import Figure  # not pyplot: the caller's backend stays as it is

    fig = Figure(figsize=(11, 0.5 + 0.22 * max(view.length, 12)))
    grid = fig.add_gridspec(4, 2, width_ratios=(3, 2), height_ratios=(1, 1, 1, 1.4))
    limit = max(np.abs(view.q).max(), np.abs(view.k).max())
    for row, (name, vector, scale) in enumerate(
            (("q", view.q, limit), ("k", view.k, limit),
             ("q×k", view.product, np.abs(view.product).max()))):
        ax = fig.add_subplot(grid[row, 0])
        ax.imshow(vector[None, :], cmap="RdBu_r", vmin=-scale, vmax=scale, aspect="auto")
        ax.set_yticks([0], [name])
        ax.set_xticks([])
    ax.set_xlabel(f"{len(view.q)} dimensions of head {view.head}")

    text = fig.add_subplot(grid[3, 0])
    text.axis("off")
    masked = len(view.tokens) - view.length
    text.text(0, 0.5, "\n".join([
        f"q·k = Σ q×k = {view.dot:.3f}",
        f"q·k / √{len(view.q)} + bias = {view.scores[view.key]:.3f}"
        + (f"   ({masked} padding keys get {MASKED_SCORE:g})" if masked else ""),
        f"softmax over the row → weight {view.weight:.3f}"]), va="center", fontsize=10,
        family="monospace")

    bars = fig.add_subplot(grid[:, 1])
    real = range(view.length)
    bars.barh(real, view.probs[:view.length],
              color=["tab:orange" if j == view.key else "tab:blue" for j in real])
    bars.set_yticks(real, view.tokens[:view.length], fontsize=8)
    bars.invert_yaxis()
    bars.set_xlabel(f"attention of {view.tokens[view.query]!r} (softmax of its row)")
    fig.suptitle(f"layer {view.layer}, head {view.head}: {view.tokens[view.query]!r} → "
                 f"{view.tokens[view.key]!r}")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
