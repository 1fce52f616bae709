"""The paper's pre-training ablations (Table 5) in small: the "mini" preset pre-trained for the
same steps on the same corpus (default: kbert's Wikipedia text) three ways, then fine-tuned on
movie-review sentiment and on the QNLI-style pairs built from SQuAD (`kbert finetune --task
qnli`, the pair task kbert has):

  mlm_nsp   masked LM + next sentence prediction (BERT)
  no_nsp    masked LM only (`nsp=False`)
  ltr       left-to-right, no NSP (`causal=True, nsp=False`): a causal backbone trained as a
            left-to-right LM, every position predicting the next token (`NextTokenLM`)

Every variant records its held-out LM accuracy from `kbert.training.pretrain` (masked tokens
for the MLM variants, next tokens for LTR: the same kinds of token, but not the same task) and
its NSP accuracy where it has the head, then the fine-tuned dev/test accuracy from
`kbert.training.finetune`. Fine-tuning starts from the pre-trained model directory, saved as a
Hugging Face `is_decoder` model for LTR, so LTR is fine-tuned left-to-right too, as in the
paper ("the left-only constraint was also applied at fine-tuning"); its classifier reads the
last real token, the only one that has seen the whole input.

    python benchmarks/ablations.py                      # writes benchmarks/results/ablations.json
    python benchmarks/ablations.py --smoke --output /tmp/a.json

The report is rewritten after each pre-training and each fine-tuning, and pre-training
checkpoints every 200 steps under --workdir (one folder per budget), so a rerun
of the same command skips what is done and resumes what was cut off: the three variants (hours
at the real budget) can run over several sittings.
"""

import argparse
import hashlib
import json
import os
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: `benchmarks.*` imports need the repo root
    sys.path.insert(0, str(ROOT))

from benchmarks.quality import environment, positive  # noqa: E402

VARIANTS = {"mlm_nsp": {"nsp": True, "causal": False},
            "no_nsp": {"nsp": False, "causal": False},
            "ltr": {"nsp": False, "causal": True}}
LABELS = {"mlm_nsp": "BERT (MLM + NSP)", "no_nsp": "No NSP", "ltr": "LTR & No NSP"}
FINETUNE_TASKS = ("sentiment", "qnli")
SMOKE = {"preset": "tiny", "steps": 2, "batch_size": 4, "sequence_length": 32,
         "finetune_epochs": 1, "max_train_examples": 16, "max_eval_examples": 16,
         "corpus_documents": 200}


def budget_of(args):
    budget = {k: getattr(args, k) for k in (
        "preset", "steps", "batch_size", "sequence_length", "pretrain_learning_rate",
        "finetune_epochs", "finetune_batch_size", "learning_rate", "max_train_examples",
        "max_eval_examples", "seed", "corpus", "corpus_documents")}
    if args.smoke:
        budget.update(SMOKE, finetune_batch_size=SMOKE["batch_size"])
    budget["smoke"] = bool(args.smoke)
    return budget


def small_corpus(path, documents):
    """The first `documents` Wikipedia documents as a text file (the smoke's corpus)."""
    from kbert.data.pretraining.documents import wikipedia_documents, write_documents

    chosen = []
    for document in wikipedia_documents():
        chosen.append(document)
        if len(chosen) == documents:
            break
    write_documents(chosen, path)
    return str(path)


CHECKPOINT_EVERY = 200
"""Pre-training steps between checkpoints: a killed sitting loses at most these."""


def workdir_for(budget, root=None):
    """Where a budget's pre-training runs live between sittings: ROOT/DIGEST of the budget
    (ROOT default $KBERT_CACHE/ablations). A rerun resumes a killed pre-training from its last
    checkpoint there, or reuses a finished one; another budget never shares it."""
    digest = hashlib.sha256(json.dumps(budget, sort_keys=True).encode()).hexdigest()[:12]
    if root is None:
        root = pathlib.Path(os.environ.get("KBERT_CACHE", "~/.cache/kbert")).expanduser() / \
            "ablations"
    return pathlib.Path(root) / digest


