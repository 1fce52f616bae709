"""The model code runs on Keras 3's JAX backend (how kbert runs on GPU machines without TF)."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kbert
from kbert.tasks.fill_mask import open_masked_lm

pytest.importorskip("jax", reason="the JAX backend test needs jax (in the test extra)")

SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np, keras
    assert keras.backend.backend() == "jax"
    import kbert
    backbone = kbert.BertBackbone.from_pretrained("minilm_l6_h384_uncased")
    x = {k: np.array(v, "int32") for k, v in json.loads(sys.argv[1]).items()}
    out = backbone(x)
    np.save(sys.argv[2], np.asarray(out["sequence_output"]))

    # One forward/backward pass: a few pre-training steps through model.fit.
    cfg = kbert.BertConfig(vocab_size=60, hidden_size=32, num_layers=2, num_heads=4,
                           intermediate_size=64, max_position_embeddings=16)
    model = kbert.BertPretrainer(kbert.BertBackbone(cfg, causal=False))
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    rng = np.random.default_rng(0)
    ids = rng.integers(1, 60, (4, 8)).astype("int32")
    batch = {"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": 1 + 0 * ids,
             "masked_positions": rng.integers(0, 8, (4, 2)).astype("int32")}
    targets = {"mlm": rng.integers(1, 60, (4, 2)).astype("int32"),
               "nsp": np.array([0, 1, 0, 1], "int32")}
    history = model.fit(batch, targets, epochs=8, verbose=0).history

    # A masked LM fills blanks on JAX as on TensorFlow.
    from kbert.tasks.fill_mask import fill_mask, open_masked_lm
    filled = fill_mask(open_masked_lm(sys.argv[3]), json.loads(sys.argv[4]), top_k=3)
    print(json.dumps({"loss": history["loss"], "filled": filled}))
""")


def test_forward_and_backward_on_jax(tmp_path):
    ids = [[101, 7592, 2088, 102, 0], [101, 2023, 2003, 1037, 102]]
    x = {"token_ids": ids, "segment_ids": [[0] * 5, [0, 0, 0, 1, 1]],
         "padding_mask": [[1, 1, 1, 1, 0], [1] * 5]}
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    masked_lm, texts = _masked_lm(tmp_path / "masked_lm"), ["a [MASK] b [MASK]", "[MASK] c"]
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(x), str(tmp_path / "jax.npy"),
         str(masked_lm), json.dumps(texts)], env=env, capture_output=True, text=True,
        timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    on_jax = json.loads(result.stdout.strip().splitlines()[-1])
    loss = on_jax["loss"]
    assert all(np.isfinite(loss)) and loss[-1] < loss[0]
    on_tf = kbert.fill_mask(open_masked_lm(masked_lm), texts, top_k=3)
    for jax_answer, tf_answer in zip(on_jax["filled"], on_tf, strict=True):
        assert jax_answer["filled"] == tf_answer["filled"]
        for jax_blank, tf_blank in zip(jax_answer["blanks"], tf_answer["blanks"], strict=True):
            assert [c["id"] for c in jax_blank] == [c["id"] for c in tf_blank]
            np.testing.assert_allclose([c["score"] for c in jax_blank],
                                       [c["score"] for c in tf_blank], atol=1e-5)

    tf_out = kbert.BertBackbone.from_pretrained("minilm_l6_h384_uncased")(
        {k: np.array(v, "int32") for k, v in x.items()})["sequence_output"]
    jax_out = np.load(tmp_path / "jax.npy")
    assert np.abs(jax_out - np.asarray(tf_out))[:, :4].max() <= 1e-4


def _masked_lm(path):
    """A small masked LM on MiniLM's vocabulary, saved as a Hugging Face directory (weights
    at std 0.5, so that its answers depend on the context)."""
    tokenizer = kbert.BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
    cfg = kbert.BertConfig(vocab_size=tokenizer.vocabulary_size(), hidden_size=32,
                           num_layers=2, num_heads=4, intermediate_size=64,
                           max_position_embeddings=32, initializer_range=0.5)
    kbert.convert.save_hf(kbert.BertPretrainer(kbert.BertBackbone(cfg), use_nsp=False), path,
                          tokenizer=tokenizer)
    return path


