"""`kbert convert`: a checkpoint to another checkpoint format; a fine-tuned run to transformers'
class for its task, keras-hub's BertTextClassifier or a checkpoint of Google's fine-tuning
scripts; either to TF Hub's BERT SavedModels. Thin over `kbert.convert` and
`kbert.export.hub_models`."""

import os
import pathlib
import tempfile

from kbert.outputs import check_overwrite


def _refuse_replacing_source(source, dest):
    """DEST that is SOURCE, or a folder holding it, would be replaced by what is read from it
    (with --overwrite the run or checkpoint was gone, without a word)."""
    source, dest = pathlib.Path(source).resolve(), pathlib.Path(dest).resolve()
    if dest == source or dest in source.parents:
        raise ValueError(f"DEST {dest} {'is' if dest == source else 'holds'} SOURCE "
                         f"{source}: writing it would replace what it is converted from; give "
                         "another DEST.")


def convert(args) -> int:
    """Reads any supported checkpoint and writes it in another format."""
    from kbert.convert import (is_causal, read_checkpoint, refuse_causal,
                               write_google_checkpoint, write_hf_checkpoint)
    from kbert.convert.huggingface import hf_label_names
    from kbert.presets import resolve, resolve_preset
    from kbert.runs import RunDirectory
    from kbert.tasks.pretrained import fine_tuned_model
    from kbert.text.tokenizer_files import accents_from_checkpoint, max_chars_from_checkpoint

    source = resolve(args.source)
    _refuse_replacing_source(source, args.dest)
    if args.overwrite and os.path.lexists(args.dest):
        check_overwrite(args.dest, [source], "DEST")
    if args.sequence_length is not None and args.to != "tf_hub":
        raise ValueError("--sequence-length applies to --to tf_hub only (a checkpoint has no "
                         "sequence length).")
    if args.to == "tf_hub":
        return _convert_to_tf_hub(args, source)
    if RunDirectory.is_run(source):
        run = RunDirectory.open(source)
        label_names = run.info.get("label_names") if run.info["kind"] != "regression" else None
        return _convert_task_model(args, run.load_model(), "run's", label_names)
    model = fine_tuned_model(source, allow_pickle=args.allow_pickle)
    if model is not None:
        return _convert_task_model(args, model, "fine-tuned", hf_label_names(source))
    refuse_causal(source, args.to)
    config, weights = read_checkpoint(source, allow_pickle=args.allow_pickle)
    preset = resolve_preset(source)
    with tempfile.TemporaryDirectory() as scratch:
        vocab = _vocabulary_file(preset, scratch)
        # the tokenizer's settings travel with the weights: a cased checkpoint stays cased
        strip_accents = accents_from_checkpoint(preset.directory)
        if args.to == "huggingface":
            settings = {"do_lower_case": preset.lowercase,
                        "strip_accents": strip_accents,
                        "max_input_chars_per_word": max_chars_from_checkpoint(preset.directory)}
            write_hf_checkpoint(args.dest, config, weights, vocab_file=vocab,
                                overwrite=args.overwrite, causal=is_causal(source),
                                tokenizer_config=settings if vocab else None)
        elif args.to == "google":
            write_google_checkpoint(args.dest, config, weights, vocab_file=vocab,
                                    overwrite=args.overwrite, lowercase=preset.lowercase,
                                    strip_accents=strip_accents)
        else:
            from kbert.convert.keras_hub import write_keras_hub_preset

            write_keras_hub_preset(args.dest, config, weights, vocabulary=vocab,
                                   lowercase=preset.lowercase, strip_accents=strip_accents,
                                   allow_approximation=args.allow_approximation,
                                   overwrite=args.overwrite)
    heads = sorted({n.split(".")[1] for n in weights if n.startswith("cls.")})
    print(f"Wrote {args.to} checkpoint to {args.dest}: {config.num_layers} layers, hidden "
          f"{config.hidden_size}, {config.hidden_act}"
          + (f", heads: {', '.join(heads)}" if heads else "") + ".")
    return 0


def _vocabulary_file(preset, scratch):
    """The checkpoint's vocab.txt, for the converted copy; where it has only a transformers 5
    tokenizer.json, a vocab.txt written in `scratch` from its WordPiece vocabulary; else None."""
    if preset.vocabulary.is_file():
        return preset.vocabulary
    if not (preset.directory / "tokenizer.json").is_file():
        return None
    from kbert.text.tokenizer_files import load_vocabulary

    path = pathlib.Path(scratch) / "vocab.txt"
    path.write_text("\n".join(load_vocabulary(preset.vocabulary)) + "\n", encoding="utf-8")
    return path


def _convert_task_model(args, model, origin, label_names) -> int:
    """A fine-tuned task model (a run's, or a checkpoint's with its head) as the
    `transformers` class for its task (with `label_names`), as keras-hub's
    `BertTextClassifier`, or as a checkpoint of Google's run_classifier.py / run_squad.py
    (keras-hub and Google keep no label names)."""
    from kbert.convert import save_google, save_hf, save_keras_hub
    from kbert.convert.task_heads import task_head

    tokenizer = model.preprocessor.tokenizer
    kind = type(model).__name__
    if args.to == "keras_hub":
        save_keras_hub(model, args.dest, overwrite=args.overwrite,
                       allow_approximation=args.allow_approximation)
        written = "keras-hub's BertTextClassifier"
    elif args.to == "google":
        save_google(model, args.dest, overwrite=args.overwrite, tokenizer=tokenizer)
        written = "a Google TF1 checkpoint with its head"
    else:
        save_hf(model, args.dest, overwrite=args.overwrite, tokenizer=tokenizer,
                label_names=label_names)
        written = f"transformers' {task_head(model).architecture}"
    print(f"Wrote the {origin} {kind} as {written} to {args.dest}.")
    return 0


def _convert_to_tf_hub(args, source) -> int:
    """A checkpoint, or a fine-tuned run's encoder, as TF Hub's preprocessor and encoder
    SavedModels."""
    from kbert import BertBackbone, BertPreprocessor, BertTokenizer
    from kbert.export.hub_models import export_hub_models
    from kbert.runs import RunDirectory

    if RunDirectory.is_run(source):
        model = RunDirectory.open(source).load_model()
        backbone, tokenizer = model.backbone, model.preprocessor.tokenizer
        length = args.sequence_length or model.preprocessor.sequence_length
    else:
        backbone = BertBackbone.from_pretrained(source, allow_pickle=args.allow_pickle)
        tokenizer = BertTokenizer.from_pretrained(source)
        length = args.sequence_length or 128
    preprocessor = BertPreprocessor(tokenizer, sequence_length=length)
    export_hub_models(backbone, preprocessor, args.dest, overwrite=args.overwrite)
    config = backbone.config
    print(f"Wrote TF Hub preprocessor and encoder to {args.dest}/{{preprocessor,encoder}}: "
          f"{config.num_layers} layers, hidden {config.hidden_size}, sequence length "
          f"{preprocessor.sequence_length}.")
    return 0
