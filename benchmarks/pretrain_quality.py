"""kbert's pre-training beside Hugging Face's from the same start on the same batches:
`kbert.BertPretrainer` (MLM + NSP) on TensorFlow and `transformers`' `BertForPreTraining` on
PyTorch (`benchmarks/pretrain_quality_hf.py`), on the recipe of `kbert pretrain`.

Same start: a data step (its own process) builds kbert's fresh pre-trainer of `--preset` with
the run's seed and writes it with `kbert.convert.save_hf` (backbone, MLM and NSP heads) to
`init/`; both sides load that directory (kbert as `kbert pretrain --init` does). Same inputs:
the data step runs `kbert pretrain`'s pipeline (`kbert.training.pretrain_data`: the built-in
Wikipedia text, whole documents held out, `MaskedLM` dynamic masking) and writes `steps ×
batch` training rows, in order, to `train.npz`, and its fixed held-out batches to
`heldout.npz`; kbert trains on a `tf.data` of those arrays, transformers on torch tensors of
them, in the same order. Same recipe: AdamW (β 0.9/0.999, ε 1e-6, weight decay 0.01 off
LayerNorm and biases: `kbert.make_optimizer` and its torch twin in `benchmarks.quality_hf`),
linear warmup then linear decay, global-norm clipping at 1.0. Each side records the number of
parameter values it leaves undecayed, which must agree.

`--mode equality`: dropout 0 on both sides, float32. Each side records its training loss
(MLM averaged over the real predictions + NSP) at every step; the result is the largest
absolute difference over the steps, the first step where it exceeds `TOLERANCE`, and the
tolerance; with `--hf-float64`, transformers is trained once more in float64 and both sides'
float32 losses are compared with that reference too. `--mode quality`: dropout 0.1 (the
paper's); held-out MLM and NSP accuracy every `--eval-every` steps and sequences per second
(over the training steps after the first, which builds kbert's graph) for each side.

    python benchmarks/pretrain_quality.py --mode equality --preset tiny --steps 200
    python benchmarks/pretrain_quality.py --mode quality --preset mini --steps 2000
    python benchmarks/pretrain_quality.py --smoke --out /tmp/pq.json

Results go to `--out` (default benchmarks/results/pretrain_quality.json):
{"budget", "kbert", "hf"} of the latest quality run (an equality run fills them when the file
has none), and {"equality": {"steps", "max_abs_loss_diff", "tolerance", ...}} of the latest
equality run, each with its budget.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: `benchmarks.*` imports need the repo root
    sys.path.insert(0, str(ROOT))

from benchmarks.quality import environment, positive, threads  # noqa: E402

TOLERANCE = 1e-3
"""Largest |kbert loss - transformers loss| at a step that still counts as equal, in equality
mode (float32, no dropout); how it was chosen is in benchmarks/README.md."""
SMOKE_TOLERANCE = 1e-4
"""The same over `--smoke`'s 10 steps, where float32 rounding has had less time to grow."""

SMOKE = {"preset": "tiny", "steps": 10, "batch_size": 4, "sequence_length": 32,
         "eval_examples": 8, "corpus_documents": 60}
ARRAYS = ("token_ids", "segment_ids", "padding_mask", "masked_positions", "masked_ids",
          "masked_weights", "nsp_labels")


