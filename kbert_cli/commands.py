"""What each `kbert` subcommand does: a thin layer over the library. Importing this module
imports kbert, and so TensorFlow; `kbert_cli.main` does so only once the command line parsed."""

import sys

from kbert_cli.convert import convert
from kbert_cli.training_parsers import config_kwargs


def _vocab(args) -> int:
    """Trains a WordPiece vocabulary in BERT's layout."""
    from kbert.outputs import check_output_file
    from kbert.data.corpus import text_lines, wikipedia_articles
    from kbert.text.vocab import train_vocabulary

    check_output_file(args.output, args.overwrite, args.corpus or ())
    texts = list(text_lines(args.corpus)) if args.corpus else wikipedia_articles()
    vocab = train_vocabulary(texts, vocab_size=args.size, lowercase=not args.cased,
                             output_path=args.output)
    source = ", ".join(args.corpus) if args.corpus else "Wikipedia lead sections"
    print(f"Wrote {len(vocab):,} {'cased' if args.cased else 'uncased'} tokens to "
          f"{args.output}, learned from {len(texts):,} texts of {source}.")
    if len(vocab) < args.size:
        print(f"{args.size:,} were asked for, but the corpus has no more word pieces seen at "
              "least twice.")
    return 0


def _pretrain(args) -> int:
    """Pre-trains with MLM + NSP; re-running the same command resumes from its checkpoint."""
    from kbert.training.pretrain import pretrain

    metrics = pretrain(**config_kwargs(args, "pretrain"))
    lm = "next_token" if args.causal else "mlm"  # what the LM head's accuracy counts
    print("held-out: " + ", ".join(f"{k.replace('mlm', lm)} {metrics[k]:.4f}" for k in
                                   ("mlm_accuracy", "nsp_accuracy", "baseline_mlm_accuracy")
                                   if metrics.get(k) is not None))
    if "init_heads" in metrics:
        heads = " and ".join(metrics["init_heads"]) or "no pre-training"
        print(f"started from {args.init}: its encoder and {heads} head(s)")
    print(f"Wrote {args.output}/metrics.json, {args.output}/model (Hugging Face layout), "
          f"TensorBoard logs in {args.output}/logs")
    return 0


def _finetune(args) -> int:
    """Fine-tunes on one task with the paper's recipe; metrics land in OUTPUT/metrics.json."""
    from kbert.data.own_files import DataFiles
    from kbert.training.finetune import finetune

    options = {k: v for k, v in (("doc_stride", args.doc_stride),
                                 ("max_query_length", args.max_query_length),
                                 ("null_threshold", args.null_threshold),
                                 ("batching", args.batching)) if v is not None}
    settings = config_kwargs(args, "finetune")
    settings["init"] = settings["init"] or args.preset
    if settings["init"] is None:  # FinetuneConfig's default
        del settings["init"]
    files = DataFiles(**config_kwargs(args, "files"))
    task = args.task or "sentiment"
    if files.train_file is not None:
        task, options = _own_files(files, args, options), None
    metrics = finetune(task=task, data_dir=args.data_dir, task_options=options, **settings)
    _print_metrics(metrics, args.output)
    return 0


def _own_files(files, args, options):
    """The spec of `kbert finetune --train-file` with the task's `options`, its files read and
    checked before any output is written; says in a line when a tenth of the training file is
    held out."""
    from kbert.tasks.own_files import file_spec, held_out_note

    if args.data_dir is not None:
        raise ValueError("--data-dir is the folder of a built-in task's files; --train-file "
                         "names one's own.")
    spec = file_spec(files, task=args.task, **options)
    if note := held_out_note(files):
        print(note)
    return spec


METRIC_NAMES = ("accuracy", "exact_match", "precision", "recall", "f1", "matthews_corrcoef",
                "pearson", "spearman")


def _format(metrics):
    return ", ".join(f"{k} {metrics[k]:.4f}" for k in METRIC_NAMES
                     if isinstance(metrics.get(k), (int, float)))


def _print_metrics(metrics, output):
    split = metrics.get("eval_split", "dev")
    if metrics.get("best_epoch") is not None:
        scores = ", ".join(f"{s['score']:.4f}" for s in metrics["dev_scores"])
        print(f"kept epoch {metrics['best_epoch']} of {len(metrics['dev_scores'])} (dev: "
              f"{scores})")
    print(f"{split}: " + _format(metrics))
    print(f"Wrote {output}/metrics.json, {output}/model.keras, TensorBoard logs in {output}/logs")


def _evaluate(args) -> int:
    """Scores a fine-tuned run or checkpoint on a task split; writes OUTPUT/metrics.json and,
    for SQuAD and CoNLL, OUTPUT/predictions.json, whole or not at all. An --output folder is
    new or an earlier evaluation (`kbert.outputs`), never the run itself."""
    import json

    from kbert.outputs import check_output, write_folder
    from kbert.training.finetune import evaluate_run

    inputs = (args.model, args.data_dir)
    if args.output:
        check_output(args.output, "evaluation", args.overwrite, inputs)
    metrics, predictions = evaluate_run(
        args.model, task=args.task, split=args.split, data_dir=args.data_dir,
        max_eval_examples=args.max_eval_examples, allow_pickle=args.allow_pickle,
        return_predictions=True, null_threshold=args.null_threshold)
    output = args.output or _evaluation_dir(args.model, metrics, args.overwrite)
    written = {name: json.dumps(value, indent=2, ensure_ascii=False) + "\n"
               for name, value in (("metrics.json", metrics), ("predictions.json", predictions))
               if value is not None}
    write_folder(output, "evaluation", written)
    print(f"{metrics['task']} {metrics['split']} ({metrics['examples']} examples): "
          + _format(metrics))
    print(f"Wrote {', '.join(f'{output}/{name}' for name in written)}")
    return 0


