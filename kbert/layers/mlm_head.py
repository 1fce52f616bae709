"""BERT's masked-language-model head, evaluated only at the masked positions."""

import keras
from keras import ops

from kbert.layers import activations
from kbert.layers.attention_kernel import gather_positions


@keras.saving.register_keras_serializable(package="kbert")
class MaskedLMHead(keras.layers.Layer):
    """Gathers the masked positions, then dense → activation → LayerNorm → tied decoder + bias.

    The decoder is the transposed token-embedding table of `token_embedding` (a
    `keras.layers.Embedding`), so pre-training updates one matrix, as in the paper. Gathering
    first means the [hidden × vocab] decoder runs on `max_predictions` rows instead of the whole
    sequence.

    Call with `sequence_output` [batch, seq, hidden] and `masked_positions` [batch, predictions]
    (int), or with the states at those positions alone [batch, predictions, hidden] (as
    `BertPretrainer` does: its backbone computes the last block there only); returns logits
    [batch, predictions, vocab].

    The tie to the embedding layer is restored by the model that owns both (`BertPretrainer`
    rebuilds it in `from_config`); a head deserialized on its own gets an untied copy.
    """

    def __init__(self, token_embedding, activation="gelu", layer_norm_eps=1e-12,
                 initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.token_embedding = token_embedding
        self.activation = activation
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self._activation_fn = activations.get(activation)

    def build(self, sequence_output_shape, masked_positions_shape=None):
        hidden = sequence_output_shape[-1]
        self.transform_dense = keras.layers.Dense(
            hidden, name="transform_dense", dtype=self.dtype_policy,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=self.initializer_range))
        self.transform_dense.build((None, None, hidden))
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_eps, name="layer_norm", dtype=self.dtype_policy)
        self.layer_norm.build((None, None, hidden))
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.token_embedding.input_dim,), initializer="zeros")
        self.built = True

    def call(self, sequence_output, masked_positions=None):
        if masked_positions is not None:
            sequence_output = gather_positions(
                sequence_output, ops.cast(masked_positions, "int32"))
        h = self.layer_norm(self._activation_fn(self.transform_dense(sequence_output)))
        table = ops.cast(self.token_embedding.embeddings, h.dtype)
        return ops.matmul(h, ops.transpose(table)) + ops.cast(self.output_bias, h.dtype)

    def compute_output_shape(self, sequence_output_shape, masked_positions_shape=None):
        rows = (sequence_output_shape[:-1] if masked_positions_shape is None
                else masked_positions_shape)
        return tuple(rows) + (self.token_embedding.input_dim,)

    def get_config(self):
        return {
            **super().get_config(),
            "token_embedding": keras.layers.serialize(self.token_embedding),
            "activation": self.activation,
            "layer_norm_eps": self.layer_norm_eps,
            "initializer_range": self.initializer_range,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["token_embedding"] = keras.layers.deserialize(config["token_embedding"])
        return cls(**config)
