"""`kbert predict --input`: a fine-tuned run over a file of raw inputs, one JSON object a line.

Each line holds what `kbert predict`'s flags take, under their library names: `text` (+
`text_pair`, or `choices`: a list of strings) for sentence tasks, `question` and `context` for
SQuAD, `text` for CoNLL; every line the same keys. Answers come out one a line, in order, as
`kbert predict` prints them, computed `batch_size` lines at a time by the task spec's own
`predict` (the path `kbert predict` and `evaluate` run). A malformed line stops the run with an
error that names the file and the line.
"""

import itertools
import json
import os
import re

from kbert.config_checks import RowError
from kbert.text.utf8 import decoded_lines, without_lone_surrogates

REQUEST_KEYS = ("text", "text_pair", "choices", "question", "context")


def _keys(names):
    """Key names as JSON writes them (quoted: errors name them as the file does)."""
    return ", ".join(json.dumps(name) for name in names)


def _quoted_keys(message):
    """A spec's `message`, which names inputs as keys, with the keys quoted as JSON does."""
    return re.sub(rf"\b({'|'.join(REQUEST_KEYS)})\b", r'"\1"', str(message))


def _line(source, number):
    """Where a request is: "requests.jsonl line 3" ("<stdin> line 3")."""
    return f"{os.fspath(source)} line {number}"


def read_requests(lines, source="<input>"):
    """(line number, request) for each non-blank line of `lines` (str, or bytes of UTF-8 text
    from `source`, a byte order mark allowed: `decoded_lines`), checked: a JSON object whose
    keys are among `REQUEST_KEYS`, each a string (`choices`: a non-empty list of strings).
    Errors name `source` and the line: "requests.jsonl line 3: not JSON (...)"."""
    for number, line in enumerate(decoded_lines(lines, source), 1):
        if not line.strip():
            continue
        where = _line(source, number)
        try:
            request = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{where}: not JSON ({error.msg}).") from None
        except RecursionError:
            raise ValueError(f"{where}: nested too deeply to be a request.") from None
        if not isinstance(request, dict) or not request:
            raise ValueError(f"{where}: expected a JSON object with keys among "
                             f"{_keys(REQUEST_KEYS)}; got {line.strip()[:80]!r}.")
        unknown = sorted(set(request) - set(REQUEST_KEYS))
        if unknown:
            raise ValueError(f"{where}: unknown key(s) {_keys(unknown)}; the keys are "
                             f"{_keys(REQUEST_KEYS)}.")
        for key, value in request.items():
            strings = value if key == "choices" else [value]
            if not isinstance(strings, list) or not strings or not all(
                    isinstance(s, str) for s in strings):
                kind = "a non-empty list of strings" if key == "choices" else "a string"
                raise ValueError(f"{where}: {json.dumps(key)} must be {kind}, got "
                                 f"{json.dumps(value)[:80]}.")
        yield number, {key: without_lone_surrogates(value) for key, value in request.items()}


def predict_requests(run_dir, lines, batch_size=64, allow_pickle=False, task=None,
                     data_dir=None, null_threshold=None, top_k=None, source="<input>"):
    """Yields the answer to each request line of `lines` (JSON-able), in order (`task`,
    `data_dir`, `null_threshold`, `top_k`: as `open_task_model`; `source`: where the lines
    come from, for `read_requests`)."""
    from kbert.tasks.pretrained import open_task_model

    spec, model = open_task_model(run_dir, task, data_dir, allow_pickle, null_threshold,
                                  top_k=top_k)
    keys = first = None
    requests = read_requests(lines, source)
    while chunk := list(itertools.islice(requests, batch_size)):
        for number, request in chunk:
            if keys is None:
                keys, first = sorted(request), number
            elif sorted(request) != keys:
                raise ValueError(f"{_line(source, number)}: keys {_keys(sorted(request))} "
                                 f"differ from line {first}'s ({_keys(keys)}); every line "
                                 "needs the same.")
        inputs = {key: [request[key] for _, request in chunk] for key in keys}
        try:
            answers = spec.predict(model, **inputs)
        except ValueError as error:
            # A problem of one request names its line; others, the chunk's lines.
            if isinstance(error, RowError) and error.row < len(chunk):
                message = f"{os.fspath(source)}: " + RowError(
                    _quoted_keys(error.template), error.row).at(f"line {chunk[error.row][0]}")
            else:
                message = (f"{os.fspath(source)} lines {chunk[0][0]}-{chunk[-1][0]}: "
                           f"{_quoted_keys(error)}")
            raise ValueError(message) from error
        yield from answers
