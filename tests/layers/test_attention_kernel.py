"""The choice of attention kernel, and the fused path's masking against kbert's einsum.

cuDNN needs a GPU; `jax.nn.dot_product_attention(implementation=None)` runs the same call with
the same lengths on a CPU, so the masking, the reordering of real tokens and the gradients that
the GPU path relies on are checked here against the einsum path (outputs on real tokens).
"""

import doctest
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from kbert.config import BertConfig
from kbert.layers import TransformerEncoderBlock, attention_kernel
from kbert.layers.attention_kernel import choose_attention
from kbert.models import BertBackbone

GPU_BF16 = {"backend": "jax", "device": "cuda", "dtype": "bfloat16", "head_size": 64}


@pytest.mark.parametrize("setting, expected", [
    ({}, "fused"),
    ({"dtype": "float16"}, "fused"),
    ({"training": True, "attention_dropout": 0.0}, "fused"),
    ({"training": False, "attention_dropout": 0.1}, "fused"),  # inference: dropout is off
    ({"training": True, "attention_dropout": 0.1}, "flash"),  # keeps the paper's dropout
    ({"training": True, "attention_dropout": 0.1, "head_size": 40}, "einsum"),  # no flash tile
    ({"training": True, "attention_dropout": 0.1, "device": "cpu"}, "einsum"),
    ({"training": True, "attention_dropout": 0.1, "devices": 8}, "einsum"),  # data-parallel
    ({"backend": "tensorflow", "device": None}, "einsum"),
    ({"device": "cpu"}, "einsum"),
    ({"device": "rocm"}, "einsum"),
    ({"device": "tpu"}, "einsum"),
    ({"dtype": "float32"}, "einsum"),
    ({"causal": True}, "einsum"),
    ({"return_attention": True}, "einsum"),
    ({"head_size": 12}, "einsum"),  # cuDNN wants a multiple of 8
    ({"head_size": 256}, "einsum"),
])
def test_auto_fuses_only_on_a_cuda_gpu_in_half_precision(setting, expected):
    assert choose_attention("auto", **{**GPU_BF16, **setting}) == expected


def test_explicit_choices():
    training = {"training": True, "attention_dropout": 0.1}
    assert choose_attention("einsum", **GPU_BF16) == "einsum"
    # Asking for a kernel by name is asking to train without attention dropout.
    assert choose_attention("fused", **GPU_BF16, **training) == "fused"
    cpu = {**GPU_BF16, "device": "cpu", "dtype": "float32"}
    assert choose_attention("xla", **cpu, **training) == "xla"
    # The flash kernel keeps the dropout; off a GPU it runs interpreted, in any precision.
    assert choose_attention("flash", **GPU_BF16, **training) == "flash"
    assert choose_attention("flash", **cpu, **training) == "flash"
    assert choose_attention("flash", **cpu, causal=True) == "einsum"
    # Probabilities and causal masks are the einsum's, whatever was asked.
    assert choose_attention("xla", **cpu, return_attention=True) == "einsum"
    assert choose_attention("fused", **GPU_BF16, causal=True) == "einsum"


@pytest.mark.parametrize("implementation, setting, message", [
    ("cudnn", {}, "must be one of"),
    ("flash", {"backend": "tensorflow", "device": None}, "needs the JAX backend"),
    ("flash", {"head_size": 24}, "head size"),
    ("flash", {"dtype": "float32"}, "needs bfloat16 or float16"),
    ("fused", {"backend": "tensorflow", "device": None}, "needs the JAX backend"),
    ("xla", {"backend": "torch", "device": None}, "needs the JAX backend"),
    ("fused", {"device": "cpu"}, "needs an NVIDIA GPU"),
    ("fused", {"dtype": "float32"}, "needs bfloat16 or float16"),
])
def test_impossible_choices_are_refused(implementation, setting, message):
    with pytest.raises(ValueError, match=message):
        choose_attention(implementation, **{**GPU_BF16, **setting})


def test_docstring_examples():
    assert doctest.testmod(attention_kernel).failed == 0


def test_tensorflow_graph_is_the_einsum_graph():
    """On this backend "auto" builds exactly the graph that "einsum" builds: no reordering."""
    config = BertConfig.preset("tiny")
    ops = [[type(op).__name__ for op in BertBackbone(config, attention_implementation=impl)
            .operations] for impl in ("auto", "einsum")]
    assert ops[0] == ops[1] and "Argsort" not in ops[0]


def test_configs_carry_the_choice_and_old_configs_load():
    block = TransformerEncoderBlock(num_heads=2, intermediate_size=8,
                                    attention_implementation="einsum")
    config = block.get_config()
    assert TransformerEncoderBlock.from_config(config).attention_implementation == "einsum"
    del config["attention_implementation"]  # as saved before the argument existed
    assert TransformerEncoderBlock.from_config(config).attention_implementation == "auto"
    backbone_config = BertBackbone(BertConfig.preset("tiny")).get_config()
    assert backbone_config.pop("attention_implementation") == "auto"
    assert BertBackbone.from_config(backbone_config).attention_implementation == "auto"
    with pytest.raises(ValueError, match="attention_implementation must be one of"):
        TransformerEncoderBlock(num_heads=2, intermediate_size=8, attention_implementation="x")


