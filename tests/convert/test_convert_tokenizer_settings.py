"""`kbert convert` carries the tokenizer's settings with the weights. It wrote a Hugging Face
directory without tokenizer_config.json, so a cased checkpoint came out uncased for both
transformers and kbert; now casing, accents and the word limit travel to every format."""

import json
import shutil

import pytest
import transformers

import kbert
from tests.test_cli_processes import KBERT, run

TEXT = "Hello Café WORLD"


@pytest.fixture(scope="module")
def cased(minilm_dir, tmp_path_factory):
    """MiniLM's weights and vocabulary, said to be cased with accents stripped (an unusual
    pair, so neither setting can come out right by following the other)."""
    path = tmp_path_factory.mktemp("src") / "checkpoint"
    path.mkdir()
    for name in ("config.json", "model.safetensors", "vocab.txt"):
        shutil.copy(minilm_dir / name, path / name)
    (path / "tokenizer_config.json").write_text(json.dumps(
        {"do_lower_case": False, "strip_accents": True, "max_input_chars_per_word": 100}))
    return path


@pytest.mark.slow
def test_every_format_keeps_casing_and_accents(cased, tmp_path):
    source = kbert.BertTokenizer.from_pretrained(str(cased))
    assert (source.lowercase, source.strip_accents) == (False, True)
    expected = source([TEXT]).to_list()
    for fmt in ("huggingface", "google", "keras_hub"):
        run(KBERT + ["convert", cased, tmp_path / fmt, "--to", fmt, "--allow-approximation"])
        read = kbert.BertTokenizer.from_pretrained(str(tmp_path / fmt))
        assert (read.lowercase, read.strip_accents) == (False, True), fmt
        assert read([TEXT]).to_list() == expected, fmt
    hf = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "huggingface"))
    assert [hf.encode(TEXT, add_special_tokens=False)] == expected
    assert kbert.BertTokenizer.from_pretrained(str(tmp_path / "huggingface")) \
        .max_chars_per_word == 100
    google = json.loads((tmp_path / "google" / "bert_config.json").read_text())
    assert (google["do_lower_case"], google["strip_accents"]) == (False, True)
