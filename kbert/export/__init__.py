"""Export for TensorFlow Serving: versioned SavedModels with raw-text signatures.

>>> path = export_saved_model(classifier, "saved_models/sentiment", preprocessor=pre,
...                           label_names=["negative", "positive"])   # → .../sentiment/1

See `kbert.export.saved_model` (layout, atomic versioned writes, warm-up requests),
`kbert.export.from_path` (what `kbert export` reads from a run, checkpoint or .keras file),
`kbert.export.signatures` (inputs and outputs per model type; `serving_tasks`: which type),
`kbert.export.task_outputs` (what each task's signatures compute) and
`kbert.export.serving_ops` (the ops stock TensorFlow Serving has, and the check every export
passes). `kbert.export.hub_models` writes a backbone
as TF Hub's BERT preprocessor and encoder SavedModels instead (`kbert convert --to tf_hub`).
"""

from kbert.export.from_path import export_from_cli
from kbert.export.hub_models import export_hub_models
from kbert.export.saved_model import export_saved_model, existing_versions, next_version
from kbert.export.serving_ops import TF_TEXT_SERVING_OPS, check_servable, unservable_ops
from kbert.export.serving_tasks import TASKS
from kbert.export.signatures import PREDICT_METHOD, ServingModule

__all__ = ["export_saved_model", "export_hub_models", "export_from_cli", "existing_versions",
           "next_version", "ServingModule", "TASKS", "PREDICT_METHOD", "TF_TEXT_SERVING_OPS",
           "check_servable", "unservable_ops"]
