"""`export_saved_model`: a kbert model as a versioned SavedModel for TensorFlow Serving.

Layout (what `tensorflow_model_server --model_base_path=saved_models/NAME` reads):

    saved_models/NAME/<version>/
        saved_model.pb, fingerprint.pb, variables/
        assets/vocab.txt                                 the tokenizer's vocabulary
        assets.extra/tf_serving_warmup_requests          PredictionLog TFRecord (warm-up)
        assets.extra/kbert_export.json                   what was exported, for tools

Each version appears whole or not at all: it is written to a hidden staging directory beside
it (`.<version>.*.tmp`, which the model server's version scan ignores: only all-digit names are
versions) and renamed into place once complete and checked (every op must be one that stock
TensorFlow Serving has; see `kbert.export.serving_ops`). Staging and scratch directories that
a killed export left behind are removed by the next export into the same base directory
(`kbert.atomic.clean_staging`; a running export's are left alone).
"""

import json
import os
import pathlib
import re
import shutil
import tempfile

import tensorflow as tf

from kbert.atomic import (atomic_directory, check_directory_target, clean_staging,
                          is_staging_name, process_alive, staging_entries)
from kbert.export import serving_ops, warmup
from kbert.export.signatures import (CLASSIFY_INPUT, EXAMPLES_INPUT, SERVING_METHODS,
                                     ServingModule)
from kbert.config import INPUT_KEYS
from kbert.outputs import MARKER, check_output

WARMUP_FILE = "tf_serving_warmup_requests"
METADATA_FILE = "kbert_export.json"


_SCRATCH = re.compile(r"^\.kbert-export-(?:(\d+)-)?[a-z0-9_]{8}$")


def existing_versions(base_dir):
    """The SavedModel versions under `base_dir`, sorted.

    Args:
      base_dir: a model's base directory (`export_saved_model`'s `export_dir`).

    Returns:
      The ints of the all-digit folder names that hold a saved_model.pb (a digit-named folder
      of other files is no SavedModel); [] for a missing folder.

    Examples:
        >>> import pathlib, tempfile
        >>> import kbert
        >>> base = pathlib.Path(tempfile.mkdtemp())
        >>> (base / "3").mkdir()
        >>> kbert.export.existing_versions(base), kbert.export.next_version(base)
        ([], 4)
    """
    base = pathlib.Path(base_dir)
    if not base.is_dir():
        return []
    return sorted(int(p.name) for p in base.iterdir()
                  if p.name.isdigit() and (p / "saved_model.pb").is_file())


def next_version(base_dir):
    """The version a new export into `base_dir` gets.

    Args:
      base_dir: a model's base directory.

    Returns:
      One more than the highest all-digit name under `base_dir` (a version or not: the new
      version must not collide with it); 1 for a new model.
    """
    base = pathlib.Path(base_dir)
    taken = [int(p.name) for p in base.iterdir() if p.name.isdigit()] if base.is_dir() else []
    return max(taken) + 1 if taken else 1


def clean_export_staging(base_dir):
    """Finishes or removes what killed exports left in `base_dir`: version staging
    (`.<N>.*.tmp`, `.<N>.*.old`) and scratch (`.kbert-export-*`) of processes no longer
    running. Returns the version directories an interrupted overwrite put back."""
    base = pathlib.Path(base_dir)
    versions = {name for _, name, _, _ in staging_entries(base) if name.isdigit()}
    restored = clean_staging(base, names=versions) if versions else []
    for entry in os.listdir(base) if base.is_dir() else []:
        match = _SCRATCH.match(entry)
        path = base / entry
        if match and path.is_dir() and not path.is_symlink() and not (
                match[1] and process_alive(int(match[1]))):
            shutil.rmtree(path, ignore_errors=True)
    return restored


