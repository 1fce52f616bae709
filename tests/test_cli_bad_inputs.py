"""Issue 23's CLI findings, run as a user runs them, in new processes: every bad flag, bad file
and absurd setting ends in `kbert CMD: error: <one line>` naming the flag or file, exit status
2, no traceback, and no output directory left behind.

The cheap cases (they fail at parse time or on a file), `kbert export` and `kbert predict`
on a small run share one new process that calls `kbert_cli.main` (what the `kbert` script
runs) once per command line;
`kbert finetune --sequence-length 100000` runs the real script in its own process beside it."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import safetensors.numpy

from kbert.config import BertConfig
from kbert.convert import write_hf_checkpoint
from kbert.convert.weights import expected_shapes

_SCRIPT = os.path.join(os.path.dirname(sys.executable), "kbert")
KBERT = [_SCRIPT] if os.path.isfile(_SCRIPT) else [sys.executable, "-m", "kbert_cli"]

_DRIVER = """
import contextlib, io, json, sys
import kbert_cli as cli
from kbert.config import BertConfig
from kbert.models.pretrained import load_backbone_and_tokenizer
from kbert.runs import RunDirectory
from kbert.tasks import get_spec

# A run directory of a small random model (64 positions) for `kbert export`: no training needed.
spec = get_spec("sentiment")
backbone, tokenizer = load_backbone_and_tokenizer(BertConfig(
    hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32, max_position_embeddings=64))
info = {"task": spec.name, "kind": spec.kind, "settings": {}, **spec.info()}
RunDirectory(sys.argv[2]).save(spec.build(backbone, tokenizer, 32, "finetune"), info, {})
results = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as exit:
            code = exit.code
        except BaseException as error:
            code, _ = "Traceback", print(f"Traceback: {error!r}", file=err)
    results.append([code, err.getvalue()])
