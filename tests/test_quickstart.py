"""A reduced quick start, run as a user runs it (`kbert quickstart` in a new process): the whole
path from pretrained weights to answers from an export."""

import json

from kbert.quickstart import LABELS, SENTENCES
from tests.test_cli_processes import KBERT, run


def test_quickstart_end_to_end(tmp_path):
    out, _ = run(KBERT + ["quickstart", "--steps", "3", "--max-eval-examples", "64",
                          "--output", tmp_path / "run", "--export-dir", tmp_path / "served"])
    assert (tmp_path / "served" / "1" / "saved_model.pb").is_file()
    written = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert 0.0 <= written["dev"]["accuracy"] <= 1.0 and "test" in written
    answers = [line.split(None, 2) for line in out.splitlines()
               if line.strip().endswith(SENTENCES) and line.startswith("    ")]
    assert [a[2] for a in answers] == list(SENTENCES)
    assert all(a[0] in LABELS and 0.5 <= float(a[1]) <= 1.0 for a in answers)
    assert f"SavedModel for TF Serving: {tmp_path / 'served' / '1'}" in out

    # run again, as `make quickstart` may be: its run is replaced, the export a new version
    run(KBERT + ["quickstart", "--steps", "1", "--max-eval-examples", "8",
                 "--output", tmp_path / "run", "--export-dir", tmp_path / "served"])
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["sizes"]["dev"] == 8
    assert sorted(p.name for p in (tmp_path / "served").iterdir()) == ["1", "2"]
