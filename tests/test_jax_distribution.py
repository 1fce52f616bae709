"""Data and model parallelism on the JAX backend (`kbert.training.jax_distribution`), on 8
virtual CPU devices: the same pre-training steps give the same weights as one device, the
model-parallel layout really splits the kernels, and `kbert pretrain --strategy data_parallel`
runs; each backend refuses the other's strategy names in one line."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("jax", reason="the JAX distribution test needs jax (in the test extra)")

SCRIPT = textwrap.dedent("""
    import contextlib, io, json, sys
    import numpy as np, keras, tensorflow as tf
    assert keras.backend.backend() == "jax" and len(keras.distribution.list_devices()) == 8
    import kbert
    from kbert_cli import main
    from kbert.training.distribution import get_strategy
    from kbert.training.optimizer import make_optimizer

    # Dropout off: the comparison is exact up to float summation order.
    cfg = kbert.BertConfig(vocab_size=512, hidden_size=32, num_layers=2, num_heads=2,
                           intermediate_size=64, max_position_embeddings=32,
                           hidden_dropout=0.0, attention_dropout=0.0)
    rng = np.random.default_rng(0)
    n, seq, preds = 48, 16, 3
    ids = rng.integers(5, 512, (n, seq)).astype("int32")
    x = {"token_ids": ids, "segment_ids": (np.arange(seq) >= seq // 2) * np.ones_like(ids),
         "padding_mask": (np.arange(seq) < rng.integers(8, seq + 1, (n, 1))).astype("int32"),
         "masked_positions": rng.integers(1, 8, (n, preds)).astype("int32")}
    y = {"mlm": rng.integers(5, 512, (n, preds)).astype("int32"),
         "nsp": rng.integers(0, 2, n).astype("int32")}
    w = {"mlm": (rng.random((n, preds)) < 0.8).astype("float32"),
         "nsp": np.ones(n, "float32")}
    keras.utils.set_random_seed(0)
    start = kbert.BertPretrainer(kbert.BertBackbone(cfg)).get_weights()

    def train(name):
        strategy = get_strategy(name)
        with strategy.scope():
            model = kbert.BertPretrainer(kbert.BertBackbone(cfg))
            model.set_weights(start)
            model.compile(optimizer=make_optimizer(1e-3, 3, warmup_fraction=0.0, model=model))
            # 3 steps of global batch 16: 2 rows a device, or 4 per "batch" shard of (4, 2).
            model.fit(tf.data.Dataset.from_tensor_slices((x, y, w)).batch(16), epochs=1,
                      shuffle=False, verbose=0)
        specs = {v.path: [str(a) for a in getattr(v.value.sharding, "spec", ())]
                 for v in model.weights + model.optimizer.variables if len(v.shape) == 2}
        shards = {v.path: list(v.value.addressable_shards[0].data.shape)
                  for v in model.weights if len(v.shape) == 2}
        return model.get_weights(), strategy.num_replicas_in_sync, specs, shards

    single, n1, _, _ = train(None)
    result = {"paths": [v.path for v in kbert.BertPretrainer(kbert.BertBackbone(cfg)).weights],
              "moved": max(float(np.abs(a - b).max()) for a, b in zip(single, start))}
    for name in ("data_parallel", "model_parallel"):
        weights, replicas, specs, shards = train(name)
        result[name] = {
            "replicas": replicas, "specs": specs, "shards": shards,
            "differ": [float(np.abs(a - b).max()) for a, b in zip(single, weights)],
            "close": [bool(np.allclose(b, a, rtol=1e-5, atol=1e-6))
                      for a, b in zip(single, weights)]}
    # "auto" keeps its flash kernel to one device (XLA cannot split a Triton call): asked as a
    # GPU would be, the device count is what differs.
    from kbert.layers import attention_kernel
    attention_kernel.current_device = lambda: "cuda"
    setting = dict(dtype="bfloat16", head_size=64, training=True, attention_dropout=0.1)
    result["kernels"] = {"default": attention_kernel.choose_here(**setting)}
    for name in ("data_parallel", "model_parallel"):
        with get_strategy(name).scope():
            result["kernels"][name] = attention_kernel.choose_here(**setting)
    result["errors"] = {}
    for name, batch in (("mirrored", 8), ("data_parallel", 12)):
        with contextlib.redirect_stderr(io.StringIO()) as stderr:
            status = main(["pretrain", "--preset", "tiny", "--steps", "1", "--batch-size",
                           str(batch), "--strategy", name, "--output", sys.argv[2] + name])
        result["errors"][name] = [status, stderr.getvalue()]
    main(["pretrain", "--preset", "tiny", "--corpus", sys.argv[1], "--steps", "2",
          "--batch-size", "8", "--sequence-length", "32", "--strategy", "data_parallel",
          "--xla", "--output", sys.argv[2]])
    print("RESULT" + json.dumps(result))
""")


@pytest.fixture(scope="module")
def jax_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("jax_distribution")
    corpus = tmp / "corpus.txt"  # one sentence a line, a blank line between documents
    corpus.write_text("\n\n".join(
        "\n".join(f"Sentence {i} of document {d} is about topic {d % 3}." for i in range(6))
        for d in range(160)) + "\n")
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=8", "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(corpus), str(tmp / "pre")],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    line = [x for x in done.stdout.splitlines() if x.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT"):]), tmp / "pre", done.stderr


@pytest.mark.parametrize("name", ["data_parallel", "model_parallel"])
def test_eight_devices_train_like_one(jax_run, name):
    result = jax_run[0]
    run = result[name]
    # Data split over "batch": all 8 devices (data_parallel) or the 4 rows of a (4, 2) mesh.
    assert run["replicas"] == {"data_parallel": 8, "model_parallel": 4}[name]
    # Three AdamW steps (clipped at norm 1) move weights by ~2e-3; the runs differ by float
    # summation order only, which Adam's normalised step can raise to ~lr·δg/ε in a weight
    # whose gradient is near zero (a LayerNorm offset): atol 1e-6, and 1e-3 of the move.
    assert result["moved"] > 1e-3
    assert all(run["close"]), [p for p, ok in zip(result["paths"], run["close"]) if not ok]
    assert max(run["differ"]) < 1e-3 * result["moved"]


def test_auto_trains_with_flash_on_one_device_only(jax_run):
    assert jax_run[0]["kernels"] == {"default": "flash", "data_parallel": "einsum",
                                     "model_parallel": "einsum"}


def test_model_parallel_layout_splits_the_big_kernels(jax_run):
    run = jax_run[0]["model_parallel"]
    specs, shards = run["specs"], run["shards"]
    columns = ["embeddings/token_embedding/embeddings"] + [
        f"transformer_layer_{i}/{k}/kernel" for i in (0, 1) for k in ("attention_qkv",
                                                                        "intermediate")]
    rows = [f"transformer_layer_{i}/{k}/kernel" for i in (0, 1)
            for k in ("attention_output", "output")]
    for path in columns:
        assert specs[path] == ["None", "model"], path
    for path in rows:
        assert specs[path] == ["model", "None"], path
    # Each device holds half of a split kernel (a model axis of 2) and all of the others.
    assert shards["transformer_layer_0/intermediate/kernel"] == [32, 32]
    assert shards["transformer_layer_1/output/kernel"] == [32, 32]
    assert shards["embeddings/token_embedding/embeddings"] == [512, 16]
    assert shards["pooler/kernel"] == [32, 32]
    assert specs["pooler/kernel"] == ["None", "None"]
    # AdamW's moments follow their variable's layout.
    moments = [p for p in specs if p.endswith("transformer_layer_0_attention_qkv_kernel_momentum")]
    assert len(moments) == 1 and specs[moments[0]] == ["None", "model"]
    # data_parallel replicates every weight.
    assert all(s == ["None", "None"] for s in jax_run[0]["data_parallel"]["specs"].values())


def test_pretrain_cli_data_parallel_on_jax(jax_run):
    result, output, _ = jax_run
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["replicas"] == 8 and metrics["steps"] == 2
    assert metrics["run"]["jit_compile"] and np.isfinite(metrics["mlm_loss"])
    assert (output / "model" / "model.safetensors").is_file()
    # One line and status 2 for a TensorFlow strategy, or a batch that does not split.
    for name, text in (("mirrored", "'mirrored' is for the TensorFlow backend; on JAX"),
                       ("data_parallel", "--batch-size 12 does not split over 8 data-parallel")):
        status, stderr = result["errors"][name]
        assert status == 2 and stderr.count("\n") == 1 and text in stderr, stderr


def test_tensorflow_refuses_jax_strategies():
    from kbert.training.distribution import get_strategy

    with pytest.raises(ValueError, match="runs on Keras' JAX backend"):
        get_strategy("data_parallel")
    with pytest.raises(ValueError, match="runs on Keras' JAX backend"):
        get_strategy("model_parallel:4")