SCRIPT = textwrap.dedent("""
    import json, sys
    import jax, keras, numpy as np
    from kbert.config import BertConfig
    from kbert.layers import attention_kernel
    from kbert.models import BertBackbone

    calls = []  # the kernel each traced block ran, when it was not the einsum
    fused = attention_kernel.fused_attention
    attention_kernel.fused_attention = lambda *a: calls.append(a[-1]) or fused(*a)
    import kbert.layers.flash_attention as flash_module
    flash = flash_module.flash_attention
    flash_module.flash_attention = lambda *a, **k: calls.append("flash") or flash(*a, **k)

    config = BertConfig.preset("tiny", vocab_size=500, max_position_embeddings=16,
                               hidden_dropout=0.0, attention_dropout=0.0)
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 500, (5, 16)).astype("int32")
    lengths = [16, 9, 3, 1]
    mask = (np.arange(16)[None] < np.array(lengths)[:, None]).astype("int32")
    holes = np.array([[0, 1, 1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 1, 0]], "int32")
    mask = np.concatenate([mask, holes])  # not a prefix: the backbone reorders it
    x = {"token_ids": ids, "segment_ids": (np.arange(16) >= 8) * mask, "padding_mask": mask}
    real = mask.astype(bool)
    weights = rng.normal(size=(5, 16, 128)).astype("float32") * real[..., None]

    # Three real tokens of each row, some twice (a masked LM's positions).
    positions = np.stack([rng.choice(np.flatnonzero(row), 3) for row in mask]).astype("int32")

    def run(name, implementation, dtype=None, training=None, cfg=config, rows=5, at=False,
            **options):
        # Outputs on real tokens and, with `training` set, the gradients of a loss on them;
        # on the first `rows` rows. With `at`, the output at `positions` too.
        calls.clear()
        keras.utils.set_random_seed(0)  # the same weights (and seeds) for every kernel
        model = BertBackbone(cfg, dtype=dtype, attention_implementation=implementation,
                             **options)
        part = {key: value[:rows] for key, value in x.items()}
        # Jitted: JAX runs an un-jitted model op by op, compiling each op (tens of seconds).
        variables = [[v.value for v in vs] for vs in (model.trainable_variables,
                                                      model.non_trainable_variables)]
        out = jax.jit(lambda t, n, p: model.stateless_call(t, n, p, training=False)[0])(
            *variables, part)
        found[name + "/seq"] = np.asarray(out["sequence_output"], "float32")[real[:rows]]
        found[name + "/pooled"] = np.asarray(out["pooled_output"], "float32")[:4]
        if at:
            out = jax.jit(lambda t, n, p, q: model.stateless_call(
                t, n, p, training=False, output_positions=q)[0])(*variables, part, positions)
            found[name + "_at/at"] = np.asarray(out["output_at_positions"], "float32")
        if training is not None:
            def loss(trainable):
                out, _ = model.stateless_call(trainable, model.non_trainable_variables, part,
                                              training=training)
                return (jax.numpy.sum(out["sequence_output"] * weights[:rows])
                        + jax.numpy.sum(out["pooled_output"][:4]))
            trainable = [v.value for v in model.trainable_variables]
            found[name + "/loss"], grads = jax.jit(jax.value_and_grad(loss))(trainable)
            found.update({f"{name}/grad/{i}": g for i, g in enumerate(grads)})
        kernels[name] = sorted(set(calls))

    found, kernels = {}, {}
    run("einsum", "einsum", training=False, at=True)
    run("xla", "xla", training=False, at=True)
    run("xla_training", "xla", training=True)
    run("einsum_bf16", "einsum", "mixed_bfloat16")
    run("xla_bf16", "xla", "mixed_bfloat16")
    run("auto", "auto")
    run("flash", "flash", training=False)
    run("flash_training", "flash", training=True)
    # The paper's dropouts on, prefix rows only (where no reordering moves the dropout's
    # indices): flash draws the einsum's attention-dropout mask, so training agrees too.
    dropout = BertConfig.preset("tiny", vocab_size=500, max_position_embeddings=16)
    run("einsum_dropout", "einsum", training=True, cfg=dropout, rows=4)
    run("flash_dropout", "flash", training=True, cfg=dropout, rows=4)
    run("xla_causal", "xla", causal=True)
    run("xla_attentions", "xla", output_attentions=True)
    np.savez(sys.argv[1], **found)
    print(json.dumps(kernels))
""")


@pytest.fixture(scope="module")
def jax_runs(tmp_path_factory):
    pytest.importorskip("jax", reason="the JAX backend test needs jax (in the test extra)")
    path = tmp_path_factory.mktemp("jax") / "runs.npz"
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(path)], env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    kernels = json.loads(result.stdout.strip().splitlines()[-1])
    with np.load(path) as arrays:
        return dict(arrays), kernels


