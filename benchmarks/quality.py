"""kbert's fine-tuning beside Hugging Face's on the same budget: pretrained MiniLM
(`minilm_l6_h384_uncased`) fine-tuned on movie-review sentiment, CoNLL-2003 and SQuAD v1.1 by
kbert's one driver (`kbert.training.finetune`) and by `transformers` on PyTorch in a plain torch
loop (`benchmarks/quality_hf.py`, `benchmarks/quality_squad_hf.py`) with kbert's recipe
(AdamW, 10% warmup then linear decay, weight decay 0.01 off LayerNorm/bias, clip 1.0), the same
epochs, batch, sequence length, doc stride, seed and the same training and evaluation examples
(the driver's own `subset` calls and seeds, handed to the HF side as example objects).
Neither side scores the dev split between epochs (kbert's `validate=False`; the HF loop has no
such pass), so both do the same work: training, then one scoring of dev and test.

Each side runs in its own process (this script with `--side`), so that thread pools and memory
do not interfere; its "seconds" are measured in that process around fine-tuning + evaluation
(model loading included). Thread settings are left at their defaults and recorded.

    python benchmarks/quality.py --task sentiment            # both sides, default budget
    python benchmarks/quality.py --task all --smoke --output /tmp/q.json

Results merge into `--output` (default benchmarks/results/quality.json) one task at a time:
{"sentiment": {"kbert": {...}, "hf": {...}, "budget": {...}}, "conll": ..., "squad": ...}.
"""

import argparse
import datetime
import hashlib
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: `benchmarks.*` imports need the repo root
    sys.path.insert(0, str(ROOT))

TASKS = ("sentiment", "conll", "squad")
METRICS = {"sentiment": ("dev_accuracy", "test_accuracy"), "conll": ("dev_f1", "test_f1"),
           "squad": ("exact_match", "f1")}
INIT = "minilm_l6_h384_uncased"
DEFAULTS = {
    "sentiment": {"epochs": 3, "sequence_length": 128},
    "conll": {"epochs": 3, "sequence_length": 128},
    # ~1 h per side: 20,000 questions at 256 (~660 steps) measured ~40 s/step for kbert under a
    # 3.5x-oversubscribed 2-core machine (~11 s/step quiet, est.): ~2 h; 8,000 (~265 steps) fits.
    "squad": {"epochs": 1, "sequence_length": 256, "doc_stride": 128,
              "max_train_examples": 8000, "max_eval_examples": 2000},
}
SMOKE = {"epochs": 1, "sequence_length": 32, "batch_size": 4, "max_train_examples": 16,
         "max_eval_examples": 16}
SMOKE_SQUAD = {"sequence_length": 96, "doc_stride": 32}  # room for a 64-token question
RUN_KEYS = ("kbert_commit", "date", "device")  # which code made a side's result, when, where
MAX_QUERY_LENGTH = 64  # kbert's SquadTask default, given to the HF side too


def make_budget(task, args):
    """The run's settings: the task's defaults, then --smoke, then explicit flags. (The parent
    process does not import kbert: that would cost each run a TensorFlow import.)"""
    budget = {"init": INIT, "epochs": 3, "batch_size": 32, "learning_rate": 5e-5,
              "warmup_fraction": 0.1, "weight_decay": 0.01, "max_train_examples": None,
              "max_eval_examples": None, "seed": 0, **DEFAULTS[task]}
    if args.smoke:
        budget.update(SMOKE, **(SMOKE_SQUAD if task == "squad" else {}))
    for name in ("epochs", "batch_size", "learning_rate", "max_train_examples",
                 "max_eval_examples", "sequence_length", "doc_stride", "seed"):
        value = getattr(args, name)
        if value is not None and (name != "doc_stride" or task == "squad"):
            budget[name] = value
    if task == "squad":
        budget["max_query_length"] = MAX_QUERY_LENGTH
    if task == "conll" and args.batching:  # how kbert draws its batches; HF's are random
        budget["kbert_batching"] = args.batching
    if task == "squad" and args.hf_squad_loss:
        budget["hf_squad_loss"] = args.hf_squad_loss
    if args.init:
        budget["init"] = str(pathlib.Path(args.init).resolve())
    budget.update(task=task, smoke=bool(args.smoke))
    return budget


def task_examples(task, budget):
    """The driver's examples for `budget`: (spec, {split: examples}) chosen exactly as
    `kbert.training.finetune` chooses them (train: `seed`; dev/test: `EVAL_SEED`)."""
    from kbert.tasks import EVAL_SEED, get_spec, subset

    spec = get_spec(task, None, **_task_options(budget))
    splits = spec.splits()
    chosen = {"train": subset(splits["train"], budget["max_train_examples"], budget["seed"])}
    for name in ("dev", "test"):
        if splits.get(name):
            chosen[name] = subset(splits[name], budget["max_eval_examples"], EVAL_SEED)
    return spec, chosen


