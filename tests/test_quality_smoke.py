"""CI smoke of benchmarks/quality.py and benchmarks/ablations.py (the real budgets are long runs).

The quality check is the one that makes the kbert-vs-HF comparison trustworthy: both sides,
each in its own process, train and score the same examples (same counts and digests, the kbert
counts read from the driver's metrics) for the same number of optimizer steps on the same
learning-rate schedule (kbert's read back from the saved optimizer, HF's recorded per step).
A tiny random BERT saved as a Hugging Face directory stands in for MiniLM to keep it fast.
"""

import json
import math
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(args, tmp_path):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def tiny_hf_dir(tmp_path_factory, minilm_dir):
    """A 1-layer, 32-wide random BERT with MiniLM's vocabulary, as a Hugging Face directory."""
    transformers = pytest.importorskip("transformers")
    path = tmp_path_factory.mktemp("tiny_hf")
    config = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=64)
    transformers.BertModel(config).save_pretrained(path)
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(pathlib.Path(minilm_dir) / name, path / name)
    return path


def test_quality_smoke_both_sides_train_the_same_examples_on_the_same_schedule(
        tmp_path, tiny_hf_dir):
    output = tmp_path / "quality.json"
    output.write_text(json.dumps({"conll": {"kept": True}}))  # other tasks' entries survive
    _run(["benchmarks/quality.py", "--task", "sentiment", "--smoke", "--epochs", "2",
          "--init", str(tiny_hf_dir), "--output", str(output)], tmp_path)
    results = json.loads(output.read_text())
    assert results["conll"] == {"kept": True}
    entry = results["sentiment"]
    assert set(entry) == {"kbert", "hf", "budget"}
    budget = entry["budget"]
    assert budget["device"]["cores"] >= 1 and budget["versions"]["torch"]
    assert budget["epochs"] == 2 and budget["max_train_examples"] == 16
    kbert, hf = entry["kbert"], entry["hf"]
    for side in (kbert, hf):
        assert 0 <= side["dev_accuracy"] <= 1 and 0 <= side["test_accuracy"] <= 1
        assert side["seconds"] > 0
    # Same examples: 16 train, 16 dev, 16 test, the same ones on both sides.
    assert kbert["examples"] == hf["examples"]
    assert {k: v["count"] for k, v in hf["examples"].items() if k != "eval_seed"} == {
        "train": 16, "dev": 16, "test": 16}
    # Same steps (2 epochs of 16 at batch 4) and the same per-step rates: warmup round(0.8)=1
    # step from 0, then linear decay to 0.
    steps = 2 * math.ceil(16 / 4)
    assert kbert["run"]["steps"] == hf["run"]["steps"] == steps
    assert len(kbert["run"]["learning_rates"]) == steps
    assert kbert["run"]["learning_rates"] == pytest.approx(hf["run"]["learning_rates"],
                                                           rel=1e-5, abs=1e-12)
    assert hf["run"]["learning_rates"][0] == 0.0
    assert max(hf["run"]["learning_rates"]) == pytest.approx(5e-5)
    assert "torch_intra_op" in hf["threads"] and "tf_intra_op" in kbert["threads"]


def test_ablations_smoke_records_pretraining_and_finetuned_scores(tmp_path):
    """One variant (the causal one, no NSP head) to keep CI short; all three run by hand."""
    output = tmp_path / "ablations.json"
    done = _run(["benchmarks/ablations.py", "--smoke", "--variants", "ltr",
                 "--finetune-tasks", "sentiment", "--output", str(output),
                 "--workdir", str(tmp_path / "work")], tmp_path)
    report = json.loads(output.read_text())
    assert set(report["variants"]) == {"ltr"}
    ltr = report["variants"]["ltr"]
    assert (ltr["causal"], ltr["nsp"]) == (True, False)
    assert ltr["pretrain"]["steps"] == 2 and ltr["pretrain"]["nsp_accuracy"] is None
    assert 0 <= ltr["pretrain"]["lm_accuracy"] <= 1
    assert ltr["pretrain"]["objective"] == "next token"
    assert ltr["sentiment"]["causal"] is True  # fine-tuned left-to-right, as in the paper
    assert 0 <= ltr["sentiment"]["dev_accuracy"] <= 1
    assert 0 <= ltr["sentiment"]["test_accuracy"] <= 1
    assert ltr["sentiment"]["train_examples"] == 16
    assert report["budget"]["preset"] == "tiny"
    assert "| LTR & No NSP |" in done.stdout and report["table"] in done.stdout


