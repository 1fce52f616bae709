import numpy as np
import safetensors.numpy

from kbert import cli


def test_convert_round_trip_between_formats(minilm_dir, tmp_path, capsys):
    assert cli.main(["convert", "minilm_l6_h384_uncased", str(tmp_path / "g"), "--to", "google"]) == 0
    assert cli.main(["convert", str(tmp_path / "g"), str(tmp_path / "h"), "--to", "huggingface"]) == 0
    assert "6 layers, hidden 384, gelu" in capsys.readouterr().out
    original = safetensors.numpy.load_file(str(minilm_dir / "model.safetensors"))
    again = safetensors.numpy.load_file(str(tmp_path / "h" / "model.safetensors"))
    original.pop("embeddings.position_ids")
    assert set(original) == set(again)
    assert all(np.array_equal(original[k], again[k]) for k in original)
    assert (tmp_path / "h" / "vocab.txt").is_file()


def test_convert_errors_say_what_is_wrong(tmp_path, capsys):
    assert cli.main(["convert", "base", str(tmp_path / "x"), "--to", "google"]) == 2
    assert "size preset without weights" in capsys.readouterr().err
    assert cli.main(["convert", "minilm_l6_h384_uncased", str(tmp_path / "k"),
                     "--to", "keras_hub"]) == 2
    assert "cannot compute this model exactly" in capsys.readouterr().err


def test_vocab_trains_bert_layout(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The cat sat on the mat.\n\nDogs and cats are friends.\nThe mat was red.\n")
    out = tmp_path / "vocab.txt"
    assert cli.main(["vocab", "--corpus", str(corpus), "--size", "150", "--output", str(out)]) == 0
    tokens = out.read_text().splitlines()
    assert tokens[0] == "[PAD]" and tokens[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert "the" in tokens and len(tokens) <= 150
