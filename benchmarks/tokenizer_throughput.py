"""Tokenization + packing throughput: kbert's in-graph BertPreprocessor vs Hugging Face.

Same sentences (real SQuAD questions/contexts and Wikipedia sentences), same uncased vocab.txt,
same output (ids, segment ids, mask; truncated and padded to 128). kbert runs as it would in
training: batches through tf.data (parallel map) and as one tf.function call per batch; the peer
is the Rust `tokenizers` BertWordPieceTokenizer's `encode_batch` (multi-threaded). Reports
medians over several rounds and kbert/HF ratios; first runs (tracing, warm-up) are discarded.

    python benchmarks/tokenizer_throughput.py [--sentences 4096] [--rounds 5] [--batch 256]
"""

import argparse
import json
import os
import re
import statistics
import time

import numpy as np
import tensorflow as tf

from kbert.data.sources import fetch
from kbert.text.preprocessor import BertPreprocessor
from kbert.text.tokenizer import BertTokenizer


def real_sentences(n):
    squad = json.loads((fetch("squad") / "dev-v1.1.json").read_text(encoding="utf-8"))
    wiki = json.loads((fetch("wikipedia") / "summaries_en-us.json").read_text(encoding="utf-8"))
    out = []
    for article in squad["data"]:
        for para in article["paragraphs"]:
            out.extend(q["question"] for q in para["qas"])
            out.extend(re.split(r"(?<=[.!?])\s+", para["context"]))
    for v in wiki.values():
        out.extend(re.split(r"(?<=[.!?])\s+", v["extract"]))
    rng = np.random.default_rng(0)
    return [out[i] for i in rng.choice(len(out), size=n, replace=False)]


def median_rate(fn, n, rounds):
    fn()  # warm-up: tracing, thread pools
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return n / statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sentences", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--sequence-length", type=int, default=128)
    args = parser.parse_args()

    vocab = fetch("minilm") / "vocab.txt"
    sentences = real_sentences(args.sentences)
    n, seq = len(sentences), args.sequence_length

    pre = BertPreprocessor(BertTokenizer(vocab, lowercase=True), sequence_length=seq)
    packed = tf.function(pre, input_signature=[tf.TensorSpec([None], tf.string)])
    batches = [tf.constant(sentences[i:i + args.batch]) for i in range(0, n, args.batch)]

    def kbert_function():
        for b in batches:
            out = packed(b)
        return out["token_ids"].numpy()

    # One parallel map call per core: on small machines AUTOTUNE oversubscribes the cores.
    dataset = (tf.data.Dataset.from_tensor_slices(sentences).batch(args.batch)
               .map(pre, num_parallel_calls=os.cpu_count()).prefetch(2))

    def kbert_data():
        for out in dataset:
            pass
        return out["token_ids"].numpy()

    from tokenizers import BertWordPieceTokenizer

    hf = BertWordPieceTokenizer(str(vocab), lowercase=True)
    hf.enable_truncation(max_length=seq)
    hf.enable_padding(length=seq)

    def hugging_face():
        encs = hf.encode_batch(sentences)
        return (np.array([e.ids for e in encs], np.int32),
                np.array([e.type_ids for e in encs], np.int32),
                np.array([e.attention_mask for e in encs], np.int32))

    # Same answer first: a throughput comparison of different outputs would mean nothing.
    ids_hf = hugging_face()[0]
    ids_kb = np.concatenate([packed(b)["token_ids"].numpy() for b in batches])
    agree = float(np.mean(np.all(ids_hf == ids_kb, axis=1)))

    rates = {
        "kbert tf.function": median_rate(kbert_function, n, args.rounds),
        "kbert tf.data": median_rate(kbert_data, n, args.rounds),
        "HF tokenizers": median_rate(hugging_face, n, args.rounds),
    }
    print(f"{n} real sentences, sequence length {seq}, batch {args.batch}, "
          f"{args.rounds} rounds (median), {os.cpu_count()} CPU cores")
    print(f"identical packed ids, kbert vs HF: {agree:.2%} of sentences")
    for name, rate in rates.items():
        print(f"  {name:18s} {rate:10,.0f} sentences/s")
    for name in ("kbert tf.function", "kbert tf.data"):
        print(f"  ratio {name} / HF tokenizers: {rates[name] / rates['HF tokenizers']:.2f}")


if __name__ == "__main__":
    main()
