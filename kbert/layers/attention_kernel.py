"""Which attention kernel a block runs: the one place kbert chooses by backend and device.

Three kernels compute the same attention. `einsum` is kbert's own (two einsums around a float32
softmax, an additive bias for the mask): every backend runs it, it applies the paper's attention
dropout and it can return the probabilities. `fused` is cuDNN's flash attention through
`jax.nn.dot_product_attention(implementation="cudnn")` with the padding given as per-row
lengths: on a GPU it runs a layer's attention in well under the einsum's time
(`benchmarks/README.md`, "Attention kernels on a GPU"). `xla` is that same call with
`implementation=None`, which JAX runs on any device: it tests the fused path's masking on a CPU and is there for a user who wants it.
`flash` is kbert's own flash attention (`kbert.layers.flash_attention`, Pallas kernels that
Triton compiles on an NVIDIA GPU): it takes the same lengths, never writes the probabilities to
memory, and keeps the paper's attention dropout, drawing the einsum's own mask. Elsewhere it
runs in Pallas' interpreter, which is exact and slow (for tests).

`attention_implementation` (on `BertBackbone` and `TransformerEncoderBlock`) picks one:

- `"auto"` (the default): on the JAX backend on an NVIDIA GPU in bfloat16 or float16, `fused`
  where there is no attention dropout to apply (inference, or a rate of 0) and `flash` in
  training with it on one device (`jax.nn.dot_product_attention` has no dropout; JAX's private
  cuDNN entry has one, but with a seed fixed at trace time every step would drop the same
  entries; over several devices, the einsum: XLA cannot split a Triton call); flash trains
  faster than the einsum there. `einsum` everywhere else: the TensorFlow backend, CPUs,
  float32, causal masks, `return_attention`, and head sizes neither kernel takes.
- `"einsum"`: always the einsum.
- `"fused"` / `"xla"`: always that kernel where the mask allows it (not with a causal mask or
  `return_attention`, which keep the einsum). Choosing one is also choosing to train without
  attention dropout: the hidden dropout still applies. Refused where it cannot run (another
  backend; `fused` without a CUDA GPU or in float32).
- `"flash"`: the flash kernel where the mask allows it and the sequence length is a multiple of
  16 (the tiles'; kbert's XLA batches are padded to one), dropout included. Refused on
  another backend, for a head size other than 16, 32, 64 or 128, and on a GPU in float32 (its
  matmuls would run in TF32).

Lengths describe a padding mask only when the real tokens come first in every row (a prefix
mask, what every kbert preprocessor packs). The backbone makes any mask one: it moves each row's
real tokens to the front, in order, before the first block and back after the last
(`real_tokens_first`). Every layer other than attention works token by token and attention
with a key mask does not depend on the order of the keys, so the result is exact, and for a
prefix mask the move is the identity (two gathers per step, far below a layer's attention).
"""

IMPLEMENTATIONS = ("auto", "einsum", "fused", "xla", "flash")
FLASH_HEAD_SIZES = (16, 32, 64, 128)  # powers of two: the Triton tiles' widths
_HALF_PRECISION = ("bfloat16", "float16")  # what cuDNN's flash attention computes in


def check_implementation(implementation, name="attention_implementation"):
    """`implementation`, once it is one of `IMPLEMENTATIONS` (`name`: the setting, for the
    error)."""
    if implementation not in IMPLEMENTATIONS:
        raise ValueError(f"{name} must be one of {IMPLEMENTATIONS}, got {implementation!r}.")
    return implementation


