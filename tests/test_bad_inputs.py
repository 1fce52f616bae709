"""Bad files and absurd settings meet a clear error naming the file, the key and what is allowed,
before anything large is allocated (issue 23): BertConfig bounds and types, the Hugging Face
and Google readers (dtypes, NaN, shard paths), run.json, the training configs, and the
fine-tuning driver's early checks and cleanup."""

import importlib
import json
import time

import ml_dtypes
import numpy as np
import pytest
import safetensors.numpy

from kbert.config import MAX_PARAMETERS, BertConfig, ConfigError, parameter_count
from kbert.convert import read_google_checkpoint, read_hf_checkpoint, write_google_checkpoint
from kbert.convert import write_hf_checkpoint
from kbert.convert.weights import CheckpointError, expected_shapes
from kbert.runs import RunDirectory, RunError
from kbert.training.pretrain_config import PretrainConfig

finetune_module = importlib.import_module("kbert.training.finetune")
SMALL = dict(vocab_size=50, hidden_size=8, num_layers=1, num_heads=2, intermediate_size=16,
             max_position_embeddings=16)
HF_SIZES = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
            "num_attention_heads": 12, "intermediate_size": 3072}


@pytest.mark.parametrize("fields, message", [
    (dict(num_layers=True), r"num_layers must be a positive integer .*got True"),
    (dict(num_layers=10**6), r"num_layers must be a positive integer of at most 256, got 1000000"),
    (dict(vocab_size=2**21), "vocab_size .* at most 1,048,576"),
    (dict(max_position_embeddings=10**6), "max_position_embeddings .* at most 65,536"),
    (dict(num_layers=256, hidden_size=16384, num_heads=16, intermediate_size=65536),
     "more than the 20,000,000,000"),
    (dict(layer_norm_eps=float("nan")), "layer_norm_eps must be a finite positive number"),
    (dict(layer_norm_eps=0.0), "layer_norm_eps must be a finite positive number"),
    (dict(initializer_range=float("inf")), "initializer_range must be a finite positive"),
    (dict(hidden_dropout="0.1"), r"hidden_dropout must be a number in \[0, 1\), got '0.1'"),
    (dict(attention_dropout=float("nan")), "attention_dropout must be a number in"),
    (dict(hidden_act=["gelu"]), r"hidden_act must be one of gelu, gelu_tanh, relu, got \['gelu'\]"),
])
def test_bert_config_refuses_absurd_values(fields, message):
    with pytest.raises(ConfigError, match=message):
        BertConfig(**fields)


def test_parameter_count_is_what_the_backbone_builds():
    from kbert.models.backbone import BertBackbone

    config = BertConfig(**{**SMALL, "num_layers": 2})
    assert parameter_count(config) == BertBackbone(config).count_params()
    assert parameter_count(BertConfig.preset("base")) == 109_482_240  # BERT-base, as HF counts
    assert parameter_count(BertConfig.preset("large")) < MAX_PARAMETERS
    assert BertConfig(num_layers=np.int64(3)).to_dict()["num_layers"] == 3  # plain int again


@pytest.mark.parametrize("change, message", [
    ({"num_hidden_layers": 10**9}, "num_hidden_layers must be a positive integer of at most 256"),
    ({"layer_norm_eps": float("nan")}, "layer_norm_eps must be a finite positive number, got nan"),
    ({"initializer_range": float("inf")}, "initializer_range must be a finite positive number"),
    ({"hidden_act": ["gelu"]}, r"hidden_act must be one of .*got \['gelu'\]"),
    ({"max_position_embeddings": None}, "max_position_embeddings must be a positive integer"),
])
def test_config_files_name_the_file_and_key_before_building(tmp_path, change, message):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**HF_SIZES, **change}))  # json writes NaN and Infinity
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=message) as error:
        BertConfig.from_hf_config(tmp_path)
    assert str(path) in str(error.value) and time.perf_counter() - start < 1


