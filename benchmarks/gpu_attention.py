"""kbert's fused or flash attention against its einsum on this device: the same outputs, and
how fast.

On Keras' JAX backend, builds the backbone twice with the same weights, once with
`attention_implementation="einsum"` and once with the other kernel (cuDNN on a CUDA GPU, JAX's
`xla` form elsewhere, or kbert's `flash`), and runs both on one batch whose rows have padding of
varied lengths (one row's mask has holes, which the backbone reorders). Reports the largest
difference of the outputs on real tokens, the relative difference of every gradient (a loss on
real tokens), and the time of a jitted training forward + backward pass of each. The fused
kernels run without dropout (the einsum then too); `flash` with the paper's dropout, which it
draws as the einsum does (so no row with holes: reordering would move the mask's indices).

`--tiles` times flash at several tile sizes in the same run (each checked against the einsum
too), for choosing `kbert.layers.flash_attention.FORWARD_BLOCKS` and `BACKWARD_BLOCK`.

    KERAS_BACKEND=jax python -m benchmarks.gpu_attention         # base, batch 64, bf16
    python -m benchmarks.gpu_attention --implementation flash     # with the attention dropout
    python -m benchmarks.gpu_attention --implementation flash --tiles 128x128/32 64x64/64
    python -m benchmarks.gpu_attention --smoke --out /tmp/a.json  # tiny, float32: any machine
"""

import argparse
import json
import os
import time

import numpy as np

from benchmarks.gpu_worker import kbert_module


def batch(config, size, seq, seed=0, holes=True):
    """Token ids and a padding mask: real lengths from a quarter of `seq` to all of it, and
    with `holes`, in the last row real tokens scattered among padding."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(seq // 4, seq + 1, size)
    mask = (np.arange(seq)[None] < lengths[:, None]).astype("int32")
    if holes:
        mask[-1] = rng.random(seq) < 0.6
        mask[-1, 0] = 1  # [CLS] is real, as every packer makes it
    ids = rng.integers(1000, config.vocab_size, (size, seq)).astype("int32") * mask
    return {"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": mask}


def run(implementation, config, inputs, args):
    """Outputs on real tokens, gradients and seconds per forward + backward pass."""
    import jax
    import keras

    models, kernels = kbert_module("models"), kbert_module("layers.attention_kernel")
    flash_module = kbert_module("layers.flash_attention")
    ran, fused, flash = set(), kernels.fused_attention, flash_module.flash_attention
    kernels.fused_attention = lambda *a: ran.add(a[-1]) or fused(*a)
    flash_module.flash_attention = lambda *a, **k: ran.add("flash") or flash(*a, **k)
    keras.utils.set_random_seed(0)  # the same weights for both implementations
    model = models.BertBackbone(config, attention_implementation=implementation)
    real = inputs["padding_mask"].astype(bool)
    weights = np.random.default_rng(1).normal(size=real.shape + (config.hidden_size,)) * real[
        ..., None]

    def loss(trainable):
        out, _ = model.stateless_call(trainable, model.non_trainable_variables, inputs,
                                      training=True)
        return jax.numpy.sum(out["sequence_output"].astype("float32") * weights)

    step = jax.jit(jax.value_and_grad(loss))
    trainable = [v.value for v in model.trainable_variables]
    _, grads = step(trainable)
    jax.block_until_ready(grads)
    start = time.perf_counter()
    for _ in range(args.repeats):
        _, grads = step(trainable)
    jax.block_until_ready(grads)
    seconds = (time.perf_counter() - start) / args.repeats
    kernels.fused_attention, flash_module.flash_attention = fused, flash
    out = np.asarray(model(inputs)["sequence_output"], "float32")[real]
    return out, [np.asarray(g, "float32") for g in grads], seconds, sorted(ran)


def main(argv=None):
    args = parse(argv)
    os.environ["KERAS_BACKEND"] = "jax"  # before Keras loads: the GPU image has no TensorFlow
    import keras

    if args.dtype != "float32":
        keras.mixed_precision.set_global_policy(f"mixed_{args.dtype}")
    kernels = kbert_module("layers.attention_kernel")
    implementation = args.implementation or (
        "fused" if kernels.current_device() == "cuda" else "xla")
    # Both passes must compute the same function: the fused kernels have no dropout, flash
    # draws the einsum's.
    flash = implementation == "flash"
    config = kbert_module("config").BertConfig.preset(
        args.preset, **({} if flash else {"hidden_dropout": 0.0, "attention_dropout": 0.0}))
    inputs = batch(config, args.batch, args.seq, holes=not flash)
    out, grads, seconds, _ = run("einsum", config, inputs, args)
    out_f, grads_f, seconds_f, ran = run(implementation, config, inputs, args)
    report = {
        "device": kernels.current_device(), "implementation": implementation, "ran": ran,
        "settings": vars(args), **_differences(out_f, grads_f, out, grads),
        "step_ms": {"einsum": seconds * 1e3, implementation: seconds_f * 1e3}}
    if args.tiles:
        report["tiles"] = _tile_runs(config, inputs, args, out, grads)
    print(json.dumps(report))
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    return report


def _differences(out_f, grads_f, out, grads):
    """The largest difference on real tokens and the largest relative gradient difference."""
    return {"max_abs_diff_sequence_output": float(np.abs(out_f - out).max()),
            "max_relative_grad_diff": max(float(np.linalg.norm(f - e) / (np.linalg.norm(e) or 1))
                                          for f, e in zip(grads_f, grads))}


def _tile_runs(config, inputs, args, out, grads):
    """Flash at each of `args.tiles` ((block_q, block_k), backward block): time and equality
    with the einsum's `out` and `grads`. The module's tile constants are read when a step is
    traced, so each new model's jitted step takes the sizes set before it."""
    flash_module = kbert_module("layers.flash_attention")
    default = flash_module.FORWARD_BLOCKS, flash_module.BACKWARD_BLOCK
    runs = []
    try:
        for forward, backward in args.tiles:
            flash_module.FORWARD_BLOCKS, flash_module.BACKWARD_BLOCK = forward, backward
            out_f, grads_f, seconds, _ = run("flash", config, inputs, args)
            runs.append({"forward": list(forward), "backward": backward,
                         "step_ms": seconds * 1e3, **_differences(out_f, grads_f, out, grads)})
    finally:
        flash_module.FORWARD_BLOCKS, flash_module.BACKWARD_BLOCK = default
    return runs