def make_budget(args):
    """The run's settings: defaults, then --smoke, then explicit flags."""
    budget = {"mode": args.mode, "preset": "tiny", "steps": 200, "batch_size": 32,
              "sequence_length": 128, "learning_rate": 1e-4, "warmup_fraction": 0.01,
              "weight_decay": 0.01, "clipnorm": 1.0, "beta_1": 0.9, "beta_2": 0.999,
              "epsilon": 1e-6, "eval_examples": 512, "corpus_documents": None,
              "seed": 0, "dropout": 0.0 if args.mode == "equality" else 0.1}
    if args.smoke:
        budget.update(SMOKE)
    for name in ("preset", "steps", "batch_size", "sequence_length", "learning_rate",
                 "warmup_fraction", "eval_examples", "seed"):
        value = getattr(args, name)
        if value is not None:
            budget[name] = value
    every = args.eval_every or (budget["steps"] if args.mode == "equality"
                                else max(1, budget["steps"] // 10))
    budget.update(eval_every=every, smoke=bool(args.smoke), nsp_labels="0 = IsNext, 1 = NotNext",
                  corpus="wikipedia" if budget["corpus_documents"] is None
                  else f"wikipedia, first {budget['corpus_documents']} documents")
    return budget


# --- data step (own process) ---------------------------------------------------------------

def prepare(budget, workdir):
    """Writes init/ (kbert's fresh pre-trainer as a Hugging Face directory), train.npz and
    heldout.npz; returns what it made."""
    import keras
    import numpy as np

    from kbert.config import BertConfig
    from kbert.convert import save_hf
    from kbert.data.pretraining import MaskedLM
    from kbert.models.pretrained import load_backbone_and_tokenizer
    from kbert.models.pretrainer import BertPretrainer
    from kbert.training.pretrain_config import PretrainConfig
    from kbert.training.pretrain_data import pretraining_data

    keras.utils.set_random_seed(budget["seed"])
    shape = BertConfig.preset(budget["preset"], hidden_dropout=budget["dropout"],
                              attention_dropout=budget["dropout"])
    backbone, tokenizer = load_backbone_and_tokenizer(shape)
    save_hf(BertPretrainer(backbone), workdir / "init", tokenizer=tokenizer)
    config = PretrainConfig(
        output_dir=workdir / "unused", bert_config=shape, steps=budget["steps"],
        batch_size=budget["batch_size"], sequence_length=budget["sequence_length"],
        eval_examples=budget["eval_examples"], seed=budget["seed"],
        corpus=_corpus(budget, workdir))
    masker = MaskedLM.from_tokenizer(tokenizer, mask_rate=config.mask_rate,
                                     max_predictions=config.predictions)
    data = pretraining_data(config, tokenizer, masker)
    train = _arrays(data.train(config.seed).take(budget["steps"]))
    heldout = _arrays(data.heldout)
    np.savez(workdir / "train.npz", **train)
    np.savez(workdir / "heldout.npz", **heldout)
    return {"train_rows": len(train["token_ids"]), "heldout_rows": len(heldout["token_ids"]),
            "train_examples_per_pass": data.train_examples,
            "max_predictions": config.predictions,
            "train_nsp_is_next": float((train["nsp_labels"] == 0).mean()),
            "heldout_nsp_is_next": float((heldout["nsp_labels"] == 0).mean())}


def _corpus(budget, workdir):
    """None (the built-in Wikipedia text), or a file of its first `corpus_documents`."""
    if budget["corpus_documents"] is None:
        return None
    import itertools

    from kbert.data.pretraining import wikipedia_documents, write_documents

    path = workdir / "corpus.txt"
    write_documents(itertools.islice(wikipedia_documents(), budget["corpus_documents"]), path)
    return path


def _arrays(dataset):
    """The batches of `dataset` ((inputs, targets, weights) as `BertPretrainer.fit` takes
    them) as rows of the flat arrays `ARRAYS`."""
    import numpy as np

    parts = {name: [] for name in ARRAYS}
    for inputs, targets, weights in dataset.as_numpy_iterator():
        for name in ("token_ids", "segment_ids", "padding_mask", "masked_positions"):
            parts[name].append(inputs[name])
        parts["masked_ids"].append(targets["mlm"])
        parts["masked_weights"].append(weights["mlm"])
        parts["nsp_labels"].append(targets["nsp"])
    return {name: np.concatenate(values) for name, values in parts.items()}


# --- kbert's side (own process) ------------------------------------------------------------

def fit_dataset(arrays, batch_size, drop_remainder):
    """(inputs, targets, weights) batches of the arrays, in order."""
    import numpy as np
    import tensorflow as tf

    inputs = {k: arrays[k] for k in ("token_ids", "segment_ids", "padding_mask",
                                     "masked_positions")}
    targets = {"mlm": arrays["masked_ids"], "nsp": arrays["nsp_labels"]}
    weights = {"mlm": arrays["masked_weights"],
               "nsp": np.ones(len(arrays["nsp_labels"]), np.float32)}
    return tf.data.Dataset.from_tensor_slices((inputs, targets, weights)).batch(
        batch_size, drop_remainder=drop_remainder)


def run_kbert(budget, workdir):
    """kbert's side: `kbert pretrain --init`'s model and optimizer, trained one step an epoch
    (so that each epoch's logged loss is that step's), scored every `eval_every` steps."""
    import keras
    import numpy as np

    from benchmarks.pretrain_quality_hf import load_batches, progress
    from kbert.models.pretrained import load_backbone_and_tokenizer
    from kbert.models.pretrainer import BertPretrainer
    from kbert.presets import load_pretraining_heads
    from kbert.training.optimizer import make_optimizer, no_decay_variables
    from kbert.training.pretrain import evaluate

    keras.utils.set_random_seed(budget["seed"])
    init = str(workdir / "init")
    backbone, _ = load_backbone_and_tokenizer(init)
    model = BertPretrainer(backbone)
    heads = load_pretraining_heads(model, init)
    steps, batch_size = budget["steps"], budget["batch_size"]
    model.compile(optimizer=make_optimizer(
        budget["learning_rate"], steps, warmup_fraction=budget["warmup_fraction"],
        weight_decay=budget["weight_decay"], clipnorm=budget["clipnorm"],
        beta_1=budget["beta_1"], beta_2=budget["beta_2"], epsilon=budget["epsilon"],
        model=model))
    train = load_batches(workdir / "train.npz")
    heldout = fit_dataset(load_batches(workdir / "heldout.npz"), batch_size, False)
    record = step_recorder(model, heldout, budget["eval_every"], steps)
    record.curve.append({"step": 0, **_scores(evaluate(model, heldout, True))})
    progress("kbert", record.curve[-1])
    model.fit(fit_dataset(train, batch_size, True), epochs=steps, steps_per_epoch=1,
              verbose=0, callbacks=[record])
    final = {k: v for k, v in record.curve[-1].items() if k != "step"}
    inner = getattr(model.optimizer, "inner_optimizer", model.optimizer)
    rates = [float(inner._learning_rate(s)) for s in range(steps)]
    return {**final, "losses": record.losses, "learning_rates": rates,
            "step_seconds": record.seconds, "curve": record.curve, "heads_loaded": heads,
            "no_decay_values": int(sum(np.prod(v.shape) for v in no_decay_variables(model))),
            "parameters": int(model.count_params()), "dtype": "float32"}


def _scores(metrics):
    return {k: metrics[k] for k in ("mlm_accuracy", "nsp_accuracy", "mlm_loss", "nsp_loss")}


def step_recorder(model, heldout, every, steps):
    """A Keras callback recording each step's loss and seconds, and the held-out scores every
    `every` steps (made here: the parent and the transformers side do not import Keras)."""
    import keras

    from benchmarks.pretrain_quality_hf import progress
    from kbert.training.pretrain import evaluate

    class StepRecord(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.losses, self.seconds, self.curve = [], [], []

        def on_train_batch_begin(self, batch, logs=None):
            self._start = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            self.seconds.append(time.perf_counter() - self._start)

        def on_epoch_end(self, epoch, logs=None):  # one step an epoch: its own loss
            self.losses.append(float(logs["loss"]))
            if (epoch + 1) % every == 0 or epoch + 1 == steps:
                self.curve.append({"step": epoch + 1,
                                   **_scores(evaluate(model, heldout, True))})
                progress("kbert", self.curve[-1])

    return StepRecord()


# --- one side in this process; the parent ---------------------------------------------------

def side_main(side, budget_file, output_file):
    budget = json.loads(pathlib.Path(budget_file).read_text())
    workdir = pathlib.Path(budget_file).parent
    load_before = os.getloadavg()[1]
    start = time.perf_counter()
    if side == "data":
        result = prepare(budget, workdir)
    elif side == "kbert":
        result = run_kbert(budget, workdir)
    else:
        from benchmarks.pretrain_quality_hf import pretrain

        result = pretrain(workdir / "init", workdir / "train.npz", workdir / "heldout.npz",
                          budget, dtype="float64" if side == "hf64" else "float32")
    if side != "data":
        warm = result["step_seconds"][1:] or result["step_seconds"]
        result["seq_per_s"] = budget["batch_size"] * len(warm) / sum(warm)
        result["threads"] = threads()
    result["seconds"] = round(time.perf_counter() - start, 1)
    # 5-minute load averages before and after: above the side's own ~2 on 2 cores, other
    # work shared the machine and the speeds are lowered by it.
    result["load_average_5min"] = [round(load_before, 2), round(os.getloadavg()[1], 2)]
    pathlib.Path(output_file).write_text(json.dumps(result))


def run_side(side, budget, workdir):
    """Runs one side in a fresh process of this script; returns its result. A side whose
    result `workdir` already holds for this budget is not run again (an interrupted run
    resumes)."""
    budget_file, output_file = workdir / "budget.json", workdir / f"{side}-result.json"
    if (output_file.is_file() and budget_file.is_file()
            and json.loads(budget_file.read_text()) == budget):
        print(f"[pretrain_quality] {side}: kept from {output_file}", file=sys.stderr)
        return json.loads(output_file.read_text())
    output_file.unlink(missing_ok=True)
    budget_file.write_text(json.dumps(budget))
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2")}
    print(f"[pretrain_quality] {side} ...", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, str(pathlib.Path(__file__).resolve()), "--side", side,
                    "--worker", str(budget_file), str(output_file)], check=True, env=env,
                   cwd=ROOT)
    return json.loads(output_file.read_text())


def compare(kbert, hf, tolerance=TOLERANCE):
    """The equality summary of two sides' per-step losses."""
    diffs = [abs(a - b) for a, b in zip(kbert["losses"], hf["losses"])]
    above = next((i for i, d in enumerate(diffs) if d > tolerance), None)
    return {"steps": len(diffs), "max_abs_loss_diff": max(diffs), "tolerance": tolerance,
            "first_step_above_tolerance": above,
            "max_abs_learning_rate_diff": max(abs(a - b) for a, b in zip(
                kbert["learning_rates"], hf["learning_rates"])),
            "no_decay_values": {"kbert": kbert["no_decay_values"],
                                "hf": hf["no_decay_values"]},
            "abs_loss_diff": diffs}


def summary(side):
    """What the results file keeps of a side (its per-step losses go to the equality entry)."""
    kept = ("mlm_accuracy", "nsp_accuracy", "seq_per_s", "mlm_loss", "nsp_loss", "curve",
            "seconds", "parameters", "no_decay_values", "threads", "load_average_5min")
    return {k: side[k] for k in kept if k in side}


def run(args):
    budget = make_budget(args)
    with tempfile.TemporaryDirectory(prefix="pretrain-quality-") as tmp:
        workdir = pathlib.Path(args.workdir or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        data = run_side("data", budget, workdir)
        sides = {side: run_side(side, budget, workdir)
                 for side in ("kbert", "hf", *(("hf64",) if args.hf_float64 else ()))}
    budget = {**budget, "data": data, **environment()}
    entry = {"budget": budget, "kbert": summary(sides["kbert"]), "hf": summary(sides["hf"])}
    if args.mode == "equality":
        tolerance = SMOKE_TOLERANCE if args.smoke else TOLERANCE
        equality = {**compare(sides["kbert"], sides["hf"], tolerance), "budget": budget,
                    "losses": {"kbert": sides["kbert"]["losses"],
                               "hf": sides["hf"]["losses"]}}
        if "hf64" in sides:  # float32 rounding alone: each side against transformers in float64
            for name in ("hf", "kbert"):
                rounding = compare(sides[name], sides["hf64"], tolerance)
                equality[f"{name}_vs_hf_float64"] = {
                    k: rounding[k] for k in ("max_abs_loss_diff", "abs_loss_diff")}
            equality["losses"]["hf_float64"] = sides["hf64"]["losses"]
        entry = {**entry, "equality": equality}
    return merge(args.out, entry, args.mode)


def merge(out, entry, mode):
    """Writes the run into the JSON file `out`: an equality run replaces "equality" (and
    fills "budget", "kbert", "hf" when the file has no quality run); a quality run replaces
    "budget", "kbert" and "hf"."""
    out = pathlib.Path(out)
    results = json.loads(out.read_text()) if out.is_file() else {}
    if mode == "equality":
        results["equality"] = entry.pop("equality")
        if results.get("budget", {}).get("mode") == "quality":
            entry = {}
    results.update(entry)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(results, indent=1) + "\n")
    os.replace(tmp, out)
    return results


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("equality", "quality"), default="equality")
    parser.add_argument("--preset", default=None, help="a fresh model's size (default tiny)")
    for name, default in (("steps", 200), ("batch-size", 32), ("sequence-length", 128),
                          ("eval-examples", 512)):
        parser.add_argument(f"--{name}", type=positive, default=None, help=f"default {default}")
    parser.add_argument("--eval-every", type=positive, default=None,
                        help="held-out scoring every N steps (default: steps/10 in quality "
                             "mode, at the end in equality mode)")
    parser.add_argument("--learning-rate", type=float, default=None, help="default 1e-4")
    parser.add_argument("--warmup-fraction", type=float, default=None,
                        help="default 0.01, as `kbert pretrain`")
    parser.add_argument("--seed", type=int, default=None, help="default 0")
    parser.add_argument("--hf-float64", action="store_true",
                        help="also train transformers in float64: the float32 rounding "
                             "envelope the tolerance is judged against")
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/pretrain_quality.json"))
    parser.add_argument("--workdir", default=None,
                        help="keep the initial weights, the batches and each side's full "
                             "record (per-step seconds) here, and reuse the results it holds "
                             "for the same budget (default: a temporary folder)")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny budget: 10 steps of batch 4 at length 32 on 60 documents")
    parser.add_argument("--side", choices=("data", "kbert", "hf", "hf64"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--worker", nargs=2, metavar=("BUDGET", "RESULT"),
                        help=argparse.SUPPRESS)  # internal: run one side in this process
    args = parser.parse_args(argv)
    if args.learning_rate is not None and not args.learning_rate > 0:
        parser.error(f"--learning-rate must be positive, got {args.learning_rate}")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        side_main(args.side, *args.worker)
        return
    results = run(args)
    for side in ("kbert", "hf"):
        print(f"[pretrain_quality] {side}: " + ", ".join(
            f"{k}={results[side][k]:.4g}" for k in ("mlm_accuracy", "nsp_accuracy",
                                                    "seq_per_s")), file=sys.stderr)
    if args.mode == "equality":
        eq = results["equality"]
        for name in ("kbert", "hf"):
            if f"{name}_vs_hf_float64" in eq:
                print(f"[pretrain_quality] {name} against transformers in float64: max |loss "
                      f"diff| {eq[f'{name}_vs_hf_float64']['max_abs_loss_diff']:.3g}",
                      file=sys.stderr)
        print(f"[pretrain_quality] equality over {eq['steps']} steps: max |loss diff| "
              f"{eq['max_abs_loss_diff']:.3g} (tolerance {eq['tolerance']:g}, first step above: "
              f"{eq['first_step_above_tolerance']})", file=sys.stderr)


if __name__ == "__main__":
    main()
