"""One post-LN Transformer encoder block, as in BERT, with a fused query/key/value projection."""

import math

import keras
from keras import ops

from kbert.layers import activations, attention_kernel
from kbert.layers.dropout import Dropout

# Google's BERT adds -10000 to masked attention scores; exp() of that is exactly 0 in fp32, and
# the value stays finite in fp16 and bf16, where a dtype's min would overflow.
_MASKED_SCORE = -10000.0


def attention_bias(padding_mask, causal=False, dtype="float32"):
    """Additive attention bias, computed once per batch and shared by every block.

    `padding_mask` is [batch, seq] (1 or True = a real token). The result broadcasts against
    scores [batch, heads, query, key]: 0 where a query may attend to a key, -10000 elsewhere.
    With `causal`, query i also never sees keys after i (the paper's left-to-right ablation).
    """
    allowed = ops.cast(padding_mask, "bool")[:, None, None, :]
    if causal:
        # Positions from a cumulative sum rather than arange: works on symbolic shapes too.
        positions = ops.cumsum(ops.ones_like(padding_mask, dtype="int32"), axis=1)
        lower = positions[:, :, None] >= positions[:, None, :]
        allowed = ops.logical_and(allowed, lower[:, None, :, :])
    return ops.cast(ops.where(allowed, 0.0, _MASKED_SCORE), dtype)


