"""Serving latency and throughput of exported text classifiers: kbert vs keras-hub.

Both are MiniLM-sized (L6, H384, 12 heads, FFN 1536, 30,522-token uncased vocabulary, sequence
length 128), 2 classes, exported as SavedModels whose signature takes raw strings (tokenizer in
the graph), reloaded with `tf.saved_model.load` and called the way a server calls them:

  * kbert: `kbert.export.export_saved_model` as shipped (padding beyond the batch's longest
    sequence is cut before the encoder runs), and the same export at the full length 128
    (`trim_padding=False`) to separate the graph from that choice;
  * keras-hub: `BertTextClassifier` + `BertTextClassifierPreprocessor` on the same vocab.txt,
    in the same serving wrapper (keras-hub's own `model.export()` leaves the preprocessor out).

Texts are real sentences (SQuAD v1.1 dev questions and context sentences). Reports p50 / p99
latency at batch 1 and sequences/s at batch 32, and kbert / keras-hub ratios (>1 = kbert
better). Weights are random (speed does not depend on them). Runs on CPU.

    python benchmarks/serving_latency.py [--calls 200] [--batches 20]
"""

import argparse
import json
import os
import re
import statistics
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from kbert.config import BertConfig  # noqa: E402
from kbert.data.sources import fetch  # noqa: E402
from kbert.export import ServingModule, export_saved_model  # noqa: E402
from kbert.models.backbone import BertBackbone  # noqa: E402
from kbert.models.classifier import BertClassifier  # noqa: E402
from kbert.presets import resolve  # noqa: E402
from kbert.text import BertPreprocessor, BertTokenizer  # noqa: E402

SEQUENCE_LENGTH = 128


def sentences(n, seed=0):
    squad = json.loads((fetch("squad") / "dev-v1.1.json").read_text(encoding="utf-8"))
    out = []
    for article in squad["data"]:
        for para in article["paragraphs"]:
            out.extend(q["question"] for q in para["qas"])
            out.extend(re.split(r"(?<=[.!?])\s+", para["context"]))
    rng = np.random.default_rng(seed)
    return [out[i] for i in rng.choice(len(out), size=n, replace=False)]


def kbert_exports(vocab_dir, workdir):
    config = BertConfig.preset("mini", num_layers=6, hidden_size=384, num_heads=12,
                               intermediate_size=1536)
    keras.utils.set_random_seed(0)
    model = BertClassifier(BertBackbone(config), num_classes=2)
    pre = BertPreprocessor(BertTokenizer.from_pretrained(vocab_dir),
                           sequence_length=SEQUENCE_LENGTH)
    shipped = export_saved_model(model, os.path.join(workdir, "kbert"), preprocessor=pre,
                                 warmup_texts=[])
    full = os.path.join(workdir, "kbert_full")
    module = ServingModule(model, pre, trim_padding=False)
    tf.saved_model.save(module, full, signatures=module.signatures())
    return model.count_params(), shipped, full


def keras_hub_export(vocab_dir, workdir):
    import keras_hub

    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=30522, num_layers=6, num_heads=12, hidden_dim=384,
        intermediate_dim=1536, max_sequence_length=512)
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=str(vocab_dir / "vocab.txt"),
                                               lowercase=True)
    pre = keras_hub.models.BertTextClassifierPreprocessor(tokenizer,
                                                          sequence_length=SEQUENCE_LENGTH)
    model = keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=None)
    # The kbert serving wrapper, used as a neutral harness: keras-hub's preprocessor returns the
    # same three keys, and nothing is trimmed.
    module = ServingModule(model, pre, task="classifier", trim_padding=False)
    path = os.path.join(workdir, "keras_hub")
    tf.saved_model.save(module, path, signatures=module.signatures())
    return model.count_params(), path


def measure(path, texts, calls, batches):
    fn = tf.saved_model.load(path).signatures["serving_default"]
    for i in range(5):  # warm-up
        fn(text=tf.constant(texts[i:i + 1]))
        fn(text=tf.constant(texts[:32]))
    latencies = []
    for i in range(calls):
        batch = tf.constant(texts[i % len(texts):i % len(texts) + 1])
        start = time.perf_counter()
        fn(text=batch)["probabilities"].numpy()
        latencies.append(time.perf_counter() - start)
    start = time.perf_counter()
    for i in range(batches):
        fn(text=tf.constant(texts[32 * i:32 * (i + 1)]))["probabilities"].numpy()
    throughput = 32 * batches / (time.perf_counter() - start)
    latencies.sort()
    return {"p50_ms": 1e3 * statistics.median(latencies),
            "p99_ms": 1e3 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
            "seq_per_s_b32": throughput}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="batch-1 calls (default 200)")
    parser.add_argument("--batches", type=int, default=20, help="batch-32 calls (default 20)")
    args = parser.parse_args()
    texts = sentences(max(args.calls, 32 * args.batches))
    vocab_dir = resolve("minilm_l6_h384_uncased")
    with tempfile.TemporaryDirectory() as workdir:
        params, shipped, full = kbert_exports(vocab_dir, workdir)
        hub_params, hub = keras_hub_export(vocab_dir, workdir)
        print(f"parameters: kbert {params:,}  keras-hub {hub_params:,}")
        results = {name: measure(path, texts, args.calls, args.batches)
                   for name, path in [("kbert", shipped), ("kbert_full_length", full),
                                      ("keras_hub", hub)]}
    print(f"{'':20s}{'p50 ms (b1)':>14s}{'p99 ms (b1)':>14s}{'seq/s (b32)':>14s}")
    for name, r in results.items():
        print(f"{name:20s}{r['p50_ms']:14.2f}{r['p99_ms']:14.2f}{r['seq_per_s_b32']:14.1f}")
    hub = results["keras_hub"]
    for name in ("kbert", "kbert_full_length"):
        r = results[name]
        print(f"{name} / keras-hub: p50 speed-up {hub['p50_ms'] / r['p50_ms']:.2f}x, "
              f"p99 {hub['p99_ms'] / r['p99_ms']:.2f}x, "
              f"throughput {r['seq_per_s_b32'] / hub['seq_per_s_b32']:.2f}x")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
