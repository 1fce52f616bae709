"""The serving half of `benchmarks/fuzz.py`: tiny exports of every kind, and a fresh serving
process that loads them with TensorFlow and tensorflow-text's op libraries only (no kbert, no
Keras: both are made unimportable first, as on a model server) and sends them hostile requests.

The worker writes one JSON line per request. If it dies, `run` counts the request in flight as
a crash and starts a new worker at the next one, so one crash never hides the rest.

    python -m benchmarks.fuzz_serving JOB.json RESULTS.jsonl     (the worker; `run` starts it)
"""

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from benchmarks.fuzz import NUM_CHOICES, SEQUENCE_LENGTH

ENTRIES = ("classifier", "pair", "choices", "span", "token", "token_ids", "examples")
LABELS = ("negative", "positive")
MAX_POSITIONS = 64
ROOT = pathlib.Path(__file__).resolve().parents[1]


# --- the exports (in the calling process, with kbert) --------------------------------------

def export_models(directory):
    """{entry: version directory}: the five exports, tiny random models on MiniLM's vocabulary."""
    import keras
    import numpy as np

    from kbert.config import BertConfig
    from kbert.data.conll import CONLL2003_LABELS
    from kbert.export import export_saved_model
    from kbert.models import (BertBackbone, BertClassifier, BertMultipleChoice,
                              BertSpanLabeler, BertTokenClassifier)
    from kbert.text import BertPreprocessor, BertTokenizer
    from kbert.text.span_preprocessor import BertSpanPreprocessor

    keras.utils.set_random_seed(0)
    tokenizer = BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
    config = BertConfig(vocab_size=tokenizer.vocabulary_size(), hidden_size=32, num_layers=1,
                        num_heads=2, intermediate_size=64, max_position_embeddings=MAX_POSITIONS)
    pre = BertPreprocessor(tokenizer, SEQUENCE_LENGTH)
    backbone = BertBackbone(config)
    tagger = BertTokenClassifier(backbone, label_names=CONLL2003_LABELS)
    kernel = tagger.classifier.kernel  # large weights: many tags, so many entities
    kernel.assign(np.random.default_rng(0).normal(size=kernel.shape).astype("float32") * 4)
    spans = BertSpanPreprocessor(tokenizer, 48, doc_stride=16, max_query_length=12)
    jobs = {"classifier": (BertClassifier(backbone, num_classes=2), pre, {}),
            "pair": (BertClassifier(backbone, num_classes=2), pre, {"sentence_pair": True}),
            "choices": (BertMultipleChoice(backbone, num_choices=NUM_CHOICES), pre, {}),
            "span": (BertSpanLabeler(backbone), spans, {}),
            "token": (tagger, pre, {})}
    base = pathlib.Path(directory)
    return {name: str(export_saved_model(
        model, base / name, preprocessor=p, warmup_texts=[],
        label_names=LABELS if name in ("classifier", "pair") else None, **kw))
        for name, (model, p, kw) in jobs.items()}


def run(cases, seed, exports=None, batch=8, megabyte_every=500, timeout=3000, huge_mb=0):
    """({entry: counts}, failures) over `cases` cases per serving entry point, in fresh worker
    processes (a new one after any death)."""
    with tempfile.TemporaryDirectory() as tmp:
        exports = exports or export_models(pathlib.Path(tmp) / "exports")
        vocab = pathlib.Path(exports["classifier"]) / "assets" / "vocab.txt"
        job = {"exports": exports, "cases": cases, "seed": seed, "batch": batch,
               "megabyte_every": megabyte_every, "start": None, "huge_mb": huge_mb, "max_positions": MAX_POSITIONS,
               "vocab_size": len(vocab.read_text(encoding="utf-8").split("\n")) - 1}
        lines, deaths = [], []
        while True:
            path, out = pathlib.Path(tmp) / "job.json", pathlib.Path(tmp) / "out.jsonl"
            path.write_text(json.dumps(job))
            out.unlink(missing_ok=True)
            env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
            env.pop("KERAS_BACKEND", None)
            proc = subprocess.run([sys.executable, "-m", "benchmarks.fuzz_serving", str(path),
                                   str(out)], cwd=ROOT, env=env, capture_output=True,
                                  text=True, timeout=timeout)
            new = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
            lines += new
            if proc.returncode == 0:
                return tally(lines, deaths)
            deaths.append(_in_flight(new, job["start"]) | {"stderr": proc.stderr[-500:]})
            done = sum(len(x["verdicts"]) for x in lines
                       if x["entry"] == deaths[-1]["entry"] and not x.get("done"))
            job["start"] = {"entry": deaths[-1]["entry"], "index": deaths[-1]["index"] + 1,
                            "cases": done + 1}
            if len(deaths) >= 20:
                raise RuntimeError(f"the serving worker died 20 times: {deaths[-1]}")


