"""CI smoke of benchmarks/pretrain_quality.py in equality mode (the real budgets are long runs).

This is the check that kbert's pre-training and transformers' `BertForPreTraining` step alike:
from the same initial weights (kbert's, written as a Hugging Face directory), on the same
masked batches, with dropout off, the two processes' training losses must agree at every step
within the script's tolerance. It fails if the models, the losses, the masking's labels, the
weight-decay exclusions, the schedule or the clipping drift apart.
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_smoke_equality_kbert_and_transformers_train_alike(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    out = tmp_path / "pretrain_quality.json"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run([sys.executable, "benchmarks/pretrain_quality.py", "--smoke",
                           "--mode", "equality", "--out", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(out.read_text())
    assert {"budget", "equality", "kbert", "hf"} <= set(results)
    budget = results["budget"]
    assert budget["mode"] == "equality" and budget["smoke"] and budget["dropout"] == 0.0
    assert budget["data"]["train_rows"] == budget["steps"] * budget["batch_size"]
    for side in ("kbert", "hf"):
        scores = results[side]
        assert 0 <= scores["mlm_accuracy"] <= 1 and 0 <= scores["nsp_accuracy"] <= 1
        assert scores["seq_per_s"] > 0
        assert [point["step"] for point in scores["curve"]] == [0, budget["steps"]]

    equality = results["equality"]
    assert equality["steps"] == budget["steps"]
    assert equality["tolerance"] > 0
    # Both sides decay the same parameters and follow the same schedule...
    assert equality["no_decay_values"]["kbert"] == equality["no_decay_values"]["hf"]
    assert equality["max_abs_learning_rate_diff"] < 1e-9
    # ... and their losses agree at every step: the real check.
    assert equality["max_abs_loss_diff"] <= equality["tolerance"], equality["abs_loss_diff"]
    assert equality["first_step_above_tolerance"] is None
    losses = equality["losses"]
    assert len(losses["kbert"]) == len(losses["hf"]) == budget["steps"]
    # The held-out scores at the start are the same model's: they agree too.
    start = [results[side]["curve"][0] for side in ("kbert", "hf")]
    assert abs(start[0]["mlm_loss"] - start[1]["mlm_loss"]) < 1e-4
    assert abs(start[0]["nsp_loss"] - start[1]["nsp_loss"]) < 1e-4
