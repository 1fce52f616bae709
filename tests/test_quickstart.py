"""A reduced quick start, run as a user runs it (`kbert quickstart` in a new process): the whole
path from pretrained weights to answers from an export."""

import json
import re

from kbert.data.tasks.sentiment import sentiment_task
from kbert.quickstart import EXAMPLES, LABELS
from tests.test_cli_processes import KBERT, run

ANSWER = re.compile(r'^    gold (\w+)  ->  (\w+) (\d\.\d\d)  "(.+)"$')


def test_quickstart_end_to_end(tmp_path):
    out, _ = run(KBERT + ["quickstart", "--steps", "3", "--max-eval-examples", "64",
                          "--output", tmp_path / "run", "--export-dir", tmp_path / "served"])
    assert (tmp_path / "served" / "1" / "saved_model.pb").is_file()
    written = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert 0.0 <= written["dev"]["accuracy"] <= 1.0 and "test" in written
    answers = [ANSWER.match(line).groups() for line in out.splitlines() if ANSWER.match(line)]
    assert len(answers) == EXAMPLES, out
    short = [name[:3] for name in LABELS]
    test_split = sentiment_task().splits["test"]
    for gold, label, probability, text in answers:
        assert label in short and 0.5 <= float(probability) <= 1.0
        assert len(text) <= 70
        # a sentence of the real test split (cut where long), shown with its own gold label
        golds = {LABELS[g][:3] for sentence, g in test_split
                 if sentence == text or text.endswith("...") and sentence.startswith(text[:-3])}
        assert golds == {gold}, (text, golds)
    assert f"SavedModel for TF Serving: {tmp_path / 'served' / '1'}" in out

    # run again, as `make quickstart` may be: its run is replaced, the export a new version
    run(KBERT + ["quickstart", "--steps", "1", "--max-eval-examples", "8",
                 "--output", tmp_path / "run", "--export-dir", tmp_path / "served"])
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["sizes"]["dev"] == 8
    assert sorted(p.name for p in (tmp_path / "served").iterdir()) == ["1", "2"]