def _in_flight(lines, start):
    """{"entry", "index"} of the request a dead worker was running: the one after its last
    line (the first one of the next entry after a finished entry)."""
    if not lines:
        return {"entry": start["entry"], "index": start["index"]} if start else {
            "entry": ENTRIES[0], "index": 0}
    last = lines[-1]
    if last["entry"] == "huge":
        return {"entry": ENTRIES[0], "index": 0}
    if last.get("done"):
        return {"entry": ENTRIES[ENTRIES.index(last["entry"]) + 1], "index": 0}
    return {"entry": last["entry"], "index": last["index"] + 1}


def tally(lines, deaths):
    counts = {e: {"cases": 0} for e in ENTRIES}
    failures = []
    for line in lines:
        if line["entry"] == "huge":
            counts["huge_request"] = line["huge"]
            continue
        c = counts[line["entry"]]
        if line.get("done"):
            c["still_answering"] = line["still_answering"]
            c["seconds"] = c.get("seconds", 0) + line["seconds"]
            continue
        for verdict in line["verdicts"]:
            c["cases"] += 1
            c[verdict] = c.get(verdict, 0) + 1
            if verdict.startswith("error_"):  # an error of a kind also counted apart
                c["error"] = c.get("error", 0) + 1
        failures += line.get("failures", [])
    for death in deaths:
        c = counts[death["entry"]]
        c["cases"] += 1
        c["crash"] = c.get("crash", 0) + 1
        failures.append(death)
    return counts, failures


# --- the worker (a fresh process: TensorFlow and tensorflow-text's ops only) ----------------

def _load_text_ops(tf):
    """Registers tensorflow-text's C++ ops without its Python package (which imports Keras)."""
    import glob
    import importlib.util

    root = list(importlib.util.find_spec("tensorflow_text").submodule_search_locations)[0]
    for library in sorted(glob.glob(os.path.join(root, "python", "ops", "_*.so"))):
        tf.load_op_library(library)


def worker(job_path, out_path):
    for name in ("kbert", "keras", "tf_keras", "keras_hub"):
        sys.modules[name] = None  # a model server has neither
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import tensorflow as tf

    from benchmarks.fuzz_checks import Checks

    job = json.loads(pathlib.Path(job_path).read_text())
    _load_text_ops(tf)
    checks = Checks(tf, {k: tf.saved_model.load(v).signatures
                         for k, v in job["exports"].items()},
                    job["vocab_size"], job["max_positions"])
    start = job["start"] or {"entry": ENTRIES[0], "index": 0, "cases": 0}
    with open(out_path, "a") as out:
        if job.get("huge_mb") and job["start"] is None:
            out.write(json.dumps({"entry": "huge", "done": True,
                                  "huge": checks.huge(job["huge_mb"])}) + "\n")
        for entry in ENTRIES[ENTRIES.index(start["entry"]):]:
            first = entry == start["entry"]
            index, cases = (start["index"], start["cases"]) if first else (0, 0)
            before, began = checks.normal(entry), time.perf_counter()
            while cases < job["cases"]:
                line = checks.request(entry, job["seed"], index, job["batch"],
                                      job["megabyte_every"])
                cases += len(line["verdicts"])
                out.write(json.dumps(line) + "\n")
                out.flush()
                index += 1
            out.write(json.dumps({"entry": entry, "index": index, "done": True,
                                  "still_answering": checks.normal(entry) == before,
                                  "seconds": round(time.perf_counter() - began, 1)}) + "\n")
            out.flush()


if __name__ == "__main__":
    worker(sys.argv[1], sys.argv[2])
