"""Mixed precision by its short name, as the CLI and the training functions take it.

"bf16" computes in bfloat16 with float32 weights: no loss scaling needed. Whether it is faster
than float32 depends on the CPU (benchmarks/results/cpu-cases-mini-bf16.json).
"fp16" computes in float16 and needs dynamic loss scaling (`LossScaleOptimizer`).
"""

POLICIES = {None: None, "fp32": None, "float32": None,
            "bf16": "mixed_bfloat16", "bfloat16": "mixed_bfloat16",
            "mixed_bfloat16": "mixed_bfloat16",
            "fp16": "mixed_float16", "float16": "mixed_float16", "mixed_float16": "mixed_float16"}


def dtype_policy(mixed_precision):
    """The Keras dtype policy name for `mixed_precision` (None means plain float32)."""
    if mixed_precision not in POLICIES:
        raise ValueError(f"mixed_precision must be one of None, 'bf16', 'fp16'; got "
                         f"{mixed_precision!r}.")
    return POLICIES[mixed_precision]


def needs_loss_scale(policy):
    """Whether training under `policy` needs dynamic loss scaling (float16's narrow range)."""
    return policy == "mixed_float16"
