"""`BertBackbone`: the BERT encoder as a functional Keras model, dict in and dict out."""

import keras

from kbert import presets
from kbert.config import INPUT_KEYS, BertConfig
from kbert.layers import BertEmbeddings, TransformerEncoderBlock, attention_bias
from kbert.layers import attention_kernel as kernels
from kbert.models.frozen_layers import apply_trainable, frozen_layers
from kbert.models.input_limits import check_packed_inputs, model_limits
from kbert.models.xla import default_jit_compile


def check_model_kwargs(cls, kwargs):
    """Refuses a model's keywords other than `name`, `trainable` and `frozen_layers`.

    Keras' functional constructor keeps the first two and silently drops the rest, so
    `dropout=0.0` would train with 0.1; a dropout keyword's error names the `BertConfig` fields.

    Args:
        cls: the model class, named in the error.
        kwargs: the constructor's remaining keyword arguments; `frozen_layers` is taken out.

    Returns:
        The `frozen_layers` names (`kbert.models.frozen_layers`), or an empty tuple.

    Examples:
        >>> import kbert
        >>> from kbert.models.backbone import check_model_kwargs
        >>> check_model_kwargs(kbert.BertBackbone, {"name": "encoder"})
        ()
        >>> check_model_kwargs(kbert.BertBackbone, {"dropout": 0.0})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        TypeError: BertBackbone got unexpected keyword argument(s) dropout. The encoder's dropout...
    """
    unknown = sorted(set(kwargs) - {"name", "trainable", "frozen_layers"})
    if unknown:
        hint = (" The encoder's dropout rates are BertConfig fields (hidden_dropout, "
                "attention_dropout); `from_pretrained` also takes them."
                if any("dropout" in name for name in unknown) else "")
        raise TypeError(f"{cls.__name__} got unexpected keyword argument(s) "
                        f"{', '.join(unknown)}.{hint}")
    return kwargs.pop("frozen_layers", None) or ()