def export_saved_model(model, export_dir, preprocessor=None, version=None, label_names=None,
                       warmup_texts=None, sentence_pair=None, task=None, overwrite=False,
                       check_ops=True, squad_version="1.1", null_threshold=0.0, top_k=5):
    """Exports a kbert model as a versioned SavedModel for TensorFlow Serving.

    The version is written whole or not at all (see the module docstring for the layout), and
    the export is refused if it uses an op stock TensorFlow Serving lacks. With a preprocessor
    the `serving_default` signature takes raw text; `serve_token_ids` takes token ids;
    signatures and outputs per model type: `kbert.export.signatures`.

    Args:
      model: a kbert model (`BertClassifier`, `BertMultipleChoice`, `BertSpanLabeler`,
        `BertTokenClassifier`, `BertFeatureClassifier`, `BertBackbone`,
        `BertFeatureExtractor`, `BertPretrainer` as a masked LM filling blanks), or another
        Keras model of one of those shapes with `task=`.
      export_dir: the model's base directory, e.g. "saved_models/sentiment" (what
        `tensorflow_model_server --model_base_path` reads).
      preprocessor: the preprocessor the model was trained with (default: the one the task
        model holds). With it, `serving_default` takes raw strings; without it, token ids.
      version: a positive integer; default: `next_version(export_dir)`.
      label_names: the class names of a classifier, in id order (the `label` output).
      warmup_texts: strings for the TF Serving warm-up requests (default: a few built-in
        sentences; an empty list writes none). Writing them needs the
        `tensorflow-serving-api` package; without it, none are written, with a warning.
      sentence_pair: whether a classifier or backbone reads sentence pairs: `serving_default`
        then takes `text` and `text_pair`. None: a `BertClassifier`'s own `sentence_pair`
        (set by its `fit` on raw text), else single sentences.
      task: a `kbert.export.serving_kinds.SERVING_KINDS` name, to override the type-based choice.
      overwrite: replace an existing `version` (TF Serving may be serving it).
      check_ops: refuse an export that uses ops stock TensorFlow Serving lacks.
      squad_version, null_threshold: for a span labeler: with "2.0" the answer is "" when the
        null score beats the best span by more than `null_threshold` (the run's, from
        training).
      top_k: for a masked LM (`BertPretrainer`): the word pieces answered for each blank.

    Returns:
      The `pathlib.Path` of the version folder, `export_dir/<version>`.

    Examples:
        >>> import pathlib, tempfile
        >>> import kbert
        >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "good", "bad", "film"]
        >>> preprocessor = kbert.BertPreprocessor(kbert.BertTokenizer(vocabulary),
        ...                                       sequence_length=16)
        >>> config = kbert.BertConfig.preset("tiny", vocab_size=len(vocabulary))
        >>> classifier = kbert.BertClassifier(kbert.BertBackbone(config), num_classes=2)
        >>> base = pathlib.Path(tempfile.mkdtemp()) / "sentiment"
        >>> path = kbert.export_saved_model(classifier, base, preprocessor=preprocessor,
        ...                                 label_names=["negative", "positive"])
        >>> path.name, (path / "saved_model.pb").is_file(), (path / "assets/vocab.txt").is_file()
        ('1', True, True)
    """
    base = pathlib.Path(os.path.abspath(os.fspath(export_dir)))
    clean_export_staging(base)
    version, target = version_directory(base, version, overwrite)
    return write_version(model, target, preprocessor, version=version, model_name=base.name,
                         scratch_parent=base, overwrite=True, label_names=label_names,
                         warmup_texts=warmup_texts, sentence_pair=sentence_pair, task=task,
                         check_ops=check_ops, squad_version=squad_version,
                         null_threshold=null_threshold, top_k=top_k)


