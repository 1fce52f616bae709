"""Export for TensorFlow Serving: versioned SavedModels with raw-text signatures.

Each export is the next version in a model's base directory, and its signatures take raw
text:

>>> import pathlib, tempfile
>>> import kbert
>>> import tensorflow as tf
>>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "good", "bad", "film"]
>>> preprocessor = kbert.BertPreprocessor(kbert.BertTokenizer(vocabulary), sequence_length=16)
>>> backbone = kbert.BertBackbone(kbert.BertConfig.preset("tiny", vocab_size=len(vocabulary)))
>>> classifier = kbert.BertClassifier(backbone, num_classes=2)
>>> base = pathlib.Path(tempfile.mkdtemp()) / "sentiment"
>>> path = kbert.export.export_saved_model(classifier, base, preprocessor=preprocessor,
...                                        label_names=["negative", "positive"], warmup_texts=[])
>>> served = tf.saved_model.load(str(path))
>>> sorted(served.signatures)
['classify', 'serve_examples', 'serve_token_ids', 'serving_default']
>>> outputs = served.signatures["serving_default"](text=tf.constant(["a good film"]))
>>> sorted(outputs), outputs["label"].shape.as_list()
(['label', 'label_id', 'logits', 'probabilities'], [1])

See `kbert.export.saved_model` (layout, atomic versioned writes, warm-up requests),
`kbert.export.from_path` (what `kbert export` reads from a run, checkpoint or .keras file),
`kbert.export.signatures` (inputs and outputs per model type; `serving_kinds`: which type),
`kbert.export.task_outputs` (what each task's signatures compute) and
`kbert.export.serving_ops` (the ops stock TensorFlow Serving has, and the check every export
passes). `kbert.export.hub_models` writes a backbone as TF Hub's BERT preprocessor and encoder
SavedModels instead (`kbert convert --to tf_hub`).
"""

from kbert.export.from_path import export_from_cli
from kbert.export.hub_models import export_hub_models
from kbert.export.saved_model import export_saved_model, existing_versions, next_version
from kbert.export.serving_ops import TF_TEXT_SERVING_OPS, check_servable, unservable_ops
from kbert.export.serving_kinds import SERVING_KINDS
from kbert.export.signatures import PREDICT_METHOD, ServingModule

__all__ = ["export_saved_model", "export_hub_models", "export_from_cli", "existing_versions",
           "next_version", "ServingModule", "SERVING_KINDS", "PREDICT_METHOD",
           "TF_TEXT_SERVING_OPS", "check_servable", "unservable_ops"]
