"""What a `BertTokenizer` reads from disk: a checked vocab.txt (or, where a Hugging Face
directory has none, its tokenizer.json's WordPiece vocabulary), and the casing and word-length
limit a checkpoint directory records.

The word-length limit: WordPiece replaces a word of more than N characters with one [UNK].
google-research/bert's `tokenization.py` (`WordpieceTokenizer.__init__`,
`max_input_chars_per_word=200`; its first release had 100) uses 200; Hugging Face's BertTokenizer
uses 100 (transformers' `WordpieceTokenizer`, and the `tokenizers` WordPiece model behind
`BertTokenizerFast`, which records it in tokenizer.json as `model.max_input_chars_per_word`).
kbert defaults to Google's 200; a Hugging Face directory keeps the limit it was made with.
"""

import json
import os
import pathlib

SPECIAL_TOKENS = {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}
"""All five are used: [UNK] by WordPiece, [CLS]/[SEP] by packing, [PAD] by padding, [MASK] by
masked-LM pre-training."""

MAX_CHARS_PER_WORD = 200  # Google's `max_input_chars_per_word`
HF_MAX_CHARS_PER_WORD = 100  # Hugging Face's
LEGACY_MAX_CHARS_PER_WORD = 100
"""What kbert tokenizers saved before the limit was an argument used (configs, kbert_tokenizer.json
files without the key): reading them keeps the ids their models were trained on."""
MAX_CHARS_LIMIT = 10_000  # a sanity bound: the graph handles words of up to 4x this many bytes


def check_max_chars(value, source="max_chars_per_word"):
    """`value` as an int in [1, MAX_CHARS_LIMIT], or a ValueError naming `source`."""
    if isinstance(value, bool) or not isinstance(value, int) or not (
            1 <= value <= MAX_CHARS_LIMIT):
        raise ValueError(f"{source} must be a whole number of characters from 1 to "
                         f"{MAX_CHARS_LIMIT:,} (Google uses {MAX_CHARS_PER_WORD}, Hugging Face "
                         f"{HF_MAX_CHARS_PER_WORD}); got {value!r}.")
    return value


KERAS_HUB_VOCABULARY = "assets/tokenizer/vocabulary.txt"
"""Where a keras-hub preset keeps its tokenizer's vocabulary (one token per line)."""


def vocabulary_file(directory):
    """The vocabulary of a checkpoint directory: its vocab.txt (Hugging Face, Google, kbert) or
    a keras-hub preset's; vocab.txt when there is neither, for the error to name."""
    directory = pathlib.Path(directory)
    keras_hub = directory / KERAS_HUB_VOCABULARY
    if not (directory / "vocab.txt").is_file() and keras_hub.is_file():
        return keras_hub
    return directory / "vocab.txt"


def _read_vocab_file(vocabulary):
    path = pathlib.Path(vocabulary)
    if path.is_dir():
        path = vocabulary_file(path)
    fast = path.with_name("tokenizer.json")
    if not path.is_file() and path.name == "vocab.txt" and fast.is_file():
        return _wordpiece_vocabulary(fast)  # transformers 5 saves a tokenizer.json only
    if not path.is_file():
        raise FileNotFoundError(f"BertTokenizer: no vocabulary file at {str(path)!r}.")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        line = e.object[:e.start].count(b"\n") + 1
        raise ValueError(f"BertTokenizer: the vocabulary {str(path)!r} is not UTF-8 text (line "
                         f"{line}, byte {e.start}); a vocab.txt holds one token per "
                         "line.") from None
    # Google strips each line; a final newline does not make an extra token.
    tokens = [line.strip() for line in text.split("\n")]
    if tokens and tokens[-1] == "":
        tokens.pop()
    return tokens, f"the vocabulary {str(path)!r}"


def _wordpiece_vocabulary(path):
    """The tokens of a Hugging Face tokenizer.json's WordPiece model, in id order."""
    model = (_json(path) or {}).get("model")
    vocab = model.get("vocab") if isinstance(model, dict) else None
    if not isinstance(model, dict) or model.get("type") != "WordPiece" or not isinstance(
            vocab, dict):
        raise ValueError(f"BertTokenizer: {str(path)!r} holds no WordPiece vocabulary "
                         "(model.type 'WordPiece' with a model.vocab object) and there is no "
                         "vocab.txt beside it.")
    if sorted(v for v in vocab.values() if isinstance(v, int)) != list(range(len(vocab))):
        raise ValueError(f"BertTokenizer: the ids of model.vocab in {str(path)!r} must be "
                         f"0 to {len(vocab) - 1}, each once.")
    return sorted(vocab, key=vocab.get), f"the vocabulary in {str(path)!r}"


