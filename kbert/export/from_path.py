"""`export_from_cli`: what `kbert export PATH OUTPUT_DIR` exports from a path a user names (a
`kbert finetune` run, a checkpoint directory with a task or masked-LM head, a `.keras` file),
read the way `kbert predict` reads it, then written by `export_saved_model`."""

import os
import pathlib

from kbert.export.saved_model import export_saved_model, version_directory


def export_from_cli(model_path, output_dir, vocabulary=None, lowercase=None,
                    sequence_length=None, version=None, label_names=None, sentence_pair=None,
                    task=None, warmup_texts=None, overwrite=False, allow_pickle=False,
                    null_threshold=None, top_k=None):
    """`kbert export MODEL OUTPUT_DIR`: a run directory or a saved Keras model →
    `OUTPUT_DIR/<version>/`.

    Args:
      model_path: a `kbert finetune` run directory (its model, preprocessor, label names,
        pair-ness and, for SQuAD, version and null threshold are used), a checkpoint directory
        holding a fine-tuned head (e.g. a transformers BertForSequenceClassification: its
        `id2label` names the labels) or a masked-LM head (`kbert pretrain`'s OUTPUT/model, a
        BertForMaskedLM: exported to fill blanks), or a `.keras` file.
      output_dir: the model's base directory, e.g. saved_models/sentiment.
      vocabulary, lowercase: for a model saved without a preprocessor: vocab.txt, a
        checkpoint directory or a weights preset, and its casing (default from the
        checkpoint). Neither → token-id signatures only.
      sequence_length: repack at this length (default: the preprocessor's).
      label_names: a list, or a comma-separated string (default: the run's).
      task: a kbert task name ("squad2", "sentiment", ...: a run or checkpoint directory is
        exported as that task, as `kbert predict --task` answers), or an
        `export_saved_model` task name for a plain Keras model.
      sentence_pair, version, warmup_texts, overwrite: as `export_saved_model`.
      allow_pickle: read a checkpoint directory's pytorch_model.bin (trusted files only).
      null_threshold: SQuAD v2.0's, in place of the run's (`with_null_threshold`).
      top_k: a masked LM's pieces per blank (default 5).
    Returns the version directory written.
    """
    from kbert.export.serving_kinds import SERVING_KINDS

    # A target that cannot take the version is refused before the model loads.
    version_directory(pathlib.Path(os.path.abspath(output_dir)), version, overwrite,
                      inputs=[model_path, vocabulary])
    kbert_task = None if task is None or task in SERVING_KINDS else task
    info, model = _load_model(pathlib.Path(model_path), allow_pickle, kbert_task,
                              null_threshold, top_k)
    task = None if kbert_task else task
    if isinstance(label_names, str):
        label_names = [n.strip() for n in label_names.split(",") if n.strip()]
    preprocessor = _preprocessor(model, vocabulary, lowercase, sequence_length)
    if task is not None and pathlib.Path(model_path).is_dir():
        model, preprocessor = _for_export_task(model, preprocessor, task, model_path)
    if label_names is None and info.get("kind") == "classification" and task != "backbone":
        label_names = info.get("label_names")  # not for the run's encoder alone
    # What the run says; None leaves it to export_saved_model, which asks the model (a
    # classifier fit on raw text knows its form).
    if sentence_pair is None:
        sentence_pair = info.get("sentence_pair")
    elif sentence_pair and False in (info.get("sentence_pair"),
                                     getattr(model, "sentence_pair", None)):
        raise ValueError(f"{model_path} answers task {info.get('task', 'its task')!r} "
                         "with single sentences, as it was trained: sentence_pair=True would "
                         "serve it text pairs it never saw.")
    squad = {"squad_version": info.get("version", "1.1"),
             "null_threshold": info.get("task_options", {}).get("null_threshold", 0.0)}
    return export_saved_model(model, output_dir, preprocessor=preprocessor, version=version,
                              label_names=label_names, warmup_texts=warmup_texts,
                              sentence_pair=sentence_pair, task=task, overwrite=overwrite,
                              top_k=info.get("top_k", 5), **squad)


def _for_export_task(model, preprocessor, task, model_path):
    """(model, preprocessor) that an export task name exports of a run's or checkpoint's task
    model: "backbone" its encoder (embeddings), the task's tokenizer packing sentences; the
    model's own kind, itself; any other kind is refused by name."""
    from kbert.export.serving_kinds import serving_kind_for
    from kbert.text import BertPreprocessor

    own = serving_kind_for(model).name
    if task == "backbone" and own != "backbone" and hasattr(model, "backbone"):
        if preprocessor is not None:
            preprocessor = BertPreprocessor(preprocessor.tokenizer, preprocessor.sequence_length)
        return model.backbone, preprocessor
    if task != own:
        raise ValueError(f"{model_path} holds a {type(model).__name__}, which exports as {own} "
                         f"(or as backbone: its encoder), not as {task}.")
    return model, preprocessor


def _load_model(model_path, allow_pickle=False, task=None, null_threshold=None, top_k=None):
    """(what the task says of the model: kind, label names, pair-ness, SQuAD version and
    options; the model) for a run directory or a checkpoint directory holding a fine-tuned
    head (`open_task_model`, as `kbert predict` reads them, `task` a kbert task name or None);
    ({}, the model) for a .keras file (a run's own model.keras: as its run)."""
    from kbert.model_files import load_model_file
    from kbert.runs import MODEL_FILE, RunDirectory
    from kbert.tasks.pretrained import open_task_model

    if model_path.name == MODEL_FILE and RunDirectory.is_run(model_path.parent):
        model_path = model_path.parent  # a run's model file: with its labels, pair-ness, ...
    if model_path.is_dir():
        spec, model = open_task_model(model_path, task, allow_pickle=allow_pickle,
                                      null_threshold=null_threshold, top_k=top_k)
        return {"kind": spec.kind, "task": spec.name, **spec.info()}, model
    for name, value in (("task", task), ("null_threshold", null_threshold), ("top_k", top_k)):
        if value is not None:
            raise ValueError(f"{name}={value!r} is for a run or checkpoint directory; "
                             f"{model_path} is a saved Keras model.")
    if model_path.is_file():
        return {}, load_model_file(model_path)
    raise FileNotFoundError(f"No run directory or saved Keras model at {model_path}.")


def _preprocessor(model, vocabulary, lowercase, sequence_length):
    """The model's own preprocessor (repacked at `sequence_length` if given), or a
    `BertPreprocessor` on `vocabulary` when one is named."""
    from kbert.text import BertPreprocessor, BertTokenizer

    preprocessor = getattr(model, "preprocessor", None)
    if vocabulary is not None:
        from kbert.presets import WEIGHT_PRESETS

        where = pathlib.Path(os.fspath(vocabulary)).expanduser()
        if not where.exists() and vocabulary not in WEIGHT_PRESETS:
            raise FileNotFoundError(
                f"No vocabulary at {where}: the vocabulary is a vocab.txt, a checkpoint "
                f"directory holding one, or a weights preset ({', '.join(WEIGHT_PRESETS)}).")
        if where.is_file():  # a vocab.txt
            casing = True if lowercase is None else lowercase
            tokenizer = BertTokenizer(where, lowercase=casing)
        else:
            tokenizer = BertTokenizer.from_pretrained(vocabulary, lowercase=lowercase)
        preprocessor = BertPreprocessor(tokenizer, sequence_length=sequence_length or 128)
    elif preprocessor is not None and sequence_length is not None:
        preprocessor = type(preprocessor).from_config(
            {**preprocessor.get_config(), "sequence_length": sequence_length})
    return preprocessor