def test_keras_hub_preset_sizes_are_checked_before_keras_hub_builds():
    from kbert.config import check_keras_hub_config

    sizes = {"vocabulary_size": 30522, "num_layers": 12, "num_heads": 12, "hidden_dim": 768,
             "intermediate_dim": 3072, "dropout": 0.1, "max_sequence_length": 512,
             "num_segments": 2}
    check_keras_hub_config(sizes, "config.json")
    with pytest.raises(ConfigError, match="p/config.json: num_layers must be a positive "
                                          "integer of at most 256, got 100000"):
        check_keras_hub_config({**sizes, "num_layers": 100_000}, "p/config.json")
    with pytest.raises(ConfigError, match=r"dropout must be a number in \[0, 1\)"):
        check_keras_hub_config({**sizes, "dropout": float("nan")}, "p/config.json")


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000,
                                  '{"a": ' * 100_000 + "1" + "}" * 100_000])
def test_a_config_nested_absurdly_deep_is_refused(tmp_path, text):
    (tmp_path / "bert_config.json").write_text(text)
    with pytest.raises(ConfigError, match="nested too deeply"):
        BertConfig.from_google_config(tmp_path)


def _weights(config, seed=0):
    rng = np.random.default_rng(seed)
    return {n: rng.normal(size=s).astype("float32") for n, s in expected_shapes(config).items()}


@pytest.fixture
def hf_dir(tmp_path):
    """A small Hugging Face checkpoint and its weights; tests rewrite its safetensors."""
    config = BertConfig(**SMALL)
    weights = _weights(config)
    return write_hf_checkpoint(tmp_path / "hf", config, weights), weights


@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_hf_reader_refuses_non_float_tensors(hf_dir, dtype):
    path, weights = hf_dir
    safetensors.numpy.save_file({**weights, "pooler.dense.bias": weights[
        "pooler.dense.bias"].astype(dtype)}, str(path / "model.safetensors"))
    with pytest.raises(CheckpointError, match=f"tensor 'pooler.dense.bias' has dtype {dtype}"):
        read_hf_checkpoint(path)


