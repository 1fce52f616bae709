"""A seeded slice of `benchmarks/fuzz.py` (issue #23): hostile text through the tokenizer, the
preprocessor (single, pair, choices) and every kind of export in one fresh serving process.
Every case must get a correct answer or a clear error, and the serving process must still answer
a normal request as before at the end. `python -m benchmarks.fuzz` runs 10,000 per entry point."""

import numpy as np
import pytest

from benchmarks import fuzz, fuzz_serving
from benchmarks.fuzz_checks import Checks, _expect_error
from kbert.text import BertTokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer.from_pretrained("minilm_l6_h384_uncased")


def _assert_clean(counts, entries):
    for entry in entries:
        c = counts[entry]
        assert c.get("wrong", 0) == 0 and c.get("crash", 0) == 0, (entry, c)
        assert c["ok"] + c.get("error", 0) == c["cases"], (entry, c)


@pytest.mark.slow
def test_library_entry_points(tokenizer):
    counts, failures = fuzz.run_library(fuzz.LIBRARY_ENTRIES, 300, seed=0,
                                        tokenizer=tokenizer, megabyte_every=100)
    assert failures == []
    _assert_clean(counts, fuzz.LIBRARY_ENTRIES)
    assert all(counts[e]["ok"] >= 300 for e in fuzz.LIBRARY_ENTRIES)  # strings: no errors


@pytest.mark.slow
def test_served_exports_in_a_fresh_process(tmp_path):
    counts, failures = fuzz_serving.run(250, seed=0, megabyte_every=100,
                                        exports=fuzz_serving.export_models(tmp_path))
    assert failures == [], failures[:5]
    _assert_clean(counts, fuzz_serving.ENTRIES)
    for entry in fuzz_serving.ENTRIES:
        assert counts[entry]["still_answering"] is True, entry
        assert counts[entry]["cases"] >= 250
    ids = counts["token_ids"]  # hostile ids refused by name, valid ones answered
    assert ids["error"] > 100 and ids["ok"] > 40
    examples = counts["examples"]  # as serving_default answers; spoiled features refused
    assert examples["ok"] > 100 and examples["error"] > 50


def test_the_checks_see_wrong_answers(tokenizer):
    """The invariants are not vacuous: answers that break them are caught."""
    import tensorflow as tf

    lib = fuzz.Library(tokenizer)
    good = lib.pack["single"](tf.constant(["[SEP] the river"]))
    row = {k: v[0].numpy() for k, v in good.items()}
    ids = lib.reference([b"[SEP] the river"], fuzz.SEQUENCE_LENGTH - 2)[0]
    assert lib.row_ok(row, [ids]) and lib.sep not in ids  # typed [SEP] is text
    assert not lib.row_ok(row, [ids[:-1]])
    forged = dict(row, token_ids=np.where(row["token_ids"] == ids[0], lib.sep,
                                          row["token_ids"]))
    assert not lib.row_ok(forged, [[lib.sep] + ids[1:]])  # a special id from user text
    checks = Checks(tf, {}, tokenizer.vocabulary_size(), 64)
    out = {"answer": np.array([b"iver"]), "start_char": np.array([4]),
           "end_char": np.array([8]), "score": np.array([1.0])}
    assert checks._span_row(out, 0, b"the river", "span") is not None  # shifted by one
    out["start_char"], out["end_char"] = np.array([5]), np.array([9])
    assert checks._span_row(out, 0, b"the river", "span") is None
    raw = dict(out, answer=np.array([b"\xffive"]), start_char=np.array([4]),
               end_char=np.array([8]))  # invalid UTF-8 answers as one U+FFFD, not raw bytes
    assert checks._span_row(raw, 0, b"the \xffiver", "span") is not None
    raw["answer"] = np.array(["\ufffdive".encode()])
    assert checks._span_row(raw, 0, b"the \xffiver", "span") is None
    assert _expect_error(lambda: 1, "token_ids")[0] == "wrong"
