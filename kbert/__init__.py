"""kbert: BERT for Keras 3 and TensorFlow.

`import kbert` imports the layers, models, preprocessors and optimizers, which registers every
kbert class with Keras, and does nothing else: `keras.saving.load_model("model.keras")` then
finds them in a new process. Training, export and conversion are imported on first use.
"""

import importlib

__version__ = "0.1.0"

_PUBLIC = {
    "BertConfig": "kbert.config",
    "BertBackbone": "kbert.models",
    "BertPretrainer": "kbert.models",
    "BertClassifier": "kbert.models",
    "BertMultipleChoice": "kbert.models",
    "BertFeatureExtractor": "kbert.models",
    "BertFeatureClassifier": "kbert.models",
    "BertSpanLabeler": "kbert.models",
    "BertTokenClassifier": "kbert.models",
    "finetune": "kbert.training",
    "pretrain": "kbert.training",
    "make_optimizer": "kbert.training",
    "export_saved_model": "kbert.export",
    "export": "kbert.export",
    "fill_mask": "kbert.tasks.fill_mask",
    "BertTokenizer": "kbert.text.tokenizer",
    "BertPreprocessor": "kbert.text.preprocessor",
    "BertMaskedLMPreprocessor": "kbert.text.masked_lm_preprocessor",
    "BertFillMaskPreprocessor": "kbert.text.fill_mask_preprocessor",
    "BertSpanPreprocessor": "kbert.text.span_preprocessor",
    "BertTokenPreprocessor": "kbert.text.token_preprocessor",
    "train_vocabulary": "kbert.text.vocab",
    "convert": "kbert.convert",
    "viz": "kbert.viz",
}


# Registers every Keras-serializable class: layers, models, preprocessors, optimizers.
from kbert import models as _models, text as _text  # noqa: E402,F401
from kbert import optimizers as _optimizers  # noqa: E402,F401
from kbert.training import optimizer as _optimizer  # noqa: E402,F401
from kbert.models.task import BertTask as _BertTask  # noqa: E402


def _raw_text_export(model, filepath, verbose):
    """`BertTask.export` with a preprocessor: `kbert.export.saved_model.keras_export`, imported
    on first use."""
    from kbert.export.saved_model import keras_export

    keras_export(model, filepath, verbose=verbose)


_BertTask.raw_text_export = staticmethod(_raw_text_export)


def __getattr__(name):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'kbert' has no attribute {name!r}")
    module = importlib.import_module(_PUBLIC[name])
    return module if _PUBLIC[name] == f"kbert.{name}" else getattr(module, name)


def __dir__():
    return sorted(list(globals()) + list(_PUBLIC))