def test_ablations_rerun_skips_variants_of_the_same_budget(tmp_path, monkeypatch):
    """Variants run in separate sittings: a rerun keeps the report's variants of the same
    budget without training them again, and a new budget starts a new report."""
    sys.path.insert(0, str(ROOT))
    from benchmarks import ablations

    budget = {**ablations.budget_of(ablations.parse_args(["--smoke"])), "corpus_documents": None}
    output = tmp_path / "ablations.json"
    done = {"pretrain": {"lm_accuracy": 0.25, "nsp_accuracy": None}, "nsp": False,
            "causal": True, "sentiment": {"dev_accuracy": 0.5, "test_accuracy": 0.75}}
    ablations.write_report(output, budget, {"ltr": done})

    def no_training(*args):
        raise AssertionError("a variant already in the report was trained again")

    monkeypatch.setattr(ablations, "pretrain_variant", no_training)
    report = ablations.run(budget, ["ltr"], ["sentiment"], output, tmp_path / "work")
    assert report["variants"] == {"ltr": done}
    assert json.loads(output.read_text())["variants"] == {"ltr": done}
    assert "| LTR & No NSP | 0.250 | – | 0.500 | 0.750 | – | – |" in report["table"]
    with pytest.raises(AssertionError, match="trained again"):  # qnli is missing: rerun
        ablations.run(budget, ["ltr"], ["sentiment", "qnli"], output, tmp_path / "work")
    assert ablations.previous_variants(output, {**budget, "steps": 3}) == {}
    assert ablations.previous_variants(output, budget) == {"ltr": done}


def test_ablations_reuse_a_finished_pretraining(tmp_path):
    """A variant whose pre-training finished in an earlier sitting (metrics.json, then model/)
    is read back, not trained again; one cut off before model/ is not taken as finished."""
    sys.path.insert(0, str(ROOT))
    from benchmarks import ablations

    budget = ablations.budget_of(ablations.parse_args(["--smoke"]))
    workdir = ablations.workdir_for(budget, tmp_path)
    assert workdir != ablations.workdir_for({**budget, "steps": 3}, tmp_path)
    run = workdir / "no_nsp"
    run.mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps(
        {"mlm_accuracy": 0.3, "baseline_mlm_accuracy": 0.05, "steps": 2,
         "resumed_from_step": 1, "train_seconds": 12.34}))
    with pytest.raises(FileNotFoundError, match="no preset named 'unknown'"):
        # no model/: not finished, so it pre-trains again (here refused at once)
        ablations.pretrain_variant("no_nsp", {**budget, "preset": "unknown"}, None, workdir)
    (run / "model").mkdir()
    scores, model_dir = ablations.pretrain_variant("no_nsp", budget, None, workdir)
    assert model_dir == run / "model"
    assert scores == {"lm_accuracy": 0.3, "objective": "masked LM", "nsp_accuracy": None,
                      "baseline_mlm_accuracy": 0.05, "steps": 2, "resumed_from_step": 1,
                      "train_seconds": 12.3}


def test_hf_side_squad_windows_equal_kbert_windows(minilm_dir):
    """The HF side's SQuAD windows (fast tokenizer overflow) are kbert's, token for token (ids,
    segments, mask), with the same training targets and max-context positions, on real questions."""
    import types

    transformers = pytest.importorskip("transformers")
    sys.path.insert(0, str(ROOT))
    from benchmarks.quality_squad_hf import add_targets, max_context, windows
    from kbert import BertTokenizer
    from kbert.tasks import get_spec, subset
    from kbert.text import BertSpanPreprocessor

    spec = get_spec("squad")
    examples = subset(spec.splits()["train"], 60, 0)
    model = types.SimpleNamespace(preprocessor=BertSpanPreprocessor(
        BertTokenizer.from_pretrained(str(minilm_dir)), 96, 32, 64))
    ours = spec.windows(model, examples, with_answers=True)
    hf = windows(transformers.AutoTokenizer.from_pretrained(minilm_dir), examples, 96, 32, 64)
    assert len(hf) == len(ours["token_ids"]) > len(examples)
    for n, w in enumerate(hf):
        length = len(w["input_ids"])
        for name, key in (("input_ids", "token_ids"), ("token_type_ids", "segment_ids"),
                          ("attention_mask", "padding_mask")):
            assert list(w[name]) == list(ours[key][n][:length]), (n, name)
            assert not ours[key][n][length:].any(), (n, key)  # nothing but padding after
        assert w["example"] == ours["example_index"][n]
    targets = add_targets(examples, hf)
    keep = ours["unmappable"] == 0
    assert [(t["start_positions"], t["end_positions"]) for t in targets] == list(
        zip(ours["start_positions"][keep], ours["end_positions"][keep]))
    flags = [set(np.flatnonzero(row)) for row in ours["max_context"]]
    for n in range(len(examples)):
        rows = [i for i, w in enumerate(hf) if w["example"] == n]
        assert max_context([hf[i] for i in rows]) == [flags[i] for i in rows]


