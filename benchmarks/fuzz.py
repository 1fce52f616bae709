"""Hostile text through kbert's entry points: counts of cases, correct answers, clear errors and
crashes (issue #23).

Entry points: the tokenizer and `BertPreprocessor` (single, pair, multiple choice) in this
process; the `serving_default` / `serve_token_ids` signatures of every kind of export (sentence
and pair classifiers, multiple choice, span labeler, token classifier; tiny random models on the
real MiniLM vocabulary) in a fresh serving process with TensorFlow and tensorflow-text's ops only
(`benchmarks/fuzz_serving.py`). Inputs: random Unicode from all planes, combining marks,
right-to-left text and controls, emoji sequences, control characters and NUL, invalid UTF-8,
typed special tokens ("[SEP]" is text), 10,000-character words, 1 MB strings, empty strings and
empty batches; for `serve_token_ids`, ids, segments and masks in and out of range, bad shapes;
for the classifier's `serve_examples`, the hostile strings as tf.Examples (answered as
`serving_default` answers them) or spoiled: a feature missing, of another type or count, an
example's bytes cut, changed or replaced by noise.

A case is one string (one id batch for `serve_token_ids`, one request for malformed requests
and spoiled examples).
Verdicts: "ok" (an answer keeping the invariants: ids in range, no special id from user text,
[CLS] A [SEP] (B [SEP]) with Google's truncation, shapes, answers that are the text's own
characters, probabilities summing to 1; invalid UTF-8 is dropped, as Google's `errors="ignore"`
decoding: the ids equal those of the text without its invalid bytes), "error" (a clear
InvalidArgument/Type/Value error naming the input, where one is due), "wrong" (an invariant
broken, or an answer where an error is due), "crash" (any other exception, or the serving
process dying). After each entry point a normal request must still answer as before.

    python -m benchmarks.fuzz [--cases 10000] [--seed 0] [--output benchmarks/results/fuzz.json]
"""

import argparse
import collections
import json
import pathlib
import random
import time

SEQUENCE_LENGTH = 32
NUM_CHOICES = 3
SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
WORDS = tuple(("the river flows through paris . who was born in 1990 ? a museum opened in berlin "
         "café naïve ÉCOLE straße İstanbul ΣΟΦΟΣ don't state-of-the-art 東京 北京 ##s").split())
RESULTS = pathlib.Path(__file__).parent / "results" / "fuzz.json"
LIBRARY_ENTRIES = ("tokenizer", "single", "pair", "choices")


# --- hostile strings ----------------------------------------------------------------------

def _chars(rng, ranges, n):
    return "".join(chr(rng.randint(*rng.choice(ranges))) for _ in range(n))


def _unicode(rng):  # every plane, surrogates excluded (not characters)
    return _chars(rng, [(0, 0xD7FF), (0xE000, 0x10FFFF), (0x20, 0x7E), (0x4E00, 0x9FFF)],
                  rng.randint(1, 40))


def _combining(rng):
    marks = [(0x300, 0x36F), (0x1AB0, 0x1AFF), (0x20D0, 0x20FF), (0x1D165, 0x1D172)]
    return "".join(rng.choice("aeoıİσΣ한") + _chars(rng, marks, rng.randint(0, 8))
                   for _ in range(rng.randint(1, 6)))


def _rtl(rng):
    text = _chars(rng, [(0x590, 0x5FF), (0x600, 0x6FF), (0x30, 0x39)], rng.randint(1, 20))
    return "".join(c + rng.choice(["", " ", "\u200f", "\u202e", "\u2066", "\u200e"])
                   for c in text)


def _emoji(rng):
    parts = ["😀", "👩\u200d👩\u200d👧", "👍🏽", "🇫🇷", "❤\ufe0f", "\U0001faf6", "🏳\ufe0f\u200d🌈"]
    return "".join(rng.choice(parts + [" ", "a"]) for _ in range(rng.randint(1, 10)))