def pretrain_variant(name, budget, corpus, workdir):
    """Pre-trains one variant in workdir/NAME (resuming, or reusing a finished run); (its
    held-out scores, the model directory)."""
    output = pathlib.Path(workdir) / name
    if (output / "metrics.json").is_file() and (output / "model").is_dir():
        metrics = json.loads((output / "metrics.json").read_text())  # written before model/
    else:
        from kbert.training import pretrain

        metrics = pretrain(output_dir=output, preset=budget["preset"], corpus=corpus,
                           steps=budget["steps"], batch_size=budget["batch_size"],
                           sequence_length=budget["sequence_length"],
                           learning_rate=budget["pretrain_learning_rate"], seed=budget["seed"],
                           checkpoint_every=min(CHECKPOINT_EVERY, budget["steps"]), verbose=0,
                           **VARIANTS[name])
    scores = {"lm_accuracy": metrics["mlm_accuracy"],
              "objective": "next token" if VARIANTS[name]["causal"] else "masked LM",
              "nsp_accuracy": metrics.get("nsp_accuracy") if VARIANTS[name]["nsp"] else None,
              "baseline_mlm_accuracy": metrics["baseline_mlm_accuracy"],
              "steps": metrics["steps"], "resumed_from_step": metrics["resumed_from_step"],
              "train_seconds": round(metrics["train_seconds"], 1)}
    return scores, output / "model"


def finetune_variant(model_dir, task, budget, workdir):
    """Fine-tunes the pre-trained model on `task` into `workdir`; its dev and test accuracy."""
    from kbert.training import finetune

    limit = budget["max_train_examples"]
    metrics = finetune(task, output_dir=workdir,
                       init=str(model_dir), epochs=budget["finetune_epochs"],
                       batch_size=budget["finetune_batch_size"],
                       learning_rate=budget["learning_rate"],
                       sequence_length=budget["sequence_length"], seed=budget["seed"],
                       max_train_examples=limit if task == "qnli" or budget["smoke"] else None,
                       max_eval_examples=budget["max_eval_examples"], verbose=0)
    return {"causal": metrics["settings"]["causal"], "dev_accuracy": metrics["dev"]["accuracy"],
            "test_accuracy": metrics["test"]["accuracy"], "steps": metrics["settings"]["steps"],
            "train_examples": metrics["sizes"]["train"]}


def table(results):
    """The markdown table (Table 5's layout: one row per pre-training variant)."""
    lines = ["| pre-training | held-out LM acc | held-out NSP acc | sentiment dev | "
             "sentiment test | QNLI dev | QNLI test |", "|---|---|---|---|---|---|---|"]

    def cell(value):
        return "–" if value is None else f"{value:.3f}"  # not measured / no NSP head

    for name, r in results.items():
        p, s, q = r["pretrain"], r.get("sentiment", {}), r.get("qnli", {})
        lines.append(f"| {LABELS[name]} | {cell(p['lm_accuracy'])} | "
                     f"{cell(p['nsp_accuracy'])} | {cell(s.get('dev_accuracy'))} | "
                     f"{cell(s.get('test_accuracy'))} | {cell(q.get('dev_accuracy'))} | "
                     f"{cell(q.get('test_accuracy'))} |")
    return "\n".join(lines)


def previous_variants(output, budget):
    """The variants `output` already holds for this very budget, or {} (no file, or another
    budget's report, which this run replaces)."""
    output = pathlib.Path(output)
    if not output.is_file():
        return {}
    report = json.loads(output.read_text())
    if {k: report["budget"].get(k) for k in budget} != budget:
        print(f"[ablations] {output} holds another budget's results: replacing them",
              file=sys.stderr, flush=True)
        return {}
    return report["variants"]


