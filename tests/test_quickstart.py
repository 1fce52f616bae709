"""A reduced quick start: the whole path from pretrained weights to answers from an export."""

import json

from kbert.quickstart import LABELS, SENTENCES, quickstart


def test_quickstart_end_to_end(tmp_path):
    summary = quickstart(output_dir=tmp_path / "run", export_dir=tmp_path / "served", steps=3,
                         max_eval_examples=64, verbose=0)
    assert summary["export"] == str(tmp_path / "served" / "1")
    assert (tmp_path / "served" / "1" / "saved_model.pb").is_file()
    written = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert 0.0 <= written["dev"]["accuracy"] <= 1.0 and "test" in written
    assert [a["text"] for a in summary["answers"]] == list(SENTENCES)
    assert all(a["label"] in LABELS and 0.5 <= a["probability"] <= 1.0
               for a in summary["answers"])