def _control(rng):
    controls = [(0, 0x1F), (0x7F, 0x9F), (0x200B, 0x200F), (0x2028, 0x202E), (0xFEFF, 0xFEFF),
                (0xFFF9, 0xFFFD)]
    return "".join(rng.choice([_chars(rng, controls, rng.randint(1, 4)), rng.choice(WORDS),
                               "\x00"]) for _ in range(rng.randint(1, 8)))


def _special(rng):
    return " ".join(rng.choice(SPECIAL + WORDS + ("[sep]", "[ CLS ]", "##")) for _ in
                    range(rng.randint(1, 8)))


def _long_word(rng):
    word = rng.choice(["a", "é", "東", "ab", "x\u0301"]) * (10_000 // 2) if rng.random() < 0.5 \
        else _chars(rng, [(0x61, 0x7A)], 10_000)
    return rng.choice(["", "the river "]) + word[:10_000] + rng.choice(["", " flows ."])


def _megabyte(rng):
    piece = rng.choice(["the river flows . ", "東京", "😀", " ", "\x00", "a"])
    return (piece * (1_000_000 // len(piece.encode()) + 1))[:1_000_000 // len(piece.encode())]


def _empty(rng):
    return rng.choice(["", " ", "\n", "\t \r\n", "\u3000"])


INVALID = [b"\xff", b"\xfe", b"\x80", b"\xbf\xbf", b"\xc0\xaf", b"\xe2\x82", b"\xed\xa0\x80",
           b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xc3", b"\xe6\x9d"]
KINDS = {"unicode": (_unicode, 6), "combining": (_combining, 3), "rtl": (_rtl, 2),
         "emoji": (_emoji, 2), "control": (_control, 3), "special": (_special, 3),
         "long_word": (_long_word, 1), "empty": (_empty, 1), "invalid": (None, 3),
         "words": (lambda rng: " ".join(rng.choices(WORDS, k=rng.randint(1, 30))), 3)}


def random_text(rng, megabyte=False):
    """(kind, bytes): one hostile string; `megabyte=True` gives a 1 MB one."""
    if megabyte:
        return "megabyte", _megabyte(rng).encode()
    kind = rng.choices(list(KINDS), [w for _, w in KINDS.values()])[0]
    if kind != "invalid":
        return kind, KINDS[kind][0](rng).encode()
    text = bytearray(rng.choice([_unicode, _special, _emoji])(rng).encode())
    for _ in range(rng.randint(1, 4)):
        at = rng.randint(0, len(text))
        text[at:at] = rng.choice(INVALID + [bytes([rng.randint(0x80, 0xFF)])])
    return kind, bytes(text)


def texts_for(seed, entry, index, megabyte_every=0, batch=8):
    """(cases, rng): the (kind, bytes) strings of request `index` of `entry`, 1 to `batch` of
    them (none every 50th: an empty batch), reproducible from (seed, entry, index) alone; with
    `megabyte_every` > 0, every so many requests hold a 1 MB string."""
    rng = random.Random(f"{seed}:{entry}:{index}")
    size = rng.randint(1, batch) if index % 50 else 0
    big = bool(megabyte_every) and index % megabyte_every == megabyte_every - 1
    return [random_text(rng, megabyte=big and i == 0) for i in range(size)], rng


# --- the library entry points, in this process -----------------------------------------------

def google_pair(a, b, budget):
    """Google's `_truncate_seq_pair`: drop from the longer list (B on ties) until they fit."""
    a, b = list(a), list(b)
    while len(a) + len(b) > budget:
        (a if len(a) > len(b) else b).pop()
    return a, b


class Library:
    """The tokenizer and preprocessors under test, and the reference each answer must equal."""

    def __init__(self, tokenizer):
        import tensorflow as tf

        from kbert.text import BertPreprocessor
        from kbert.text.preprocessor_base import cap_text, text_budget

        self.tf, self.tokenizer = tf, tokenizer
        pre = BertPreprocessor(tokenizer, SEQUENCE_LENGTH)
        # Traced once each: eager ragged ops cost ~50 ms a call, a graph ~1 ms.
        strings = tf.TensorSpec([None], tf.string)
        self.tokenize = tf.function(lambda t: tokenizer(t).to_tensor(-1),
                                    input_signature=[strings])
        self.cap = {n: tf.function(lambda t, b=text_budget(tokenizer, n): cap_text(t, b),
                                   input_signature=[strings])
                    for n in (SEQUENCE_LENGTH - 2, SEQUENCE_LENGTH - 3)}
        self.pack = {"single": tf.function(pre, input_signature=[strings]),
                     "pair": tf.function(lambda a, b: pre((a, b)),
                                         input_signature=[strings, strings]),
                     "choices": tf.function(lambda a, b: pre((a, b)), input_signature=[
                         strings, tf.TensorSpec([None, NUM_CHOICES], tf.string)])}
        self.special = {tokenizer.token_to_id(t) for t in SPECIAL if t != "[UNK]"}
        self.vocab = tokenizer.vocabulary_size()
        self.cls, self.sep = tokenizer.cls_token_id, tokenizer.sep_token_id

    def ids(self, texts):
        """The tokenizer's ids of each string, as lists."""
        dense = self.tokenize(self.tf.constant(texts, self.tf.string)).numpy()
        return [[int(i) for i in row if i != -1] for row in dense]

    def reference(self, texts, tokens):
        """Ids of each text cut as the preprocessor cuts it (what `tokens` kept tokens can come
        from), tokenized with invalid UTF-8 dropped by Python: the ids a row must hold."""
        cut = self.cap[tokens](self.tf.constant(texts, self.tf.string)).numpy().tolist()
        return self.ids([t.decode("utf-8", "ignore").encode() for t in cut])

    def tokenizer_verdicts(self, texts):
        ids = self.ids(texts)
        if not texts:  # an empty batch: one case, answered with no rows
            return [ids == []]
        clean = self.ids([t.decode("utf-8", "ignore").encode() for t in texts])
        return [self._ids_ok(row) and row == ref for row, ref in zip(ids, clean)]

    def _ids_ok(self, ids):
        return all(0 <= i < self.vocab and i not in self.special for i in ids)

    def row_ok(self, row, parts):
        """A packed row [CLS] A [SEP] (B [SEP]) [PAD]... with A, B the given id lists."""
        ids, seg, mask = (list(map(int, row[k])) for k in ("token_ids", "segment_ids",
                                                             "padding_mask"))
        want, want_seg = [self.cls], [0]
        for n, part in enumerate(parts):
            want += list(part) + [self.sep]
            want_seg += [n] * (len(part) + 1)
        pad = SEQUENCE_LENGTH - len(want)
        return (pad >= 0 and ids == want + [0] * pad and seg == want_seg + [0] * pad
                and mask == [1] * len(want) + [0] * pad
                and all(self._ids_ok(part) for part in parts))

    def packed_verdicts(self, entry, texts, rng):
        tf, n = self.tf, len(texts)
        if entry == "single":
            out = self.pack["single"](tf.constant(texts, tf.string))
            if not texts:
                return [out["token_ids"].shape == (0, SEQUENCE_LENGTH)]
            refs = self.reference(texts, SEQUENCE_LENGTH - 2)
            return [self.row_ok(self._row(out, i), [r[:SEQUENCE_LENGTH - 2]])
                    for i, r in enumerate(refs)]
        seconds = [random_text(rng)[1] for _ in range(n * (NUM_CHOICES if entry == "choices"
                                                             else 1))]
        if entry == "pair":
            out = self.pack["pair"](tf.constant(texts, tf.string),
                                    tf.constant(seconds, tf.string))
            firsts = texts
        else:
            choices = tf.reshape(tf.constant(seconds, tf.string), [n, NUM_CHOICES])
            out = self.pack["choices"](tf.constant(texts, tf.string), choices)
            if out["token_ids"].shape != (n, NUM_CHOICES, SEQUENCE_LENGTH):
                return [False] * max(n, 1)
            out = {k: tf.reshape(v, [-1, SEQUENCE_LENGTH]) for k, v in out.items()}
            firsts = [t for t in texts for _ in range(NUM_CHOICES)]
        if not texts:
            return [out["token_ids"].shape[0] == 0]
        a = self.reference(firsts, SEQUENCE_LENGTH - 3)
        b = self.reference(seconds, SEQUENCE_LENGTH - 3)
        rows = [self.row_ok(self._row(out, i), google_pair(x, y, SEQUENCE_LENGTH - 3))
                for i, (x, y) in enumerate(zip(a, b))]
        if entry == "pair":
            return rows
        return [all(rows[i * NUM_CHOICES:(i + 1) * NUM_CHOICES]) for i in range(n)]

    _row = staticmethod(lambda out, i: {k: v[i].numpy() for k, v in out.items()})


def classify(call, clear=("InvalidArgumentError", "TypeError", "ValueError")):
    """(verdicts or None, error verdict): runs `call`; an exception of a `clear` type with a
    message is a clear error, any other a crash."""
    try:
        return call(), None
    except Exception as e:  # noqa: BLE001 - every exception is counted
        return None, "error" if type(e).__name__ in clear and str(e).strip() else "crash"


def run_library(entries, cases, seed, tokenizer, megabyte_every=500):
    """{entry: Counter of verdicts} over `cases` strings per entry (requests of 0-4 strings)."""
    lib = Library(tokenizer)
    counts, failures = {}, []
    for entry in entries:
        tally, index = collections.Counter(), 0
        while tally["cases"] < cases:
            batch, rng = texts_for(seed, entry, index, megabyte_every, batch=16)
            texts = [t for _, t in batch]
            run = (lambda: lib.tokenizer_verdicts(texts)) if entry == "tokenizer" else (
                lambda: lib.packed_verdicts(entry, texts, rng))
            verdicts, error = classify(run)
            batch = batch or [("empty_batch", b"")]
            tally["cases"] += len(batch)
            for (kind, text), ok in zip(batch, verdicts or [error] * len(batch)):
                verdict = {True: "ok", False: "wrong"}.get(ok, ok)
                tally[verdict] += 1
                if verdict in ("wrong", "crash"):
                    failures.append({"entry": entry, "index": index, "kind": kind,
                                     "text": text[:200].decode("utf-8", "backslashreplace")})
            index += 1
        counts[entry] = dict(tally)
    return counts, failures


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=10_000, help="cases per entry point")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=str(RESULTS))
    parser.add_argument("--skip-serving", action="store_true")
    parser.add_argument("--huge-mb", type=int, default=16,
                        help="first time one request of this many MB per text signature")
    args = parser.parse_args(argv)
    if args.cases < 1:
        parser.error(f"--cases must be positive, got {args.cases}")
    from benchmarks import fuzz_serving
    from kbert.text import BertTokenizer

    start = time.perf_counter()
    tokenizer = BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
    library, failures = run_library(LIBRARY_ENTRIES, args.cases, args.seed, tokenizer)
    counts = {f"library {k}": v for k, v in library.items()}
    if not args.skip_serving:
        serving, more = fuzz_serving.run(args.cases, args.seed, huge_mb=args.huge_mb)
        counts.update({f"served {k}": v for k, v in serving.items()})
        failures += more
    result = {"cases_per_entry": args.cases, "seed": args.seed, "counts": counts,
              "failures": failures[:50], "seconds": round(time.perf_counter() - start, 1)}
    pathlib.Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.output).write_text(json.dumps(result, indent=1) + "\n")
    for entry, tally in counts.items():
        print(f"{entry:>20}: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.items())))
    return result


if __name__ == "__main__":
    main()