def choose_attention(implementation="auto", *, backend, device, dtype, head_size, causal=False,
                     return_attention=False, training=False, attention_dropout=0.0,
                     devices=1):
    """The kernel to run, `"einsum"`, `"fused"`, `"xla"` or `"flash"`, for a block here.

    `backend` is Keras' backend name, `device` the JAX platform (`current_device()`: "cuda",
    "rocm", "tpu" or "cpu"; None off JAX), `dtype` the block's compute dtype, `devices` how
    many devices a `keras.distribution` spreads the step over.

    >>> choose_attention(backend="tensorflow", device=None, dtype="float32", head_size=64)
    'einsum'
    >>> choose_attention(backend="jax", device="cuda", dtype="bfloat16", head_size=64)
    'fused'
    """
    check_implementation(implementation)
    if implementation == "einsum" or causal or return_attention:
        return "einsum"  # probabilities, or a mask that lengths cannot express
    if implementation == "auto":
        fusable = (backend == "jax" and device == "cuda" and dtype in _HALF_PRECISION
                   and head_size % 8 == 0 and head_size <= 128)
        if not fusable:
            return "einsum"
        if training and attention_dropout > 0:  # only the flash kernel drops
            # XLA cannot split a Triton call over devices (cuDNN's has JAX's sharding rules):
            # over several it would gather the whole batch onto each. Unmeasured: the einsum.
            flash = head_size in FLASH_HEAD_SIZES and devices == 1
            return "flash" if flash else "einsum"
        return "fused"
    if backend != "jax":
        raise ValueError(f"attention_implementation={implementation!r} needs the JAX backend; "
                         f"Keras runs on {backend!r}.")
    if implementation == "fused" and device != "cuda":
        raise ValueError(f"attention_implementation='fused' needs an NVIDIA GPU (cuDNN); JAX "
                         f"runs on {device!r}.")
    if implementation == "fused" and dtype not in _HALF_PRECISION:
        raise ValueError(f"attention_implementation='fused' needs bfloat16 or float16 "
                         f"(cuDNN's flash attention), not {dtype!r}.")
    if implementation == "flash" and head_size not in FLASH_HEAD_SIZES:
        raise ValueError(f"attention_implementation='flash' takes a head size in "
                         f"{FLASH_HEAD_SIZES}, not {head_size}.")
    if implementation == "flash" and device == "cuda" and dtype not in _HALF_PRECISION:
        raise ValueError(f"attention_implementation='flash' on a GPU needs bfloat16 or "
                         f"float16 (float32 matmuls would run in TF32), not {dtype!r}.")
    return implementation


def current_device():
    """The platform JAX computes on: "cuda", "rocm", "tpu" or "cpu"."""
    import jax

    platform = jax.default_backend()
    if platform != "gpu":
        return platform
    try:  # JAX names both GPU platforms "gpu"; only CUDA's answers to its own name.
        jax.devices("cuda")
        return "cuda"
    except RuntimeError:
        return "rocm"


def choose_here(implementation="auto", **setting):
    """`choose_attention` on the backend and device of this process."""
    import keras

    backend = keras.backend.backend()
    device = current_device() if backend == "jax" else None
    spread = keras.distribution.distribution() if backend == "jax" else None
    devices = 1 if spread is None else spread.device_mesh.devices.size
    return choose_attention(implementation, backend=backend, device=device, devices=devices,
                            **setting)


def runnable_here(implementation, **setting):
    """`implementation`, or "auto" with a warning where `choose_here` refuses it: a model saved
    with a kernel named for another machine (fused or flash on a GPU) still loads, e.g. on
    TensorFlow to be exported. At inference every kernel computes the same function."""
    import warnings

    try:
        choose_here(implementation, **setting)
    except ValueError as error:
        warnings.warn(f"{error} Loading with attention_implementation='auto' instead.",
                      stacklevel=2)
        return "auto"
    return implementation


def real_tokens_first(padding_mask):
    """`(order, lengths)`: per row, the positions of the real tokens in order, then those of
    the padding (`order` [batch, seq], for `gather_positions`), and the count of real tokens
    (`lengths` [batch] int32, at least 1 so that an all-padding row stays finite)."""
    from keras import ops

    real = ops.cast(ops.cast(padding_mask, "bool"), "int32")
    positions = ops.cumsum(ops.ones_like(real), axis=1) - 1  # symbolic shapes welcome
    seq_len = positions[:, -1:] + 1
    # Unique keys (padding after every real token, ties broken by position): the order does
    # not hang on the sort being stable.
    order = ops.argsort((1 - real) * seq_len + positions, axis=1)
    lengths = ops.maximum(ops.sum(real, axis=1), 1)
    return order, ops.cast(lengths, "int32")


def gather_positions(x, order):
    """`x` [batch, seq] or [batch, seq, hidden] with its positions taken in `order`."""
    from keras import ops

    index = order if len(x.shape) == 2 else ops.expand_dims(order, -1)
    return ops.take_along_axis(x, index, axis=1)


def inverse_order(order):
    """The order that undoes `order` (gathering by one after the other is the identity)."""
    from keras import ops

    return ops.argsort(order, axis=1)


def fused_attention(query, key, value, lengths, kernel):
    """softmax(q·kᵀ/√d)·v by `jax.nn.dot_product_attention`, keys and queries past each row's
    length masked; q, k, v are [batch, seq, heads, head_size].

    Rows past a row's length come back as zeros (the einsum gives them some mixture of the real
    tokens): no real token ever attends to them, so nothing downstream depends on them.
    Called on JAX arrays directly: `keras.ops.dot_product_attention` takes no lengths, and with
    kbert's [batch, 1, 1, key] bias its flash path refuses the shape (Keras 3.15).
    """
    import jax

    return jax.nn.dot_product_attention(
        query, key, value, query_seq_lengths=lengths, key_value_seq_lengths=lengths,
        implementation="cudnn" if kernel == "fused" else None)