def write_report(output, budget, results):
    """The report with every variant so far, in the table's order, written atomically."""
    ordered = {name: results[name] for name in VARIANTS if name in results}
    report = {"budget": budget, "variants": ordered, "table": table(ordered)}
    output = pathlib.Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp, output)
    return report


def run(budget, variants, tasks, output, workdir_root=None):
    """Pre-trains and fine-tunes each variant, writing the report after each step, so that a
    budget's variants can run over several sittings: a rerun skips what the report holds and
    resumes pre-training from `workdir_for(budget, workdir_root)`."""
    results = previous_variants(output, budget)
    report = write_report(output, budget, results)
    workdir = workdir_for(budget, workdir_root)
    corpus = budget["corpus"]
    for name in variants:
        entry = results.get(name, {})
        if all(task in entry for task in tasks):
            print(f"[ablations] {name}: already in {output}", file=sys.stderr, flush=True)
            continue
        if budget["corpus_documents"] and corpus is None:
            workdir.mkdir(parents=True, exist_ok=True)
            corpus = small_corpus(workdir / "corpus.txt", budget["corpus_documents"])
        print(f"[ablations] {name}: pre-training in {workdir} ...", file=sys.stderr, flush=True)
        scores, model_dir = pretrain_variant(name, budget, corpus, workdir)
        if entry.get("pretrain") != scores:  # pre-trained anew: earlier fine-tunings are stale
            entry = {"pretrain": scores, **VARIANTS[name], "environment": environment()}
        for task in tasks:
            if task in entry:
                continue
            print(f"[ablations] {name}: fine-tuning {task} ...", file=sys.stderr, flush=True)
            with tempfile.TemporaryDirectory(prefix=f"ablations-{name}-{task}-") as tmp:
                entry[task] = finetune_variant(model_dir, task, budget, tmp)
            results[name] = entry
            report = write_report(output, budget, results)
        results[name] = entry
        report = write_report(output, budget, results)
    return report


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", nargs="+", choices=tuple(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--finetune-tasks", nargs="+", choices=FINETUNE_TASKS,
                        default=list(FINETUNE_TASKS))
    parser.add_argument("--preset", default="mini", help="the size preset pre-trained")
    parser.add_argument("--steps", type=positive, default=2000, help="pre-training steps")
    parser.add_argument("--batch-size", type=positive, default=32, help="pre-training batch")
    parser.add_argument("--sequence-length", type=positive, default=128)
    parser.add_argument("--pretrain-learning-rate", type=float, default=5e-4,
                        help="pre-training peak (the README's 500-step mini run: 5e-4; the "
                             "paper's 1e-4 is for 1M steps of batch 256)")
    parser.add_argument("--corpus", default=None, help="pre-training text (default Wikipedia)")
    parser.add_argument("--corpus-documents", type=positive, default=None,
                        help="pre-train on only the first N Wikipedia documents")
    parser.add_argument("--finetune-epochs", type=positive, default=3)
    parser.add_argument("--finetune-batch-size", type=positive, default=32)
    parser.add_argument("--learning-rate", type=float, default=5e-5, help="fine-tuning peak")
    parser.add_argument("--max-train-examples", type=positive, default=20000,
                        help="QNLI training pairs (sentiment trains on all)")
    parser.add_argument("--max-eval-examples", type=positive, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=str(ROOT / "benchmarks/results/ablations.json"))
    parser.add_argument("--workdir", default=None,
                        help="where pre-training runs live between sittings, one folder per "
                             "budget (default $KBERT_CACHE/ablations)")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny preset, 2 steps on 200 documents, 16 examples, length 32")
    args = parser.parse_args(argv)
    if args.corpus and args.corpus_documents:
        parser.error("give --corpus or --corpus-documents, not both")
    for name in ("learning_rate", "pretrain_learning_rate"):
        if not getattr(args, name) > 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    return args


def main(argv=None):
    args = parse_args(argv)
    report = run(budget_of(args), args.variants, args.finetune_tasks, args.output, args.workdir)
    print(report["table"])


if __name__ == "__main__":
    main()
