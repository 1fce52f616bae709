"""The benchmark harness: its FLOP counts against PyTorch's own counter, and a short run of the
driver with real workers."""

import json
import subprocess
import sys

import pytest

from benchmarks import flops
from kbert.config import BertConfig


def _torch_flops(config, seq, case):
    """FLOPs that torch.utils.flop_counter counts for Hugging Face's model of the same size."""
    import torch
    import transformers
    from torch.utils.flop_counter import FlopCounterMode

    hf_config = transformers.BertConfig(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size,
        num_hidden_layers=config.num_layers, num_attention_heads=config.num_heads,
        intermediate_size=config.intermediate_size, num_labels=2, attn_implementation="eager")
    ids = torch.randint(1000, 2000, (2, seq))
    counter = FlopCounterMode(display=False)
    if case in ("infer", "classify"):
        model = (transformers.BertModel(hf_config, add_pooling_layer=False) if case == "infer"
                 else transformers.BertForSequenceClassification(hf_config)).eval()
        with counter, torch.no_grad():
            model(input_ids=ids)
    else:
        model = transformers.BertForSequenceClassification(hf_config)
        with counter:
            model(input_ids=ids, labels=torch.tensor([0, 1])).loss.backward()
    return counter.get_total_flops() / 2  # per sequence


@pytest.mark.parametrize("preset", ["tiny", "mini"])
@pytest.mark.parametrize("case", ["infer", "classify", "train"])
def test_model_flops_match_pytorchs_counter(preset, case):
    config = BertConfig.preset(preset)
    assert flops.case_flops(case, config, 64) == _torch_flops(config, 64, case)


def test_dense_layer_chain_has_a_layers_dense_multiplies():
    config = BertConfig.preset("base")
    chain = sum(2 * k * n for k, n in flops.dense_layer_shapes(config))
    attention = 4 * 128 * config.hidden_size  # per token and layer at length 128
    assert config.num_layers * 128 * (chain + attention) == flops.forward_flops(config, 128)


def test_pretraining_counts_only_the_masked_predictions():
    config = BertConfig.preset("base")
    extra = flops.case_flops("pretrain", config, 128) - flops.case_flops("train", config, 128)
    assert extra == 3 * 20 * (2 * 768 * 768 + 2 * 768 * 30522)


def test_quick_run_measures_every_contestant(tmp_path):
    out = tmp_path / "result.json"
    subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--quick", "--parts", "cases",
         "--cases", "infer", "--contestants", "kbert", "hugging_face", "--out", str(out)],
        check=True, timeout=600, cwd=str(__import__("pathlib").Path(__file__).parents[1]),
        stdout=subprocess.DEVNULL)
    report = json.loads(out.read_text())
    peak = report["machine"]["peak_gflops"]
    assert peak > 1
    (dense,) = report["machine"]["dense_layer_gflops"].values()  # the one preset measured
    # TensorFlow's matmuls are timed in both of its modes, XLA's apart from oneDNN's.
    assert {f: set(modes) for f, modes in dense.items()} == {
        "kbert": {"xla", "no_xla"}, "hugging_face": {"eager"}}
    assert min(g for modes in dense.values() for g in modes.values()) > 0
    measured = {r["contestant"]: r for r in report["results"]}
    assert set(measured) == {"kbert (default)", "kbert (no XLA)", "HF PyTorch"}
    for result in measured.values():
        assert result["sequences_per_s"] > 0
        # Its GFLOP/s are the counted FLOPs (checked against torch's counter above) at its
        # speed. Not "below the peak": a 0.05 s quick peak beside a busy test worker ran under
        # what a model reached (1.0006 once).
        want = flops.case_flops("infer", BertConfig.preset("tiny"), result["seq"])
        assert result["gflops_per_s"] == pytest.approx(result["sequences_per_s"] * want / 1e9)
    (row,) = report["summary"]
    # The ratio is kbert's default mode (compile() with no speed flags) against the peer.
    assert row["kbert"] == "kbert (default)"
    assert row["vs_hugging_face"] == pytest.approx(
        measured["kbert (default)"]["sequences_per_s"] / measured["HF PyTorch"]["sequences_per_s"])


