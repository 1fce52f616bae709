import importlib
import json

import numpy as np
import pytest
import safetensors.numpy
import tensorflow as tf

import kbert_cli as cli
from kbert.training.finetune_config import FinetuneConfig

# The modules, not the functions of the same name that kbert.training exports.
finetune_module = importlib.import_module("kbert.training.finetune")
pretrain_module = importlib.import_module("kbert.training.pretrain")


def test_convert_round_trip_between_formats(minilm_dir, tmp_path, capsys):
    assert cli.main(["convert", "minilm_l6_h384_uncased", str(tmp_path / "g"), "--to", "google"]) == 0
    assert cli.main(["convert", str(tmp_path / "g"), str(tmp_path / "h"), "--to", "huggingface"]) == 0
    assert "6 layers, hidden 384, gelu" in capsys.readouterr().out
    original = safetensors.numpy.load_file(str(minilm_dir / "model.safetensors"))
    again = safetensors.numpy.load_file(str(tmp_path / "h" / "model.safetensors"))
    original.pop("embeddings.position_ids")
    assert set(original) == set(again)
    assert all(np.array_equal(original[k], again[k]) for k in original)
    assert (tmp_path / "h" / "vocab.txt").is_file()


def test_convert_writes_the_vocabulary_of_a_tokenizer_json_directory(minilm_dir, tmp_path):
    """A transformers 5 directory (tokenizer.json, no vocab.txt) converts with its
    vocabulary: the Google copy gets the vocab.txt the original had."""
    transformers = pytest.importorskip("transformers")
    source = tmp_path / "hf5"
    transformers.BertModel.from_pretrained(str(minilm_dir)).save_pretrained(str(source))
    transformers.AutoTokenizer.from_pretrained(str(minilm_dir)).save_pretrained(str(source))
    assert not (source / "vocab.txt").exists()
    assert cli.main(["convert", str(source), str(tmp_path / "g"), "--to", "google"]) == 0
    written = (tmp_path / "g" / "vocab.txt").read_text(encoding="utf-8").split()
    assert written == (minilm_dir / "vocab.txt").read_text(encoding="utf-8").split()


def test_convert_errors_say_what_is_wrong(tmp_path, capsys):
    assert cli.main(["convert", "base", str(tmp_path / "x"), "--to", "google"]) == 2
    assert "size preset without weights" in capsys.readouterr().err
    assert cli.main(["convert", "minilm_l6_h384_uncased", str(tmp_path / "k"),
                     "--to", "keras_hub"]) == 2
    assert "cannot compute this model exactly" in capsys.readouterr().err