def write_version(model, target, preprocessor=None, version=None, model_name=None,
                  scratch_parent=None, overwrite=False, label_names=None, warmup_texts=None,
                  sentence_pair=None, task=None, check_ops=True, squad_version="1.1",
                  null_threshold=0.0, top_k=5):
    """Writes one SavedModel directory, whole or not at all: what `export_saved_model` writes
    as a version, and `model.export(path)` as `path` itself.

    Args:
      model, preprocessor, label_names, warmup_texts, sentence_pair, task, check_ops,
        squad_version, null_threshold, top_k: as for `export_saved_model`.
      target: the directory to write; it appears once complete and checked.
      version: the version recorded in assets.extra/kbert_export.json (None: not one).
      model_name: the model name of the warm-up requests (default: `target`'s folder name).
      scratch_parent: where the vocabulary is staged, and a killed export's scratch cleaned
        (default: the system's temporary folder).
      overwrite: whether an existing `target` that holds files may be replaced.

    Returns:
      The `pathlib.Path` of `target`.

    Examples:
        >>> import pathlib, tempfile
        >>> import kbert
        >>> from kbert.export.saved_model import write_version
        >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "good", "film"]
        >>> preprocessor = kbert.BertPreprocessor(kbert.BertTokenizer(vocabulary),
        ...                                       sequence_length=16)
        >>> config = kbert.BertConfig.preset("tiny", vocab_size=len(vocabulary))
        >>> classifier = kbert.BertClassifier(kbert.BertBackbone(config), num_classes=2)
        >>> path = write_version(classifier, pathlib.Path(tempfile.mkdtemp()) / "served",
        ...                      preprocessor, warmup_texts=[])
        >>> path.name, (path / "saved_model.pb").is_file()
        ('served', True)
    """
    target = pathlib.Path(os.path.abspath(os.fspath(target)))
    if preprocessor is None:
        preprocessor = getattr(model, "preprocessor", None)
    if sentence_pair is None:
        sentence_pair = bool(getattr(model, "sentence_pair", None))
    module = ServingModule(model, preprocessor, task=task, label_names=label_names,
                           sentence_pair=sentence_pair, squad_version=squad_version,
                           null_threshold=null_threshold, top_k=top_k)
    if scratch_parent is not None:
        pathlib.Path(scratch_parent).mkdir(parents=True, exist_ok=True)
    scratch = pathlib.Path(tempfile.mkdtemp(prefix=f".kbert-export-{os.getpid()}-",
                                            dir=scratch_parent))
    try:
        if preprocessor is not None:
            module.vocabulary_file = vocabulary_asset(preprocessor, scratch)
        signatures = module.signatures()
        with atomic_directory(target, overwrite=overwrite) as staging:
            tf.saved_model.save(module, str(staging), signatures=signatures)
            if module.classify_signature:
                _set_method_name(staging, module.classify_signature)
            _write_extras(staging / "assets.extra", module, model, preprocessor, version,
                          warmup_texts, model_name=model_name or target.name)
            if check_ops:
                serving_ops.check_servable(staging)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def keras_export(model, filepath, verbose=None):
    """`model.export(filepath)` for a kbert task with a preprocessor: the raw-text SavedModel
    of `export_saved_model`, written into `filepath` itself (Keras' layout) rather than a
    version folder below it.

    Keras writes over whatever `filepath` holds; here a new or empty folder is required, so
    that no file is lost and no earlier export is half replaced.

    Args:
      model: a kbert task model holding its preprocessor.
      filepath: the SavedModel's directory; new, or an empty folder.
      verbose: None or True prints one line naming the signatures and their inputs (Keras
        prints every signature and captured tensor); False prints nothing.

    Returns:
      The `pathlib.Path` of the SavedModel.

    Raises:
      FileExistsError: `filepath` is a file, or a folder that holds anything.

    Examples:
        >>> import pathlib, tempfile
        >>> import kbert
        >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "good", "film"]
        >>> preprocessor = kbert.BertPreprocessor(kbert.BertTokenizer(vocabulary),
        ...                                       sequence_length=16)
        >>> config = kbert.BertConfig.preset("tiny", vocab_size=len(vocabulary))
        >>> backbone = kbert.BertBackbone(config)
        >>> classifier = kbert.BertClassifier(backbone, num_classes=2, preprocessor=preprocessor)
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "served"
        >>> classifier.export(path)  # doctest: +ELLIPSIS
        Saved a SavedModel of raw text at '.../served': serving_default(text), ...
        >>> classifier.export(path)
        Traceback (most recent call last):
        ...
        FileExistsError: ... exists and is not an empty folder; ...
    """
    target = pathlib.Path(os.path.abspath(os.fspath(filepath)))
    check_directory_target(target, "SavedModel directory")
    if os.path.lexists(target) and (target.is_symlink() or any(target.iterdir())):
        raise FileExistsError(f"{target} exists and is not an empty folder; model.export "
                              "writes a new SavedModel: choose a new path or empty it.")
    version = int(target.name) if target.name.isdigit() else None
    write_version(model, target, version=version,
                  model_name=target.parent.name if version else target.name)
    if verbose is None or verbose:
        meta = json.loads((target / "assets.extra" / METADATA_FILE).read_text(encoding="utf-8"))
        signatures = ", ".join(f"{name}({', '.join(info['inputs'])})"
                               for name, info in meta["signatures"].items())
        print(f"Saved a SavedModel of raw text at '{target}': {signatures}.")
    return target


