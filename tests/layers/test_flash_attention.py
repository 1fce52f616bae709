"""kbert's flash attention kernels (Pallas, run here in its interpreter) against the einsum.

The reference is the einsum path's own arithmetic written out: scores / √d plus the -10000
padding bias, a softmax, and `kbert.layers.dropout.dropped` on the [batch, heads, query, key]
probabilities, which is what `Dropout` applies in `TransformerEncoderBlock._einsum_attention`.
Same seed, so the same dropped entries: outputs and the gradients of q, k and v must agree to
float32 rounding, over several tiles of queries and keys (the online softmax's rescaling) and
with keys masked. Runs on Keras' JAX backend, in a subprocess.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("jax", reason="the JAX backend test needs jax (in the test extra)")

SCRIPT = textwrap.dedent("""
    import json
    import jax, jax.numpy as jnp, numpy as np
    from kbert.layers.dropout import dropped
    from kbert.layers.flash_attention import flash_attention

    def einsum_path(q, k, v, lengths, rate, seed):
        scores = jnp.einsum("bqhd,bkhd->bhqk", q / np.sqrt(q.shape[-1]), k)
        real = jnp.arange(q.shape[1])[None, :] < lengths[:, None]
        probs = jax.nn.softmax(scores + jnp.where(real, 0.0, -10000.0)[:, None, None], -1)
        if rate:
            probs = dropped(probs, seed, jnp.uint32(round(rate * 2**32)), 1 / (1 - rate))
        return jnp.einsum("bhqk,bkhd->bqhd", probs, v)

    rng = np.random.default_rng(0)
    report = {}
    # 48: forward and backward tiles of 16 (three of each); 64: one forward tile, two back.
    for seq, head_size, lengths in ((48, 32, [48, 17, 1]), (64, 16, [64, 40, 5])):
        shape = (3, seq, 2, head_size)
        q, k, v, w = (jnp.asarray(rng.normal(size=shape), jnp.float32) for _ in range(4))
        lengths = jnp.array(lengths, jnp.int32)
        for rate, seed in ((0.0, None), (0.1, [3, 11]), (0.5, [2**31 + 5, 7])):
            seed = None if seed is None else jnp.array(seed, jnp.uint32)
            def loss(fn):
                return lambda q, k, v: jnp.sum(fn(q, k, v, lengths, rate, seed) * w)
            ours = flash_attention(q, k, v, lengths, rate, seed)
            want = einsum_path(q, k, v, lengths, rate, seed)
            grads = jax.grad(loss(flash_attention), (0, 1, 2))(q, k, v)
            want_grads = jax.grad(loss(einsum_path), (0, 1, 2))(q, k, v)
            diffs = [float(jnp.max(jnp.abs(ours - want)))] + [
                float(jnp.max(jnp.abs(a - b))) for a, b in zip(grads, want_grads)]
            report[f"{seq}/{rate}"] = {"diffs": diffs,
                                       "zeros": float(jnp.mean(ours == 0)),
                                       "scale": float(jnp.max(jnp.abs(want)))}
    # Another seed drops other entries.
    q = jnp.asarray(rng.normal(size=(1, 32, 1, 16)), jnp.float32)
    one = jnp.array([32], jnp.int32)
    a, b = (flash_attention(q, q, q, one, 0.3, jnp.array(s, jnp.uint32)) for s in ([1, 2], [1, 3]))
    report["seeds_differ"] = float(jnp.max(jnp.abs(a - b)))
    print(json.dumps(report))
""")


# One JAX process runs each script below in a namespace of its own, in order (SCRIPT_TILES
# last: it sets the tile constants), and returns what each printed: a process's start is
# most of what the three short ones cost.
RUN_ALL = textwrap.dedent("""
    import contextlib, io, json, sys
    printed = {}
    for name, code in json.loads(sys.argv[1]).items():
        with contextlib.redirect_stdout(io.StringIO()) as out:
            exec(code, {"__name__": name})
        printed[name] = out.getvalue()
    print(json.dumps(printed))