def test_vocab_trains_bert_layout(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The cat sat on the mat.\n\nDogs and cats are friends.\nThe mat was red.\n")
    out = tmp_path / "vocab.txt"
    assert cli.main(["vocab", "--corpus", str(corpus), "--size", "150", "--output", str(out)]) == 0
    tokens = out.read_text().splitlines()
    assert tokens[0] == "[PAD]" and tokens[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert "the" in tokens and len(tokens) <= 150


@pytest.mark.slow
def test_pretrain_from_the_command_line(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(  # one sentence per line, blank line between documents
        "\n".join(f"Sentence {i} of document {d} talks about topic {d % 3}." for i in range(8))
        for d in range(80)) + "\n")
    out = tmp_path / "run"
    assert cli.main(["pretrain", "--preset", "tiny", "--corpus", str(corpus), "--steps", "2",
                     "--batch-size", "4", "--sequence-length", "32", "--checkpoint-every", "1",
                     "--profile-batches", "1,2", "--output", str(out)]) == 0
    assert "held-out: mlm_accuracy" in capsys.readouterr().out
    assert (out / "metrics.json").is_file() and (out / "model" / "config.json").is_file()
    assert list(out.glob("logs/**/plugins/profile/*/*.xplane.pb"))
    assert cli.main(["pretrain", "--preset", "tiny", "--corpus", str(corpus), "--steps", "2",
                     "--batch-size", "4", "--sequence-length", "32", "--causal", "--no-nsp",
                     "--output", str(tmp_path / "ltr")]) == 0
    assert "held-out: next_token_accuracy" in capsys.readouterr().out
    assert json.loads((tmp_path / "ltr/model/config.json").read_text())["is_decoder"]


@pytest.mark.parametrize("text", ["0,3", "a,b", "1,2,3"])
def test_profile_batches_must_be_one_or_two_batch_numbers(text, capsys):
    with pytest.raises(SystemExit):
        cli.parse(cli.build_parser(), ["pretrain", "--profile-batches", text])
    assert "FIRST,LAST" in capsys.readouterr().err


def test_config_file_gives_defaults_that_flags_override(tmp_path):
    yaml_file = tmp_path / "pretrain.yaml"
    yaml_file.write_text("# a reproducible run\npreset: tiny\nsteps: 50\nbatch-size: 8\n"
                         "learning_rate: 3e-4\nwhole_word: true\noptimizer: lamb\n")
    args = cli.parse(cli.build_parser(), ["pretrain", "--config", str(yaml_file),
                                          "--batch-size", "4"])
    assert (args.preset, args.steps, args.epochs, args.batch_size) == ("tiny", 50, None, 4)
    assert args.learning_rate == 3e-4 and args.whole_word and args.optimizer == "lamb"
    assert args.sequence_length == 128  # neither file nor flag: the parser's default

    # A flag of an exclusive group (--steps | --epochs, --preset | --init) replaces the file's.
    args = cli.parse(cli.build_parser(), ["pretrain", "--config", str(yaml_file),
                                          "--epochs", "2", "--init", "ckpt"])
    assert (args.steps, args.epochs, args.preset, args.init) == (None, 2, "mini", "ckpt")

    json_file = tmp_path / "finetune.json"
    json_file.write_text(json.dumps({"task": "qnli", "max-train-examples": 500, "seed": 3,
                                     "init": "random:minilm_l6_h384_uncased"}))
    args = cli.parse(cli.build_parser(), ["finetune", "--preset", "tiny", "--seed", "4",
                                          "--config", str(json_file)])
    assert (args.task, args.max_train_examples, args.seed) == ("qnli", 500, 4)
    assert (args.init, args.preset) == (None, "tiny")


def test_config_file_runs_the_command(tmp_path, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(finetune_module, "finetune",
                        lambda **kwargs: calls.append(kwargs) or {"accuracy": 0.5})
    config = tmp_path / "run.yml"
    config.write_text("task: mmlu\nsteps: 60\nbatch_size: 8\nlearning-rate: 2.0e-5\n")
    assert cli.main(["finetune", "--config", str(config), "--steps", "5"]) == 0
    assert "dev: accuracy 0.5000" in capsys.readouterr().out
    assert calls[0]["task"] == "mmlu" and calls[0]["steps"] == 5
    assert calls[0]["batch_size"] == 8 and calls[0]["learning_rate"] == 2e-5


def test_finetune_flags_reach_the_driver(monkeypatch):
    calls = []
    monkeypatch.setattr(finetune_module, "finetune",
                        lambda **kwargs: calls.append(kwargs) or {"accuracy": 0.5})
    assert cli.main(["finetune", "--attention-images", "A fine film."]) == 0
    assert calls[0]["attention_sentence"] == "A fine film." and calls[0]["xla"] is None  # kbert decides by backend
    assert cli.main(["finetune", "--task", "conll", "--xla", "--mixed-precision", "fp16"]) == 0
    assert calls[1]["task"] == "conll" and calls[1]["xla"] is True
    assert calls[1]["task_options"] == {}
    assert cli.main(["finetune", "--mixed-precision", "bf16"]) == 0
    assert [c["mixed_precision"] for c in calls] == [None, "fp16", "bf16"]
    with pytest.raises(SystemExit):
        cli.main(["finetune", "--mixed-precision", "int8"])
    assert cli.main(["finetune", "--task", "conll", "--batching", "random"]) == 0
    assert calls[-1]["task_options"] == {"batching": "random"}
    assert calls[-1]["validate"] is None  # the default: dev scored after every epoch...
    assert FinetuneConfig(validate=None).validates  # ...by Keras, or by --keep-best alone
    assert not FinetuneConfig(validate=None, keep_best=True).validates
    assert cli.main(["finetune", "--no-validation"]) == 0
    assert calls[-1]["validate"] is False
    assert cli.main(["finetune", "--validation", "--keep-best"]) == 0
    assert calls[-1]["validate"] is True and calls[-1]["keep_best"] is True
    assert calls[-1]["attention"] == "auto"  # kbert's choice by backend and device
    assert cli.main(["finetune", "--attention", "flash"]) == 0
    assert calls[-1]["attention"] == "flash"
    assert (calls[-1]["hidden_dropout"], calls[-1]["attention_dropout"]) == (None, None)
    assert cli.main(["finetune", "--attention-dropout", "0", "--hidden-dropout", "0.2"]) == 0
    assert (calls[-1]["hidden_dropout"], calls[-1]["attention_dropout"]) == (0.2, 0.0)
    for bad in ("1", "-0.1", "nan"):
        with pytest.raises(SystemExit):
            cli.main(["finetune", "--attention-dropout", bad])


def test_pretrain_attention_flag_reaches_the_driver(monkeypatch):
    calls = []
    monkeypatch.setattr(pretrain_module, "pretrain",
                        lambda *args, **kwargs: calls.append(kwargs) or {"mlm_accuracy": 0.1})
    assert cli.main(["pretrain", "--steps", "1"]) == 0
    assert cli.main(["pretrain", "--steps", "1", "--attention", "einsum"]) == 0
    assert [c["attention"] for c in calls] == ["auto", "einsum"]


def test_attention_images_are_refused_for_span_tasks(capsys):
    assert cli.main(["finetune", "--task", "squad", "--preset", "tiny", "--steps", "1",
                     "--max-train-examples", "8", "--max-eval-examples", "8",
                     "--attention-images", "A fine film."]) == 2
    assert "sentence and pair tasks, not with squad" in capsys.readouterr().err


def test_config_file_errors_name_the_key(tmp_path, capsys):
    config = tmp_path / "bad.yaml"
    config.write_text("steps: 10\nbatch_sise: 8\n")
    assert cli.main(["finetune", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "unknown option 'batch_sise' for `kbert finetune`" in err
    assert "valid options: task, init, preset, epochs, steps, batch-size," in err
    for text, message in (("steps: many\n", "steps takes an integer, not 'many'"),
                          ("optimizer: sgd\n", "optimizer is one of adamw, lamb, not 'sgd'"),
                          ("no_nsp: 1\n", "no_nsp is a switch: give true or false"),
                          ("steps: 1\nepochs: 2\n", "give only one of steps, epochs"),
                          ("- steps\n", "must hold a mapping")):
        config.write_text(text)
        assert cli.main(["pretrain", "--config", str(config)]) == 2
        assert message in capsys.readouterr().err
    assert cli.main(["pretrain", "--config", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml" in capsys.readouterr().err


def test_out_of_memory_says_which_batch_size_to_try(monkeypatch, capsys):
    def out_of_memory(**kwargs):
        raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor")

    monkeypatch.setattr(finetune_module, "finetune", out_of_memory)
    assert cli.main(["finetune", "--batch-size", "32"]) == 2
    err = capsys.readouterr().err
    assert "kbert finetune: error: ran out of memory at batch size 32" in err
    assert "--batch-size 16" in err

    def no_memory(*args, **kwargs):
        raise MemoryError()

    monkeypatch.setattr(pretrain_module, "pretrain", no_memory)
    assert cli.main(["pretrain", "--steps", "5", "--batch-size", "8"]) == 2
    assert ("e.g. --batch-size 4 --gradient-accumulation-steps 2"
            in capsys.readouterr().err)
    assert cli.main(["pretrain", "--steps", "5", "--batch-size", "1"]) == 2
    assert "shorter --sequence-length" in capsys.readouterr().err


def test_finetune_help_reads_as_written(capsys):
    with pytest.raises(SystemExit):
        cli.main(["finetune", "--help"])
    assert "(AdamW, 10% warmup, linear decay)" in capsys.readouterr().out


def test_library_errors_name_the_commands_flags():
    from kbert_cli import build_parser
    from kbert_cli.messages import in_cli_terms

    export = build_parser().commands["export"]
    assert in_cli_terms("Pass overwrite=True to replace it.", export) == \
        "Pass --overwrite to replace it."
    assert in_cli_terms("`sequence_length`=600: raise sequence_length", export) == \
        "--sequence-length=600: raise --sequence-length"
    assert in_cli_terms("sequence_length=600 leaves no room", export) == \
        "--sequence-length 600 leaves no room"
    # plain words that are also option names, and Python names the command has no flag for,
    # stay as they are
    assert in_cli_terms("the version and overwrite words; causal=True", export) == \
        "the version and overwrite words; causal=True"
    assert in_cli_terms("pass allow_pickle=True", export) == "pass --allow-pickle"
    # a JSON key in double quotes, as a file spells it, stays a key
    predict = build_parser().commands["predict"]
    assert in_cli_terms('keys "text_pair" and text_pair', predict) == \
        'keys "text_pair" and --text-pair'


@pytest.mark.slow
def test_convert_help_examples_run_as_written(minilm_dir, tmp_path, monkeypatch):
    """`kbert convert --help` names only sources that exist: its examples run in order."""
    monkeypatch.chdir(tmp_path)
    epilog = cli.build_parser().commands["convert"].epilog
    examples = [line.split("#")[0].split()[1:] for line in epilog.splitlines()
                if line.strip().startswith("kbert convert")]
    assert len(examples) == 4
    for argv in examples:
        assert cli.main(argv) == 0, argv
    assert (tmp_path / "out" / "minilm_hub" / "tokenizer.json").is_file()
    assert (tmp_path / "out" / "minilm_tfhub" / "encoder" / "saved_model.pb").is_file()