@pytest.mark.parametrize("dtype", ["float16", ml_dtypes.bfloat16, "float64"])
def test_hf_reader_upcasts_other_floats_to_float32(hf_dir, dtype):
    path, weights = hf_dir
    stored = {n: w.astype(dtype) for n, w in weights.items()}
    stored["embeddings.position_ids"] = np.arange(16, dtype="int64")[None]  # HF's int buffer
    safetensors.numpy.save_file(stored, str(path / "model.safetensors"))
    _, read = read_hf_checkpoint(path)
    for name, value in stored.items():
        if name in read:
            assert read[name].dtype == np.float32
            np.testing.assert_array_equal(read[name], value.astype("float32"))
    assert "embeddings.position_ids" not in read


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_hf_reader_refuses_nan_and_infinite_weights(hf_dir, bad):
    path, weights = hf_dir
    weights["encoder.layer.0.output.dense.weight"][3, 2] = bad
    safetensors.numpy.save_file(weights, str(path / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"'encoder.layer.0.output.dense.weight' holds 1 "
                                              r"NaN or infinite value\(s\) of 128"):
        read_hf_checkpoint(path)


def _shard(path, weights, weight_map):
    """`path` as a sharded checkpoint: its weights split over two files, then `weight_map`."""
    (path / "model.safetensors").unlink()
    names = sorted(weights)
    for i, part in enumerate((names[::2], names[1::2])):
        safetensors.numpy.save_file({n: weights[n] for n in part},
                                    str(path / f"model-0000{i + 1}-of-00002.safetensors"))
    index = path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return index


def test_a_sharded_checkpoint_reads_like_a_single_file(hf_dir):
    path, weights = hf_dir
    names = sorted(weights)
    weight_map = {n: f"model-0000{1 + i % 2}-of-00002.safetensors" for i, n in enumerate(names)}
    _shard(path, weights, weight_map)
    _, read = read_hf_checkpoint(path)
    assert sorted(read) == names and all(np.array_equal(read[n], weights[n]) for n in names)


@pytest.mark.parametrize("entry, message", [
    ("../outside.safetensors", "is not a file name"),
    ("OUTSIDE", "is not a file name"),  # an absolute path
    ("sub/model.safetensors", "is not a file name"),
    ("..", "is not a file name"),
    (7, "is not a file name"),
    ("missing.safetensors", "names shard file.* that do not exist"),
])
def test_shard_index_entries_cannot_leave_the_checkpoint(hf_dir, tmp_path, entry, message):
    path, weights = hf_dir
    outside = tmp_path / "outside.safetensors"  # a valid file the index must not reach
    safetensors.numpy.save_file(weights, str(outside))
    entry = str(outside) if entry == "OUTSIDE" else entry
    index = _shard(path, weights, {"pooler.dense.bias": entry})
    with pytest.raises(CheckpointError, match=message) as error:
        read_hf_checkpoint(path)
    assert str(index) in str(error.value) and "pooler.dense.bias" in str(error.value) or \
        "do not exist" in str(error.value)


@pytest.mark.parametrize("index_text", [json.dumps({"weight_map": ["a"]}), "[]", "{",
                                        json.dumps({"weight_map": {}})])
def test_a_malformed_shard_index_is_a_checkpoint_error(hf_dir, index_text):
    path, weights = hf_dir
    _shard(path, weights, {}).write_text(index_text)
    with pytest.raises(CheckpointError, match="model.safetensors.index.json"):
        read_hf_checkpoint(path)


def test_google_reader_refuses_nan_weights(tmp_path):
    config = BertConfig(**SMALL)
    weights = _weights(config)
    weights["pooler.dense.weight"][0, 0] = np.nan
    write_google_checkpoint(tmp_path / "g", config, weights)
    with pytest.raises(CheckpointError, match="'bert/pooler/dense/kernel' holds 1 NaN"):
        read_google_checkpoint(tmp_path / "g")


@pytest.mark.parametrize("info, message", [
    ("[]", "run.json does not hold a JSON object"),
    ("{", "run.json is not valid JSON"),
    ("[" * 100_000 + "]" * 100_000, "run.json is nested too deeply"),
    (json.dumps({"task": "sentiment", "kind": "classification"}), "run.json lacks 'settings'"),
    (json.dumps({"task": "sentiment", "kind": "classification", "settings": []}),
     "'settings' must be a JSON object"),
    (json.dumps({"task": ["x"], "kind": "classification", "settings": {}}),
     "'task' must be a JSON string"),
    (json.dumps({"task": "x", "kind": "c", "settings": {}, "task_options": 3}),
     "'task_options' must be a JSON object"),
    (json.dumps({"task": "../../etc/passwd", "kind": "classification", "settings": {}}),
     "'task' '../../etc/passwd' is no task name"),
    (json.dumps({"task": "glue:SST-2", "kind": "c", "settings": {}}),
     "'kind' 'c' is none of classification, regression"),
])
def test_run_files_that_are_not_what_kbert_wrote(tmp_path, info, message):
    (tmp_path / "model.keras").write_bytes(b"")
    (tmp_path / "run.json").write_text(info)
    with pytest.raises(RunError, match=message):
        RunDirectory.open(tmp_path).info


def test_metrics_json_that_is_not_an_object(tmp_path):
    (tmp_path / "metrics.json").write_text("[]")
    with pytest.raises(RunError, match="metrics.json does not hold a JSON object"):
        RunDirectory(tmp_path).metrics


@pytest.mark.parametrize("fields, message", [
    (dict(learning_rate=float("nan")), "learning_rate must be positive and finite, got nan"),
    (dict(learning_rate=float("inf")), "learning_rate must be positive and finite, got inf"),
    (dict(clipnorm=float("nan")), "clipnorm must be positive and finite"),
    (dict(weight_decay=float("inf")), r"weight_decay must be a number in \[0, inf\]"),
    (dict(sequence_length=100_000), "sequence_length 100000 is longer than the model's 512"),
    (dict(bert_config=BertConfig(**SMALL), sequence_length=17), "model's 16 positions"),
    (dict(attention="cudnn"), "attention must be one of .*'flash'.*, got 'cudnn'"),
])
def test_pretrain_config_refuses(fields, message):
    with pytest.raises(ValueError, match=message):
        PretrainConfig("out", steps=3, **fields)


def test_pretrain_refuses_a_missing_corpus_before_it_creates_its_folder(tmp_path):
    from kbert.training.pretrain import pretrain

    with pytest.raises(FileNotFoundError, match="No corpus files at .*missing.txt"):
        pretrain(tmp_path / "run", steps=1, preset="tiny", corpus=str(tmp_path / "missing.txt"))
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("fields, message", [
    (dict(learning_rate=float("nan")), "learning_rate must be positive and finite"),
    (dict(learning_rate=0.0), "learning_rate must be positive and finite"),
    (dict(batch_size=True), "batch_size must be a positive integer, got True"),
    (dict(batch_size=0), "batch_size must be a positive integer"),
    (dict(max_train_examples=0), "max_train_examples must be a positive integer"),
    (dict(max_eval_examples=-4), "max_eval_examples must be a positive integer"),
    (dict(epochs=float("nan")), "epochs must be a positive integer, got nan"),
    (dict(warmup_fraction=2.0), r"warmup_fraction must be a finite number in \[0, 1\]"),
    (dict(weight_decay=float("nan")), "weight_decay must be a finite number"),
    (dict(seed=-1), "seed must be a non-negative integer"),
    (dict(validate="no"), "validate must be True, False or None, got 'no'"),
    (dict(keep_best=None), "keep_best must be True or False, got None"),
    (dict(attention="Flash"), "attention must be one of .*'flash'.*, got 'Flash'"),
    (dict(attention_dropout=1.0), r"attention_dropout must be a number in \[0, 1\), got 1.0"),
    (dict(hidden_dropout=float("nan")), r"hidden_dropout must be a number in \[0, 1\), got nan"),
    (dict(hidden_dropout=True), r"hidden_dropout must be a number in \[0, 1\), got True"),
])
def test_finetune_config_refuses(fields, message):
    with pytest.raises(ValueError, match=message):
        finetune_module.FinetuneConfig(**fields)


def test_finetune_checks_sequence_length_before_it_creates_anything(tmp_path):
    output = tmp_path / "run"
    with pytest.raises(ConfigError, match="sequence_length 100000 is longer than the "
                                          "model's 512 positions"):
        finetune_module.finetune(task="sentiment", init="tiny", steps=1,
                                 sequence_length=100_000, output_dir=str(output))
    with pytest.raises(ConfigError, match="sequence_length 384 .* model's 16 positions"):
        finetune_module.finetune(task="squad", init=_small_checkpoint(tmp_path), steps=1,
                                 output_dir=str(output))  # SQuAD's own default length
    assert not output.exists()


def _small_checkpoint(tmp_path):
    config = BertConfig(**SMALL)
    return str(write_hf_checkpoint(tmp_path / "small", config, _weights(config)))


def test_a_failed_finetune_leaves_no_directory_it_created(tmp_path, monkeypatch):
    """The failure is injected once the output directory exists (TensorBoard's logs/ in it),
    as when training runs out of memory: without the cleanup the directory stays."""
    def fail(*args, **kwargs):
        (output / "logs" / "train").mkdir(parents=True, exist_ok=True)
        raise RuntimeError("training failed")

    monkeypatch.setattr(finetune_module, "build_backbone", fail)
    output = tmp_path / "new" / "run"
    with pytest.raises(RuntimeError, match="training failed"):
        finetune_module.finetune(task="sentiment", init="tiny", steps=1, output_dir=str(output))
    assert not output.exists() and (tmp_path / "new").is_dir()
    output = tmp_path / "mine"  # the user's directory: refused before any work (kbert.outputs)
    (output / "notes").mkdir(parents=True)
    with pytest.raises(ValueError, match="exists and is not a kbert output"):
        finetune_module.finetune(config=finetune_module.FinetuneConfig(
            init="tiny", steps=1, output_dir=str(output)), task="sentiment")
    assert sorted(p.name for p in output.iterdir()) == ["notes"]
