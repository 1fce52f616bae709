"""Nothing a user owns is lost: every command that writes follows `kbert.outputs`' rule. Each
case runs the real `kbert` command on real files (refusals through `kbert_cli.main` in this
process, runs that train in new processes) and checks the exit status, a one-line error, and
that the user's files are untouched (sha256 before and after)."""

import hashlib
import json
import os
import pathlib
import subprocess

import pytest

from kbert import outputs
from tests.test_cli_processes import KBERT, cli, sentiment_run  # noqa: F401  (a fixture)


def hashes(*folders):
    """{path: sha256} of every file under `folders`, and the links there with their targets."""
    found = {}
    for folder in map(pathlib.Path, folders):
        paths = [folder] if folder.is_file() else sorted(folder.rglob("*"))
        for path in paths:
            if path.is_symlink():
                found[str(path)] = "-> " + os.readlink(path)
            elif path.is_file():
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def user_folder(path, *names):
    """A folder of the user's: a file for each name (`a/b` makes a subfolder)."""
    for name in names:
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(f"the user's {name}\n")
    return path


def refused(commands, cwd, home, capsys, monkeypatch):
    """Runs the commands (`kbert_cli.main`, in this process: a refusal comes before any work,
    so a new process adds nothing) in the folder `cwd` with `home` as the home folder; each
    must exit 2 with one `kbert CMD: error:` line."""
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("HOME", str(home))
    errors = []
    for command in commands:
        status, _, err = cli(capsys, *command)
        assert status == 2, f"{command} exited {status}:\n{err[-3000:]}"
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"kbert {command[0]}: error: "), err
        errors.append(lines[0])
    return errors


TINY = ["--task", "sentiment", "--preset", "tiny", "--steps", "2", "--batch-size", "8",
        "--max-eval-examples", "16"]


def test_training_never_writes_into_a_folder_of_the_users(tmp_path, capsys, monkeypatch):
    """finetune / pretrain into a folder that is not their output, the home folder, the
    current folder, or one holding an input: refused by name, with or without --overwrite."""
    mine = user_folder(tmp_path / "mine", "metrics.json", "model.keras", "checkpoints/a",
                       "notes.txt")
    home = user_folder(tmp_path / "home", "Documents/cv.txt", ".bashrc")
    pre = user_folder(tmp_path / "pre", "model/weights.bin", "metrics.json")
    glue = user_folder(tmp_path / "data", "SST-2/train.tsv", "SST-2/dev.tsv")
    users = (mine, home / "Documents", home / ".bashrc", pre, glue)  # Keras caches in ~/.keras
    before = hashes(*users)
    errors = refused([
        ["finetune", *TINY, "--output", mine],
        ["finetune", *TINY, "--output", home],
        ["finetune", *TINY, "--output", home, "--overwrite"],
        ["finetune", *TINY, "--output", ".", "--overwrite"],
        ["finetune", "--task", "glue:SST-2", "--data-dir", glue / "SST-2", "--preset", "tiny",
         "--steps", "1", "--output", glue, "--overwrite"],
        ["pretrain", "--preset", "tiny", "--steps", "1", "--output", pre],
    ], mine, home, capsys, monkeypatch)
    assert hashes(*users) == before
    assert f"--output {mine} exists and is not a kbert output; pass --overwrite" in errors[0]
    assert f"--output {home} exists and is not a kbert output" in errors[1]
    assert f"--overwrite never replaces {home}: it is your home folder" in errors[2]
    assert f"--overwrite never replaces {mine}: it is the current folder" in errors[3]
    assert f"--output {glue} holds the input {glue / 'SST-2'}" in errors[4]
    assert f"--output {pre} exists and is not a kbert output" in errors[5]


@pytest.mark.slow
def test_no_output_replaces_an_input_or_a_users_file(sentiment_run, tmp_path, capsys,  # noqa: F811
                                                    monkeypatch):
    """evaluate / predict / export / vocab / convert: an output that is an input, a folder of
    the user's, the home or current folder is refused; the run and the user's files stay."""
    home = user_folder(tmp_path / "home", "Documents/cv.txt", ".bashrc")
    scores = user_folder(tmp_path / "scores", "metrics.json")
    served = user_folder(tmp_path / "served", "notes.txt")
    inputs = tmp_path / "in.jsonl"
    inputs.write_text(json.dumps({"text": "A joy to watch."}) + "\n")
    answers = user_folder(tmp_path, "answers.jsonl") / "answers.jsonl"
    corpus = user_folder(tmp_path, "corpus.txt") / "corpus.txt"
    users = (home / "Documents", home / ".bashrc", scores, served, inputs, answers, corpus,
             sentiment_run)
    before = hashes(*users)
    errors = refused([
        ["evaluate", sentiment_run, "--output", sentiment_run],
        ["evaluate", sentiment_run, "--output", scores],
        ["predict", sentiment_run, "--input", inputs, "--output", inputs, "--overwrite"],
        ["predict", sentiment_run, "--input", inputs, "--output", answers],
        ["export", sentiment_run, served],
        ["export", sentiment_run, sentiment_run, "--overwrite"],
        ["vocab", "--corpus", corpus, "--output", corpus, "--overwrite"],
        ["convert", sentiment_run, home, "--to", "google", "--overwrite"],
        ["convert", sentiment_run, ".", "--to", "google", "--overwrite"],
    ], served, home, capsys, monkeypatch)
    assert hashes(*users) == before
    assert f"--output {sentiment_run} is the input {sentiment_run}" in errors[0]
    assert f"--output {scores} exists and is not a kbert output" in errors[1]
    assert f"--output {inputs} is the input {inputs}" in errors[2]
    assert f"--output {answers} exists; pass --overwrite" in errors[3]
    assert f"OUTPUT_DIR {served} exists and is not a kbert output" in errors[4]
    assert f"OUTPUT_DIR {sentiment_run} is the input {sentiment_run}" in errors[5]
    assert f"--output {corpus} is the input {corpus}" in errors[6]
    assert f"--overwrite never replaces {home}: it is your home folder" in errors[7]
    assert f"--overwrite never replaces {served}: it is the current folder" in errors[8]


