"""The graph SQuAD pipeline against the numpy reference on whole SQuAD files.

`BertSpanPreprocessor` (windows, offsets, max context, targets) vs `squad_features`, and
`decode_spans` vs `decode_answers` on seeded random logits (v1.1, and v2.0 with the threshold
at the median null-score difference), over the full dev set (10,570 questions) and the first
20,000 training questions, in chunks of questions (the algorithm is per question, so chunking
changes nothing). Prints windows, multi-window questions and mismatches per output, and the
seconds each side took (same machine, same run; the graph side runs eagerly, op by op).

    python benchmarks/squad_features_equality.py [--lengths 384/128 192/64] [--chunk 2000]
"""

import argparse
import pathlib
import sys
import time

import numpy as np
import tensorflow as tf

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # the numpy reference

from kbert.data.sources import fetch  # noqa: E402
from kbert.data.squad import read_squad
from tests.spans.reference_squad import decode_answers, squad_features
from kbert.text.span_decoding import decode_spans
from kbert.text.span_preprocessor import BertSpanPreprocessor
from kbert.text.tokenizer import BertTokenizer


def columns(examples):
    starts = [e.answers[0][1] if e.answers else -1 for e in examples]
    ends = [e.answers[0][1] + len(e.answers[0][0]) if e.answers else -1 for e in examples]
    return (tf.constant([e.question for e in examples]), tf.constant([e.context for e in examples]),
            tf.constant(starts, tf.int32), tf.constant(ends, tf.int32))


def feature_mismatches(got, expected, examples):
    """{output: mismatching windows} (all windows when the window counts differ)."""
    out = {}
    for key, value in got.items():
        value = value.numpy()
        if key == "unmappable":
            ids = [examples[i].id for i in np.unique(got["example_index"].numpy()[value == 1])]
            out[key] = int(ids != expected[key])
        elif value.shape != expected[key].shape:
            out[key] = len(expected[key])
        else:
            differs = value != expected[key]
            out[key] = int(differs.reshape(len(differs), -1).any(1).sum())
    return out


def answer_mismatches(examples, expected, windows, seed):
    """{version: mismatching questions} for random logits (text, chars, score, diff)."""
    rng = np.random.default_rng(seed)
    start, end = (rng.normal(0, 3, expected["token_ids"].shape).astype("float32")
                  for _ in range(2))
    contexts = tf.constant([e.context for e in examples])
    _, details = decode_answers(examples, expected, start, end, "1.1")
    diffs = [d["null_score_diff"] for d in details.values() if d["null_score_diff"] is not None]
    out = {}
    for version, threshold in (("1.1", 0.0), ("2.0", float(np.median(diffs)))):
        predictions, details = decode_answers(examples, expected, start, end, version,
                                              null_threshold=threshold)
        got = decode_spans(start, end, windows, contexts, version, null_threshold=threshold)
        got = {k: v.numpy() for k, v in got.items()}
        bad = 0
        for n, e in enumerate(examples):
            d = details[e.id]
            score = -np.inf if d["score"] is None else np.float32(d["score"])
            bad += (got["answer"][n].decode("utf-8") != predictions[e.id]
                    or got["start_char"][n] != d["start"] or got["end_char"][n] != d["end"]
                    or got["score"][n] != score)
        out[f"answers v{version}"] = bad
        out[f"empty v{version}"] = sum(p == "" for p in predictions.values())
    return out


def compare(name, examples, tokenizer, sequence_length, doc_stride, chunk):
    pre = BertSpanPreprocessor(tokenizer, sequence_length, doc_stride)
    totals, seconds = {"questions": len(examples), "windows": 0, "multi-window": 0}, [0.0, 0.0]
    for begin in range(0, len(examples), chunk):
        part = examples[begin:begin + chunk]
        t = time.perf_counter()
        expected = squad_features(part, tokenizer, sequence_length, doc_stride)
        seconds[0] += time.perf_counter() - t
        t = time.perf_counter()
        got = pre.windows(*columns(part))
        seconds[1] += time.perf_counter() - t
        totals["windows"] += len(expected["token_ids"])
        totals["multi-window"] += int((np.bincount(expected["example_index"]) > 1).sum())
        found = feature_mismatches(got, expected, part)
        found.update(answer_mismatches(part, expected, got, seed=begin))
        for key, count in found.items():
            totals[key] = totals.get(key, 0) + count
    print(f"{name} {sequence_length}/{doc_stride}: "
          + ", ".join(f"{k} {v}" for k, v in totals.items())
          + f"; features: numpy {seconds[0]:.1f} s, graph {seconds[1]:.1f} s", flush=True)
    return totals


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", nargs="+", default=["384/128", "192/64"])
    parser.add_argument("--chunk", type=int, default=2000)
    parser.add_argument("--train", type=int, default=20000)
    args = parser.parse_args()
    tokenizer = BertTokenizer.from_pretrained(fetch("minilm"))
    dev, _ = read_squad(fetch("squad") / "dev-v1.1.json")
    train, _ = read_squad(fetch("squad") / "train-v1.1.json")
    bad = 0
    for lengths in args.lengths:
        sequence_length, doc_stride = (int(v) for v in lengths.split("/"))
        for name, examples in (("dev", dev), (f"train[:{args.train}]", train[:args.train])):
            totals = compare(name, examples, tokenizer, sequence_length, doc_stride, args.chunk)
            bad += sum(v for k, v in totals.items()
                       if k not in ("questions", "windows", "multi-window")
                       and not k.startswith("empty"))
    print("all equal" if bad == 0 else f"{bad} mismatches")
    return int(bad > 0)


if __name__ == "__main__":
    raise SystemExit(main())
