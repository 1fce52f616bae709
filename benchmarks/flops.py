"""Model FLOPs per sequence, and the machine's best matrix multiply, for utilisation.

Model FLOPs count the matrix multiplies the model needs (2 per multiply-add), the usual basis
of "model FLOPs utilisation": embedding lookups, softmax, GELU and LayerNorm are left out, and
so is work a package chooses to do beyond the model's need (Hugging Face's pre-training head
decodes every position, not only the 20 masked ones; that is not credited). A training step
counts three forward passes (the backward pass costs two). The classifier cases count the
whole encoder, as the architecture defines it, for every package; kbert's classifier runs the
last block only where its pooled output needs it (keys and values everywhere, the rest at
`[CLS]`), so its rate there is over FLOPs it partly skipped (mini at length 128: a fifth of them).
Likewise its pre-training runs the last block at `[CLS]` and the masked positions only (BERT-base
at length 128 with 20 predictions: 5.6% of the FLOPs counted here skipped).
"""

import time

import numpy as np

MATMUL_SECONDS = 0.5  # the least time one timing of a matmul rate lasts


def forward_flops(config, seq):
    """Encoder FLOPs for one sequence: per layer and token, the QKV, output and FFN projections
    (2·(4H² + 2·H·I)) and attention's two [seq × head] products over all heads (4·seq·H)."""
    hidden, inner = config.hidden_size, config.intermediate_size
    per_token = config.num_layers * (2 * (4 * hidden * hidden + 2 * hidden * inner)
                                     + 4 * seq * hidden)
    return seq * per_token


def case_flops(case, config, seq, masked_positions=20):
    """Model FLOPs of one sequence in a benchmark case (see `contestants.CASES`)."""
    hidden = config.hidden_size
    encoder = forward_flops(config, seq)
    if case == "infer":
        return encoder
    pooled_heads = 2 * hidden * hidden + 2 * hidden * 2  # pooler + 2-way classifier (or NSP)
    if case == "classify":
        return encoder + pooled_heads
    if case in ("train", "finetune"):
        return 3 * (encoder + pooled_heads)
    if case == "pretrain":
        mlm = masked_positions * (2 * hidden * hidden + 2 * hidden * config.vocab_size)
        return 3 * (encoder + pooled_heads + mlm)
    raise ValueError(f"Unknown case {case!r}.")


def best_matmul_gflops(framework, sizes=(256, 512, 1024, 2048), seconds=MATMUL_SECONDS,
                       dtype="float32", device="cpu"):
    """The fastest square matmul this framework runs here, in GFLOP/s (best of 3 timings of at
    least `seconds` each, per size and, for TensorFlow, with and without XLA) with operands of
    `dtype` ("float32", "bfloat16"), for PyTorch on `device` (JAX and TensorFlow compute on
    their default device)."""
    rng = np.random.default_rng(0)
    best = 0.0
    for n in sizes:
        a, b = (rng.standard_normal((n, n), "float32") for _ in range(2))
        runs = _chains(framework, a, [b], dtype, device).values()
        best = max(best, *(_rate(run, 2 * n ** 3, seconds) for run in runs))
    return best


def dense_layer_gflops(framework, config, tokens, seconds=MATMUL_SECONDS):
    """{mode: GFLOP/s} of one encoder layer's four dense projections alone, at the model's own
    shapes; for TensorFlow the modes are "xla" and "no_xla" (oneDNN where TensorFlow has it).

    The chain [tokens, H] → intermediate [H, I] → output [I, H] → attention output [H, H] →
    query/key/value [H, 3H] has the same multiplies as a layer, each consuming the last. Square
    peaks flatter some libraries: a package whose matmul is slow at these thin shapes loses
    here before any of its model code runs, and this rate shows how much. Keeping TensorFlow's
    two modes apart shows what XLA's matmuls cost against oneDNN's.
    """
    shapes = dense_layer_shapes(config)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((tokens, config.hidden_size), "float32")
    weights = [(rng.standard_normal(shape) / np.sqrt(shape[0])).astype("float32")
               for shape in shapes]
    flops = sum(2 * tokens * k * n for k, n in shapes)
    return {mode: _rate(run, flops, seconds)
            for mode, run in _chains(framework, x, weights).items()}


def dense_layer_shapes(config):
    """The weight shapes of one layer's dense projections, in an order that chains."""
    hidden, inner = config.hidden_size, config.intermediate_size
    return [(hidden, inner), (inner, hidden), (hidden, hidden), (hidden, 3 * hidden)]


def _rate(run, flops, seconds):
    """GFLOP/s of `run`: best of 3 timings of enough calls to last `seconds`."""
    run()
    repeats = 1
    while True:  # grow the repeat count until one timing lasts `seconds`
        start = time.perf_counter()
        for _ in range(repeats):
            run()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            break
        repeats *= 2
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeats):
            run()
        elapsed = min(elapsed, time.perf_counter() - start)
    return flops * repeats / elapsed / 1e9


def _chains(framework, x, weights, dtype="float32", device="cpu"):
    """{mode: a zero-argument callable that multiplies `x` through `weights` in turn and waits
    for it}: PyTorch "eager", JAX "xla", TensorFlow "xla" and "no_xla"."""
    if framework == "hugging_face":
        import torch

        tx, *tws = (torch.from_numpy(a).to(device, getattr(torch, dtype)) for a in (x, *weights))

        def torch_chain():
            with torch.inference_mode():
                h = tx
                for w in tws:
                    h = torch.mm(h, w)
            if device == "cuda":
                torch.cuda.synchronize()
            return h

        return {"eager": torch_chain}
    import keras

    def chain(h, *ws):
        for w in ws:
            h = h @ w
        return h

    if keras.backend.backend() == "jax":
        import jax

        args = [jax.device_put(a).astype(dtype) for a in (x, *weights)]
        jitted = jax.jit(chain)
        return {"xla": lambda: jitted(*args).block_until_ready()}
    import tensorflow as tf

    args = [tf.cast(tf.constant(a), dtype) for a in (x, *weights)]

    def tf_chain(jit_compile):
        # A reduction of the last product waits for it without copying it to the host.
        run = tf.function(lambda *a: tf.reduce_sum(chain(*a)), jit_compile=jit_compile)
        return lambda: run(*args).numpy()

    return {"xla": tf_chain(True), "no_xla": tf_chain(False)}