@keras.saving.register_keras_serializable(package="kbert")
class TransformerEncoderBlock(keras.layers.Layer):
    """Self-attention → dropout → residual → LayerNorm → FFN → dropout → residual → LayerNorm.

    Call with `x` [batch, seq, hidden] and an `attention_bias` from `attention_bias()`. With
    `return_attention=True` the call returns `(output, probabilities)`, probabilities being
    [batch, heads, seq, seq] after softmax (before attention dropout).

    `sequence_lengths` [batch] (int32) says instead that each row's first `length` tokens are
    its real ones, which lets the block run a fused attention kernel where
    `attention_implementation` and the device allow it (`kbert.layers.attention_kernel` says
    which, and why); rows past a length then come out differently (nothing real attends to
    them). Without lengths the block runs its einsum with the bias.

    `query` [batch, n, hidden], the input states of a few of `x`'s tokens (e.g. `x[:, :1]`),
    asks for the block's output at those tokens as well: the call returns `(output,
    output_at_query)`, the second [batch, n, hidden] computed from the keys and values the full
    output uses, with attention for n queries, the output projection, the FFN and the
    LayerNorms on n rows. The backbone computes its pooled `[CLS]` state this way, as the Model
    Garden's `output_range` does: a model that reads only `pooled_output` never runs the last
    block's attention and FFN over the whole sequence (only its key/value projection), and one
    that reads both projects keys and values once. It takes a padding bias ([batch, 1, 1,
    key]), not a causal one, and not `return_attention`.

    Examples:
        >>> import keras
        >>> from kbert.layers import TransformerEncoderBlock
        >>> block = TransformerEncoderBlock(num_heads=4, intermediate_size=64)
        >>> tuple(block(keras.ops.zeros((2, 7, 16))).shape)
        (2, 7, 16)
    """

    def __init__(self, num_heads, intermediate_size, activation="gelu", dropout=0.1,
                 attention_dropout=0.1, layer_norm_eps=1e-12, initializer_range=0.02,
                 attention_implementation="auto", **kwargs):
        super().__init__(**kwargs)
        attention_kernel.check_implementation(attention_implementation)
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.activation = activation
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.attention_implementation = attention_implementation
        self._activation_fn = activations.get(activation)

    def build(self, input_shape):
        hidden = input_shape[-1]
        if hidden % self.num_heads:
            raise ValueError(f"Hidden size {hidden} is not divisible by {self.num_heads} heads.")
        self.head_size = hidden // self.num_heads

        def dense(units, name):
            return keras.layers.Dense(
                units, name=name, dtype=self.dtype_policy,
                kernel_initializer=keras.initializers.TruncatedNormal(
                    stddev=self.initializer_range))

        def layer_norm(name):
            return keras.layers.LayerNormalization(
                epsilon=self.layer_norm_eps, name=name, dtype=self.dtype_policy)

        self.qkv_dense = dense(3 * hidden, "attention_qkv")
        self.attention_output_dense = dense(hidden, "attention_output")
        self.attention_layer_norm = layer_norm("attention_layer_norm")
        self.intermediate_dense = dense(self.intermediate_size, "intermediate")
        self.output_dense = dense(hidden, "output")
        self.output_layer_norm = layer_norm("output_layer_norm")
        self.attention_dropout_layer = Dropout(
            self.attention_dropout, dtype=self.dtype_policy)
        self.dropout_layer = Dropout(self.dropout, dtype=self.dtype_policy)

        seq_shape = tuple(input_shape)
        self.qkv_dense.build(seq_shape)
        self.attention_output_dense.build(seq_shape)
        self.attention_layer_norm.build(seq_shape)
        self.intermediate_dense.build(seq_shape)
        self.output_dense.build(seq_shape[:-1] + (self.intermediate_size,))
        self.output_layer_norm.build(seq_shape)
        # Dropouts built here too: a fused-attention block never calls the attention dropout,
        # and an unbuilt layer makes JAX's `predict` rebuild the model by a forward pass.
        self.attention_dropout_layer.build(seq_shape[:1] + (self.num_heads,) + seq_shape[1:2] * 2)
        self.dropout_layer.build(seq_shape)
        self.built = True

    def call(self, x, attention_bias=None, sequence_lengths=None, training=None,
             return_attention=False, query=None):
        if query is not None and (return_attention or attention_bias is not None
                                  and attention_bias.shape[2] != 1):
            raise ValueError("`query` takes a padding bias [batch, 1, 1, key] (a causal bias "
                             "depends on the query) and no `return_attention`; got a bias of "
                             f"shape {getattr(attention_bias, 'shape', None)}, "
                             f"return_attention={return_attention}.")
        batch, seq_len = ops.shape(x)[0], ops.shape(x)[1]
        hidden = self.num_heads * self.head_size
        kernel = "einsum" if sequence_lengths is None else attention_kernel.choose_here(
            self.attention_implementation, dtype=self.compute_dtype, head_size=self.head_size,
            return_attention=return_attention, training=bool(training),
            attention_dropout=self.attention_dropout)
        if kernel == "flash" and not (isinstance(seq_len, int) and seq_len % 16 == 0):
            kernel = "einsum"  # the flash tiles need it; also Keras' symbolic shape pass
        # Rows of [batch·seq, hidden] outside attention: the gradients of the biases and
        # LayerNorms then sum over one axis, which XLA on a CPU runs faster than over two.
        rows = ops.reshape(x, (-1, hidden))
        q, k, v = self._query_key_value(rows, batch, seq_len)
        if kernel == "einsum":
            context, probs = self._einsum_attention(q, k, v, attention_bias, training)
        elif kernel == "flash":
            context, probs = self._flash_attention(q, k, v, sequence_lengths, training), None
        else:
            context, probs = attention_kernel.fused_attention(
                q, k, v, sequence_lengths, kernel), None
        out = self._feed_forward(rows, ops.reshape(context, (-1, hidden)), training)
        out = ops.reshape(out, (batch, seq_len, hidden))
        if query is not None:
            return out, self._output_at(query, k, v, attention_bias, training)
        return (out, probs) if return_attention else out

    def _query_key_value(self, rows, batch, seq_len):
        """[batch·seq, hidden] → three [batch, seq, heads, head_size] tensors; the einsums
        contract over heads in place (only training re-lays the values out). Unstacked, not
        sliced: TensorFlow without XLA back-propagates each slice as a full-size zero tensor
        with the slice scattered in (a sixth of a BERT-mini step), an unstack as one stack.
        (Three matmuls on thirds of the kernel, each output contiguous as cuDNN takes it,
        were no faster on an H100: `benchmarks/results/gpu/qkv-separate-infer.json`.)"""
        qkv = ops.reshape(self.qkv_dense(rows),
                          (batch, seq_len, 3, self.num_heads, self.head_size))
        return ops.unstack(qkv, 3, axis=2)

    def _feed_forward(self, rows, context, training):
        """The block after attention, on rows [n, hidden] and their attention context."""
        attended = self.dropout_layer(self.attention_output_dense(context), training=training)
        rows = self.attention_layer_norm(rows + attended)
        ffn = self.output_dense(self._activation_fn(self.intermediate_dense(rows)))
        return self.output_layer_norm(rows + self.dropout_layer(ffn, training=training))

    def _output_at(self, states, key, value, attention_bias, training):
        """The block's output [batch, n, hidden] at the tokens whose input states are `states`
        [batch, n, hidden], attending to the full call's `key` and `value`.

        Attention for one query is a broadcast product and a sum, not a batched matmul:
        oneDNN's AMX batched matmul, which TensorFlow runs for an einsum outside XLA, crashed
        the process now and then at one query (SIGSEGV in `brgemm_matmul_t`, on an Intel Xeon
        with AMX), and at one query a matmul gains nothing. For more (a masked LM's 21), the
        einsum: the broadcast form ate the whole gain of skipping the rest of the block
        (`benchmarks/README.md`, "Attention at a few queries")."""
        batch, n, hidden = ops.shape(states)[0], ops.shape(states)[1], states.shape[-1]
        rows = ops.reshape(states, (-1, hidden))
        query = self._query_key_value(rows, batch, n)[0]
        if states.shape[1] != 1:  # an unknown n included
            context = self._einsum_attention(query, key, value, attention_bias, training)[0]
        else:
            query = query * (1.0 / math.sqrt(self.head_size))
            scores = ops.sum(query[:, :, None] * key[:, None], axis=-1)  # [batch, 1, key, heads]
            if attention_bias is not None:  # [batch, 1, 1, key] → [batch, 1, key, 1]
                scores = scores + ops.cast(attention_bias[:, :, 0, :, None], scores.dtype)
            probs = ops.cast(ops.softmax(ops.cast(scores, "float32"), axis=2), query.dtype)
            probs = self.attention_dropout_layer(probs, training=training)
            context = ops.sum(probs[..., None] * value[:, None], axis=2)  # [batch, 1, heads, d]
        rows = self._feed_forward(rows, ops.reshape(context, (-1, hidden)), training)
        return ops.reshape(rows, (batch, n, hidden))

    def _einsum_attention(self, query, key, value, attention_bias, training):
        """(context [batch, seq, heads, head_size], probabilities) with an additive bias."""
        scores = ops.einsum("bqhd,bkhd->bhqk", query * (1.0 / math.sqrt(self.head_size)), key)
        if attention_bias is not None:
            scores = scores + ops.cast(attention_bias, scores.dtype)
        # Softmax in float32 even under mixed precision: bf16 sums of many small terms drift.
        probs = ops.cast(ops.softmax(ops.cast(scores, "float32"), axis=-1), query.dtype)
        dropped = self.attention_dropout_layer(probs, training=training)
        if training:
            # The same product with values laid out [batch, heads, head_size, key]: XLA on a CPU
            # then computes the values' gradient as a plain matmul instead of one with a
            # transposed left operand, which runs at a third of the speed (~2% of a step).
            # Inference keeps the form XLA runs fastest without gradients.
            context = ops.einsum("bhqk,bhdk->bqhd", dropped, ops.transpose(value, (0, 2, 3, 1)))
        else:
            context = ops.einsum("bhqk,bkhd->bqhd", dropped, value)
        return context, probs

    def _flash_attention(self, query, key, value, lengths, training):
        """kbert's flash kernel, with the attention dropout drawn from this block's own seed
        generator: the mask the einsum path would draw at this call."""
        from kbert.layers.flash_attention import flash_attention

        rate = self.attention_dropout if training else 0.0
        seed = self.attention_dropout_layer.seed_generator.next() if rate > 0 else None
        return flash_attention(query, key, value, lengths, rate=rate, seed=seed)

    def get_config(self):
        return {
            **super().get_config(),
            "num_heads": self.num_heads,
            "intermediate_size": self.intermediate_size,
            "activation": self.activation,
            "dropout": self.dropout,
            "attention_dropout": self.attention_dropout,
            "layer_norm_eps": self.layer_norm_eps,
            "initializer_range": self.initializer_range,
            "attention_implementation": self.attention_implementation,
        }
