"""TensorBoard, started on the logs of a real fine-tuning run, shows its scalars and attention
images through its HTTP API (on a free 127.0.0.1 port; stopped by PID)."""

import json
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import numpy as np
import pytest
import tensorflow as tf

from kbert.training.finetune import finetune


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _get(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read()


@pytest.fixture
def tensorboard(tmp_path):
    """`start(logdir)` runs TensorBoard and returns its base URL once it lists the run `train`;
    the server is stopped by its PID when the test ends, passed or failed."""
    server, log = None, tmp_path / "tensorboard.log"

    def start(logdir):
        nonlocal server
        port = _free_port()
        # sys.executable: CI's PATH has no venv bin/, so no `tensorboard` script on it.
        server = subprocess.Popen(
            [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir),
             "--host", "127.0.0.1", "--port", str(port), "--load_fast", "false",
             "--reload_interval", "1"],
            stdout=log.open("w"), stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert server.poll() is None, f"TensorBoard exited:\n{log.read_text()}"
            try:
                if "train" in json.loads(_get(f"{base}/data/plugin/scalars/tags")):
                    return base
            except OSError:  # not listening yet
                pass
            time.sleep(0.5)
        raise AssertionError(f"TensorBoard did not serve the run in time:\n{log.read_text()}")

    try:
        yield start
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


@pytest.mark.slow
def test_tensorboard_serves_a_real_runs_scalars_and_images(tmp_path, tensorboard):
    run = tmp_path / "run"
    metrics = finetune(task="sentiment", init="tiny", output_dir=run, epochs=2, batch_size=16,
                       max_train_examples=64, max_eval_examples=16, verbose=0,
                       attention_sentence="The cat sat on the mat.")
    base = tensorboard(run / "logs")

    tags = json.loads(_get(f"{base}/data/plugin/scalars/tags"))
    assert {"epoch_loss", "epoch_accuracy", "epoch_learning_rate", "batch_loss"} <= set(
        tags["train"])

    def scalars(tag):
        query = urllib.parse.urlencode({"run": "train", "tag": tag})
        return json.loads(_get(f"{base}/data/plugin/scalars/scalars?{query}"))  # [t, step, v]

    epoch_loss = scalars("epoch_loss")
    assert [step for _, step, _ in epoch_loss] == [0, 1]
    np.testing.assert_allclose(epoch_loss[-1][2], metrics["final_train_loss"], rtol=1e-6)
    batch_loss = scalars("batch_loss")
    assert len(batch_loss) == metrics["settings"]["steps"] == 8
    assert all(np.isfinite(value) and value > 0 for _, _, value in batch_loss)
    # Linear decay reaches 0 after the last step; each step's own rate is logged beside it.
    assert scalars("epoch_learning_rate")[-1][2] == 0.0
    # The rates steps 1..8 used, as transformers' get_linear_schedule_with_warmup gives them
    # (peak 5e-5, 1 warmup step = 10% of 8 rounded up): step index s < 1 → 5e-5·s, then
    # 5e-5·(8 - s)/(8 - 1).
    used = [(step, value) for _, step, value in scalars("batch_learning_rate")]
    expected = [5e-5 * s if s < 1 else 5e-5 * (8 - s) / 7 for s in range(8)]
    assert [step for step, _ in used] == list(range(1, 9))
    np.testing.assert_allclose([value for _, value in used], expected, rtol=1e-5, atol=1e-12)
    # Validation loss and accuracy after each epoch, beside training's (fit's validation run).
    assert {"epoch_loss", "epoch_accuracy"} <= set(tags["validation"])
    query = urllib.parse.urlencode({"run": "validation", "tag": "epoch_loss"})
    validation = json.loads(_get(f"{base}/data/plugin/scalars/scalars?{query}"))
    assert [step for _, step, _ in validation] == [0, 1]
    assert all(np.isfinite(value) and value > 0 for _, _, value in validation)

    images = json.loads(_get(f"{base}/data/plugin/images/tags"))
    assert set(images["attention"]) == {"attention/layer_0", "attention/layer_1"}
    query = urllib.parse.urlencode({"run": "attention", "tag": "attention/layer_1"})
    samples = json.loads(_get(f"{base}/data/plugin/images/images?{query}"))
    assert samples[-1]["step"] == 8
    png = _get(f"{base}/data/plugin/images/individualImage?{samples[-1]['query']}")
    assert tf.io.decode_png(png).shape == (72, 146, 3)  # 9 tokens × 8 px, 2 heads
