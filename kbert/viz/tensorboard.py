"""Attention heatmaps as TensorBoard images while a model trains, to watch its heads change."""

import keras
import numpy as np

from kbert.viz.attention import _encode, _probabilities, _viewer


def heatmap_image(maps, scale=8, columns=4, gap=2):
    """Tiles the attention maps of one layer's heads into one RGB image.

    Args:
      maps: the probabilities of one layer, a numpy array [heads, n, n].
      scale: the side in pixels of the viridis square drawn for each probability.
      columns: the heads in a row of tiles (left to right, then top to bottom).
      gap: the white pixels between tiles.

    Returns:
      A uint8 numpy array [height, width, 3].

    Examples:
        >>> import numpy as np
        >>> import kbert
        >>> maps = np.full((3, 5, 5), 0.2)
        >>> kbert.viz.heatmap_image(maps, scale=4, columns=2).shape
        (42, 42, 3)
    """
    import matplotlib

    heads, n, _ = maps.shape
    columns = min(columns, heads)
    rows = -(-heads // columns)
    side = n * scale
    image = np.full((rows * (side + gap) - gap, columns * (side + gap) - gap, 3), 255, "uint8")
    colours = (matplotlib.colormaps["viridis"](np.clip(maps, 0.0, 1.0))[..., :3] * 255).round()
    for head in range(heads):
        top, left = (head // columns) * (side + gap), (head % columns) * (side + gap)
        tile = colours[head].repeat(scale, axis=0).repeat(scale, axis=1)
        image[top:top + side, left:left + side] = tile.astype("uint8")
    return image


class AttentionImages(keras.callbacks.Callback):
    """A Keras callback that logs a backbone's attention as TensorBoard images while it trains.

    It writes the attention on one fixed sentence (or pair) as images `attention/layer_{i}`,
    one per layer with its heads tiled (row = query token, column = key token), at the start
    of training, every `every` optimizer steps (None: at each epoch end) and at the end; each
    image's step is the optimizer step. `finetune(attention_sentence=...)` uses it.

    Args:
      log_dir: the TensorBoard folder to write to.
      backbone: the `kbert.BertBackbone` being trained (the callback's model holds it).
      preprocessor: the `kbert.BertPreprocessor` that packs the sentence.
      text: the sentence.
      text_pair: the second sentence of a pair, or None.
      every: optimizer steps between images; None: one per epoch.
      scale: pixels per probability (`heatmap_image`).
      columns: heads per row of tiles.

    Examples:
        >>> import tempfile
        >>> import kbert
        >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat"]
        >>> preprocessor = kbert.BertPreprocessor(kbert.BertTokenizer(vocabulary), sequence_length=8)
        >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny", vocab_size=len(vocabulary)))
        >>> callback = kbert.viz.AttentionImages(tempfile.mkdtemp(), backbone, preprocessor,
        ...                                      "the cat sat", every=10)
        >>> callback.tokens
        ['[CLS]', 'the', 'cat', 'sat', '[SEP]']
    """

    def __init__(self, log_dir, backbone, preprocessor, text, text_pair=None, every=None,
                 scale=8, columns=4):
        super().__init__()
        self.log_dir = str(log_dir)
        self.backbone = backbone
        self.every = every
        self.scale = scale
        self.columns = columns
        self._inputs, tokens, self._length = _encode(preprocessor, text, text_pair)
        self.tokens = tokens[:self._length]

    def on_train_begin(self, logs=None):
        import tensorflow as tf

        self._viewer = _viewer(self.backbone, output_attentions=True)
        self._writer = tf.summary.create_file_writer(self.log_dir)
        self._last_step = None
        self.write()

    def on_train_batch_end(self, batch, logs=None):
        if self.every and self._step() % self.every == 0:
            self.write()

    def on_epoch_end(self, epoch, logs=None):
        if not self.every:
            self.write()

    def on_train_end(self, logs=None):
        self.write()
        self._writer.close()

    def _step(self):
        return int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))

    def write(self):
        """Writes the images for the current weights (once per optimizer step)."""
        import tensorflow as tf

        step = self._step()
        if step == self._last_step:
            return
        self._last_step = step
        self._viewer.set_weights(self.backbone.get_weights())
        probs = _probabilities(self._viewer, self._inputs, self._length)
        with self._writer.as_default(step=step):
            for layer, maps in enumerate(probs):
                tf.summary.image(f"attention/layer_{layer}",
                                 heatmap_image(maps, self.scale, columns=self.columns)[None],
                                 description=f"Heads left to right; rows are query tokens, "
                                             f"columns key tokens: {' '.join(self.tokens)}")
        self._writer.flush()
