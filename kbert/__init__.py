"""kbert: BERT for Keras 3 and TensorFlow.

Public names are imported on first use, so `import kbert` (and `kbert --help`) stays fast and
the CLI can configure logging before TensorFlow loads.
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
    "BertSpanLabeler": "kbert.models",
    "BertTokenClassifier": "kbert.models",
    "finetune": "kbert.training",
    "pretrain": "kbert.training",
    "make_optimizer": "kbert.training",
    "export_saved_model": "kbert.export",
    "export": "kbert.export",
    "BertTokenizer": "kbert.text.tokenizer",
    "BertPreprocessor": "kbert.text.preprocessor",
    "train_vocabulary": "kbert.text.vocab",
    "convert": "kbert.convert",
    "viz": "kbert.viz",
}


def __getattr__(name):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'kbert' has no attribute {name!r}")
    module = importlib.import_module(_PUBLIC[name])
    return module if _PUBLIC[name] == f"kbert.{name}" else getattr(module, name)


def __dir__():
    return sorted(list(globals()) + list(_PUBLIC))
