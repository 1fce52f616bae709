"""BERT's input embeddings: token + segment + learned position, then LayerNorm and dropout."""

import keras
from keras import ops

from kbert.layers.dropout import Dropout


@keras.saving.register_keras_serializable(package="kbert")
class BertEmbeddings(keras.layers.Layer):
    """Sums token, segment and position embeddings, normalises, and applies dropout.

    The token table is `token_embedding.embeddings`; the MLM decoder reuses it (weight tying).

    Examples:
        >>> import keras
        >>> from kbert.layers import BertEmbeddings
        >>> emb = BertEmbeddings(vocab_size=100, hidden_size=32)
        >>> ids = keras.ops.ones((2, 5), "int32")
        >>> tuple(emb(ids, keras.ops.zeros((2, 5), "int32")).shape)
        (2, 5, 32)
    """

    def __init__(self, vocab_size, hidden_size, max_position_embeddings=512, type_vocab_size=2,
                 dropout=0.1, layer_norm_eps=1e-12, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.dropout = dropout
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range

        def table(rows, name):
            return keras.layers.Embedding(
                rows, hidden_size, name=name, dtype=self.dtype_policy,
                embeddings_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range))

        self.token_embedding = table(vocab_size, "token_embedding")
        self.position_embedding = table(max_position_embeddings, "position_embedding")
        self.segment_embedding = table(type_vocab_size, "segment_embedding")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_eps, name="layer_norm", dtype=self.dtype_policy)
        self.dropout_layer = Dropout(dropout, dtype=self.dtype_policy)

    def build(self, token_ids_shape, segment_ids_shape=None):
        self.token_embedding.build(token_ids_shape)
        self.position_embedding.build((None,))
        self.segment_embedding.build(token_ids_shape)
        self.layer_norm.build(tuple(token_ids_shape) + (self.hidden_size,))
        # Built here, not on first use: Keras runs a functional model's `compute_output_shape`
        # rather than `call`, and a model with an unbuilt layer is rebuilt by a forward pass on
        # every `predict` on JAX.
        self.dropout_layer.build(tuple(token_ids_shape) + (self.hidden_size,))
        self.built = True

    def call(self, token_ids, segment_ids, training=None):
        seq_len = ops.shape(token_ids)[1]
        positions = self.position_embedding(ops.arange(seq_len, dtype="int32"))
        x = (self.token_embedding(token_ids) + self.segment_embedding(segment_ids)
             + ops.expand_dims(positions, 0))
        return self.dropout_layer(self.layer_norm(x), training=training)

    def compute_output_shape(self, token_ids_shape, segment_ids_shape=None):
        return tuple(token_ids_shape) + (self.hidden_size,)

    def get_config(self):
        return {
            **super().get_config(),
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "max_position_embeddings": self.max_position_embeddings,
            "type_vocab_size": self.type_vocab_size,
            "dropout": self.dropout,
            "layer_norm_eps": self.layer_norm_eps,
            "initializer_range": self.initializer_range,
        }
