"""Bad vocabulary files meet one clear error that names the file and what is wrong, from the
library and from the CLI, before anything is built from them."""

import os
import subprocess
import sys

import pytest

from kbert.text.tokenizer import BertTokenizer
from kbert.text.tokenizer_files import load_vocabulary

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _file(tmp_path, name, text, encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return path


@pytest.mark.parametrize("name, text, message", [
    ("empty.txt", "", r"'.*empty.txt' is empty; it needs at least \[PAD\], \[UNK\], \[CLS\]"),
    ("blank.txt", "\n \n\t\n", r"'.*blank.txt' is empty"),
    ("no_cls_sep.txt", "[PAD]\n[UNK]\n[MASK]\na\n",
     r"'.*no_cls_sep.txt' lacks the special tokens \[CLS\], \[SEP\];"),
    ("no_unk.txt", "[PAD]\n[CLS]\n[SEP]\n[MASK]\n", r"'.*no_unk.txt' lacks the special tokens "
                                                    r"\[UNK\];"),
    ("no_pad_mask.txt", "[UNK]\n[CLS]\n[SEP]\n",
     r"lacks the special tokens \[PAD\], \[MASK\];"),
    ("repeats.txt", "\n".join(SPECIALS + ["a", "b", "a"]),
     r"'.*repeats.txt' repeats tokens 'a' \(lines 6 and 8\)"),
    ("hole.txt", "\n".join(SPECIALS + ["a", "", "b"]),
     r"'.*hole.txt' has empty tokens on lines \[7\]"),
    ("latin1.txt", "\n".join(SPECIALS + ["café"]).encode("latin-1"),
     r"'.*latin1.txt' is not UTF-8 text \(line 6, byte 34\)"),
])
def test_bad_vocabulary_files_are_named(tmp_path, name, text, message):
    path = _file(tmp_path, name, text)
    with pytest.raises(ValueError, match=message):
        load_vocabulary(path)
    with pytest.raises(ValueError, match=message):
        BertTokenizer(str(path))


def test_a_checkpoint_directory_names_its_vocab_file(tmp_path):
    (tmp_path / "ckpt").mkdir()
    _file(tmp_path / "ckpt", "vocab.txt", "[PAD]\n[UNK]\n[MASK]\n")
    with pytest.raises(ValueError, match=r"'.*ckpt/vocab.txt' lacks the special tokens "
                                         r"\[CLS\], \[SEP\]"):
        BertTokenizer.from_pretrained(tmp_path / "ckpt")
    with pytest.raises(ValueError, match=r"the vocabulary \(a list of 0 tokens\) is empty"):
        BertTokenizer([])


def test_google_style_file_reads_as_before(tmp_path):
    """Lines are stripped (Google's `load_vocab`), the final newline adds no token, ids are
    line numbers."""
    path = _file(tmp_path, "vocab.txt", " [PAD]\r\n[UNK]\n[CLS] \n[SEP]\n[MASK]\nhello\n")
    assert load_vocabulary(path) == SPECIALS + ["hello"]
    assert BertTokenizer(path).token_to_id("hello") == 5


def test_cli_refuses_a_checkpoint_without_cls_and_sep(tmp_path):
    """What a user sees from `kbert finetune --init DIR` when DIR's vocab.txt is broken: one
    line naming the file and the missing tokens, exit status 2, no traceback."""
    import kbert

    ckpt = tmp_path / "ckpt"  # a real (tiny) Hugging Face checkpoint with a broken vocab.txt
    config = kbert.BertConfig(vocab_size=4, hidden_size=32, num_layers=1, num_heads=2,
                              intermediate_size=64, max_position_embeddings=128)
    kbert.convert.save_hf(kbert.BertBackbone(config), ckpt)
    _file(ckpt, "vocab.txt", "[PAD]\n[UNK]\n[MASK]\nthe\n")
    script = os.path.join(os.path.dirname(sys.executable), "kbert")
    kbert = [script] if os.path.isfile(script) else [sys.executable, "-m", "kbert_cli"]
    done = subprocess.run(
        kbert + ["finetune", "--task", "sentiment", "--init", str(ckpt), "--steps", "1",
                 "--output", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("kbert finetune:")]
    assert len(errors) == 1, done.stderr[-2000:]
    assert f"{ckpt / 'vocab.txt'}" in errors[0]
    assert "lacks the special tokens [CLS], [SEP]" in errors[0]


def test_a_transformers_5_directory_reads_its_tokenizer_json(minilm_dir, tmp_path):
    """transformers 5 saves a tokenizer as tokenizer.json (+ config) only: kbert reads the
    WordPiece vocabulary there, the casing from tokenizer_config.json and HF's word limit, and
    tokenizes as transformers does."""
    transformers = pytest.importorskip("transformers")
    transformers.AutoTokenizer.from_pretrained(str(minilm_dir)).save_pretrained(str(tmp_path))
    assert not (tmp_path / "vocab.txt").exists()
    ours = BertTokenizer.from_pretrained(tmp_path)
    theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    texts = ["Déjà vu: the CAFÉ's crème brûlée!", "unaffable pseudo-intellectuals [SEP]"]
    assert ours(texts).to_list() == [theirs(t, add_special_tokens=False, split_special_tokens=True)
                                     ["input_ids"] for t in texts]
    assert ours.get_vocabulary() == BertTokenizer.from_pretrained(minilm_dir).get_vocabulary()
    (tmp_path / "tokenizer.json").write_text('{"model": {"type": "BPE", "vocab": {}}}')
    with pytest.raises(ValueError, match="holds no WordPiece vocabulary"):
        BertTokenizer.from_pretrained(tmp_path)
    (tmp_path / "tokenizer.json").write_text(
        '{"model": {"type": "WordPiece", "vocab": {"[PAD]": 0, "[UNK]": 2}}}')
    with pytest.raises(ValueError, match="must be 0 to 1, each once"):
        BertTokenizer.from_pretrained(tmp_path)