def test_one_side_rerun_keeps_the_other_sides_result_and_when_it_ran(tmp_path):
    """`--side kbert` replaces kbert's result and the budget; HF's stays, marked with the
    commit, date and machine of the run that made it (read from the budget it was made under)."""
    from benchmarks.quality import merge

    output = tmp_path / "q.json"
    old_budget = {"kbert_commit": "aaa", "date": "2026-01-01", "device": {"cpu": "A"},
                  "epochs": 1}
    output.write_text(json.dumps({"squad": {"budget": old_budget, "kbert": {"f1": 1.0},
                                            "hf": {"f1": 2.0}}}))
    new = {"budget": {"kbert_commit": "bbb", "date": "2026-02-02", "device": {"cpu": "B"},
                      "epochs": 1},
           "kbert": {"f1": 3.0, "ran": {"kbert_commit": "bbb", "date": "2026-02-02",
                                        "device": {"cpu": "B"}}}}
    entry = merge(output, "squad", new)
    assert entry["kbert"]["f1"] == 3.0 and entry["budget"]["kbert_commit"] == "bbb"
    assert entry["hf"] == {"f1": 2.0, "ran": {"kbert_commit": "aaa", "date": "2026-01-01",
                                              "device": {"cpu": "A"}}}
    assert json.loads(output.read_text())["squad"] == entry


def test_side_options_are_recorded_only_for_their_task_and_when_asked():
    """`--batching` is recorded in CoNLL's budget and becomes the kbert side's task option,
    `--hf-squad-loss` in SQuAD's; without them the budget (and so quality.json's recorded one)
    is unchanged."""
    from benchmarks.quality import _task_options, make_budget, parse_args

    asked = make_budget("conll", parse_args(["--task", "conll", "--batching", "random"]))
    assert asked["kbert_batching"] == "random"
    assert _task_options(asked) == {"batching": "random"}
    plain = make_budget("conll", parse_args(["--task", "conll"]))
    assert "kbert_batching" not in plain and _task_options(plain) == {}
    assert "kbert_batching" not in make_budget("squad", parse_args(["--batching", "random"]))
    masked = make_budget("squad", parse_args(["--task", "squad", "--hf-squad-loss", "masked"]))
    assert masked["hf_squad_loss"] == "masked"
    assert "hf_squad_loss" not in make_budget("squad", parse_args(["--task", "squad"]))
    assert "hf_squad_loss" not in make_budget("conll", parse_args(["--hf-squad-loss", "masked"]))


def test_attention_dropout_script_compares_the_rates_per_seed(tmp_path):
    """`benchmarks/attention_dropout.py --smoke`: both rates run through the CLI for the seed,
    the flag reaches each run (the script checks each metrics.json), and the means are the
    runs' means."""
    out = tmp_path / "attention_dropout.json"
    _run(["-m", "benchmarks.attention_dropout", "--smoke", "--seeds", "3", "--out", str(out)],
         tmp_path)
    report = json.loads(out.read_text())
    assert [(r["rate"], r["seed"]) for r in report["runs"]] == [(0.1, 3), (0.0, 3)]
    for run in report["runs"]:
        assert 0 <= run["dev_accuracy"] <= 1 and 0 <= run["test_accuracy"] <= 1
        assert report["means"][str(run["rate"])]["test_accuracy"] == run["test_accuracy"]
