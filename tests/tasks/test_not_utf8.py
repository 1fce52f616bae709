"""A byte that is not UTF-8 in a user's file is named by file, line and column in every reader
(Python's own error names neither the file nor the line); a pre-training corpus skips such
bytes as Google's create_pretraining_data.py does, with a warning."""

import warnings

import pytest

from kbert.data.conll import read_conll
from kbert.data.corpus import text_lines
from kbert.data.pretraining.documents import read_documents
from kbert.data.squad import read_squad
from kbert.data.tasks import read_glue_tsv, read_table
from kbert.data.tasks.mmlu import read_mmlu

LATIN1 = "café".encode("latin-1")  # é as a Latin-1 byte, 0xe9: not UTF-8
MMLU = '{"question": "q", "answer_a": "a", "answer_b": "b", "answer_c": "c", ' \
       '"answer_d": "%s", "correct_answer": "A"}\n'

READERS = {  # reader, file name, the file's lines (the bad byte on the last one, after "caf")
    "glue": (read_glue_tsv, "dev.tsv", [b"sentence\tlabel", b"fine\t1", LATIN1 + b"\t0"]),
    "csv": (read_table, "train.csv", [b"text,label", b"fine,1", LATIN1 + b",0"]),
    "tsv": (read_table, "train.tsv", [b"text\tlabel", LATIN1 + b"\t0"]),
    "jsonl": (read_table, "train.jsonl", [b'{"text": "fine", "label": 1}',
                                          b'{"text": "' + LATIN1 + b'", "label": 0}']),
    "squad": (read_squad, "dev.json", [
        b'{"data": [{"title": "t", "paragraphs": [{"qas": [{"id": "1", "question": "q", '
        b'"answers": [{"text": "caf", "answer_start": 0}]}],',
        b'"context": "' + LATIN1 + b'"}]}]}']),
    "conll": (read_conll, "train.txt", [b"EU B-ORG", b"", LATIN1 + b" O"]),
    "mmlu": (read_mmlu, "test.jsonl", [(MMLU % "d").encode()[:-1],
                                       (MMLU % "caf\xe9").encode("latin-1")[:-1]]),
    "vocab corpus": (lambda path: list(text_lines([path])), "corpus.txt",
                     [b"First line.", LATIN1]),
}


@pytest.mark.parametrize("name", sorted(READERS))
def test_a_byte_that_is_not_utf8_is_named_by_file_line_and_column(tmp_path, name):
    reader, filename, lines = READERS[name]
    path = tmp_path / filename
    path.write_bytes(b"\r\n".join(lines) + b"\r\n")
    line, column = len(lines), lines[-1].index(b"\xe9") + 1
    with pytest.raises(ValueError) as raised:
        reader(path)
    assert str(raised.value) == (f"{path}:{line}: not UTF-8 text (byte 0xe9 at column "
                                 f"{column}); save the file as UTF-8.")

    path.write_bytes(b"\xef\xbb\xbf" + b"\r\n".join(lines).replace(b"caf\xe9", b"caf\xc3\xa9"))
    assert reader(path)  # the same file in UTF-8 (with a byte order mark) reads


def test_a_pretraining_corpus_skips_bytes_that_are_not_utf8_with_a_warning(tmp_path):
    """Google's create_pretraining_data.py (google-research/bert tokenization.py,
    `convert_to_unicode`) decodes with errors "ignore"; kbert reads the bytes as U+FFFD, which
    its tokenizer deletes (tests/text: `_clean_text`), and says which file and line."""
    path = tmp_path / "corpus.txt"
    path.write_bytes(b"A first sentence.\nA " + LATIN1 + b" second.\n\nAnother \xff\xfe doc.\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        documents = list(read_documents([path], format="sentences"))
    assert documents == [["A first sentence.", "A caf\ufffd second."],
                         ["Another \ufffd\ufffd doc."]]
    assert [str(w.message) for w in caught] == [
        f"{path}: 2 line(s) are not UTF-8 text (the first: line 2); their bad bytes are "
        "skipped, as Google's create_pretraining_data.py skips them."]
