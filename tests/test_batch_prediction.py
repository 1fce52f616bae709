"""`kbert predict --input`'s reading of request lines (kbert.training.batch_prediction); the
command itself runs in tests/test_cli_processes.py."""

import re

import pytest

from kbert.training.batch_prediction import read_requests


def test_lines_become_numbered_requests():
    lines = ['{"text": "caf\\u00e9 [SEP] x"}\n', "\n", '  {"text": "b", "text_pair": "c"}  \n',
             '{"text": "q", "choices": ["a", "b"]}']
    assert list(read_requests(lines)) == [
        (1, {"text": "café [SEP] x"}), (3, {"text": "b", "text_pair": "c"}),
        (4, {"text": "q", "choices": ["a", "b"]})]


@pytest.mark.parametrize("line, words", [
    ('{"text": "a"', 'line 1: not JSON'),
    ("[1, 2]", "line 1: expected a JSON object"),
    ("{}", "line 1: expected a JSON object"),
    ('{"text": "a", "label": 1}', 'line 1: unknown key(s) "label"'),
    ('{"text": null}', 'line 1: "text" must be a string, got null'),
    ('{"question": ["a"]}', 'line 1: "question" must be a string'),
    ('{"text": "q", "choices": "abc"}', '"choices" must be a non-empty list of strings'),
    ('{"text": "q", "choices": []}', '"choices" must be a non-empty list of strings'),
    ('{"text": "q", "choices": ["a", 3]}', '"choices" must be a non-empty list of strings'),
])
def test_malformed_lines_are_refused_by_number(line, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        list(read_requests([line]))


@pytest.mark.parametrize("line, words", [
    ('{"text": "a"', "requests.jsonl line 2: not JSON"),
    ("[" * 100_000 + "]" * 100_000, "requests.jsonl line 2: nested too deeply to be a request"),
])
def test_errors_name_the_file_as_well_as_the_line(line, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        list(read_requests(['{"text": "fine"}', line], "requests.jsonl"))


def test_a_files_bytes_are_read_as_utf8_a_line_at_a_time():
    """`kbert predict --input` reads the file's bytes: a line that is not UTF-8 is named (the
    error was the codec's, with no line), and a byte order mark is no part of the first line
    (it made the line no JSON)."""
    lines = ["\ufeff{\"text\": \"caf\u00e9\"}\n".encode("utf-8"), b'{"text": "b"}\n']
    assert list(read_requests(lines)) == [(1, {"text": "café"}), (2, {"text": "b"})]
    with pytest.raises(ValueError, match=re.escape(
            "requests.jsonl:2: not UTF-8 text (byte 0xe9 at column 14); save the file as")):
        list(read_requests([b'{"text": "a"}\n', b'{"text": "caf\xe9"}\n'], "requests.jsonl"))


@pytest.mark.slow
def test_a_request_the_model_refuses_is_named_by_its_line(tmp_path):
    """A multiple-choice request with another number of choices, in the second chunk: the
    error names its line in the file (it gave the chunk's lines and the row in the chunk)."""
    import json

    import keras

    from kbert.models import BertBackbone, BertMultipleChoice
    from kbert.runs import RunDirectory
    from kbert.text import BertPreprocessor
    from kbert.training.batch_prediction import predict_requests
    from tests.spans.helpers import tiny_config, tokenizer

    keras.utils.set_random_seed(0)
    model = BertMultipleChoice(BertBackbone(tiny_config()), num_choices=2,
                               preprocessor=BertPreprocessor(tokenizer(), sequence_length=16))
    RunDirectory(tmp_path / "run").save(model, {
        "task": "toy", "kind": "multiple_choice", "settings": {}, "label_names": None,
        "num_classes": 2, "sentence_pair": False}, {})
    lines = [json.dumps({"text": "the cat", "choices": choices}) for choices in
             (["sat", "ran"], ["a", "b"], ["a", "b"], ["sat"], ["a", "b"])]
    lines.insert(1, "")
    answers = predict_requests(tmp_path / "run", lines, batch_size=2,
                               source=tmp_path / "text" / "in.jsonl")
    assert len([next(answers), next(answers)]) == 2
    with pytest.raises(ValueError, match=rf"^{re.escape(str(tmp_path))}/text/in.jsonl: A toy "
                                         r"model takes 2 \"choices\" a \"text\"; line 5 has 1 "
                                         r"\('the cat'\)\.$"):
        list(answers)
