"""A plain-Python statement of Google's original BERT tokenization, the yardstick for kbert.

It follows google-research/bert's `tokenization.py` step by step (`FullTokenizer.tokenize` =
`BasicTokenizer.tokenize`, then `WordpieceTokenizer.tokenize` on each word), with the same
constants, in our own words and with no tables and no TensorFlow, so it can be read and trusted
on its own:

  `convert_to_unicode`: bytes are decoded as UTF-8 dropping invalid bytes ("ignore");
  `_clean_text`: NUL, U+FFFD and `_is_control` (Cc, Cf; not \\t \\n \\r) are deleted,
     `_is_whitespace` (space \\t \\n \\r, Zs) becomes a space;
  `_tokenize_chinese_chars`: spaces around CJK ideographs (`_is_chinese_char`'s 8 ranges);
  `whitespace_tokenize`: `str.strip` + `str.split`;
  per word, uncased only: `str.lower`, then `_run_strip_accents` (NFD, drop Mn);
  `_run_split_on_punc`: every `_is_punctuation` character (ASCII 33-47 58-64 91-96 123-126,
     or Unicode P*) is its own word; the words are re-split on whitespace;
  `WordpieceTokenizer.tokenize`: a word of more than `max_input_chars_per_word` characters is
     one [UNK]; else greedy longest-match-first with "##" continuations, [UNK] for the whole
     word if some position has no piece.

`max_input_chars_per_word`: Google's `WordpieceTokenizer.__init__` says 200 (their first
release, commit f18bd94, said 100). Hugging Face's differs: 100, in transformers'
src/transformers/models/bert/tokenization_bert.py (`WordpieceTokenizer.__init__`; in v5
tokenization_bert_legacy.py) and in the `tokenizers` WordPiece model that BertTokenizerFast runs
(tokenizer.json `model.max_input_chars_per_word`). `ReferenceTokenizer` takes either.
"""

import unicodedata

GOOGLE_MAX_CHARS = 200  # google-research/bert tokenization.py, WordpieceTokenizer.__init__
HF_MAX_CHARS = 100  # transformers' WordpieceTokenizer, tokenizers' WordPiece

CJK = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
       (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]


def _control(ch):
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch) in ("Cc", "Cf")


def _space(ch):
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _punct(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _cjk(ch):
    return any(lo <= ord(ch) <= hi for lo, hi in CJK)


def _strip_accents(word):
    return "".join(ch for ch in unicodedata.normalize("NFD", word)
                   if unicodedata.category(ch) != "Mn")


def _split_on_punct(word):
    out, current = [], ""
    for ch in word:
        if _punct(ch):
            if current:
                out.append(current)
            out.append(ch)
            current = ""
        else:
            current += ch
    if current:
        out.append(current)
    return out


def basic_tokenize(text, lowercase):
    if isinstance(text, bytes):
        text = text.decode("utf-8", "ignore")
    cleaned = "".join(" " if _space(ch) else ch for ch in text
                      if not (ord(ch) in (0, 0xFFFD) or _control(ch)))
    spaced = "".join(f" {ch} " if _cjk(ch) else ch for ch in cleaned)
    pieces = []
    for word in spaced.split():
        if lowercase:
            word = _strip_accents(word.lower())
        pieces.extend(_split_on_punct(word))
    return " ".join(pieces).split()


def wordpiece(word, vocab, unk="[UNK]", max_chars=GOOGLE_MAX_CHARS):
    if len(word) > max_chars:
        return [unk]
    out, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
            end -= 1
        if end == start:
            return [unk]
        out.append(piece)
        start = end
    return out


class ReferenceTokenizer:
    def __init__(self, tokens, lowercase, max_chars=GOOGLE_MAX_CHARS):
        self.vocab = {t: i for i, t in enumerate(tokens)}
        self.lowercase = lowercase
        self.max_chars = max_chars

    def tokenize(self, text):
        return [p for w in basic_tokenize(text, self.lowercase)
                for p in wordpiece(w, self.vocab, max_chars=self.max_chars)]

    def encode(self, text):
        return [self.vocab[t] for t in self.tokenize(text)]


def truncate_pair(a, b, max_length):
    """Google's `_truncate_seq_pair`: drop from the end of the longer list, `b` on a tie."""
    a, b = list(a), list(b)
    while len(a) + len(b) > max_length:
        if len(a) > len(b):
            a.pop()
        else:
            b.pop()
    return a, b