def _evaluation_dir(model, metrics, overwrite):
    """Where evaluate writes by default: inside a run (`RunDirectory.eval_dir`), else inside
    the checkpoint directory, as `eval_<split>`; checked as --output is (an earlier
    evaluation's folder holds only its two files)."""
    import pathlib

    from kbert.outputs import check_output
    from kbert.runs import METRICS_FILE, PREDICTIONS_FILE, RunDirectory

    if RunDirectory.is_run(model):
        output = RunDirectory(model).eval_dir(metrics["split"], metrics["task"])
    else:
        output = pathlib.Path(model) / f"eval_{metrics['split']}"
    check_output(output, "evaluation", overwrite, unmarked=lambda path: {
        p.name for p in path.iterdir()} <= {METRICS_FILE, PREDICTIONS_FILE})
    return output


def _predict(args) -> int:
    """Answers raw text with a fine-tuned run or checkpoint: labels, answers or entities."""
    import json

    from kbert.training.finetune import predict_run

    inputs = {k: v for k, v in (("text", args.text), ("text_pair", args.text_pair),
                                ("choices", args.choice), ("question", args.question),
                                ("context", args.context)) if v is not None}
    if args.input is not None:
        if inputs:
            raise ValueError("--input reads every input from its file; leave out "
                             f"{', '.join('--' + k.replace('_', '-') for k in inputs)}.")
        args.batch_size = args.batch_size or 64  # set: out-of-memory advice halves it
        return _predict_file(args)
    if args.output is not None or args.batch_size is not None or args.overwrite:
        raise ValueError("--output, --overwrite and --batch-size go with --input (a file of "
                         "inputs).")
    print(json.dumps(predict_run(args.model, allow_pickle=args.allow_pickle, task=args.task,
                                 data_dir=args.data_dir, null_threshold=args.null_threshold,
                                 top_k=args.top_k, **inputs),
                     indent=2, ensure_ascii=False))
    return 0


def _predict_file(args) -> int:
    """`kbert predict --input`: one JSON answer a line, to --output (written whole or not at
    all) or standard output (no --output, or -)."""
    import contextlib
    import json
    import os
    import pathlib

    from kbert.outputs import check_output_file, staged_file
    from kbert.training.batch_prediction import predict_requests

    target = pathlib.Path(args.output) if args.output not in (None, "-") else None
    if target is not None:
        check_output_file(target, args.overwrite, [args.input, args.model])
    staging = staged_file(target) if target else None
    try:
        with contextlib.ExitStack() as files:
            stdin = args.input == "-"
            lines = sys.stdin.buffer if stdin else files.enter_context(
                open(args.input, "rb"))  # lines decoded one by one (`decoded_lines`)
            out = files.enter_context(open(staging, "w", encoding="utf-8")) if target \
                else sys.stdout
            answers = predict_requests(
                args.model, lines, args.batch_size, allow_pickle=args.allow_pickle,
                task=args.task, data_dir=args.data_dir, null_threshold=args.null_threshold,
                top_k=args.top_k, source="<stdin>" if stdin else args.input)
            count = 0
            for count, answer in enumerate(answers, 1):
                out.write(json.dumps(answer, ensure_ascii=False) + "\n")
        if target:
            os.replace(staging, target)
            print(f"Wrote {count} answers to {target}", file=sys.stderr)
    finally:
        if staging is not None and staging.exists():
            staging.unlink()
    return 0


def _export(args) -> int:
    """Exports a fine-tuned model as a versioned SavedModel that takes raw text."""
    from kbert.export.from_path import export_from_cli

    path = export_from_cli(
        args.model, args.output_dir, vocabulary=args.vocab,
        lowercase=False if args.cased else None, sequence_length=args.sequence_length,
        version=args.version, label_names=args.labels, sentence_pair=args.sentence_pair or None,
        task=args.task, warmup_texts=[] if args.no_warmup else None, overwrite=args.overwrite,
        allow_pickle=args.allow_pickle, null_threshold=args.null_threshold, top_k=args.top_k)
    print(f"Exported {args.model} to {path}")
    return 0


def _quickstart(args) -> int:
    """Pretrained MiniLM → fine-tuned on movie reviews → exported → answering raw text."""
    from kbert.quickstart import quickstart

    quickstart(output_dir=args.output, export_dir=args.export_dir, steps=args.steps,
               max_eval_examples=args.max_eval_examples)
    return 0


COMMANDS = {"convert": convert, "vocab": _vocab, "pretrain": _pretrain, "finetune": _finetune,
            "evaluate": _evaluate, "predict": _predict, "export": _export,
            "quickstart": _quickstart}
"""Subcommand name → the function that carries it out, given the parsed arguments."""
