"""`kbert predict --input`: a fine-tuned run over a file of raw inputs, one JSON object a line.

Each line holds what `kbert predict`'s flags take, under their library names: `text` (+
`text_pair`, or `choices`: a list of strings) for sentence tasks, `question` and `context` for
SQuAD, `text` for CoNLL; every line the same keys. Answers come out one a line, in order, as
`kbert predict` prints them, computed `batch_size` lines at a time by the task spec's own
`predict` (the path `kbert predict` and `evaluate` run). A malformed line stops the run with an
error that names its line number.
"""

import itertools
import json
import re

from kbert.models.row_error import RowError
from kbert.text.utf8 import decoded_lines, without_lone_surrogates

REQUEST_KEYS = ("text", "text_pair", "choices", "question", "context")


def _keys(names):
    """Key names as JSON writes them (quoted: errors name them as the file does)."""
    return ", ".join(json.dumps(name) for name in names)


def read_requests(lines, source="<input>"):
    """(line number, request) for each non-blank line of `lines` (str, or bytes of UTF-8 text
    from `source`, a byte order mark allowed: `decoded_lines`), checked: a JSON object whose
    keys are among `REQUEST_KEYS`, each a string (`choices`: a non-empty list of strings)."""
    for number, line in enumerate(decoded_lines(lines, source), 1):
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"line {number}: not JSON ({error.msg}).") from None
        if not isinstance(request, dict) or not request:
            raise ValueError(f"line {number}: expected a JSON object with keys among "
                             f"{_keys(REQUEST_KEYS)}; got {line.strip()[:80]!r}.")
        unknown = sorted(set(request) - set(REQUEST_KEYS))
        if unknown:
            raise ValueError(f"line {number}: unknown key(s) {_keys(unknown)}; the keys are "
                             f"{_keys(REQUEST_KEYS)}.")
        for key, value in request.items():
            strings = value if key == "choices" else [value]
            if not isinstance(strings, list) or not strings or not all(
                    isinstance(s, str) for s in strings):
                kind = "a non-empty list of strings" if key == "choices" else "a string"
                raise ValueError(f"line {number}: {json.dumps(key)} must be {kind}, got "
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
                raise ValueError(f"line {number}: keys {_keys(sorted(request))} differ from "
                                 f"line {first}'s ({_keys(keys)}); every line needs the same.")
        inputs = {key: [request[key] for _, request in chunk] for key in keys}
        try:
            answers = spec.predict(model, **inputs)
        except ValueError as error:
            # A problem of one request names its line; others, the chunk's lines.
            one = isinstance(error, RowError) and error.row < len(chunk)
            message = error.at(f"line {chunk[error.row][0]}") if one else (
                f"lines {chunk[0][0]}-{chunk[-1][0]}: {error}")
            # The spec names inputs as keys: quote them as JSON does.
            message = re.sub(rf"\b({'|'.join(REQUEST_KEYS)})\b", r'"\1"', message)
            raise ValueError(message) from error
        yield from answers