def load_vocabulary(vocabulary):
    """A list of tokens from a vocab.txt path (one token per line; a directory means its
    vocab.txt) or an iterable of tokens, checked: not empty, no empty or repeated token, and
    the five special tokens present. Errors name the file and the offending lines.

    Repeats are refused rather than resolved: Google's `load_vocab` silently gives a repeated
    token the id of its last line, so the earlier id can never be produced."""
    if isinstance(vocabulary, (str, os.PathLike)):
        tokens, where = _read_vocab_file(vocabulary)
    else:
        tokens = [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in vocabulary]
        where = f"the vocabulary (a list of {len(tokens)} tokens)"
    if not any(tokens):  # no lines, or blank ones only
        raise ValueError(f"BertTokenizer: {where} is empty; it needs at least "
                         f"{', '.join(SPECIAL_TOKENS.values())}.")
    first, dupes, empty = {}, [], []
    for i, tok in enumerate(tokens):
        if tok == "":
            empty.append(i + 1)
        elif tok in first:
            dupes.append(f"{tok!r} (lines {first[tok] + 1} and {i + 1})")
        else:
            first[tok] = i
    if empty:
        raise ValueError(f"BertTokenizer: {where} has empty tokens on lines {empty[:10]}.")
    if dupes:
        raise ValueError(f"BertTokenizer: {where} repeats tokens {', '.join(dupes[:10])}; "
                         "each token needs exactly one id.")
    missing = [t for t in SPECIAL_TOKENS.values() if t not in first]
    if missing:
        raise ValueError(f"BertTokenizer: {where} lacks the special tokens "
                         f"{', '.join(missing)}; BERT needs {', '.join(SPECIAL_TOKENS.values())}.")
    return tokens


def _json(path):
    """The object in the JSON file `path`, None if there is none; a clear error if unreadable."""
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"{str(path)!r} is not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{str(path)!r} should hold a JSON object, not a "
                         f"{type(value).__name__}.")
    return value


def casing_from_checkpoint(path):
    """Whether the checkpoint at `path` was trained on lowercased text.

    Order: `do_lower_case` in HF `tokenizer_config.json`; else `lowercase`/`do_lower_case` in a
    kbert or Google config; else `lowercase` in a keras-hub preset's tokenizer.json; else the
    Google directory naming convention (`uncased_L-12_...` vs `cased_L-12_...`, also
    `bert-base-cased`); else True, since most BERT checkpoints are uncased.
    """
    path = pathlib.Path(path)
    for name in ("tokenizer_config.json", "kbert_tokenizer.json", "bert_config.json"):
        cfg = _json(path / name) or {}
        for key in ("do_lower_case", "lowercase"):
            if isinstance(cfg.get(key), bool):
                return cfg[key]
    keras_hub = _json(path / "tokenizer.json") or {}  # keras-hub's: {"class_name", "config"}
    if keras_hub.get("class_name") == "BertTokenizer" and isinstance(
            (keras_hub.get("config") or {}).get("lowercase"), bool):
        return keras_hub["config"]["lowercase"]
    name = path.resolve().name.lower()
    if "uncased" in name:
        return True
    if "cased" in name:
        return False
    return True


def accents_from_checkpoint(path):
    """Whether the checkpoint at `path` strips accents apart from its casing: True or False
    where it says so, None where it does not (then accents go with lowercasing, as in Google's
    BERT). Read from `strip_accents` in Hugging Face's tokenizer_config.json, else in the
    bert_config.json kbert writes, else in a Hugging Face tokenizer.json's `BertNormalizer`,
    else in a keras-hub preset's tokenizer.json."""
    path = pathlib.Path(path)
    fast = _json(path / "tokenizer.json") or {}
    places = [("tokenizer_config.json", _json(path / "tokenizer_config.json") or {}),
              ("bert_config.json", _json(path / "bert_config.json") or {}),
              ("tokenizer.json normalizer", fast.get("normalizer") or {}),
              ("tokenizer.json config", fast.get("config") or {})]
    for where, settings in places:
        value = settings.get("strip_accents") if isinstance(settings, dict) else None
        if value is not None:
            if not isinstance(value, bool):
                raise ValueError(f"strip_accents in {str(path)!r} ({where}) should be true, "
                                 f"false or null, not {value!r}.")
            return value
    return None


def max_chars_from_checkpoint(path):
    """The word-length limit the tokenizer of the checkpoint at `path` used.

    Order: `max_chars_per_word` in kbert_tokenizer.json (older kbert runs wrote that file
    without it: 100, the limit they used); a Hugging Face tokenizer.json's
    `model.max_input_chars_per_word`, else a `max_input_chars_per_word` in tokenizer_config.json,
    else 100 if either file is there (Hugging Face's value); else Google's 200 (Google and kbert
    directories).
    """
    path = pathlib.Path(path)
    own = _json(path / "kbert_tokenizer.json")
    if own is not None:
        return check_max_chars(own.get("max_chars_per_word", LEGACY_MAX_CHARS_PER_WORD),
                               f"max_chars_per_word in {str(path / 'kbert_tokenizer.json')!r}")
    fast = _json(path / "tokenizer.json")
    model = (fast or {}).get("model")
    if isinstance(model, dict) and model.get("max_input_chars_per_word") is not None:
        return check_max_chars(model["max_input_chars_per_word"],
                               f"model.max_input_chars_per_word in "
                               f"{str(path / 'tokenizer.json')!r}")
    config = _json(path / "tokenizer_config.json")
    if (config or {}).get("max_input_chars_per_word") is not None:
        return check_max_chars(config["max_input_chars_per_word"],
                               f"max_input_chars_per_word in "
                               f"{str(path / 'tokenizer_config.json')!r}")
    if fast is not None or config is not None:
        return HF_MAX_CHARS_PER_WORD
    return MAX_CHARS_PER_WORD
