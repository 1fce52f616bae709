"""Issue 76's damaged and hostile files, as a user meets them: a damaged, empty, random or
linked `model.keras`, a config.json that names `os.system`, a blank past the sequence length, a
request line nested 100,000 deep, a run.json whose task is a path, repeated label names and
vocabularies that `finetune` refuses. Each ends in one line, `kbert CMD: error: ...` naming the
file, exit status 2, and every file the command read stays as it was. The hostile configs run
in new `kbert` processes, as a user's shell would; the other refusals through `kbert_cli.main`
in this process, as do the served signature's rank check and the Hugging Face writer's file
modes."""

import hashlib
import json
import os
import pathlib
import shutil
import zipfile

import keras
import pytest
import tensorflow as tf

from kbert.config import BertConfig
from kbert.convert import save_hf
from kbert.models import BertBackbone, BertClassifier, BertPretrainer
from kbert.text import BertPreprocessor, BertTokenizer
from tests.test_cli_processes import KBERT, cli, run_together

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "movie", "was", "good"]
TINY = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_layers=1, num_heads=2,
                  intermediate_size=32, max_position_embeddings=64)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A small random sentiment run (no training: its model.keras is what `kbert finetune`
    saves), a masked-LM checkpoint (64 positions) and a Hugging Face encoder checkpoint, all
    on `VOCAB`."""
    from kbert.runs import RunDirectory
    from kbert.tasks import get_spec

    base = tmp_path_factory.mktemp("damaged")
    keras.utils.set_random_seed(0)
    spec = get_spec("sentiment")
    tokenizer = BertTokenizer(VOCAB)
    info = {"task": spec.name, "kind": spec.kind, "settings": {}, **spec.info()}
    RunDirectory(base / "run").save(spec.build(BertBackbone(TINY), tokenizer, 32, "finetune"),
                                    info, {})
    (base / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    save_hf(BertPretrainer(BertBackbone(TINY), use_nsp=False), base / "masked_lm",
            vocab_file=base / "vocab.txt")
    save_hf(BertBackbone(TINY), base / "encoder", vocab_file=base / "vocab.txt")
    return base


def snapshot(*paths):
    """{path: sha256 of its bytes, or the target of a link} of every file under `paths`."""
    found = {}
    for top in map(pathlib.Path, paths):
        for path in [top, *top.rglob("*")] if top.is_dir() else [top]:
            if path.is_symlink():
                found[str(path)] = f"-> {os.readlink(path)}"
            elif path.is_file():
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def refused(cases, inputs, capsys=None):
    """Runs each (command line after `kbert`, words its error must hold); each must exit 2 with
    one line, `kbert CMD: error: ...` holding its words, and leave every file under `inputs` as
    it was. With `capsys`, one after another through `kbert_cli.main` in this process (what a
    refusal needs); without, side by side in new processes."""
    before = snapshot(*inputs)
    if capsys is None:
        outputs = run_together(*(KBERT + command for command, _ in cases),
                               expect=[2] * len(cases))
    else:
        outputs = []
        for command, _ in cases:
            status, out, err = cli(capsys, *command)
            assert status == 2, (command, err[-3000:])
            outputs.append((out, err))
    for (command, words), (_, err) in zip(cases, outputs):
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"kbert {command[0]}: error: "), err
        for word in words:
            assert str(word) in lines[0], (word, lines[0])
    assert snapshot(*inputs) == before


def variant(work, tmp_path, name, edit):
    """A copy of the run as `tmp_path/name`, its model.keras changed by `edit(path)`."""
    copy = tmp_path / name
    shutil.copytree(work / "run", copy)
    edit(copy / "model.keras")
    return copy


def rezipped(**members):
    """An `edit` that writes the archive again with `members` (name: bytes) replaced."""
    def edit(path):
        with zipfile.ZipFile(path) as archive:
            files = {name: archive.read(name) for name in archive.namelist()}
        files.update(members)
        with zipfile.ZipFile(path, "w") as archive:
            for name, data in files.items():
                archive.writestr(name, data)
    return edit


def truncated_weights(path):
    with zipfile.ZipFile(path) as archive:
        weights = archive.read("model.weights.h5")
    rezipped(**{"model.weights.h5": weights[:len(weights) // 2]})(path)


def test_a_model_keras_with_truncated_weights_is_named_damaged(work, tmp_path, capsys):
    """predict, evaluate and export each ended in h5py's `OSError: Unable to synchronously
    open file (truncated file...)`."""
    damaged = variant(work, tmp_path, "truncated", truncated_weights)
    words = [f"{damaged}/model.keras is damaged: its weights cannot be read", "truncated file"]
    refused([(["predict", damaged, "--text", "x"], words), (["evaluate", damaged], words),
             (["export", damaged, tmp_path / "served"], words)], [damaged], capsys)
    assert not (tmp_path / "served").exists()


@pytest.mark.slow
def test_a_model_config_that_names_no_kbert_model_is_refused_and_runs_nothing(work, tmp_path):
    """A config.json naming `os.system`, `builtins.eval` or `subprocess.Popen`, or a JSON list,
    ended in `TypeError: Could not locate class` or `Expected 'config' to be a dict`."""
    marker = tmp_path / "ran"
    configs = {
        "system": {"module": "os", "class_name": "system",
                   "config": {"command": f"touch {marker}"}},
        "eval": {"module": "builtins", "class_name": "eval", "config": {"source": "1"}},
        "popen": {"module": "subprocess", "class_name": "Popen",
                  "config": {"args": ["touch", str(marker)]}},
        "list": [{"module": "os", "class_name": "system"}],
    }
    runs = {name: variant(work, tmp_path, name, rezipped(**{
        "config.json": json.dumps(config).encode()})) for name, config in configs.items()}
    said = {"system": "names os.system, not a kbert or Keras model",
            "eval": "names builtins.eval, not a kbert or Keras model",
            "popen": "names subprocess.Popen, not a kbert or Keras model",
            "list": "holds a JSON list, not an object"}
    refused([(["predict", path, "--text", "x"],
              [f"{path}/model.keras holds no kbert model config: its config.json", said[name]])
             for name, path in runs.items()], runs.values())
    assert not marker.exists()


def test_a_model_keras_that_is_random_empty_or_a_link_says_which(work, tmp_path, capsys):
    """Each got "File not found: filepath=..." (a link was followed)."""
    random = variant(work, tmp_path, "random", lambda p: p.write_bytes(os.urandom(4096)))
    empty = variant(work, tmp_path, "empty", lambda p: p.write_bytes(b""))

    def link(path):
        path.unlink()
        path.symlink_to(work / "run" / "model.keras")

    linked = variant(work, tmp_path, "linked", link)
    refused([
        (["predict", random, "--text", "x"],
         [f"{random}/model.keras is damaged: not a .keras archive"]),
        (["evaluate", empty], [f"{empty}/model.keras is empty (0 bytes)"]),
        (["export", linked, tmp_path / "served"],
         [f"{linked}/model.keras is a symbolic link, refused"]),
    ], [random, empty, linked, work / "run"], capsys)
    assert not (tmp_path / "served").exists()


def test_a_blank_past_the_sequence_length_is_one_line(work, tmp_path, capsys):
    """A masked LM's `[MASK]` past its 64 positions ended in an InvalidArgumentError with a
    stack and the whole text."""
    late = "the " * 70 + "[MASK]"
    requests = tmp_path / "requests.jsonl"
    requests.write_text(json.dumps({"text": "a [MASK]"}) + "\n" + json.dumps({"text": late})
                        + "\n", encoding="utf-8")
    past = "is past the sequence length 64: it falls after the first 62 tokens"
    refused([(["predict", work / "masked_lm", "--text", late], ["in the text", past]),
             (["predict", work / "masked_lm", "--input", requests],
              [f"{requests}: A blank ([MASK]) in line 2", past])],
            [work / "masked_lm", requests], capsys)


def test_request_lines_nested_too_deeply_or_malformed_name_the_file(work, tmp_path, capsys):
    """A line of 100,000 nested brackets ended in RecursionError; a malformed line's error
    named the line but not the file."""
    deep, malformed = tmp_path / "deep.jsonl", tmp_path / "malformed.jsonl"
    deep.write_text("[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    malformed.write_text('{"text": "fine"}\n{"text": \n', encoding="utf-8")
    refused([(["predict", work / "run", "--input", deep], [f"{deep} line 1: nested too deeply"]),
             (["predict", work / "run", "--input", malformed],
              [f"{malformed} line 2: not JSON"])], [work / "run", deep, malformed], capsys)


def test_a_run_json_task_that_is_a_path_is_refused_on_every_read(work, tmp_path, capsys):
    """`predict` answered for a run whose run.json task is `../../etc/passwd`."""
    run = variant(work, tmp_path, "run", lambda path: None)
    info = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**info, "task": "../../etc/passwd"}))
    words = [f"{run}/run.json: 'task' '../../etc/passwd' is no task name"]
    refused([(["predict", run, "--text", "x"], words), (["evaluate", run], words),
             (["export", run, tmp_path / "served"], words),
             (["export", work / "run", tmp_path / "labelled", "--labels", "a,a"],
              ["The label names repeat 'a'"])], [run, work / "run"], capsys)
    assert not (tmp_path / "served").exists() and not (tmp_path / "labelled").exists()


def test_convert_refuses_the_vocabularies_finetune_refuses(work, tmp_path, capsys):
    """`kbert convert` copied a vocabulary without [CLS], empty, with a repeated token or not
    UTF-8, and exited 0."""
    vocabularies = {
        "no_cls": "\n".join(t for t in VOCAB if t != "[CLS]") + "\n",
        "empty": "",
        "repeated": "\n".join(VOCAB[:-1] + ["the"]) + "\n",
        "latin1": "\n".join(VOCAB[:-1]) + "\ncaf\xe9\n",
    }
    said = {"no_cls": "lacks the special tokens [CLS]", "empty": "is empty",
            "repeated": "repeats tokens 'the' (lines 6 and 10)",
            "latin1": "is not UTF-8 text (line 10"}
    sources = {}
    for name, text in vocabularies.items():
        sources[name] = tmp_path / name
        shutil.copytree(work / "encoder", sources[name])
        (sources[name] / "vocab.txt").write_bytes(text.encode("latin-1"))
    formats = dict(zip(vocabularies, ("huggingface", "google") * 2))
    refused([(["convert", sources[name], tmp_path / f"{name}_out", "--to", formats[name]],
              [f"the vocabulary '{sources[name]}/vocab.txt' {said[name]}"])
             for name in vocabularies], sources.values(), capsys)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith("_out")]


@pytest.mark.slow
def test_serving_default_refuses_strings_of_another_rank(tmp_path):
    """A loader does not enforce a signature's declared shapes: `text` of rank 2, or a scalar,
    was answered as if it were a batch."""
    from kbert.export import export_saved_model

    keras.utils.set_random_seed(0)
    model = BertClassifier(BertBackbone(TINY), num_classes=2)
    preprocessor = BertPreprocessor(BertTokenizer(VOCAB), sequence_length=16)
    path = export_saved_model(model, tmp_path / "served", preprocessor=preprocessor,
                              warmup_texts=[])
    serve = tf.saved_model.load(str(path)).signatures["serving_default"]
    assert serve(text=tf.constant(["the movie", "good"]))["label"].shape == [2]
    for text, shape in ((tf.constant([["the movie"]]), r"\[1,1\]"),
                        (tf.constant("the movie"), r"\[\]")):
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=rf"Shape of tensor text {shape} is not compatible with "
                                 r"expected shape \[\?\]"):
            serve(text=text)


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600)],
                         ids=["umask-022", "umask-077"])
def test_hugging_face_files_are_written_with_the_users_umask(work, tmp_path, umask, mode):
    """safetensors wrote model.safetensors 0600 whatever the umask."""
    old = os.umask(umask)
    try:
        save_hf(BertBackbone(TINY), tmp_path / "hf", vocab_file=work / "vocab.txt")
    finally:
        os.umask(old)
    for name in ("config.json", "model.safetensors", "vocab.txt"):
        assert (tmp_path / "hf" / name).stat().st_mode & 0o777 == mode, name
