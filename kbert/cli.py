"""The `kbert` command: a thin layer over the library, one subcommand per job."""

import argparse
import os
import sys

from kbert.cli_config import parse


FORMATS = ("huggingface", "google", "keras_hub")


def _convert(args) -> int:
    """Reads any supported checkpoint and writes it in another format."""
    import shutil

    from kbert.convert import read_checkpoint, write_google_checkpoint, write_hf_checkpoint
    from kbert.presets import resolve

    source = resolve(args.source)
    config, weights = read_checkpoint(source, allow_pickle=args.allow_pickle)
    vocab = source / "vocab.txt" if (source / "vocab.txt").is_file() else None
    if args.to == "huggingface":
        write_hf_checkpoint(args.dest, config, weights, vocab_file=vocab, overwrite=args.overwrite)
    elif args.to == "google":
        write_google_checkpoint(args.dest, config, weights, vocab_file=vocab,
                                overwrite=args.overwrite)
    else:
        from kbert.convert.keras_hub import to_keras_hub

        if os.path.exists(args.dest) and not args.overwrite:
            raise FileExistsError(f"{args.dest} exists; pass --overwrite to replace it.")
        shutil.rmtree(args.dest, ignore_errors=True)
        to_keras_hub(config, weights, allow_approximation=args.allow_approximation
                     ).save_to_preset(str(args.dest))
    heads = sorted({n.split(".")[1] for n in weights if n.startswith("cls.")})
    print(f"Wrote {args.to} checkpoint to {args.dest}: {config.num_layers} layers, hidden "
          f"{config.hidden_size}, {config.hidden_act}"
          + (f", heads: {', '.join(heads)}" if heads else "") + ".")
    return 0


def _vocab(args) -> int:
    """Trains a WordPiece vocabulary in BERT's layout."""
    from kbert.data.corpus import text_lines, wikipedia_articles
    from kbert.text.vocab import train_vocabulary

    texts = list(text_lines(args.corpus)) if args.corpus else wikipedia_articles()
    vocab = train_vocabulary(texts, vocab_size=args.size, lowercase=not args.cased,
                             output_path=args.output)
    source = ", ".join(args.corpus) if args.corpus else "Wikipedia lead sections"
    print(f"Wrote {len(vocab)} tokens ({'cased' if args.cased else 'uncased'}) learned from "
          f"{len(texts)} texts of {source} to {args.output}.")
    return 0


def _pretrain(args) -> int:
    """Pre-trains with MLM + NSP; re-running the same command resumes from its checkpoint."""
    from kbert.training.pretrain import pretrain

    metrics = pretrain(
        args.output, preset=args.preset, init=args.init, corpus=args.corpus, steps=args.steps,
        epochs=args.epochs, batch_size=args.batch_size, sequence_length=args.sequence_length,
        learning_rate=args.learning_rate, optimizer=args.optimizer,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        mixed_precision=args.mixed_precision, jit_compile=args.xla,
        checkpoint_every=args.checkpoint_every, strategy=args.strategy,
        whole_word=args.whole_word, nsp=not args.no_nsp, seed=args.seed,
        profile_batches=args.profile_batches)
    print("held-out: " + ", ".join(f"{k} {metrics[k]:.4f}" for k in
                                   ("mlm_accuracy", "nsp_accuracy", "baseline_mlm_accuracy")
                                   if metrics.get(k) is not None))
    print(f"Wrote {args.output}/metrics.json, {args.output}/model (Hugging Face layout), "
          f"TensorBoard logs in {args.output}/logs")
    return 0


def _batch_range(text):
    """"10,20" → (10, 20); "10" → 10 (one batch)."""
    try:
        numbers = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected FIRST,LAST batch numbers, got {text!r}")
    if len(numbers) not in (1, 2) or min(numbers) < 1:
        raise argparse.ArgumentTypeError(f"expected FIRST,LAST batch numbers, got {text!r}")
    return numbers[0] if len(numbers) == 1 else numbers


def _finetune(args) -> int:
    """Fine-tunes on one task with the paper's recipe; metrics land in OUTPUT/metrics.json."""
    from kbert.training.finetune import finetune

    options = {k: v for k, v in (("doc_stride", args.doc_stride),
                                 ("max_query_length", args.max_query_length),
                                 ("null_threshold", args.null_threshold)) if v is not None}
    metrics = finetune(
        task=args.task, data_dir=args.data_dir, task_options=options,
        init=args.init or args.preset or "minilm_l6_h384_uncased", output_dir=args.output,
        epochs=args.epochs, steps=args.steps, batch_size=args.batch_size,
        sequence_length=args.sequence_length, learning_rate=args.learning_rate,
        max_train_examples=args.max_train_examples, max_eval_examples=args.max_eval_examples,
        mode=args.mode, seed=args.seed, mixed_precision=args.mixed_precision,
        attention_sentence=args.attention_images, xla=args.xla)
    _print_metrics(metrics, args.output)
    return 0


