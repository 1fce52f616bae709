"""CoNLL-style word splitting of raw text as graph ops (`split_words`), for serving NER.

The same words as the pre-redesign `split_words` (kept in `tests/spans/reference_conll.py`),
the regex `\\w+(?:[-'’.&]\\w+)*|[^\\w\\s]` (runs of word characters joined by inner hyphens,
apostrophes, periods and ampersands, and single punctuation marks), with each word's
[start, end) in characters of the original string.

Why the character classes are spelled out: Python's `\\w` and `\\s` are Unicode (str.isalnum or
"_"; str.isspace, which includes U+001C-U+001F, U+0085, U+00A0, ...), RE2's `\\s` is ASCII only,
and RE2's `\\pL\\pN` follow RE2's own Unicode version (newer than Python 3.11's 14.0: 4,388 code
points unassigned in 14.0 are letters or digits there). The classes are read off the running
Python's `re` instead (as `kbert.text.unicode_tables` reads `unicodedata`), so every code point
is classified as the reference classifies it; the exported graph carries them as constants.

Invalid UTF-8 (impossible in a Python str) is first replaced, one U+FFFD per invalid sequence,
so character offsets count each such sequence as one character, as `BertTokenizer` does.
"""

import functools
import re
import sys

from kbert.text.tf_libs import tf, tf_text

_JOINERS = "-'\u2019.&"  # the characters that may join two word runs into one word
_SURROGATES = (0xD800, 0xE000)  # not characters: Python str can hold them, UTF-8 cannot


def _class_ranges(pattern):
    """RE2 class body (`\\x{a}-\\x{b}...`) of the code points one-character `pattern` matches
    in the running Python."""
    parts = []
    for low, high in ((0, _SURROGATES[0]), (_SURROGATES[1], sys.maxunicode + 1)):
        chars = "".join(map(chr, range(low, high)))
        for m in re.finditer(pattern + "+", chars):
            a, b = ord(m.group()[0]), ord(m.group()[-1])
            parts.append(f"\\x{{{a:x}}}" if a == b else f"\\x{{{a:x}}}-\\x{{{b:x}}}")
    return "".join(parts)


@functools.lru_cache(maxsize=None)
def word_patterns():
    """(split pattern, keep pattern) for `tf_text.regex_split_with_offsets`: the keep pattern
    is the reference regex with Python's classes; the split pattern also matches whitespace
    runs (dropped), so that nothing between two matches is left over."""
    word, space = _class_ranges(r"\w"), _class_ranges(r"\s")
    joiners = "".join(f"\\x{{{ord(c):x}}}" for c in _JOINERS)
    keep = f"[{word}]+(?:[{joiners}][{word}]+)*|[^{word}{space}]"
    return f"{keep}|[{space}]+", keep


def _check_text(text):
    text = tf.convert_to_tensor(text)
    if text.dtype != tf.string:
        raise TypeError(f"split_words expects strings, got dtype {text.dtype.name}.")
    if text.shape.rank != 1:
        raise ValueError(f"split_words expects strings of shape [batch], got shape {text.shape}.")
    return text


def split_words(text):
    """Raw strings [batch] → (words, starts, ends, text): words ragged string [batch, None];
    starts/ends ragged int32, each word's [start, end) in characters of `text`; and `text`
    itself with invalid UTF-8 replaced (what the offsets index, for entity strings)."""
    text = tf.strings.unicode_transcode(_check_text(text), "UTF-8", "UTF-8", errors="replace",
                                        replacement_char=0xFFFD)
    split, keep = word_patterns()
    words, begin, _ = tf_text.regex_split_with_offsets(text, split, keep)
    # Byte offsets → character offsets: a word's start is the number of characters whose
    # first byte comes before it (a search per word, not a copy of the text before it).
    _, char_bytes = tf.strings.unicode_decode_with_offsets(text, "UTF-8")
    big = tf.int64.max  # padding that keeps each row sorted
    starts = tf.searchsorted(char_bytes.to_tensor(big), begin.to_tensor(big), side="left",
                             out_type=tf.int32)
    starts = tf.RaggedTensor.from_tensor(starts, lengths=begin.row_lengths()).flat_values
    ends = starts + tf.strings.length(words.flat_values, unit="UTF8_CHAR")
    return words, words.with_flat_values(starts), words.with_flat_values(ends), text