def test_keras_hub_can_train_with_keras_own_adamw():
    """`--peer-optimizer keras`: the same settings in Keras' class, with weight decay left off
    the same variables as in kbert's."""
    import keras

    from benchmarks.contestants import optimizer_for
    from kbert import BertBackbone, BertClassifier

    model = BertClassifier(BertBackbone(BertConfig.preset("tiny")), num_classes=2)
    ours, theirs = optimizer_for(model), optimizer_for(model, keras_class=True)
    assert type(theirs) is keras.optimizers.AdamW
    settings = {k: v for k, v in ours.get_config().items() if not k.startswith("no_decay_")}
    assert {**theirs.get_config(), "name": None} == {**settings, "name": None}
    decayed = [v.path for v in model.trainable_variables if theirs._use_weight_decay(v)]
    assert decayed == [v.path for v in model.trainable_variables if ours._use_weight_decay(v)]
    assert 0 < len(decayed) < len(model.trainable_variables)


def test_a_worker_that_dies_is_reported_and_restarted(capsys):
    from benchmarks import run

    bench = run.Bench(run.parse(["--quick", "--contestants", "hugging_face"]))
    try:
        bench.worker("hugging_face").process.kill()  # as the kernel's OOM killer would
        bench.compare("infer", "tiny", 2, 32)
        assert bench.results == []
        assert "hugging_face worker died with exit code -9 (SIGKILL" in capsys.readouterr().out
        bench.compare("infer", "tiny", 2, 32)  # a fresh worker takes over
        (result,) = bench.results
        assert result["contestant"] == "HF PyTorch" and result["sequences_per_s"] > 0
    finally:
        bench.close()


def test_xla_break_even_is_the_extra_first_call_over_the_saving_per_step(monkeypatch):
    """`benchmarks.xla_break_even` with its measurements given: medians over rounds that
    alternate which mode goes first, and the steps after which XLA's extra compilation is
    paid back (never, when XLA's step is no faster)."""
    from benchmarks import xla_break_even

    order = []
    timings = {("train", True): [(12.0, 0.070), (14.0, 0.074)],
               ("train", False): [(7.0, 0.080), (7.0, 0.078)],
               ("infer", True): [(3.0, 0.050), (3.0, 0.050)],
               ("infer", False): [(2.0, 0.040), (2.0, 0.040)]}

    def measure(case, preset, batch, seq, xla, seconds):
        order.append(xla)
        return timings[case, xla].pop(0)

    monkeypatch.setattr(xla_break_even, "measure", measure)
    train = xla_break_even.break_even("train", "tiny", 16, 128, rounds=2, seconds=1)
    assert order == [True, False, False, True]
    assert train["first_call_s"] == {"xla": 13.0, "no_xla": 7.0}
    assert train["step_s"] == {"xla": pytest.approx(0.072), "no_xla": pytest.approx(0.079)}
    assert train["break_even_steps"] == pytest.approx(6.0 / 0.007)
    assert xla_break_even.break_even("infer", "tiny", 16, 128, 2, 1)["break_even_steps"] is None


def test_xla_flag_sets_each_run_in_a_process_of_their_own(tmp_path):
    """`benchmarks.xla_flags` at tiny size: a flag set reaches its own worker only (XLA aborts
    on a flag it does not know, and that set alone is reported, the other measured)."""
    from benchmarks import xla_flags

    report = xla_flags.main(["--sets", "default=", "unknown=--xla_cpu_no_such_flag=1",
                             "--cases", "infer", "--preset", "tiny", "--batch", "2", "--seq",
                             "32", "--rounds", "2", "--seconds", "0.1",
                             "--out", str(tmp_path / "flags.json")])
    infer = report["results"]["infer"]
    assert len(infer["default"]["rounds"]) == 2 and infer["default"]["sequences_per_s"] > 0
    assert "worker died with exit code 1" in infer["unknown"]["error"]
    assert json.loads((tmp_path / "flags.json").read_text())["sets"] == {
        "default": "", "unknown": "--xla_cpu_no_such_flag=1"}


def test_alternating_rounds_rotate_the_first_and_drop_a_failed_contestant(monkeypatch):
    from benchmarks import run

    monkeypatch.setattr(run.time, "sleep", lambda seconds: None)
    asked = []

    def measure(label):
        asked.append(label)
        if label == "b" and asked.count("b") == 2:
            return {"error": "died"}
        return {"sequences": 8, "times": [4.0, 1.0, 2.0]}  # median 2 s → 4 sequences/s

    per_round, errors = run.alternating_rounds(["a", "b", "c"], measure, rounds=3)
    assert asked == ["a", "b", "c", "b", "c", "a", "c", "a"]
    assert per_round == {"a": [4.0] * 3, "b": [4.0], "c": [4.0] * 3}
    assert errors == {"b": "died"}