def _task_options(budget):
    if budget["task"] == "conll" and "kbert_batching" in budget:
        return {"batching": budget["kbert_batching"]}
    if budget["task"] != "squad":
        return {}
    return {"doc_stride": budget["doc_stride"], "max_query_length": budget["max_query_length"]}


def fingerprint(examples):
    """{split: {"count", "sha256"}}: which examples a side trained and scored on."""
    def digest(rows):
        return hashlib.sha256(repr([_plain(r) for r in rows]).encode("utf-8")).hexdigest()
    return {name: {"count": len(rows), "sha256": digest(rows)} for name, rows in examples.items()}


def _plain(example):
    return (example.__dict__ if hasattr(example, "__dict__") else example)


def threads():
    """The thread pools each library runs with (defaults, recorded)."""
    info = {}
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        info.update(torch_intra_op=torch.get_num_threads(),
                    torch_inter_op=torch.get_num_interop_threads())
    if "tensorflow" in sys.modules:
        tf = sys.modules["tensorflow"]
        info.update(tf_intra_op=tf.config.threading.get_intra_op_parallelism_threads(),
                    tf_inter_op=tf.config.threading.get_inter_op_parallelism_threads(),
                    tf_note="0 = TensorFlow's default (all cores)")
    return info


def run_kbert(budget, examples, workdir):
    """kbert's side: the one driver, its metrics.json read back."""
    from kbert.training import finetune

    task = budget["task"]
    start = time.perf_counter()
    metrics = finetune(task, output_dir=workdir, init=budget["init"], epochs=budget["epochs"],
                       batch_size=budget["batch_size"], learning_rate=budget["learning_rate"],
                       sequence_length=budget["sequence_length"],
                       warmup_fraction=budget["warmup_fraction"],
                       weight_decay=budget["weight_decay"], seed=budget["seed"],
                       max_train_examples=budget["max_train_examples"],
                       max_eval_examples=budget["max_eval_examples"], verbose=0,
                       validate=False, task_options=_task_options(budget))
    seconds = time.perf_counter() - start
    sizes = {k: v for k, v in metrics["sizes"].items() if k in examples}
    if sizes != {k: len(v) for k, v in examples.items()}:
        raise RuntimeError(f"The driver used {sizes} examples, this script chose "
                           f"{ {k: len(v) for k, v in examples.items()} }.")
    scores = {"sentiment": lambda m: {"dev_accuracy": m["dev"]["accuracy"],
                                      "test_accuracy": m["test"]["accuracy"]},
              "conll": lambda m: {"dev_f1": m["dev"]["f1"], "test_f1": m["test"]["f1"]},
              "squad": lambda m: {"exact_match": m["dev"]["exact_match"],
                                  "f1": m["dev"]["f1"]}}[task](metrics)
    record = {"steps": metrics["settings"]["steps"], "train_seconds": metrics["train_seconds"],
              "final_train_loss": metrics["final_train_loss"]}
    if task == "squad":
        record["eval_windows"] = metrics["dev"]["features"]
    if budget["smoke"]:
        record["learning_rates"] = kbert_learning_rates(workdir)
    return scores, record, seconds


def kbert_learning_rates(run_dir):
    """The rate of each optimizer step the run took, read from the saved optimizer (its step
    count and its schedule) in the run directory."""
    from kbert.runs import RunDirectory

    optimizer = RunDirectory.open(run_dir).load_model(compile=True).optimizer
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    steps = int(inner.iterations.numpy())
    return [float(inner._learning_rate(step)) for step in range(steps)]


def run_hf(budget, examples, spec):
    """The Hugging Face side on the same examples."""
    from benchmarks import quality_hf
    from kbert.presets import resolve

    checkpoint = str(resolve(budget["init"]))
    start = time.perf_counter()
    if budget["task"] == "sentiment":
        scores, record = quality_hf.sentiment(checkpoint, examples, budget)
    elif budget["task"] == "conll":
        scores, record = quality_hf.conll(checkpoint, examples, budget, spec.label_names)
    else:
        from benchmarks.quality_squad_hf import squad

        scores, record = squad(checkpoint, examples, budget)
    seconds = time.perf_counter() - start
    if not budget["smoke"]:
        record.pop("learning_rates")
    return scores, record, seconds


def side_main(side, budget_file, output_file):
    """One side in this process: writes {metrics..., "seconds", "run", "examples", ...}."""
    budget = json.loads(pathlib.Path(budget_file).read_text())
    spec, examples = task_examples(budget["task"], budget)
    load_before = os.getloadavg()[1]
    with tempfile.TemporaryDirectory(prefix="quality-") as workdir:
        if side == "kbert":
            scores, record, seconds = run_kbert(budget, examples, pathlib.Path(workdir) / "run")
        else:
            scores, record, seconds = run_hf(budget, examples, spec)
    from kbert.tasks import EVAL_SEED

    result = {**scores, "seconds": round(seconds, 1), "run": record,
              "examples": {**fingerprint(examples), "eval_seed": EVAL_SEED},
              "threads": threads(),
              # 5-minute load averages before and after: above the side's own ~2 on 2 cores,
              # other work shared the machine and "seconds" is inflated by it.
              "load_average_5min": [round(load_before, 2), round(os.getloadavg()[1], 2)]}
    pathlib.Path(output_file).write_text(json.dumps(result, indent=1))


