"""Directories that appear whole or not at all (`kbert.atomic`) and export versions
(`kbert.export.saved_model`): the states a kill leaves behind, made by hand, and what the next
write or export makes of them."""

import os

import pytest

from kbert.atomic import atomic_directory, clean_staging, staging_entries

DEAD_PID = 4_000_000  # above Linux's pid_max: no such process


def _write(directory, text):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "data.txt").write_text(text)


def test_replace_only_once_the_new_directory_is_complete(tmp_path):
    target = tmp_path / "out"
    with atomic_directory(target, owned_files=("data.txt",)) as stage:
        (stage / "data.txt").write_text("one")
    with pytest.raises(RuntimeError):
        with atomic_directory(target, owned_files=("data.txt",)) as stage:
            (stage / "data.txt").write_text("half")
            raise RuntimeError("killed")
    assert (target / "data.txt").read_text() == "one"
    with atomic_directory(target, owned_files=("data.txt",)) as stage:
        (stage / "data.txt").write_text("two")
    assert (target / "data.txt").read_text() == "two"
    assert os.listdir(tmp_path) == ["out"]


@pytest.mark.parametrize("moment", ["before_old_moved", "between_renames", "after_new_in"])
def test_a_kill_during_a_replace_is_finished_by_the_next_write(tmp_path, moment):
    """The three moments `replace_directory` can be killed at, with `new/` and `old/` in the aside
    directory as the renames leave them."""
    target = tmp_path / "out"
    aside = tmp_path / f".out.{DEAD_PID}-abcd1234.old"
    if moment == "before_old_moved":
        _write(target, "old")
        _write(aside / "new", "new")
    elif moment == "between_renames":
        _write(aside / "old", "old")
        _write(aside / "new", "new")
    else:
        _write(target, "new")
        _write(aside / "old", "old")
    expected = "old" if moment == "before_old_moved" else "new"
    assert clean_staging(tmp_path) == ([] if moment != "between_renames" else [target])
    assert (target / "data.txt").read_text() == expected
    assert os.listdir(tmp_path) == ["out"]


def test_the_next_write_of_the_same_name_cleans_up(tmp_path):
    target = tmp_path / "out"
    _write(tmp_path / f".out.{DEAD_PID}-abcd1234.old" / "old", "old")  # between renames
    _write(tmp_path / ".out.efgh5678.tmp", "killed mid-write (kbert's earlier name)")
    with atomic_directory(target, owned_files=("data.txt",)) as stage:
        (stage / "data.txt").write_text("newest")
    assert (target / "data.txt").read_text() == "newest"
    assert os.listdir(tmp_path) == ["out"]


def test_only_kbert_staging_of_dead_processes_is_removed(tmp_path):
    mine = [tmp_path / n for n in (".out.tmp", ".out.notes.old", "out.abcd1234.tmp",
                                   ".out.ABCD1234.tmp", ".out.abcd12345.tmp")]
    for path in mine:
        _write(path, "user data")
    live = tmp_path / f".out.{os.getpid()}-abcd1234.tmp"
    _write(live, "a running writer's")
    (tmp_path / f".out.{DEAD_PID}-abcd1234.tmp").write_text("a file, not a directory")
    assert [e[0] for e in staging_entries(tmp_path)] == [live]
    clean_staging(tmp_path)
    assert sorted(os.listdir(tmp_path)) == sorted(
        [p.name for p in mine] + [live.name, f".out.{DEAD_PID}-abcd1234.tmp"])


# --- export versions ---------------------------------------------------------------------

def test_versions_are_savedmodels_and_killed_exports_are_cleaned(tmp_path):
    from kbert.export.saved_model import clean_export_staging, existing_versions, next_version

    base = tmp_path / "m"
    (base / "1").mkdir(parents=True)
    (base / "1" / "saved_model.pb").write_bytes(b"x")
    _write(base / "5", "not a model")  # digit-named, unrelated
    _write(base / f".2.{DEAD_PID}-abcd1234.tmp" / "variables", "half an export")
    _write(base / ".3.efgh5678.tmp", "the earlier naming")
    _write(base / ".kbert-export-ijkl9012", "scratch")
    _write(base / f".kbert-export-{DEAD_PID}-mnop3456", "scratch")
    live = base / f".kbert-export-{os.getpid()}-qrst7890"
    _write(live, "a running export's scratch")
    _write(base / ".notes", "the user's")
    assert existing_versions(base) == [1]
    assert next_version(base) == 6  # never collides with "5"
    clean_export_staging(base)
    assert sorted(os.listdir(base)) == sorted([".notes", "1", "5", live.name])


@pytest.mark.slow
def test_an_export_cleans_what_killed_exports_left(tmp_path, tiny_config):
    import keras
    import tensorflow as tf

    from kbert.export import export_saved_model
    from kbert.models.backbone import BertBackbone

    keras.utils.set_random_seed(0)
    base = tmp_path / "m"
    _write(base / f".1.{DEAD_PID}-abcd1234.tmp" / "variables", "half an export")
    _write(base / ".kbert-export-ijkl9012", "scratch")
    _write(base / "3", "not a model")
    path = export_saved_model(BertBackbone(tiny_config), base, warmup_texts=[])
    assert path.name == "4"
    assert sorted(os.listdir(base)) == ["3", "4"]
    assert "serve_token_ids" in tf.saved_model.load(str(path)).signatures


def test_a_failed_job_removes_only_an_output_folder_it_created_and_left_empty(
        tmp_path, monkeypatch):
    import importlib

    from kbert.atomic import removed_if_unfinished

    pretraining = importlib.import_module("kbert.training.pretrain")  # the module, not the function

    for name, leftovers in (("empty", ()), ("logs", ("logs",)), ("checkpoint", ("checkpoints",)),
                            ("existed", ())):
        output = tmp_path / name
        if name == "existed":
            output.mkdir()
        with pytest.raises(RuntimeError), removed_if_unfinished(output):
            output.mkdir(exist_ok=True)
            for entry in leftovers:
                (output / entry).mkdir()
            raise RuntimeError("killed by the test")
        assert output.exists() == (name in ("checkpoint", "existed")), name

    def fail(*args, **kwargs):  # a failure after pretrain() made its folder
        raise RuntimeError("no data")

    monkeypatch.setattr(pretraining, "pretraining_data", fail)
    with pytest.raises(RuntimeError, match="no data"):
        pretraining.pretrain(tmp_path / "pretrain", preset="tiny", steps=1, batch_size=2,
                             sequence_length=16, corpus=None)
    assert not (tmp_path / "pretrain").exists()