print(json.dumps(results))
"""


def _files(tmp_path):
    """The bad files the cases read."""
    (tmp_path / "malformed.yaml").write_text("steps: [1\nbatch_size: 8\n")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "list.yaml").write_text("- steps\n")
    (tmp_path / "a_directory.yaml").mkdir()
    (tmp_path / "one_document.txt").write_text("One sentence a line.\nThe same document.\n")
    run = tmp_path / "not_a_run"
    run.mkdir()
    (run / "model.keras").write_bytes(b"")
    (run / "run.json").write_text("[]")
    config = BertConfig(vocab_size=50, hidden_size=8, num_layers=1, num_heads=2,
                        intermediate_size=16, max_position_embeddings=16)
    weights = {n: np.zeros(s, "float32") for n, s in expected_shapes(config).items()}
    for name, change in (("layers", {"num_hidden_layers": 10**9}),
                         ("eps", {"layer_norm_eps": float("nan")}),
                         ("act", {"hidden_act": ["gelu"]})):
        path = write_hf_checkpoint(tmp_path / name, config, weights)
        hf = json.loads((path / "config.json").read_text())
        (path / "config.json").write_text(json.dumps({**hf, **change}))
    path = write_hf_checkpoint(tmp_path / "index", config, weights)
    (path / "model.safetensors").unlink()
    safetensors.numpy.save_file(weights, str(tmp_path / "outside.safetensors"))
    (path / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {n: "../outside.safetensors" for n in weights}}))
    ints = write_hf_checkpoint(tmp_path / "ints", config, weights)
    safetensors.numpy.save_file({n: w.astype("int64") for n, w in weights.items()},
                                str(ints / "model.safetensors"))
    write_hf_checkpoint(tmp_path / "exact_gelu", config, weights)  # keras-hub has no erf GELU
    write_hf_checkpoint(tmp_path / "decoder", config, weights, causal=True)  # left-to-right
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "notes.txt").write_text("the user's own file")
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    (pickled / "config.json").write_text((tmp_path / "exact_gelu" / "config.json").read_text())
    (pickled / "pytorch_model.bin").write_bytes(b"never unpickled")
    (tmp_path / "served_v" / "1").mkdir(parents=True)
    (tmp_path / "empty").mkdir()
    for n, lines in enumerate(PREDICT_FILES):
        (tmp_path / f"requests_{n}.jsonl").write_text(lines, encoding="utf-8")
    huge = tmp_path / "huge_keras_hub"
    huge.mkdir()
    (huge / "model.weights.h5").write_bytes(b"")
    (huge / "config.json").write_text(json.dumps({
        "module": "keras_hub.src.models.bert.bert_backbone", "class_name": "BertBackbone",
        "config": {"vocabulary_size": 50, "num_layers": 100_000, "num_heads": 2,
                   "hidden_dim": 8, "intermediate_dim": 16}}))


# `kbert predict --input` files with a malformed line, and what the error says of it.
PREDICT_FILES = {
    '{"text": "fine"}\n{"text": "good"\n': "line 2: not JSON",
    '{"text": "fine"}\n["good"]\n': "line 2: expected a JSON object",
    '{"text": "fine"}\n{"txt": "good"}\n': 'line 2: unknown key(s) "txt"',
    '{"text": 3}\n': 'line 1: "text" must be a string',
    '{"text": "a"}\n\n{"text": "b", "text_pair": "c"}\n':
        'line 3: keys "text", "text_pair" differ from line 1\'s ("text")',
    '{"text": "a", "text_pair": "b"}\n': 'single sentences: "text_pair" does not apply',
}

# (command line, what the one error line must say); {t} is the test's folder.
CASES = [
    *((f"predict {{t}}/small_run --input {{t}}/requests_{n}.jsonl --output {{t}}/answers_{n}",
       re.escape(words)) for n, words in enumerate(PREDICT_FILES.values())),
    ("predict {t}/small_run --text x --input {t}/requests_0.jsonl", "leave out --text"),
    ("predict {t}/small_run --text x --batch-size 8", "--batch-size go with --input"),
    *((f"{command} {{t}}/empty{rest}", "empty holds no model.keras or run.json: give a .kbert "
                                        "finetune. output directory, or a checkpoint directory")
      for command, rest in (("evaluate", ""), ("predict", " --text x"),
                            ("export", " {t}/empty_out"))),
    ("finetune --config {t}/malformed.yaml", r"--config \S*malformed.yaml is not valid YAML"),
    ("finetune --config {t}/a_directory.yaml", "a_directory.yaml: is a directory"),
    ("finetune --config {t}/deep.json", "deep.json is nested too deeply"),
    ("pretrain --config {t}/list.yaml", "list.yaml must hold a mapping"),
    ("finetune --batch-size 0", "argument --batch-size: takes a positive integer, not '0'"),
    ("finetune --batch-size -4", "argument --batch-size: takes a positive integer, not '-4'"),
    ("finetune --max-train-examples 0", "argument --max-train-examples: takes a positive"),
    ("finetune --max-eval-examples 0", "argument --max-eval-examples: takes a positive"),
    ("finetune --learning-rate nan", "argument --learning-rate: takes a finite number, not 'nan'"),
    ("pretrain --steps 5 --learning-rate inf", "argument --learning-rate: takes a finite"),
    ("pretrain --steps 5 --learning-rate=-1e-4", "argument --learning-rate: takes a positive"),
    ("pretrain --steps 5 --sequence-length 100000 --output {t}/pretrain_out",
     "--sequence-length 100000 is longer than the model's 512 positions"),
    ("pretrain --steps 5 --corpus {t}/one_document.txt --output {t}/pretrain_out",
     "The corpus holds 1 document.s.; it needs at least two .one is held out.. In a file of "
     "one sentence a line, a blank line ends a document"),
    ("pretrain --steps 5 --causal --whole-word --output {t}/ltr_out",
     "--causal trains a left-to-right LM on every next token; --whole-word and"),
    ("evaluate {t}/not_a_run", r"not_a_run/run.json does not hold a JSON object"),
    # an existing run is replaced only with --overwrite; a file is no output directory
    ("finetune --preset tiny --output {t}/small_run",
     "small_run holds a finished 'sentiment' run; pass --overwrite to train afresh"),
    ("finetune --preset tiny --output {t}/list.yaml", "list.yaml is a file, not a directory"),
    ("evaluate {t}/small_run --output {t}/list.yaml",
     "list.yaml is a file, not a directory for --output"),
    # a target that is a file, or inside one, named before the model loads; never replaced
    ("export {t}/small_run {t}/list.yaml", "list.yaml is a file, not a directory for the "
                                           "model's versions"),
    ("export {t}/small_run {t}/list.yaml/1", "list.yaml is a file, not a directory for the "
                                             "model's versions .it would go inside"),
    ("convert {t}/exact_gelu {t}/list.yaml --to google --overwrite",
     "list.yaml is a file, not a directory"),
    # what is converted is never what is replaced (with --overwrite the run was gone)
    ("convert {t}/small_run {t}/small_run --to huggingface --overwrite",
     r"DEST \S+small_run is SOURCE \S+small_run: writing it would replace what it is"),
    ("convert {t}/exact_gelu {t} --to google --overwrite", r"DEST \S+ holds SOURCE"),
    # options of another task, as the command's flags
    ("finetune --preset tiny --batching length --output {t}/opt_out",
     "Task 'sentiment' takes no options; got --batching 'length'"),
    ("finetune --task squad --preset tiny --batching random --output {t}/opt_out",
     "Task 'squad' takes no option --batching 'random'; its options: --doc-stride"),
    # a kernel that this backend cannot run (flash is JAX's), named before any training
    ("finetune --preset tiny --steps 1 --attention flash --output {t}/flash_out",
     "attention_implementation='flash' needs the JAX backend; Keras runs on 'tensorflow'"),
    ("convert {t}/layers {t}/out --to google",
     r"layers/config.json: num_hidden_layers must be a positive integer of at most 256"),
    ("convert {t}/eps {t}/out --to google", r"eps/config.json: layer_norm_eps must be a finite"),
    ("convert {t}/act {t}/out --to google", r"act/config.json: hidden_act must be one of"),
    ("convert {t}/index {t}/out --to google",
     r"model.safetensors.index.json: weight_map\['\S+'\] = '../outside.safetensors' is not"),
    ("convert {t}/ints {t}/out --to google", "has dtype int64; weights must be floating point"),
    ("export {t}/small_run {t}/served --sequence-length 100000", "--sequence-length.*100000.*64"),
    # the library's Python arguments are named as the command's flags
    ("export {t}/small_run {t}/served_v --version 1", "already exists.*Pass --overwrite to"),
    ("convert {t}/exact_gelu {t}/keep --to google", "holds other files; pass --overwrite to"),
    ("convert {t}/pickled {t}/out --to google", "pickle file.*pass --allow-pickle if you trust"),
    # a refused conversion leaves the destination it was allowed to overwrite as it was
    ("convert {t}/exact_gelu {t}/keep --to keras_hub --overwrite",
     "cannot compute this model exactly.*Pass --allow-approximation to convert anyway"),
    ("convert {t}/decoder {t}/out --to google", "decoder is a left-to-right .is_decoder. model"),
    ("convert {t}/huge_keras_hub {t}/out --to google",
     r"huge_keras_hub/config.json: num_layers must be a positive integer of at most 256"),
]


def _one_error_line(code, stderr, command, message):
    lines = [line for line in stderr.splitlines() if line.strip()]  # TF's C++ log included
    assert code == 2 and "Traceback" not in stderr, (command, code, stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith(f"kbert {command.split()[0]}: error: "), lines
    assert re.search(message, lines[0]), (message, lines[0])


def test_bad_flags_and_files_end_in_one_error_line(tmp_path):
    _files(tmp_path)
    commands = [c.format(t=tmp_path) for c, _ in CASES]
    driver = subprocess.Popen([sys.executable, "-c", _DRIVER,
                               json.dumps([c.split() for c in commands]),
                               str(tmp_path / "small_run")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finetune = _start(KBERT + ["finetune", "--preset", "tiny", "--steps", "1",
                               "--sequence-length", "100000", "--output", tmp_path / "ft_out"])
    out, err = driver.communicate(timeout=600)
    assert driver.returncode == 0, err[-3000:]
    for command, (_, message), (code, stderr) in zip(commands, CASES, json.loads(
            out.strip().splitlines()[-1])):
        _one_error_line(code, stderr, command, message)
    assert not (tmp_path / "pretrain_out").exists() and not (tmp_path / "out").exists()
    assert not (tmp_path / "flash_out").exists() and not (tmp_path / "opt_out").exists()
    assert [p.name for p in (tmp_path / "keep").iterdir()] == ["notes.txt"]
    assert (tmp_path / "list.yaml").is_file() and (tmp_path / "small_run" / "run.json").is_file()
    assert not any((tmp_path / "served").glob("[0-9]*"))
    assert not list(tmp_path.glob("answers_*")) and not (tmp_path / "empty_out").exists()

    _, err = finetune.communicate(timeout=600)
    _one_error_line(finetune.returncode, err, "finetune", "--sequence-length 100000 is longer "
                    "than the model's 512 positions")
    assert not (tmp_path / "ft_out").exists()


def _start(command):
    return subprocess.Popen([str(c) for c in command], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
