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


def test_finetune_evaluate_and_export_from_the_command_line(tmp_path, capsys):
    run = tmp_path / "run"
    assert cli.main(["finetune", "--task", "sentiment", "--preset", "tiny", "--steps", "2",
                     "--batch-size", "8", "--max-eval-examples", "32",
                     "--output", str(run)]) == 0
    assert "test: accuracy" in capsys.readouterr().out
    assert cli.main(["evaluate", str(run), "--split", "dev", "--max-eval-examples", "32"]) == 0
    out = capsys.readouterr().out
    assert "sentiment dev (32 examples): accuracy" in out
    assert (run / "eval_dev" / "metrics.json").is_file()
    assert cli.main(["export", str(run), str(tmp_path / "served"),
                     "--labels", "negative,positive"]) == 0
    assert (tmp_path / "served" / "1" / "saved_model.pb").is_file()
    assert cli.main(["evaluate", str(tmp_path)]) == 2
    assert "no model.keras" in capsys.readouterr().err


def test_pretrain_from_the_command_line(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(  # one sentence per line, blank line between documents
        "\n".join(f"Sentence {i} of document {d} talks about topic {d % 3}." for i in range(8))
        for d in range(80)) + "\n")
    out = tmp_path / "run"
    assert cli.main(["pretrain", "--preset", "tiny", "--corpus", str(corpus), "--steps", "2",
                     "--batch-size", "4", "--sequence-length", "32", "--checkpoint-every", "1",
                     "--output", str(out)]) == 0
    assert "held-out: mlm_accuracy" in capsys.readouterr().out
    assert (out / "metrics.json").is_file() and (out / "model" / "config.json").is_file()


def test_ner_finetune_evaluate_and_predict(tmp_path, capsys):
    run = tmp_path / "ner"
    assert cli.main(["finetune", "--task", "conll", "--preset", "tiny", "--steps", "2",
                     "--batch-size", "8", "--max-train-examples", "32",
                     "--max-eval-examples", "32", "--output", str(run)]) == 0
    assert "test: precision" in capsys.readouterr().out
    assert cli.main(["evaluate", str(run), "--split", "dev", "--max-eval-examples", "16"]) == 0
    assert "dev" in (out := capsys.readouterr().out) and ": precision" in out
    assert cli.main(["predict", str(run), "--text", "Angela Merkel visited Paris."]) == 0
    assert capsys.readouterr().out.lstrip().startswith("[")
    assert cli.main(["predict", str(run), "--question", "Who?", "--context", "Ann."]) == 2
    assert "give text" in capsys.readouterr().err
