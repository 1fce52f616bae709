"""`kbert finetune --init RUN_DIR`: a kbert run is a starting point like a checkpoint (a task
after another, a run trained further). Checked against the run itself, read in another process:
after one step at a vanishing rate the new run answers as the old one, and its encoder is the
old encoder whatever head the new task needs."""

import json

import numpy as np
import pytest

from kbert.runs import RunDirectory
from kbert.tasks import EVAL_SEED, get_spec, subset
from kbert.training.finetune import finetune, predict_run

SETTINGS = dict(batch_size=8, max_train_examples=16, max_eval_examples=16, sequence_length=32,
                verbose=0)


@pytest.fixture(scope="module")
def source_run(tmp_path_factory):
    """A small sentiment run whose head has moved from its initialisation (2 steps at 1e-3)."""
    path = tmp_path_factory.mktemp("source") / "run"
    finetune("sentiment", init="tiny", output_dir=str(path), epochs=1, learning_rate=1e-3,
             **SETTINGS)
    return path


@pytest.mark.slow
def test_a_run_fine_tunes_on_from_another_run_with_its_head(source_run, tmp_path):
    from tests.test_cli_processes import KBERT, run

    run(KBERT + ["finetune", "--task", "sentiment", "--init", source_run, "--steps", "1",
                 "--learning-rate", "1e-12", "--batch-size", "8", "--sequence-length", "32",
                 "--max-train-examples", "16", "--max-eval-examples", "16",
                 "--output", tmp_path / "run"])
    before = json.loads((source_run / "metrics.json").read_text())
    after = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert after["dev"]["accuracy"] == before["dev"]["accuracy"]
    texts = [text for text, _ in subset(get_spec("sentiment").splits()["dev"], 16, EVAL_SEED)]
    old, new = predict_run(source_run, text=texts), predict_run(tmp_path / "run", text=texts)
    probabilities = np.array([a["probabilities"] for a in old])
    assert np.ptp(probabilities[:, 0]) > 1e-4  # the texts get different answers
    assert abs(probabilities[:, 0].mean() - 0.5) > 1e-3  # the trained head, not a fresh one
    np.testing.assert_allclose([a["probabilities"] for a in new], probabilities, atol=1e-5)


@pytest.mark.slow
def test_a_run_gives_its_encoder_and_tokenizer_to_another_task(source_run, tmp_path):
    from kbert.models import BertBackbone
    from kbert.models.pretrained import load_backbone_and_tokenizer
    from kbert.text import BertTokenizer

    trained = RunDirectory.open(source_run).load_model()
    backbone = BertBackbone.from_pretrained(str(source_run))
    assert backbone.config == trained.backbone.config
    for ours, theirs in zip(backbone.get_weights(), trained.backbone.get_weights()):
        np.testing.assert_array_equal(ours, theirs)
    settings = ("vocabulary", "lowercase", "strip_accents", "max_chars_per_word")
    tokenizer = BertTokenizer.from_pretrained(str(source_run)).get_config()
    assert {k: tokenizer[k] for k in settings} == {
        k: trained.preprocessor.tokenizer.get_config()[k] for k in settings}
    random_backbone, _ = load_backbone_and_tokenizer(f"random:{source_run}")
    assert random_backbone.config == trained.backbone.config
    assert not np.allclose(random_backbone.get_weights()[0], trained.backbone.get_weights()[0])

    # a regression on the sentiment run: a 1-output head trains, the encoder is the run's
    with pytest.warns(UserWarning, match="head of 2 outputs, not this task's 1: a new head"):
        finetune("sentiment_score", init=str(source_run), output_dir=str(tmp_path / "run"),
                 steps=1, learning_rate=1e-12, **SETTINGS)
    regression = RunDirectory.open(tmp_path / "run").load_model()
    for ours, theirs in zip(regression.backbone.get_weights(), trained.backbone.get_weights()):
        np.testing.assert_allclose(ours, theirs, atol=1e-6)