@pytest.mark.slow
def test_links_are_removed_and_overwrite_keeps_the_users_files(tmp_path):
    """An unfinished run whose logs, checkpoints and scores are links to the user's folders
    resumes with folders of its own, and nothing lands in the link targets. `--overwrite` of a
    folder of the user's replaces only the names a run writes: the user's other files stay."""
    run = tmp_path / "run"
    outputs.mark(run, "finetune")
    elsewhere = user_folder(tmp_path / "elsewhere", "logs/keep.txt", "checkpoints/keep.txt",
                            "eval_dev/keep.txt")
    for name in ("logs", "checkpoints", "eval_dev"):
        (run / name).symlink_to(elsewhere / name)
    mine = user_folder(tmp_path / "mine", "notes.txt", "data/train.csv", "metrics.json")
    before = hashes(elsewhere, mine / "notes.txt", mine / "data")
    procs = [subprocess.Popen([str(c) for c in KBERT + ["finetune", *TINY, *more]],
                              stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
             for more in (["--output", run], ["--output", mine, "--overwrite"])]
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
    assert hashes(elsewhere, mine / "notes.txt", mine / "data") == before
    assert not any(p.is_symlink() for p in run.iterdir())
    assert (run / "logs").is_dir() and (run / "run.json").is_file()
    assert json.loads((mine / "metrics.json").read_text())["task"] == "sentiment"
    assert outputs.kind_of(mine) == "finetune" and not outputs.stage_path(mine).exists()


def test_the_rule_in_process(tmp_path, monkeypatch):
    """`check_output` / `check_output_file` / `swap_in` against each case of the rule."""
    monkeypatch.chdir(tmp_path)
    new = tmp_path / "new"
    assert outputs.check_output(new, "finetune") == "new"
    new.mkdir()
    assert outputs.check_output(new, "finetune") == "new"  # empty
    outputs.mark(new, "pretrain")
    assert outputs.kind_of(new) == "pretrain"
    assert outputs.check_output(new, "pretrain") == "same"
    with pytest.raises(outputs.OutputError, match="holds a kbert pretrain output"):
        outputs.check_output(new, "finetune")
    assert outputs.check_output(new, "finetune", overwrite=True) == "other"
    with pytest.raises(outputs.OutputError, match="it holds the current folder"):
        outputs.check_output(tmp_path.parent, "finetune", overwrite=True)
    with pytest.raises(outputs.OutputError, match="it is the root folder"):
        outputs.check_overwrite("/")
    data = user_folder(tmp_path / "user", "data/train.csv") / "data" / "train.csv"
    with pytest.raises(outputs.OutputError, match="holds the input"):
        outputs.check_output(tmp_path / "user", "finetune", overwrite=True, inputs=[data])
    with pytest.raises(outputs.OutputError, match="is the input"):
        outputs.check_output_file(data, overwrite=True, inputs=[data])
    with pytest.raises(outputs.OutputError, match="exists; pass --overwrite"):
        outputs.check_output_file(data)
    with pytest.raises(outputs.OutputError, match="is a directory"):
        outputs.check_output_file(tmp_path / "user")

    old = user_folder(tmp_path / "old", "metrics.json", "notes.txt")
    staging = user_folder(tmp_path / "staging", "metrics.json")
    outputs.swap_in(staging, old, lambda entry: entry.name == "metrics.json")
    assert (old / "metrics.json").read_text() == "the user's metrics.json\n"  # the new one's
    assert (old / "notes.txt").is_file() and not staging.exists()


def test_outputs_are_written_with_the_users_umask(tmp_path):
    previous = os.umask(0o022)
    try:
        outputs.write_text(tmp_path / "a.txt", "x")
        outputs.write_folder(tmp_path / "scores", "evaluation", {"metrics.json": "{}"})
    finally:
        os.umask(previous)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "scores" / "metrics.json").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "scores").stat().st_mode & 0o777 == 0o755
    assert outputs.kind_of(tmp_path / "scores") == "evaluation"