@pytest.mark.parametrize("name, reference", [
    ("xla", "einsum"), ("xla_training", "einsum"), ("flash", "einsum"),
    ("flash_training", "einsum"), ("flash_dropout", "einsum_dropout")])
@pytest.mark.slow
def test_lengths_path_equals_the_einsum_on_real_tokens(jax_runs, name, reference):
    found, kernels = jax_runs
    assert kernels[name] == [name.split("_")[0]] and kernels[reference] == []
    ours = {key.split("/", 1)[1]: v for key, v in found.items() if key.startswith(name + "/")}
    want = {key.split("/", 1)[1]: v for key, v in found.items()
            if key.startswith(reference + "/")}
    assert set(ours) == set(want) and len(ours) > 10  # outputs, loss and every gradient
    for key, value in want.items():
        # float32 rounding, relative to each tensor's largest entry (gradients reach ~100).
        atol = max(1e-5, 1e-6 * float(np.max(np.abs(value))))
        np.testing.assert_allclose(ours[key], value, rtol=1e-4, atol=atol, err_msg=key)


@pytest.mark.slow
def test_output_at_positions_through_the_lengths_path(jax_runs):
    """A masked LM's positions index the tokens as given, also where the lengths path moved a
    row's real tokens first (the last row has holes in its padding mask)."""
    found, kernels = jax_runs
    assert kernels["xla"] == ["xla"]
    np.testing.assert_allclose(found["xla_at/at"], found["einsum_at/at"], rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_lengths_path_in_bfloat16_stays_within_its_precision(jax_runs):
    found, kernels = jax_runs
    assert kernels["xla_bf16"] == ["xla"]
    # LayerNorm outputs are of order 1, and bfloat16 keeps 8 bits of mantissa.
    for key in ("seq", "pooled"):
        ours, einsum = found[f"xla_bf16/{key}"], found[f"einsum_bf16/{key}"]
        np.testing.assert_allclose(ours, einsum, atol=0.1)
        assert np.mean(np.abs(ours - found[f"einsum/{key}"])) < 0.02


@pytest.mark.slow
@pytest.mark.parametrize("name", ["auto", "xla_causal", "xla_attentions"])
def test_einsum_where_lengths_cannot_serve(jax_runs, name):
    """A CPU in "auto", a causal mask and returned probabilities all keep the einsum."""
    assert jax_runs[1][name] == []


SAVE_ON_JAX = textwrap.dedent("""
    import sys
    import keras, numpy as np
    from kbert.config import BertConfig
    from kbert.models import BertBackbone

    keras.utils.set_random_seed(0)
    model = BertBackbone(BertConfig.preset("tiny", vocab_size=500, max_position_embeddings=16),
                         attention_implementation="flash")
    ids = np.random.default_rng(0).integers(5, 500, (3, 16)).astype("int32")
    mask = (np.arange(16)[None] < np.array([[16], [7], [2]])).astype("int32")
    x = {"token_ids": ids * mask, "segment_ids": 0 * ids, "padding_mask": mask}
    out = model.predict_on_batch(x)
    model.save(sys.argv[1] + "/model.keras")
    np.savez(sys.argv[1] + "/io.npz", **x, **{k: np.asarray(v) for k, v in out.items()})
""")

LOAD_ON_TENSORFLOW = textwrap.dedent("""
    import sys, warnings
    import keras, numpy as np
    import kbert  # registers kbert's classes for Keras' loader

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = keras.saving.load_model(sys.argv[1] + "/model.keras")
    saved = np.load(sys.argv[1] + "/io.npz")
    x = {k: saved[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    out = model.predict_on_batch(x)
    real = x["padding_mask"].astype(bool)
    print(keras.backend.backend(), model.attention_implementation,
          float(np.abs(out["sequence_output"] - saved["sequence_output"])[real].max()),
          float(np.abs(out["pooled_output"] - saved["pooled_output"]).max()),
          any("Loading with attention_implementation='auto'" in str(w.message) for w in caught))
""")


def test_a_model_saved_with_the_flash_kernel_loads_and_runs_on_tensorflow(tmp_path):
    """Trained on a GPU with an explicit kernel, served from TensorFlow: the saved model loads
    (in a new process, on the other backend) with "auto", says so, and computes the same."""
    pytest.importorskip("jax", reason="the JAX backend test needs jax (in the test extra)")
    saved = subprocess.run([sys.executable, "-c", SAVE_ON_JAX, str(tmp_path)],
                           env={**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"},
                           capture_output=True, text=True, timeout=600)
    assert saved.returncode == 0, saved.stderr[-3000:]
    loaded = subprocess.run([sys.executable, "-c", LOAD_ON_TENSORFLOW, str(tmp_path)],
                            env={**os.environ, "KERAS_BACKEND": "tensorflow"},
                            capture_output=True, text=True, timeout=600)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    backend, implementation, seq_diff, pooled_diff, warned = \
        loaded.stdout.strip().splitlines()[-1].split()
    assert (backend, implementation, warned) == ("tensorflow", "auto", "True")
    assert float(seq_diff) < 1e-4 and float(pooled_diff) < 1e-4
