"""Google BERT's character classes, computed from Python's `unicodedata`.

Google's BasicTokenizer decides every character's fate with Python's `unicodedata` (and
`str.lower`, `str.split`). To reproduce it bit for bit inside a TensorFlow graph, kbert derives
the same decisions from the same database here, once per process, and hands the graph explicit
code-point tables and RE2 character classes. The Unicode version is therefore the running
Python's (`unicodedata.unidata_version`), exactly as it is for Google's code.

The graph normalizes text one character at a time (`char_map`), which is what lets it track
offsets into the original string. That is exact because of facts `check_invariants` checks:
no character turns into whitespace, CJK ideographs stay CJK ideographs and nothing else becomes
one, so splitting after normalization equals Google's splitting before it. The one context rule
of `str.lower` (a final capital sigma becomes `ς`) is applied separately with a regex.
"""

import functools
import hashlib
import json
import os
import pathlib
import unicodedata

# Google's `_is_chinese_char` ranges: the CJK Unified Ideographs blocks and extensions plus
# the compatibility ideographs. Hangul, kana and CJK punctuation are deliberately not in it.
CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)

_MAX = 0x110000


def _stored(name, compute):
    """`compute()`, kept on disk after the first time: deriving the tables walks all 1.1M
    code points (seconds), which every process that builds a tokenizer would otherwise pay.

    The file (`$KBERT_CACHE`, default ~/.cache/kbert) is keyed by the Unicode version and this
    module's code, so a new Python or a change here computes afresh; an unreadable one is
    recomputed and replaced, and a cache directory that cannot be written is only skipped.
    """
    source = hashlib.sha256(pathlib.Path(__file__).read_bytes()).hexdigest()[:16]
    directory = pathlib.Path(os.environ.get("KBERT_CACHE", "~/.cache/kbert")).expanduser()
    path = directory / f"unicode-{unicodedata.unidata_version}-{source}-{name}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    value = compute()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        staging = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        staging.write_text(json.dumps(value), encoding="utf-8")
        os.replace(staging, path)
    except OSError:
        pass
    return value


def _chars():
    for cp in range(_MAX):
        if 0xD800 <= cp <= 0xDFFF:  # surrogates never come out of a UTF-8 decoder
            continue
        yield cp, chr(cp)


def is_removed(ch):
    """Google's `_clean_text` drops NUL, U+FFFD and control/format characters (Cc, Cf)."""
    if ch in "\t\n\r":
        return False
    return ord(ch) in (0, 0xFFFD) or unicodedata.category(ch) in ("Cc", "Cf")


def is_whitespace(ch):
    """Space for Google: \\t \\n \\r, Zs, and whatever else Python's `str.split` splits on."""
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs" or ch.isspace()


def is_punctuation(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_cjk(ch):
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


def normalize_char(ch, lowercase, strip_accents=None):
    """What Google's BasicTokenizer turns one character into, context aside. `strip_accents`
    (NFD, then no Mn marks) follows `lowercase` unless given, as in Hugging Face's
    BasicTokenizer, whose `strip_accents` option some checkpoints set."""
    if is_removed(ch):
        return ""
    if is_whitespace(ch):
        return " "
    out = ch.lower() if lowercase else ch
    if lowercase if strip_accents is None else strip_accents:
        out = "".join(c for c in unicodedata.normalize("NFD", out)
                      if unicodedata.category(c) != "Mn")
    return out


def char_map(lowercase, strip_accents=None):
    """{char: replacement} for every character the normalizer changes.

    Capital sigma is left alone (mapped by `sigma_patterns` in context).
    """
    strip = lowercase if strip_accents is None else strip_accents
    name = ("uncased" if lowercase else "cased") + (
        "" if strip == lowercase else "-stripped" if strip else "-accents")
    return _stored(f"char_map-{name}", lambda: compute_char_map(lowercase, strip))


def compute_char_map(lowercase, strip_accents=None):
    table = {}
    for cp, ch in _chars():
        if ch == "\u03a3":
            continue
        out = normalize_char(ch, lowercase, strip_accents)
        if out != ch:
            table[ch] = out
    return table


@functools.lru_cache(maxsize=None)
def _sigma_classes():
    """Code points Python's final-sigma rule treats as case-ignorable, and as cased.

    Python does not expose these properties, so they are measured with `str.lower` itself.
    """
    ignorable, cased = [], []
    for cp, ch in _chars():
        before = (ch + "\u03a3").lower().endswith("\u03c2")  # ch is cased and not ignorable
        between = ("\u0391" + ch + "\u03a3").lower().endswith("\u03c2")
        if before:
            cased.append(cp)
        elif between:
            ignorable.append(cp)
    return ignorable, cased


def _ranges(cps):
    cps = sorted(set(cps))
    out, start, prev = [], None, None
    for cp in cps:
        if start is None:
            start = prev = cp
        elif cp == prev + 1:
            prev = cp
        else:
            out.append((start, prev))
            start = prev = cp
    if start is not None:
        out.append((start, prev))
    return out


def char_class(cps, negate=False):
    """An RE2 character class matching exactly the code points `cps`."""
    parts = []
    for lo, hi in _ranges(cps):
        parts.append(f"\\x{{{lo:X}}}" if lo == hi else f"\\x{{{lo:X}}}-\\x{{{hi:X}}}")
    return "[" + ("^" if negate else "") + "".join(parts) + "]"


@functools.lru_cache(maxsize=None)
def split_pattern():
    """(delimiter regex, kept-delimiter regex) for splitting normalized text into words."""
    return tuple(_stored("split_pattern", compute_split_pattern))


def compute_split_pattern():
    isolated = [cp for cp, ch in _chars() if is_punctuation(ch) or is_cjk(ch)]
    keep = char_class(isolated)
    return " |" + keep, keep


@functools.lru_cache(maxsize=None)
def sigma_pattern():
    """Regex whose group 3 is a capital sigma that `str.lower` makes final (`ς`).

    Applied to normalized text, where deleted characters are already gone (as in Google's code,
    which lowercases after cleaning) and spaces end a word.
    """
    return _stored("sigma_pattern", compute_sigma_pattern)


def compute_sigma_pattern():
    ignorable, cased = _sigma_classes()
    ign = char_class(ignorable)
    cased_cls = char_class(cased)
    not_cased = char_class(set(ignorable) | set(cased), negate=True)
    return f"({cased_cls}{ign}*)(\u03a3)({ign}*(?:{not_cased}|$))"


def check_invariants(lowercase, strip_accents=None):
    """The facts that make per-character normalization equal Google's per-word one."""
    problems = []
    for ch, out in char_map(lowercase, strip_accents).items():
        if out == " ":
            continue
        if any(c.isspace() for c in out):
            problems.append(f"U+{ord(ch):04X} becomes whitespace")
        if is_cjk(ch) != any(is_cjk(c) for c in out) or (is_cjk(ch) and len(out) != 1):
            problems.append(f"U+{ord(ch):04X} changes CJK status")
    return problems