METRIC_NAMES = ("accuracy", "exact_match", "precision", "recall", "f1", "matthews_corrcoef",
                "pearson", "spearman")


def _format(metrics):
    return ", ".join(f"{k} {metrics[k]:.4f}" for k in METRIC_NAMES
                     if isinstance(metrics.get(k), (int, float)))


def _print_metrics(metrics, output):
    split = metrics.get("eval_split", "dev")
    print(f"{split}: " + _format(metrics))
    print(f"Wrote {output}/metrics.json, {output}/model.keras, TensorBoard logs in {output}/logs")


def _evaluate(args) -> int:
    """Scores a fine-tuned run on a task split; writes OUTPUT/metrics.json."""
    import json
    import pathlib

    from kbert.training.finetune import evaluate_run

    metrics = evaluate_run(args.model, task=args.task, split=args.split, data_dir=args.data_dir,
                           max_eval_examples=args.max_eval_examples)
    split = metrics["split"]
    output = pathlib.Path(args.output or pathlib.Path(args.model) / f"eval_{split}")
    output.mkdir(parents=True, exist_ok=True)
    (output / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    print(f"{metrics['task']} {split} ({metrics['examples']} examples): " + _format(metrics))
    print(f"Wrote {output}/metrics.json")
    return 0


def _predict(args) -> int:
    """Answers raw text with a fine-tuned run: labels, answers or entities."""
    import json

    from kbert.training.finetune import predict_run

    inputs = {k: v for k, v in (("text", args.text), ("text_pair", args.text_pair),
                                ("choices", args.choice), ("question", args.question),
                                ("context", args.context)) if v is not None}
    print(json.dumps(predict_run(args.model, **inputs), indent=2, ensure_ascii=False))
    return 0


def _export(args) -> int:
    """Exports a fine-tuned model as a versioned SavedModel that takes raw text."""
    from kbert.export.saved_model import export_from_cli

    path = export_from_cli(
        args.model, args.output_dir, vocabulary=args.vocab,
        lowercase=False if args.cased else None, sequence_length=args.sequence_length,
        version=args.version, label_names=args.labels, sentence_pair=args.pair or None,
        task=args.task, warmup_texts=[] if args.no_warmup else None, overwrite=args.overwrite)
    print(f"Exported {args.model} to {path}")
    return 0


def _quickstart(args) -> int:
    """Pretrained MiniLM → fine-tuned on movie reviews → exported → answering raw text."""
    from kbert.quickstart import quickstart

    quickstart(output_dir=args.output, export_dir=args.export_dir, steps=args.steps,
               max_eval_examples=args.max_eval_examples)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kbert", description="BERT for Keras 3 and TensorFlow.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    convert = commands.add_parser(
        "convert", help="convert a checkpoint between Hugging Face, Google TF1 and keras-hub",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Convert a BERT checkpoint. SOURCE is a Hugging Face directory, an original "
                    "Google checkpoint directory, a keras-hub preset directory or a kbert "
                    "weights preset name; its format is detected.",
        epilog="examples:\n"
               "  kbert convert minilm_l6_h384_uncased out/minilm_google --to google\n"
               "  kbert convert uncased_L-12_H-768_A-12 out/bert_base_hf --to huggingface\n"
               "  kbert convert out/bert_base_hf out/bert_base_hub --to keras_hub")
    convert.add_argument("source")
    convert.add_argument("dest")
    convert.add_argument("--to", choices=FORMATS, required=True)
    convert.add_argument("--overwrite", action="store_true",
                         help="replace DEST even if it holds other files")
    convert.add_argument("--allow-pickle", action="store_true",
                         help="read a pytorch_model.bin (unpickling runs code: trusted files only)")
    convert.add_argument("--allow-approximation", action="store_true",
                         help="for keras_hub: accept its fixed tanh-GELU for an exact-GELU model")
    convert.set_defaults(run=_convert)

    vocab = commands.add_parser(
        "vocab", help="train a WordPiece vocabulary in BERT's layout",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Learn a WordPiece vocabulary: [PAD]=0, [unused0-98], [UNK]=100, [CLS]=101, "
                    "[SEP]=102, [MASK]=103, then characters and word pieces by frequency.",
        epilog="examples:\n"
               "  kbert vocab --output out/vocab.txt                     # Wikipedia, 30,522\n"
               "  kbert vocab --corpus a.txt b.txt --size 8000 --cased --output out/vocab.txt")
    vocab.add_argument("--corpus", nargs="+", metavar="FILE",
                       help="UTF-8 text files, one text per line (default: the built-in "
                            "Wikipedia lead sections)")
    vocab.add_argument("--size", type=int, default=30522, help="target size (default 30522)")
    vocab.add_argument("--cased", action="store_true", help="keep case and accents")
    vocab.add_argument("--output", required=True, help="where to write vocab.txt")
    vocab.set_defaults(run=_vocab)

    pretrain = commands.add_parser(
        "pretrain", help="pre-train with masked LM + next sentence prediction",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Pre-train BERT on a text corpus (default: the built-in Wikipedia lead "
                    "sections). Checkpoints every N steps; re-run the same command to resume. "
                    "Writes OUTPUT/metrics.json, OUTPUT/model and TensorBoard logs.",
        epilog="examples:\n"
               "  kbert pretrain --preset mini --steps 2000 --output runs/pretrain\n"
               "  kbert pretrain --corpus my_docs/ --whole-word --optimizer lamb --output runs/wwm\n"
               "  TF_CONFIG=... kbert pretrain --strategy multi_worker --output runs/mw")
    start = pretrain.add_mutually_exclusive_group()
    start.add_argument("--preset", default="mini", help="size of a fresh model (default mini)")
    start.add_argument("--init", help="a checkpoint dir or weights preset to continue from")
    pretrain.add_argument("--corpus", help="text file, folder of .txt files, glob, or TFRecord "
                                           "folder (default: Wikipedia lead sections)")
    length = pretrain.add_mutually_exclusive_group(required=True)
    length.add_argument("--steps", type=int)
    length.add_argument("--epochs", type=int)
    pretrain.add_argument("--batch-size", type=int, default=32)
    pretrain.add_argument("--sequence-length", type=int, default=128)
    pretrain.add_argument("--learning-rate", type=float, default=1e-4)
    pretrain.add_argument("--optimizer", choices=("adamw", "lamb"), default="adamw")
    pretrain.add_argument("--gradient-accumulation-steps", type=int, default=1)
    pretrain.add_argument("--mixed-precision", choices=("bf16", "fp16"))
    pretrain.add_argument("--xla", action="store_true", help="compile train steps with XLA")
    pretrain.add_argument("--checkpoint-every", type=int, default=1000)
    pretrain.add_argument("--strategy", default=None,
                          help="default, mirrored, multi_worker (from TF_CONFIG), tpu[:NAME], "
                               "or auto")
    pretrain.add_argument("--whole-word", action="store_true", help="whole-word masking")
    pretrain.add_argument("--no-nsp", action="store_true", help="the paper's No-NSP ablation")
    pretrain.add_argument("--seed", type=int, default=0)
    pretrain.add_argument("--profile-batches", type=_batch_range, default=None,
                          metavar="FIRST,LAST",
                          help="write a profiler trace of these batches to TensorBoard's "
                               "Profile tab, e.g. 10,20")
    pretrain.add_argument("--output", default="runs/pretrain")
    pretrain.set_defaults(run=_pretrain)

    finetune = commands.add_parser(
        "finetune", help="fine-tune on a sentence, pair, choice, span or tagging task",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Fine-tune BERT end to end (AdamW, 10% warmup, linear decay) and score "
                    "the held-out split. Writes OUTPUT/metrics.json, OUTPUT/model.keras (with "
                    "its preprocessor), OUTPUT/run.json and TensorBoard logs in OUTPUT/logs.",
        epilog="examples:\n"
               "  kbert finetune --task sentiment --steps 300 --output runs/sentiment\n"
               "  kbert finetune --task sentiment --preset mini --epochs 3 --output runs/random\n"
               "  kbert finetune --task qnli --max-train-examples 20000 --output runs/qnli\n"
               "  kbert finetune --task conll --steps 400 --learning-rate 1e-4 --output runs/ner\n"
               "  kbert finetune --task squad --max-train-examples 4000 --output runs/squad\n"
               "  kbert finetune --task glue:SST-2 --data-dir glue/SST-2 --output runs/sst2\n"
               "  kbert finetune --steps 300 --attention-images 'A warm, funny film.' "
               "--output runs/sentiment\n"
               "  kbert finetune --config sentiment.yaml --seed 1   # flags beat the file")
    finetune.add_argument("--task", default="sentiment",
                          help="sentiment, sentiment_score, qnli, mmlu, squad, squad2, conll, "
                               "or glue:<NAME> with --data-dir (default: sentiment)")
    start = finetune.add_mutually_exclusive_group()
    start.add_argument("--init", help="pretrained weights: a checkpoint dir or weights preset "
                                      "(default: minilm_l6_h384_uncased)")
    start.add_argument("--preset", help="train from random weights of this size preset "
                                        "(tiny, mini, small, medium, base, large)")
    finetune.add_argument("--epochs", type=int, default=3)
    finetune.add_argument("--steps", type=int, help="train this many steps instead of --epochs")
    finetune.add_argument("--batch-size", type=int, default=32)
    finetune.add_argument("--sequence-length", type=int,
                          help="default 128 (SQuAD: 384)")
    finetune.add_argument("--learning-rate", type=float,
                          help="peak learning rate (default 5e-5; 1e-3 for --mode feature)")
    finetune.add_argument("--max-train-examples", type=int, help="train on a random subset")
    finetune.add_argument("--max-eval-examples", type=int, help="score a fixed subset")
    finetune.add_argument("--mode", choices=("finetune", "feature"), default="finetune",
                          help="feature: frozen BERT, last four layers into a BiLSTM")
    finetune.add_argument("--data-dir", help="directory of a GLUE task's TSV files")
    finetune.add_argument("--doc-stride", type=int,
                          help="SQuAD: sub-tokens between the starts of a context's windows "
                               "(default 128)")
    finetune.add_argument("--max-query-length", type=int,
                          help="SQuAD: questions are cut to this many sub-tokens (default 64)")
    finetune.add_argument("--null-threshold", type=float,
                          help="SQuAD v2.0: answer \"\" when the null score beats the best "
                               "span by more than this (default 0)")
    finetune.add_argument("--seed", type=int, default=0)
    finetune.add_argument("--attention-images", metavar="SENTENCE",
                          help="write SENTENCE's attention heatmaps to TensorBoard while "
                               "training (OUTPUT/logs/attention)")
    finetune.add_argument("--xla", action="store_true",
                          help="compile train steps with XLA (batches padded to a multiple "
                               "of 16)")
    finetune.add_argument("--mixed-precision", choices=("bf16", "fp16"),
                          help="compute in bfloat16 (on a CPU, without --xla: faster on the "
                               "AMD EPYC measured, slower on the Intel Xeon without AMX; see "
                               "README) or float16 (GPUs; loss scaling), weights float32")
    finetune.add_argument("--output", default="runs/finetune")
    finetune.set_defaults(run=_finetune)

    evaluate = commands.add_parser(
        "evaluate", help="score a fine-tuned model on a task split",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Load a `kbert finetune` output directory and score it with the task's "
                    "standard metrics. Writes OUTPUT/metrics.json.",
        epilog="examples:\n"
               "  kbert evaluate runs/sentiment                  # its own task, test split\n"
               "  kbert evaluate runs/sentiment --split dev --max-eval-examples 500")
    evaluate.add_argument("model", help="a kbert finetune output directory")
    evaluate.add_argument("--task", help="default: the task the model was trained on")
    evaluate.add_argument("--split", choices=("train", "dev", "test"),
                          help="default: test (SQuAD: dev, its only public split)")
    evaluate.add_argument("--data-dir", help="directory of a GLUE task's TSV files")
    evaluate.add_argument("--max-eval-examples", type=int, help="score a fixed subset")
    evaluate.add_argument("--output", help="default: MODEL/eval_SPLIT")
    evaluate.set_defaults(run=_evaluate)

    predict = commands.add_parser(
        "predict", help="answer raw text with a fine-tuned run",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Raw text in, answers out: a label with probabilities for sentence tasks "
                    "(--text, plus --text-pair for pairs or --choice for multiple choice), the "
                    "answer and its character span for SQuAD (--question, --context), the "
                    "entities with character spans for CoNLL (--text).",
        epilog="examples:\n"
               "  kbert predict runs/sentiment --text 'A joy to watch.'\n"
               "  kbert predict runs/squad --question 'Who wrote it?' --context 'Ann wrote it.'\n"
               "  kbert predict runs/ner --text 'Angela Merkel visited Paris.'\n"
               "  kbert predict runs/mmlu --text 'What is 2 + 2?' --choice 3 --choice 4 "
               "--choice 5 --choice 22")
    predict.add_argument("model", help="a kbert finetune output directory")
    predict.add_argument("--text")
    predict.add_argument("--text-pair", help="the second text of a sentence-pair task")
    predict.add_argument("--choice", action="append",
                         help="one answer choice of a multiple-choice task (repeat it)")
    predict.add_argument("--question")
    predict.add_argument("--context")
    predict.set_defaults(run=_predict)

    export = commands.add_parser(
        "export", help="export a fine-tuned model for TensorFlow Serving",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Write OUTPUT_DIR/<version>/, a SavedModel whose serving_default signature "
                    "takes raw strings (tokenization in the graph), plus serve_token_ids.",
        epilog="examples:\n"
               "  kbert export runs/sentiment saved_models/sentiment --labels negative,positive\n"
               "  kbert export runs/qnli saved_models/qnli --pair --version 3")
    export.add_argument("model", help="a kbert finetune output dir, or a .keras file")
    export.add_argument("output_dir", help="the model's base dir, e.g. saved_models/NAME")
    export.add_argument("--vocab", help="vocab.txt, checkpoint dir or weights preset "
                                        "for a model saved without one (default: the run's own)")
    export.add_argument("--cased", action="store_true", help="the vocabulary is cased")
    export.add_argument("--sequence-length", type=int)
    export.add_argument("--version", type=int, help="default: one more than the latest")
    export.add_argument("--labels", help="comma-separated label names, in label-id order")
    export.add_argument("--pair", action="store_true",
                        help="inputs are text + text_pair (default: as the run was trained)")
    export.add_argument("--task", help="classifier, multiple_choice, backbone or features, "
                                       "for a plain Keras model")
    export.add_argument("--no-warmup", action="store_true",
                        help="write no TF Serving warm-up requests")
    export.add_argument("--overwrite", action="store_true")
    export.set_defaults(run=_export)

    quick = commands.add_parser(
        "quickstart", help="the whole path in one go: fine-tune, evaluate, export, serve",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Fine-tune the pretrained MiniLM on the movie-review sentiment data for a "
                    "few minutes, print dev/test accuracy, export saved_models/sentiment/<ver>/ "
                    "and answer a few sentences through the export.",
        epilog="examples:\n"
               "  kbert quickstart\n"
               "  kbert quickstart --steps 50 --max-eval-examples 200   # a two-minute taste")
    quick.add_argument("--steps", type=int, default=400, help="training steps (default 400)")
    quick.add_argument("--max-eval-examples", type=int, help="score a fixed subset only")
    quick.add_argument("--output", default="runs/quickstart")
    quick.add_argument("--export-dir", default="saved_models/sentiment")
    quick.set_defaults(run=_quickstart)

    for command in commands.choices.values():
        command.add_argument("--config", metavar="FILE",
                             help="a YAML or JSON file of this command's options (keys: option "
                                  "names); flags given on the command line override it")
    parser.commands = commands.choices  # for --config in parse()
    return parser


def _out_of_memory(error):
    tensorflow = sys.modules.get("tensorflow")
    return isinstance(error, MemoryError) or (
        tensorflow is not None and isinstance(error, tensorflow.errors.ResourceExhaustedError))


def _out_of_memory_advice(args):
    """What to retry with after training ran out of memory at `args.batch_size`."""
    if args.batch_size <= 1:
        return ("ran out of memory at batch size 1: retry with a shorter --sequence-length or "
                "a smaller model (--preset).")
    retry = f"--batch-size {args.batch_size // 2}"
    if getattr(args, "gradient_accumulation_steps", None):
        retry += (f" --gradient-accumulation-steps {2 * args.gradient_accumulation_steps} "
                  "(the same batch per update)")
    return (f"ran out of memory at batch size {args.batch_size}: retry with a smaller batch, "
            f"e.g. {retry}.")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parse(build_parser(), argv)
    except (FileNotFoundError, ValueError) as error:
        print(f"kbert {argv[0]}: error: {error}", file=sys.stderr)
        return 2
    try:
        return args.run(args)
    except (FileNotFoundError, FileExistsError, ValueError) as error:
        print(f"kbert {args.command}: error: {error}", file=sys.stderr)
        return 2
    except Exception as error:
        if getattr(args, "batch_size", None) is None or not _out_of_memory(error):
            raise
        print(f"kbert {args.command}: error: {_out_of_memory_advice(args)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