PREDICT_SCRIPT = textwrap.dedent("""
    import functools, json
    import numpy as np
    import kbert
    from kbert.layers.encoder_block import TransformerEncoderBlock

    cfg = kbert.BertConfig(vocab_size=60, hidden_size=32, num_layers=2, num_heads=4,
                           intermediate_size=64, max_position_embeddings=16)
    calls = []  # Python runs of a block's forward pass (tracing or eager)
    forward = TransformerEncoderBlock.call

    @functools.wraps(forward)
    def counted(self, *args, **kwargs):
        calls.append(1)
        return forward(self, *args, **kwargs)

    TransformerEncoderBlock.call = counted
    found = {}
    for implementation in ("einsum", "xla"):  # "xla": the lengths path a GPU runs fused
        model = kbert.BertClassifier(
            kbert.BertBackbone(cfg, attention_implementation=implementation), num_classes=2)
        model.compile()
        ids = np.random.default_rng(0).integers(1, 60, (8, 16)).astype("int32")
        x = {"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": 1 + 0 * ids}
        for call in ("first", "second"):
            calls.clear()
            model.predict(x, batch_size=4, verbose=0)
            found[f"{implementation}/{call}"] = len(calls)
    print(json.dumps(found))
""")


def test_predict_runs_the_compiled_step_alone_on_later_calls():
    """Keras' JAX `predict` runs a forward pass in Python (eagerly, op by op) to build any
    layer left unbuilt, on every call that finds one: BERT-base's classifier then predicted
    at 5,269 sequences/s on an H100 in 20-batch calls where its compiled step alone ran 15,294
    (`benchmarks/results/gpu/h100-before-predict-fix/profile-base-seq128-batch64.json`). The
    fused-attention path never calls the attention dropout, and Keras builds a functional
    model's embeddings through `compute_output_shape`, so both must be built in `build`."""
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    result = subprocess.run([sys.executable, "-c", PREDICT_SCRIPT], env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    # The first call traces each of the 2 blocks once (the last with the [CLS] query of the
    # pooled state); later calls run the compiled step alone.
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {
        "einsum/first": 2, "einsum/second": 0, "xla/first": 2, "xla/second": 0}


def test_finetune_with_the_flash_kernel_on_jax_then_evaluate_on_tensorflow(tmp_path):
    """A user's GPU flow, run on this CPU (the kernels interpreted): `kbert finetune
    --attention flash` under JAX trains with the paper's attention dropout and records the
    kernel; `kbert evaluate` in a new TensorFlow process loads the run and scores the same
    examples to the same accuracy."""
    kbert_cli = [sys.executable, "-m", "kbert_cli"]
    run = tmp_path / "flash_run"
    common = ["--max-eval-examples", "24"]
    trained = subprocess.run(
        kbert_cli + ["finetune", "--preset", "tiny", "--steps", "4", "--batch-size", "8",
                     "--max-train-examples", "32", "--sequence-length", "32", "--attention",
                     "flash", "--no-validation", "--output", str(run), *common],
        env={**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"},
        capture_output=True, text=True, timeout=900)
    assert trained.returncode == 0, trained.stderr[-3000:]
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["settings"]["attention"] == "flash"
    assert np.isfinite(metrics["final_train_loss"])
    evaluated = subprocess.run(
        kbert_cli + ["evaluate", str(run), "--split", "test", *common],
        env={**os.environ, "KERAS_BACKEND": "tensorflow"}, capture_output=True, text=True,
        timeout=900)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert "Loading with attention_implementation='auto'" in evaluated.stderr
    scored = json.loads((run / "eval_test" / "metrics.json").read_text())
    assert scored["examples"] == 24 and scored["accuracy"] == metrics["test"]["accuracy"]