@keras.saving.register_keras_serializable(package="kbert")
class BertBackbone(keras.Model):
    """The BERT encoder: embeddings, `num_layers` post-LN Transformer blocks and the pooler.

    A functional Keras model, dict in and dict out, with new random weights;
    `BertBackbone.from_pretrained` loads a checkpoint's. Layer names are stable (`embeddings`,
    `transformer_layer_{i}`, `pooler`), so checkpoints map onto them one to one
    (`kbert.convert`).

    Args:
        config: a `BertConfig`: the sizes and dropout rates.
        causal: bool. The paper's left-to-right ablation: each token attends only to itself and
            those before it, and the pooler reads the last real token (the one that has seen
            the whole sequence, as GPT's classifier does) instead of `[CLS]`, which would see
            only itself. A causal backbone saves as a Hugging Face `is_decoder` model.
        output_hidden_states: bool. Also return `hidden_states`.
        output_attentions: bool. Also return `attention_probs`.
        dtype: a Keras dtype policy or its name (e.g. "mixed_bfloat16"); None for Keras'
            global policy. The task models built on the backbone compute in it too.
        attention_implementation: the attention kernel: "auto", "einsum", "fused", "xla" or
            "flash". "auto" runs cuDNN's fused attention on the JAX backend on an NVIDIA GPU
            in bfloat16 or float16 (kbert's flash kernel when training with attention
            dropout), and kbert's einsum everywhere else, the TensorFlow backend included.
            `kbert.layers.attention_kernel` has the rules and why.
        **kwargs: `name`, `trainable`, and `frozen_layers` (names of layers kept frozen
            through saving, `kbert.models.frozen_layers`). Any other keyword raises
            `TypeError`: Keras would drop it silently.

    Call arguments:
        inputs: a dict of int32 [batch, seq] tensors: `token_ids`, `segment_ids` and
            `padding_mask` (1 on real tokens, 0 on padding).
        training: bool. Whether dropout applies.
        output_positions: optional int32 [batch, n] positions (a masked LM's): adds
            `output_at_positions` [batch, n, hidden].

    Returns:
        A dict: `sequence_output` [batch, seq, hidden], the last block's output, and
        `pooled_output` [batch, hidden], dense + tanh on `[CLS]`'s final state. The last block
        computes `[CLS]` (and `output_positions`) apart, so a model that reads only
        `pooled_output` (a classifier) or `output_at_positions` (`BertPretrainer`) skips the
        rest of that block. With `output_hidden_states`, `hidden_states`: the embedding output
        and every block's output (num_layers + 1 tensors [batch, seq, hidden]); with
        `output_attentions`, `attention_probs`: one [batch, heads, seq, seq] per block.

    Examples:
        >>> import numpy as np
        >>> import kbert
        >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny"))
        >>> ids = np.array([[101, 7592, 2088, 102, 0, 0]])  # [CLS] hello world [SEP], padding
        >>> inputs = {"token_ids": ids, "segment_ids": np.zeros_like(ids),
        ...           "padding_mask": (ids > 0).astype("int32")}
        >>> outputs = backbone(inputs)
        >>> tuple(outputs["sequence_output"].shape), tuple(outputs["pooled_output"].shape)
        ((1, 6, 128), (1, 128))

        Every layer's output:

        >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny"),
        ...                               output_hidden_states=True)
        >>> len(backbone(inputs)["hidden_states"])
        3
    """

    serving_kind = "backbone"
    """How kbert.export serves this class (a key of `export.serving_kinds.SERVING_KINDS`)."""

    def __init__(self, config: BertConfig, causal=False, output_hidden_states=False,
                 output_attentions=False, dtype=None, attention_implementation="auto",
                 **kwargs):
        frozen = check_model_kwargs(type(self), kwargs)
        # === Layers ===
        embeddings = BertEmbeddings(
            config.vocab_size, config.hidden_size, config.max_position_embeddings,
            config.type_vocab_size, dropout=config.hidden_dropout,
            layer_norm_eps=config.layer_norm_eps, initializer_range=config.initializer_range,
            dtype=dtype, name="embeddings")
        blocks = [
            TransformerEncoderBlock(
                config.num_heads, config.intermediate_size, activation=config.hidden_act,
                dropout=config.hidden_dropout, attention_dropout=config.attention_dropout,
                layer_norm_eps=config.layer_norm_eps, initializer_range=config.initializer_range,
                attention_implementation=attention_implementation, dtype=dtype,
                name=f"transformer_layer_{i}")
            for i in range(config.num_layers)
        ]
        pooler = keras.layers.Dense(
            config.hidden_size, activation="tanh", dtype=dtype, name="pooler",
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=config.initializer_range))

        # === Functional graph ===
        inputs = {
            name: keras.Input(shape=(None,), dtype="int32", name=name)
            for name in INPUT_KEYS
        }
        x = embeddings(inputs["token_ids"], inputs["segment_ids"])
        fused = kernels.choose_here(
            attention_implementation, causal=causal, return_attention=output_attentions,
            dtype=embeddings.compute_dtype,
            head_size=config.hidden_size // config.num_heads) != "einsum"
        x, pooled, hidden_states, attention_probs, _ = _encode(
            x, inputs["padding_mask"], blocks, causal, output_attentions, fused)
        outputs = {"sequence_output": x, "pooled_output": pooler(pooled)}
        if output_hidden_states:
            outputs["hidden_states"] = hidden_states
        if output_attentions:
            outputs["attention_probs"] = attention_probs
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        apply_trainable(self, frozen)
        if dtype is not None:
            # Keras' functional constructor drops `dtype`; task heads and get_config read it.
            self.dtype_policy = dtype

        # === Config ===
        self.config = config
        self.causal = causal
        self.output_hidden_states = output_hidden_states
        self.output_attentions = output_attentions
        self.attention_implementation = attention_implementation
        self.embeddings = embeddings
        self.encoder_blocks = blocks
        self.pooler = pooler
        self._fused = fused

    def call(self, inputs, training=None, mask=None, output_positions=None):
        """Runs the encoder: see the class's "Call arguments" and "Returns".

        With `output_positions` [batch, n] (int32, a masked LM's positions) the output also
        holds `output_at_positions` [batch, n, hidden], the last block run at `[CLS]` and
        those positions only (`_encode`); `BertPretrainer` calls it so.
        """
        if output_positions is None:
            return super().call(inputs, training=training, mask=mask)
        x = self.embeddings(inputs["token_ids"], inputs["segment_ids"], training=training)
        positions = keras.ops.cast(output_positions, "int32")
        x, pooled, hidden_states, attention_probs, at_positions = _encode(
            x, inputs["padding_mask"], self.encoder_blocks, self.causal, self.output_attentions,
            self._fused, positions=positions)
        outputs = {"sequence_output": x, "pooled_output": self.pooler(pooled),
                   "output_at_positions": at_positions}
        if self.output_hidden_states:
            outputs["hidden_states"] = hidden_states
        if self.output_attentions:
            outputs["attention_probs"] = attention_probs
        return outputs

    def compute_output_spec(self, inputs, training=None, mask=None, output_positions=None):
        if output_positions is None:
            return super().compute_output_spec(inputs, training=training, mask=mask)
        spec = dict(super().compute_output_spec(inputs, training=training, mask=mask))
        batch, hidden = inputs["token_ids"].shape[0], self.config.hidden_size
        spec["output_at_positions"] = keras.KerasTensor(
            (batch, output_positions.shape[1], hidden), self.compute_dtype)
        return spec

    def compile(self, *args, jit_compile="auto", **kwargs):
        """Keras' `compile`; `jit_compile="auto"` lets kbert choose XLA (`kbert.models.xla`)."""
        super().compile(*args, jit_compile=default_jit_compile(jit_compile, self.dtype_policy),
                        **kwargs)

    def predict(self, x, *args, **kwargs):
        """Keras' `predict`, after the inputs are checked against this model's tables.

        Under XLA an id beyond a table would read a clamped row, not fail, so packed arrays are
        checked whole and a dataset's batches as they are read
        (`kbert.tensorflow_inputs`).

        Args:
            x: the packed inputs (a dict of arrays) or a dataset of them.
            *args: Keras' `predict` arguments.
            **kwargs: Keras' `predict` arguments (e.g. `batch_size`, `verbose`).

        Returns:
            The output dict as numpy arrays.

        Examples:
            >>> import numpy as np
            >>> import kbert
            >>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny"))
            >>> ids = np.array([[101, 7592, 102], [101, 2088, 102]])
            >>> outputs = backbone.predict({"token_ids": ids, "segment_ids": 0 * ids,
            ...                             "padding_mask": np.ones_like(ids)}, verbose=0)
            >>> outputs["pooled_output"].shape
            (2, 128)
        """
        if isinstance(x, dict):
            check_packed_inputs(model_limits(self), x)
        elif isinstance(getattr(x, "element_spec", None), dict) and hasattr(x, "map"):
            from kbert.tensorflow_inputs import checked_dataset  # TensorFlow, on demand

            x = checked_dataset(x, model_limits(self))
        return super().predict(x, *args, **kwargs)

    @property
    def token_embedding(self):
        """The `keras.layers.Embedding` whose table the MLM decoder shares."""
        return self.embeddings.token_embedding

    def get_config(self):
        """The constructor's arguments, JSON-ready (`from_config` rebuilds the backbone)."""
        return {
            "config": self.config.to_dict(),
            "causal": self.causal,
            "output_hidden_states": self.output_hidden_states,
            "output_attentions": self.output_attentions,
            "attention_implementation": self.attention_implementation,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
            "name": self.name,
            "trainable": self.trainable,
            "frozen_layers": frozen_layers(self),
        }

    @classmethod
    def from_config(cls, config):
        """The backbone `get_config`'s dict describes (what `keras.saving.load_model` calls).

        The constructor refuses an attention kernel that cannot run here; a saved model that
        names one loads with "auto" instead (`attention_kernel.runnable_here`).
        """
        config = dict(config)
        config["config"] = bert_config = BertConfig.from_dict(config["config"])
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        policy = keras.dtype_policies.get(config.get("dtype") or keras.config.dtype_policy())
        config["attention_implementation"] = kernels.runnable_here(
            config.get("attention_implementation", "auto"), dtype=policy.compute_dtype,
            head_size=bert_config.hidden_size // bert_config.num_heads)
        return cls(**config)

    @classmethod
    def from_pretrained(cls, path_or_preset, allow_pickle=False, **kwargs):
        """A backbone with pretrained weights.

        Args:
            path_or_preset: a kbert weights preset name (e.g. "minilm_l6_h384_uncased"), or a
                directory holding a Hugging Face checkpoint, an original Google TF1 checkpoint,
                a keras-hub preset or a `kbert finetune` run. A size preset has no weights and
                raises `FileNotFoundError`: build `BertBackbone(BertConfig.preset(name))`.
            allow_pickle: bool. Whether a pickled PyTorch file (`pytorch_model.bin`) may be
                read; unpickling runs arbitrary code, so trust the file first.
            **kwargs: constructor arguments (e.g. `output_hidden_states`, `dtype`), and the
                dropout rates `hidden_dropout` and `attention_dropout`, which replace the
                checkpoint's (no weight depends on them).

        Returns:
            A `BertBackbone` (or an instance of the subclass it is called on).

        Examples:
            >>> import kbert
            >>> backbone = kbert.BertBackbone.from_pretrained("minilm_l6_h384_uncased")
            >>> backbone.config.num_layers, backbone.config.hidden_size
            (6, 384)
            >>> tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
            >>> preprocessor = kbert.BertPreprocessor(tokenizer, sequence_length=16)
            >>> outputs = backbone(preprocessor(["The quick brown fox.", "Hello world!"]))
            >>> tuple(outputs["sequence_output"].shape)
            (2, 16, 384)
        """
        return presets.load_backbone(path_or_preset, cls=cls, allow_pickle=allow_pickle,
                                     require_weights=True, **kwargs)


def _last_real_token(x, padding_mask):
    """A causal model's pooled state: its last real token's (one-hot selection, so it works on
    any padding pattern and symbolic length)."""
    mask = keras.ops.cast(padding_mask, "int32")
    rank = mask * keras.ops.cumsum(keras.ops.ones_like(mask), axis=1)
    last = keras.ops.equal(rank, keras.ops.max(rank, axis=1, keepdims=True)) & (mask > 0)
    return keras.ops.einsum("bs,bsh->bh", keras.ops.cast(last, x.dtype), x)


def _encode(x, padding_mask, blocks, causal, output_attentions, fused, positions=None):
    """The blocks over the embeddings `x`: (output, the state the pooler reads, hidden states,
    attention probabilities, the output at `positions` [batch, n] or None).

    The pooler reads `[CLS]`'s state, which the last block computes apart at that one query
    (`TransformerEncoderBlock(query=...)`) from the keys and values of its full call: equal to
    the full output's first row, and a model that reads only `pooled_output` (a classifier)
    then never runs the last block's attention and FFN over the whole sequence, since XLA and
    TensorFlow's graph pruning drop what no output needs. The output at `positions` (a masked
    LM's) comes from the same query call, `[CLS]` and those positions together. A causal model
    pools its last real token, and a call that returns attention maps `[CLS]`'s row, from the
    full output; their output at `positions` is gathered from it.

    With `fused`, the blocks get the padding as lengths as well as a bias: each row's real
    tokens are moved first for them and moved back after (see `kbert.layers.attention_kernel`).
    """
    lengths = restore = None
    if fused:
        order, lengths = kernels.real_tokens_first(padding_mask)
        x = kernels.gather_positions(x, order)
        padding_mask = kernels.gather_positions(padding_mask, order)
        restore = kernels.inverse_order(order)
    bias = attention_bias(padding_mask, causal=causal)
    hidden_states, attention_probs, pooled, at_positions = [x], [], None, None
    for i, block in enumerate(blocks):
        if output_attentions:
            x, probs = block(x, attention_bias=bias, return_attention=True)
            attention_probs.append(probs)
        elif i == len(blocks) - 1 and not causal:
            # [CLS] at 0 (then `positions`), wherever the fused path moved them.
            asked = None if positions is None else keras.ops.pad(positions, ((0, 0), (1, 0)))
            if restore is not None:
                asked = (restore[:, :1] if asked is None
                         else keras.ops.take_along_axis(restore, asked, axis=1))
            first = x[:, :1] if asked is None else kernels.gather_positions(x, asked)
            if positions is None:  # [CLS] alone: a static query length of 1 even where the
                # sequence length is unknown, since `_output_at` picks its kernel by it.
                first = keras.ops.reshape(first, (-1, 1, x.shape[-1]))
            x, at_query = block(x, attention_bias=bias, sequence_lengths=lengths, query=first)
            pooled = at_query[:, 0]
            at_positions = None if positions is None else at_query[:, 1:]
        else:
            x = block(x, attention_bias=bias, sequence_lengths=lengths)
        hidden_states.append(x)
    if restore is not None:
        hidden_states = [kernels.gather_positions(h, restore) for h in hidden_states]
    if causal:
        pooled = _last_real_token(hidden_states[-1], padding_mask)
    elif pooled is None:  # attention maps asked for: [CLS]'s row of the full output
        pooled = hidden_states[-1][:, 0]
    if positions is not None and at_positions is None:
        at_positions = kernels.gather_positions(hidden_states[-1], positions)
    return hidden_states[-1], pooled, hidden_states, attention_probs, at_positions
