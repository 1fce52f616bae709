"""`pretrain()`: metrics, TensorBoard logs, optimizers, and resuming after SIGKILL."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

SMALL = dict(vocab_size=30522, hidden_size=32, num_layers=2, num_heads=2,
             intermediate_size=64, max_position_embeddings=64)


def small_config():
    from kbert.config import BertConfig

    return BertConfig(**SMALL)


def event_scalars(folder):
    """{tag: [(step, value)]} from the TensorBoard event files in `folder`."""
    import tensorflow as tf

    out = {}
    for name in sorted(os.listdir(folder)):
        for event in tf.compat.v1.train.summary_iterator(os.path.join(folder, name)):
            for value in event.summary.value:
                number = float(tf.make_ndarray(value.tensor)) if value.HasField("tensor") \
                    else value.simple_value
                out.setdefault(value.tag, []).append((event.step, number))
    return out


@pytest.mark.slow
def test_pretrain_metrics_and_tensorboard(tmp_path, corpus_file):
    from kbert.training.pretrain import pretrain

    out = tmp_path / "run"
    result = pretrain(out, config=small_config(), corpus=corpus_file, steps=12,
                      batch_size=8, sequence_length=64, learning_rate=1e-3, warmup_steps=2,
                      checkpoint_every=5, log_every=1, eval_examples=64, verbose=0,
                      profile_batches=(2, 3))
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["steps"] == 12 == result["steps"]
    for key in ("mlm_accuracy", "nsp_accuracy", "mlm_loss", "nsp_loss",
                "baseline_mlm_accuracy"):
        assert 0 <= metrics[key] and np.isfinite(metrics[key])
    assert metrics["start"]["mlm_loss"] > metrics["mlm_loss"]  # it learned something
    assert json.loads((out / "checkpoints/latest/state.json").read_text())["step"] == 12
    assert (out / "model/config.json").is_file() and (out / "model/vocab.txt").is_file()
    tags = event_scalars(out / "logs/steps")
    for tag in ("loss", "mlm_loss", "mlm_accuracy", "nsp_loss", "nsp_accuracy",
                "learning_rate", "sequences_per_second"):
        assert tag in tags, tag
    assert [s for s, _ in tags["learning_rate"]] == list(range(1, 13))
    lr = dict(tags["learning_rate"])
    # The rate each step used (step N at s = N - 1): warmup 0, 5e-4, then the peak at step 3,
    # and linear decay over 10 steps: step 12 ran at s = 11, 1e-3 · (1 - 9/10).
    assert lr[1] == 0.0 and lr[2] == pytest.approx(5e-4) and lr[3] == pytest.approx(1e-3)
    assert lr[12] == pytest.approx(1e-4, rel=1e-5)
    assert os.listdir(out / "logs/train")  # Keras' epoch summaries
    # The profiler trace of batches 2-3, where TensorBoard's profile tab reads it.
    assert list((out / "logs/train/plugins/profile").glob("*/*.xplane.pb"))


@pytest.mark.slow
def test_optimizers_and_options(tmp_path, corpus_file):
    """LAMB, polynomial decay, gradient accumulation, bf16, whole-word masking, no NSP."""
    from kbert.training.pretrain import pretrain

    out = tmp_path / "lamb"
    result = pretrain(out, config=small_config(), corpus=corpus_file, steps=3,
                      batch_size=4, sequence_length=32, optimizer="lamb", decay_power=2.0,
                      gradient_accumulation_steps=2, mixed_precision="bf16", whole_word=True,
                      nsp=False, checkpoint_every=2, log_every=1, eval_examples=16, verbose=0,
                      save_model=False)
    assert result["steps"] == 3 and result["examples_seen"] == 3 * 2 * 4
    assert "nsp_accuracy" not in result and np.isfinite(result["mlm_loss"])
    # The schedule counts updates, not batches: peak 1e-4, no warmup, (1 - s/3)^2 decay; the
    # log at update N shows the rate update N used (s = N - 1).
    lr = dict(event_scalars(out / "logs/steps")["learning_rate"])
    for step in range(1, 4):
        assert lr[step] == pytest.approx(1e-4 * (1 - (step - 1) / 3) ** 2, abs=1e-10), step


@pytest.mark.slow
def test_left_to_right_pretraining_learns_next_tokens_and_saves_a_decoder(tmp_path,
                                                                         corpus_file):
    """The paper's LTR ablation: a causal model trained on next tokens. Its held-out accuracy
    beats always answering the most frequent token, and the saved model is an `is_decoder`
    checkpoint that loads causal again (so fine-tuning stays left-to-right). (At 40-60 steps
    it still answers the unigram's top token everywhere: exactly the baseline's accuracy.)"""
    from kbert import BertBackbone
    from kbert.training.pretrain import pretrain

    out = tmp_path / "ltr"
    result = pretrain(out, config=small_config(), corpus=corpus_file, steps=120, batch_size=8,
                      sequence_length=32, learning_rate=5e-3, warmup_steps=4, causal=True,
                      nsp=False, checkpoint_every=0, eval_examples=64, verbose=0)
    assert result["run"]["causal"] and result["run"]["max_predictions"] == 31
    assert result["start"]["mlm_loss"] > result["mlm_loss"] + 1.0
    assert result["mlm_accuracy"] > result["baseline_mlm_accuracy"]
    assert json.loads((out / "model/config.json").read_text())["is_decoder"] is True
    assert BertBackbone.from_pretrained(str(out / "model")).causal


def test_no_weight_decay_on_layernorm_and_bias():
    import keras

    from kbert.models.backbone import BertBackbone
    from kbert.models.pretrainer import BertPretrainer
    from kbert.training.optimizer import WarmupPolynomialDecay
    from kbert.training.optimizer import make_optimizer

    model = BertPretrainer(BertBackbone(small_config()))
    for name in ("adamw", "lamb"):
        opt = make_optimizer(1e-3, 100, model=model, optimizer=name, warmup_steps=10)
        decayed = {v.path for v in model.trainable_variables if opt._use_weight_decay(v)}
        assert any("kernel" in p for p in decayed)
        assert not any(p.endswith(("bias", "gamma", "beta")) for p in decayed), decayed
    schedule = WarmupPolynomialDecay(1.0, 110, 10, power=2.0)
    values = [float(keras.ops.convert_to_numpy(schedule(s))) for s in (0, 5, 10, 60, 110, 200)]
    assert values == pytest.approx([0.0, 0.5, 1.0, 0.25, 0.0, 0.0])


RUN = textwrap.dedent("""
    import sys
    from kbert.config import BertConfig
    from kbert.training.pretrain import pretrain
    pretrain(sys.argv[1], config=BertConfig(**{small}), corpus=sys.argv[2], steps=40,
             batch_size=8, sequence_length=64, learning_rate=1e-3, warmup_steps=4,
             checkpoint_every=4, log_every=1, eval_examples=32, verbose=0, save_model=False)
