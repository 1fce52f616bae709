"""The model code runs on Keras 3's JAX backend (how kbert runs on GPU machines without TF)."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kbert

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
    print(json.dumps({"loss": history["loss"]}))
""")


def test_forward_and_backward_on_jax(tmp_path):
    ids = [[101, 7592, 2088, 102, 0], [101, 2023, 2003, 1037, 102]]
    x = {"token_ids": ids, "segment_ids": [[0] * 5, [0, 0, 0, 1, 1]],
         "padding_mask": [[1, 1, 1, 1, 0], [1] * 5]}
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(x), str(tmp_path / "jax.npy")],
        env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    loss = json.loads(result.stdout.strip().splitlines()[-1])["loss"]
    assert all(np.isfinite(loss)) and loss[-1] < loss[0]

    tf_out = kbert.BertBackbone.from_pretrained("minilm_l6_h384_uncased")(
        {k: np.array(v, "int32") for k, v in x.items()})["sequence_output"]
    jax_out = np.load(tmp_path / "jax.npy")
    assert np.abs(jax_out - np.asarray(tf_out))[:, :4].max() <= 1e-4