def tiles(text):
    """argparse type: "QxK/B", the forward tile (queries x keys) and the backward block."""
    try:
        forward, backward = text.split("/")
        block_q, block_k = forward.split("x")
        sizes = int(block_q), int(block_k), int(backward)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected QxK/B, e.g. 128x128/32, got {text!r}")
    if any(size not in (16, 32, 64, 128) for size in sizes):
        raise argparse.ArgumentTypeError(f"tile sizes are 16, 32, 64 or 128, got {text!r}")
    return sizes[:2], sizes[2]


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="base")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16",
                                                                "float32"])
    parser.add_argument("--implementation", choices=["fused", "xla", "flash"], default=None,
                        help="default: fused on a CUDA GPU, xla elsewhere")
    parser.add_argument("--repeats", type=int, default=20, help="timed passes of each")
    parser.add_argument("--tiles", nargs="+", type=tiles, default=[], metavar="QxK/B",
                        help="with flash: also time these tile sizes (forward queries x keys, "
                             "backward block), e.g. 128x128/32 64x64/64")
    parser.add_argument("--smoke", action="store_true", help="tiny, float32, 2 repeats")
    parser.add_argument("--out", default=None, help="JSON file for the report")
    args = parser.parse_args(argv)
    if args.tiles and args.implementation != "flash":
        parser.error("--tiles sizes kbert's flash kernel: give --implementation flash")
    if args.smoke:
        args.preset, args.batch, args.seq, args.dtype, args.repeats = "tiny", 4, 32, "float32", 2
    return args


if __name__ == "__main__":
    main()