""")


@pytest.fixture(scope="module")
def printed():
    scripts = {"report": SCRIPT, "refusals": SCRIPT_REFUSALS, "lowering": SCRIPT_LOWERING,
               "tiles": SCRIPT_TILES}
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    result = subprocess.run([sys.executable, "-c", RUN_ALL, json.dumps(scripts)], env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture
def report(printed):
    return json.loads(printed["report"].strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("case", ["48/0.0", "48/0.1", "48/0.5", "64/0.0", "64/0.1", "64/0.5"])
def test_outputs_and_gradients_equal_the_einsum_with_its_dropout(report, case):
    found = report[case]
    assert found["scale"] > 0.5  # a real comparison, not of zeros
    for name, diff in zip(("output", "dq", "dk", "dv"), found["diffs"]):
        assert diff < 2e-5, (case, name, found["diffs"])


@pytest.mark.slow
def test_a_fresh_seed_draws_a_fresh_mask(report):
    assert report["seeds_differ"] > 0.1


SCRIPT_REFUSALS = textwrap.dedent("""
    import jax.numpy as jnp
    from kbert.layers.flash_attention import flash_attention

    def message(shape, rate=0.0, seed=None):
        x = jnp.zeros(shape, jnp.float32)
        try:
            flash_attention(x, x, x, jnp.ones(shape[:1], jnp.int32), rate, seed)
        except ValueError as error:
            return str(error)
        return "accepted"

    for case in [((1, 32, 2, 24),), ((1, 40, 2, 32),), ((1, 32, 2, 32), 1.0),
                 ((1, 32, 2, 32), 0.1)]:
        print(message(*case))
""")


@pytest.mark.slow
def test_shapes_and_settings_it_cannot_run_are_refused_by_name(printed):
    lines = printed["refusals"].strip().splitlines()[-4:]
    assert "head size" in lines[0] and "24" in lines[0]
    assert "multiple of 16" in lines[1] and "40" in lines[1]
    assert "Dropout rate must be in [0, 1)" in lines[2]
    assert "needs a seed" in lines[3]


SCRIPT_LOWERING = textwrap.dedent("""
    import jax, jax.numpy as jnp
    from kbert.layers.flash_attention import flash_attention

    x = jnp.zeros((4, 128, 12, 64), jnp.bfloat16)  # BERT-base's heads
    lengths, seed = jnp.full((4,), 100, jnp.int32), jnp.array([1, 2], jnp.uint32)

    def loss(q, k, v):
        out = flash_attention(q, k, v, lengths, 0.1, seed, interpret=False)
        return jnp.sum(out.astype(jnp.float32))

    step = jax.jit(jax.grad(loss, (0, 1, 2)))
    print(step.trace(x, x, x).lower(lowering_platforms=("cuda",)).as_text())
""")


@pytest.mark.slow
def test_the_kernels_lower_to_triton_for_a_cuda_gpu(printed):
    """Without a GPU, the Pallas-to-Triton lowering still runs: every operation the kernels
    use (the hash's uint32 arithmetic, scalar loads, transposed dots) has a Triton form."""
    calls = [line for line in printed["lowering"].splitlines() if "xla.gpu.triton" in line]
    assert len(calls) == 2  # the forward kernel, then the backward one
    assert "kbert_flash_attention_forward" in calls[0]
    assert "kbert_flash_attention_backward" in calls[1]


SCRIPT_TILES = textwrap.dedent("""
    import json, re
    import jax, jax.numpy as jnp
    import kbert.layers.flash_attention as flash

    x, lengths = jnp.zeros((1, 64, 2, 16)), jnp.array([64])
    grids = {}
    for forward, backward in (((16, 32), 16), ((64, 64), 32)):
        flash.FORWARD_BLOCKS, flash.BACKWARD_BLOCK = forward, backward
        # A new function, as each model's step is: JAX may reuse a trace of the same one.
        grad = jax.grad(lambda q: jnp.sum(flash.flash_attention(q, q, q, lengths)))
        grids[str(forward + (backward,))] = re.findall(r"grid=\\(([^)]*)\\)",
                                                       str(jax.make_jaxpr(grad)(x)))
    print(json.dumps(grids))
""")


@pytest.mark.slow
def test_tile_sizes_are_read_when_a_step_is_traced(printed):
    """`benchmarks.gpu_attention --tiles` sets the two constants between models: each new
    step's trace must take them (grid: batch, heads, query tiles; backward: key tiles)."""
    grids = json.loads(printed["tiles"].strip().splitlines()[-1])
    assert grids == {"(16, 32, 16)": ["1, 2, 4", "1, 2, 4"],
                     "(64, 64, 32)": ["1, 2, 1", "1, 2, 2"]}