def environment():
    """The device, package versions and date a budget records."""
    from importlib import metadata

    cpu = next((line.split(":", 1)[1].strip() for line in
                pathlib.Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    versions = {}
    for name in ("kbert", "tensorflow", "keras", "torch", "transformers", "seqeval"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    return {"device": {"cpu": cpu, "cores": os.cpu_count()}, "versions": versions,
            "python": platform.python_version(), "kbert_commit": commit or None,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def run_side(side, budget, workdir):
    """Runs one side in a fresh process of this script; returns its result."""
    budget_file = pathlib.Path(workdir) / f"{side}-budget.json"
    output_file = pathlib.Path(workdir) / f"{side}-result.json"
    budget_file.write_text(json.dumps(budget))
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2")}
    subprocess.run([sys.executable, str(pathlib.Path(__file__).resolve()), "--side", side,
                    "--worker", str(budget_file), str(output_file)], check=True, env=env,
                   cwd=ROOT)
    return json.loads(output_file.read_text())


def merge(output, task, entry):
    """Writes `entry` as `task`'s result into the JSON file `output`, keeping other tasks
    (and, when one side ran alone, the other side's last result, with the commit and date of
    its own run under "ran")."""
    output = pathlib.Path(output)
    results = json.loads(output.read_text()) if output.is_file() else {}
    old = results.get(task, {})
    for side in ("kbert", "hf"):
        if side in old and side not in entry and "ran" not in old[side]:
            old[side]["ran"] = {k: old["budget"].get(k) for k in RUN_KEYS}
    results[task] = {**old, **entry}
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".tmp")
    tmp.write_text(json.dumps(results, indent=2) + "\n")
    os.replace(tmp, output)
    return results[task]


def run_task(task, args):
    budget = make_budget(task, args)
    entry = {"budget": {**budget, **environment()}}
    sides = ("kbert", "hf") if args.side == "both" else (args.side,)
    with tempfile.TemporaryDirectory(prefix="quality-") as workdir:
        for side in sides:
            print(f"[quality] {task}: {side} side ...", file=sys.stderr, flush=True)
            entry[side] = run_side(side, budget, workdir)
            entry[side]["ran"] = {k: entry["budget"][k] for k in RUN_KEYS}
            print(f"[quality] {task} {side}: " + ", ".join(
                f"{k}={entry[side][k]:.4g}" for k in (*METRICS[task], "seconds")),
                  file=sys.stderr, flush=True)
    return merge(args.output, task, entry)


def positive(value):
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return number


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=(*TASKS, "all"), default="all")
    parser.add_argument("--side", choices=("kbert", "hf", "both"), default="both")
    for name in ("epochs", "max-train-examples", "max-eval-examples", "sequence-length",
                 "doc-stride", "batch-size"):
        parser.add_argument(f"--{name}", type=positive, default=None,
                            help="default: the task's budget (see DEFAULTS)")
    parser.add_argument("--learning-rate", type=float, default=None, help="default 5e-5")
    parser.add_argument("--seed", type=int, default=None, help="default 0")
    parser.add_argument("--batching", choices=("length", "random"), default=None,
                        help="CoNLL: how kbert draws training batches (default: kbert's, "
                             "random; Hugging Face's side always draws them at random)")
    parser.add_argument("--hf-squad-loss", choices=("padded", "masked"), default=None,
                        help="SQuAD: Hugging Face's loss (default: BertForQuestionAnswering's, "
                             "its softmax over the padding too; masked: over the real tokens, "
                             "as kbert's)")
    parser.add_argument("--init", default=None,
                        help=f"a Hugging Face BERT directory both sides start from (default: "
                             f"the {INIT} preset)")
    parser.add_argument("--output", default=str(ROOT / "benchmarks/results/quality.json"))
    parser.add_argument("--smoke", action="store_true",
                        help="tiny budget (16 examples, length 32, batch 4, one epoch)")
    parser.add_argument("--worker", nargs=2, metavar=("BUDGET", "RESULT"),
                        help=argparse.SUPPRESS)  # internal: run one side in this process
    args = parser.parse_args(argv)
    if args.worker and args.side == "both":
        parser.error("--worker runs one side: give --side kbert or --side hf")
    if args.learning_rate is not None and not args.learning_rate > 0:
        parser.error(f"--learning-rate must be positive, got {args.learning_rate}")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        side_main(args.side, *args.worker)
        return
    for task in TASKS if args.task == "all" else (args.task,):
        run_task(task, args)


if __name__ == "__main__":
    main()