def _set_method_name(export_dir, signature):
    """Gives `signature` ("classify" or "regress") the method name of TF Serving's Classify /
    Regress API, which `tf.saved_model.save` cannot write (every signature it writes is
    predict), and writes the fingerprint of the changed saved_model.pb as the save does."""
    from tensorflow.core.protobuf import saved_model_pb2
    from tensorflow.python.saved_model import fingerprinting_utils

    path = pathlib.Path(export_dir) / "saved_model.pb"
    proto = saved_model_pb2.SavedModel.FromString(path.read_bytes())
    for meta_graph in proto.meta_graphs:
        meta_graph.signature_def[signature].method_name = SERVING_METHODS[signature]
    path.write_bytes(proto.SerializeToString())
    fingerprinting_utils.write_fingerprint(str(export_dir))


def version_directory(base, version, overwrite, inputs=()):
    """(version, base/version): the next version by default; an existing one only with
    `overwrite`, since TF Serving may be serving it. `base` is new or holds only versions
    (`kbert.outputs`' rule; `inputs` are what the export reads). Cheap: `export_from_cli`
    calls it before it loads the model, to refuse a bad target first."""
    check_directory_target(base, "directory for the model's versions")
    check_output(base, "export", overwrite, inputs, flag="OUTPUT_DIR", unmarked=_holds_versions)
    if version is None:
        version = next_version(base)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"version must be a positive integer, got {version!r}.")
    target = base / str(version)
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target} already exists; TF Serving may be serving it. Pass "
                              "overwrite=True to replace it, or choose another version.")
    return version, target


def _holds_versions(base):
    """Whether `base` holds only what exports write: version folders and their staging."""
    return all(name.isdigit() or name == MARKER or _SCRATCH.match(name) or is_staging_name(name)
               for name in os.listdir(base))


def vocabulary_asset(preprocessor, scratch):
    """The tokenizer's vocabulary as a SavedModel asset (written to assets/vocab.txt)."""
    vocab = scratch / "vocab.txt"
    vocab.write_text("\n".join(preprocessor.tokenizer.get_vocabulary()) + "\n",
                     encoding="utf-8")
    return tf.saved_model.Asset(str(vocab))


def _write_extras(extra, module, model, preprocessor, version, warmup_texts, model_name):
    """assets.extra/: the warm-up requests (if any) and the export's metadata."""
    extra.mkdir()
    texts = warmup.texts_for(module, warmup_texts)
    if texts:
        warmup.write_requests(extra / WARMUP_FILE, module, texts, model_name=model_name)
    (extra / METADATA_FILE).write_text(
        json.dumps(_metadata(module, model, preprocessor, version, bool(texts)), indent=2),
        encoding="utf-8")


def _metadata(module, model, preprocessor, version, has_warmup):
    from importlib.metadata import version as installed_version

    meta = {
        "kbert_version": installed_version("kbert"),
        "version": version,
        "model_class": type(model).__name__,
        "task": module.task.name,
        "signatures": {
            "serving_default": {"inputs": list(module.text_inputs or INPUT_KEYS)},
            "serve_token_ids": {"inputs": list(INPUT_KEYS)},
            **({"serve_examples": {"inputs": [EXAMPLES_INPUT],
                                   "example_features": list(module.text_inputs)}}
               if module.text_inputs else {}),
            **({module.classify_signature: {
                "inputs": [CLASSIFY_INPUT], "method": SERVING_METHODS[module.classify_signature],
                "example_features": list(module.text_inputs)}}
               if module.classify_signature else {}),
        },
        "label_names": module.label_names,
        "num_choices": module.num_choices,
        "sentence_pair": module.sentence_pair,
        "warmup_requests": has_warmup,
    }
    if preprocessor is not None:
        meta.update({"sequence_length": preprocessor.sequence_length,
                     "truncate": getattr(preprocessor, "truncate", None),
                     "lowercase": preprocessor.tokenizer.lowercase,
                     "strip_accents": preprocessor.tokenizer.strip_accents,
                     "vocabulary_size": preprocessor.tokenizer.vocabulary_size()})
    return meta