""")


def test_resume_after_sigkill(tmp_path, corpus_file):
    out = tmp_path / "run"
    script = RUN.format(small=SMALL)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.Popen([sys.executable, "-c", script, str(out), str(corpus_file)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    state_file = out / "checkpoints/latest/state.json"
    deadline = time.time() + 240
    killed_after = None
    try:
        while time.time() < deadline and proc.poll() is None:
            if state_file.exists():
                step = json.loads(state_file.read_text())["step"]
                if step >= 8:
                    os.kill(proc.pid, signal.SIGKILL)
                    killed_after = step
                    break
            time.sleep(0.05)
    finally:
        if proc.poll() is None and killed_after is None:
            proc.kill()
        proc.wait()
    assert killed_after is not None, proc.stderr.read().decode()[-3000:]
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "metrics.json").exists()
    saved = json.loads(state_file.read_text())["step"]
    assert 8 <= saved < 40 and saved % 4 == 0

    done = subprocess.run([sys.executable, "-c", script, str(out), str(corpus_file)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["steps"] == 40 and metrics["resumed_from_step"] == saved
    assert metrics["start"] is not None  # the start metrics of the first attempt survive
    assert metrics["examples_seen"] == 40 * 8  # the whole run's, not the resumed attempt's
    assert metrics["sequences_per_second"] > 0
    from kbert.atomic import staging_entries  # nothing the killed writer staged is left

    assert list(staging_entries(out / "checkpoints")) == []
    # The learning rate after the resume is the uninterrupted schedule's: warmup 4, peak 1e-3,
    # linear decay to 0 at step 40; step N (from 1) used the rate at s = N - 1.
    lr = dict(event_scalars(out / "logs/steps")["learning_rate"])
    for step in range(max(saved + 1, 5), 41):
        assert lr[step] == pytest.approx(1e-3 * (41 - step) / 36, rel=1e-5, abs=1e-9), step

    before = file_hashes(out)  # rerunning the finished run changes nothing on disk
    again = subprocess.run([sys.executable, "-c", script, str(out), str(corpus_file)], env=env,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert file_hashes(out) == before


def file_hashes(folder):
    """{relative path: sha256} of every file under `folder`."""
    import hashlib

    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}
