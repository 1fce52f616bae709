"""The tokenizer's Unicode tables are derived once per machine and read back from disk: what is
read back equals what is derived, and a damaged file is derived again, never trusted."""

import json
import pytest

from kbert.text import unicode_tables


def test_tables_read_back_from_disk_equal_the_derived_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("KBERT_CACHE", str(tmp_path))
    derived = unicode_tables.compute_split_pattern()
    assert tuple(unicode_tables._stored("split_pattern", lambda: derived)) == derived
    (path,) = tmp_path.glob("unicode-*-split_pattern.json")

    def never():
        raise AssertionError("the stored table should have been read")

    assert tuple(unicode_tables._stored("split_pattern", never)) == derived

    path.write_text('["truncated')  # a damaged file: derived again, and replaced
    assert tuple(unicode_tables._stored("split_pattern", lambda: derived)) == derived
    assert json.loads(path.read_text()) == list(derived)


@pytest.mark.slow
def test_the_cached_char_map_is_the_derived_one(tmp_path, monkeypatch):
    monkeypatch.setenv("KBERT_CACHE", str(tmp_path))
    for lowercase in (True, False):
        derived = unicode_tables.compute_char_map(lowercase)
        unicode_tables._stored(f"char_map-{lowercase}", lambda: derived)
        read = unicode_tables._stored(f"char_map-{lowercase}", None)
        assert read == derived and any(ord(c) > 0xFFFF for c in read)  # beyond the BMP too


def test_an_unwritable_cache_only_costs_time(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("KBERT_CACHE", str(blocker / "cache"))
    assert unicode_tables._stored("sigma_pattern", lambda: "x") == "x"
