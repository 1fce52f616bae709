"""`BertTask`: what every model built on a `BertBackbone` shares: its optional preprocessor,
raw-text `fit` / `evaluate` / `predict`, serialisation, and `from_pretrained`."""

import keras

from kbert import tensorflow_backend
from kbert.models import pretrained, xla
from kbert.models.backbone import BertBackbone, check_model_kwargs
from kbert.models.frozen_layers import apply_trainable, frozen_layers
from kbert.models.input_limits import check_preprocessor, model_limits
from kbert.models.task_inputs import (by_output, check_labels, checked_inputs, checked_weights,
                                      expected_warnings_hidden, is_raw_text, packed_for_fit,
                                      refuse_text_batch, sparse_label_classes, text_dataset)
from kbert.optimizers import Adam


def _backbone_in(model):
    """The `BertBackbone` that `model`'s graph runs (directly, or inside a feature extractor)."""
    for layer in model.layers:
        if isinstance(layer, BertBackbone):
            return layer
        if isinstance(getattr(layer, "backbone", None), BertBackbone):
            return layer.backbone
    raise ValueError(f"{type(model).__name__} runs no BertBackbone.")


class BertTask(keras.Model):
    """The base of the task models: a `BertBackbone`, a head, and optionally a preprocessor.

    With a `preprocessor` (keras-hub's habit), `fit`, `evaluate` and `predict` take raw text,
    packed in the graph batch by batch: strings for a sentence task, a tuple `(texts_a,
    texts_b)` for pairs, `(questions, choices)` (choices: one list per question) for multiple
    choice. Packed inputs (a dict with `token_ids`, or a dataset of them) still pass through.
    `model.save` keeps the preprocessor, vocabulary and casing included. `from_pretrained`
    builds backbone, preprocessor and head in one call.

    A subclass builds its functional graph and passes it here; it lists its own constructor
    arguments in `task_config()`. `get_config` adds the serialised backbone and preprocessor,
    and `from_config` rebuilds the backbone first, so ties into it (the MLM decoder, frozen
    features) are made anew by the subclass constructor.

    Args:
        inputs: the functional graph's inputs (the backbone's dict, or more).
        outputs: the graph's outputs (the head's).
        preprocessor: optional; the layer that packs raw text into `inputs` (e.g. a
            `BertPreprocessor`). A `sequence_length` beyond the backbone's positions, or a
            vocabulary larger than its embedding, raises `ValueError`.
        **kwargs: `name`, `trainable` and `frozen_layers`, as for `BertBackbone`.

    Examples:
        >>> import numpy as np
        >>> import kbert
        >>> model = kbert.BertClassifier.from_pretrained("tiny", num_classes=2, sequence_length=16)
        >>> type(model.preprocessor).__name__
        'BertPreprocessor'
        >>> model.compile()
        >>> history = model.fit(["a great movie", "a dull movie"], np.array([1, 0]), verbose=0)
        >>> sorted(history.history)
        ['accuracy', 'loss']
        >>> model.predict(["a fine movie"], verbose=0).shape
        (1, 2)
    """

    backbone_cls = BertBackbone
    """The backbone `from_pretrained` builds."""

    preprocessor_cls = None
    """The preprocessor class that packs this task's raw inputs (`from_pretrained` builds it)."""

    default_sequence_length = 128
    """The length `from_pretrained` packs to unless told, cut to a smaller model's positions."""

    serving_kind = None
    """The serving signature kbert.export gives this class (a key of
    `kbert.export.serving_kinds.SERVING_KINDS`)."""

    raw_text_export = None
    """What `export` hands a model with a preprocessor to, `fn(model, filepath, verbose)`:
    `kbert.export.saved_model.keras_export`, set by the `kbert` package, which sits above
    both (kbert.export builds on the models, so they cannot import it)."""

    checkpoint_heads = None
    """Where this task's head sits in transformers', Google's and keras-hub's checkpoints (a
    `kbert.convert.task_heads.CheckpointHeads`); None where they have no such head."""

    label_classes = None
    """How many classes the head's sparse labels index (None: its targets are not class ids);
    `fit` and `evaluate` check array labels against it."""

    auto_learning_rate = 5e-5
    """`compile()`'s Adam rate: the paper's first fine-tuning rate (A.3), keras-hub's "auto";
    1e-3 (Keras') where the encoder is frozen and a new head alone trains."""

    def __init__(self, inputs, outputs, preprocessor=None, **kwargs):
        frozen = check_model_kwargs(type(self), kwargs)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        apply_trainable(self, frozen)
        # Keras' functional constructor keeps no dtype: the task takes its backbone's policy
        # (its heads compute in it), so that `compile` wraps a float16 model's optimizer in
        # loss scaling, as Keras does for any mixed_float16 model.
        backbone = _backbone_in(self)
        self.dtype_policy = backbone.dtype_policy
        if preprocessor is not None:
            check_preprocessor(model_limits(backbone), preprocessor)
        self.preprocessor = preprocessor

    def task_config(self) -> dict:
        """The subclass's own constructor arguments, for `get_config`."""
        return {}

    def label_ranges(self, sequence_length):
        """What each output's sparse labels index, for a head with several outputs.

        `fit` and `evaluate` check dict labels against it.

        Args:
            sequence_length: the packed rows' length (an int, or a scalar tensor in a
                dataset's map).

        Returns:
            A dict `{output: (number of classes, their meaning in words)}`; empty here.
        """
        return {}

    def get_config(self):
        """The constructor's arguments, the backbone and preprocessor serialised."""
        return {
            "backbone": keras.layers.serialize(self.backbone),
            **self.task_config(),
            "preprocessor": (None if self.preprocessor is None
                             else keras.layers.serialize(self.preprocessor)),
            "name": self.name,
            "trainable": self.trainable,
            "frozen_layers": frozen_layers(self),
        }

    @classmethod
    def from_config(cls, config):
        """The task model `get_config`'s dict describes, its backbone rebuilt first."""
        config = dict(config)
        config["backbone"] = keras.layers.deserialize(config["backbone"])
        if config.get("preprocessor") is not None:
            config["preprocessor"] = keras.layers.deserialize(config["preprocessor"])
        return cls(**config)

    def compile(self, optimizer="auto", *args, jit_compile="auto", **kwargs):
        """Keras' `compile`, with kbert's choice of optimizer and XLA where left "auto".

        Args:
            optimizer: a Keras optimizer, or "auto" for Adam at `auto_learning_rate`
                (`kbert.optimizers.Adam`; 1e-3 when the backbone is frozen). For warmup,
                decay and clipping, `kbert.make_optimizer`.
            *args: Keras' `compile` arguments (`loss`, `loss_weights`, `metrics`, ...).
            jit_compile: True, False, or "auto" for kbert's choice (`kbert.models.xla`): on
                TensorFlow CPUs too, where Keras would leave it off, for inputs of one fixed
                length in calls long enough to pay for compiling; batches whose length varies,
                and short calls, run without it.
            **kwargs: Keras' `compile` arguments.
        """
        if isinstance(optimizer, str) and optimizer == "auto":
            optimizer = Adam(self.auto_learning_rate if self.backbone.trainable_weights else 1e-3)
        policy = self.backbone.dtype_policy  # the heads compute in the backbone's policy
        self.xla_by_shape = xla.by_shape(jit_compile, policy)
        self.xla_modes = {}  # under xla_by_shape: each step function's choice ("train": True)
        self._xla_asked = jit_compile
        super().compile(optimizer, *args,
                        jit_compile=xla.default_jit_compile(jit_compile, policy), **kwargs)

    def get_compile_config(self):
        """Keras' record of `compile`, keeping "auto" where kbert chose: a saved model then
        chooses again where it is loaded (another backend or device)."""
        config = super().get_compile_config()
        if config and getattr(self, "_xla_asked", True) in (None, "auto"):
            config["jit_compile"] = "auto"
        return config

    def match_xla_to(self, x, kind="predict", steps=None, batch_size=None):
        """Chooses XLA for one step function by the inputs it is about to run on.

        Under `xla_by_shape` (`compile(jit_compile="auto")` on TensorFlow), compiles `kind`'s
        step function with XLA when `x` has one fixed length and the call is long enough to
        pay for the compilation (`xla.pays_off`); a change rebuilds that function on its next
        use. `fit`, `evaluate` and `predict` call it; call it before a `*_on_batch` loop.

        Args:
            x: the inputs of the coming call.
            kind: "train", "test" or "predict".
            steps: how many steps the call runs; None counts them from `x`.
            batch_size: the batch size that `x`'s arrays are cut into.
        """
        xla.match_to(self, x, kind, steps, batch_size)

    def compile_from_config(self, config):
        """Compiles a loaded model as it was saved. Keras skips this (with a warning) for any
        model whose `compile` is overridden; ours only fill in task defaults, and the saved
        arguments are the filled-in ones, so they pass through unchanged. The optimizer is
        built here so that loading restores its moments and step count."""
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)

    @classmethod
    def from_pretrained(cls, name_or_dir, **kwargs):
        """This task on pretrained weights, in one call: backbone, preprocessor and head.

        The head is new, unless the checkpoint holds this task's fine-tuned head: a Hugging
        Face checkpoint of its `transformers` class (`BertForSequenceClassification` for a
        `BertClassifier`, ...), a keras-hub `BertTextClassifier` preset, or a checkpoint of
        Google's run_classifier.py / run_squad.py (`kbert.convert.task_heads`).

        Args:
            name_or_dir: a weights preset ("minilm_l6_h384_uncased"), a checkpoint directory
                (Hugging Face, Google TF1, keras-hub), a size preset ("tiny") for random
                weights, or a `kbert finetune` run directory (then the trained task model
                itself is loaded, and no other argument applies).
            **kwargs: the task's constructor arguments (e.g. `num_classes=3`;
                `preprocessor=None` for a model of packed ids, as keras-hub's `from_preset`),
                and: `sequence_length`, the preprocessor's packed length (default: the class's
                `default_sequence_length`, cut to the model's positions); `dtype`, the
                backbone's dtype policy; `hidden_dropout` and `attention_dropout`, which
                replace the checkpoint's rates; `allow_pickle=True`, to read a trusted
                `pytorch_model.bin`.

        Returns:
            An instance of the class it is called on.

        Examples:
            >>> import kbert
            >>> model = kbert.BertClassifier.from_pretrained("minilm_l6_h384_uncased", num_classes=2)
            >>> model.backbone.config.num_layers, model.preprocessor.sequence_length
            (6, 128)
            >>> model.predict(["a great movie", "a dull movie"], verbose=0).shape
            (2, 2)
        """
        return pretrained.task_from_pretrained(cls, name_or_dir, **kwargs)

    def export(self, filepath, format="tf_saved_model", verbose=None, input_signature=None,
               **kwargs):
        """Keras' `export`; with a preprocessor, the SavedModel `kbert.export_saved_model`
        writes, taking raw text.

        With a preprocessor, on the TensorFlow backend, the default format and no other
        argument, `filepath` gets the raw-text signatures of `kbert.export` (`serving_default`
        takes strings; `serve_token_ids` the packed ids), written whole or not at all into a
        new or empty folder (`kbert.export.saved_model.keras_export`). Otherwise Keras exports
        the graph of packed ids.

        Args:
            filepath: the artifact's path: for a SavedModel, its directory.
            format: Keras' formats ("tf_saved_model", "onnx", "openvino", "litert", ...).
            verbose: whether to print what was written.
            input_signature: Keras' input signature; given, Keras exports the ids graph.
            **kwargs: Keras' `export` arguments; given, Keras exports.

        Examples:
            >>> import pathlib, tempfile
            >>> import kbert
            >>> import tensorflow as tf
            >>> model = kbert.BertClassifier.from_pretrained("tiny", num_classes=2,
            ...                                              sequence_length=16)
            >>> path = pathlib.Path(tempfile.mkdtemp()) / "served"
            >>> model.export(path, verbose=False)
            >>> served = tf.saved_model.load(str(path)).signatures["serving_default"]
            >>> served(text=tf.constant(["a fine movie"]))["probabilities"].shape.as_list()
            [1, 2]
        """
        if (self.preprocessor is None or format != "tf_saved_model" or input_signature is not None
                or kwargs or self.raw_text_export is None
                or keras.backend.backend() != "tensorflow"):
            return super().export(filepath, format=format, verbose=verbose,
                                  input_signature=input_signature, **kwargs)
        self.raw_text_export(self, filepath, verbose)

    # --- raw text in -------------------------------------------------------------------------

    def _check(self, x, y=None):
        return checked_inputs(self, x, y)

    def _check_labels(self, y):
        """A hook: checks array labels against the head (its `label_classes`)."""
        check_labels(y, self.label_classes)

    def _dataset_label_classes(self, spec):
        """A hook: the classes a dataset's labels (`spec`) index, None when not checked."""
        return sparse_label_classes(spec, self.label_classes)

    def _fitting_on(self, text):
        """A hook: `fit`, its input checked, is about to train on raw `text` (None: packed)."""

    def _weigh_classes(self, x, y, sample_weight, class_weight):
        """A hook: `fit`'s (x, sample_weight, class_weight) once `class_weight` is applied, or
        left to Keras (as here: one weight an example, from its class id)."""
        return x, sample_weight, class_weight

    def _text_dataset(self, x, *args, **kwargs):
        """A hook: the preprocessor's batches of raw `x` (`task_inputs.text_dataset`)."""
        return text_dataset(self, x, *args, **kwargs)

    def fit(self, x=None, y=None, batch_size=None, sample_weight=None, validation_data=None,
            shuffle=None, validation_split=0.0, **kwargs):
        """Keras' `fit`, with raw text and input checks.

        Args:
            x: raw text (with a preprocessor: see the class docstring), packed inputs (a dict
                of arrays), or a dataset, generator or `PyDataset` of either.
            y: the labels; array labels are checked against the head before training.
            batch_size: rows a batch; raw text is packed in batches of it (default 32).
            sample_weight: optional weights, as Keras takes them.
            validation_data: `(x, y)` or `(x, y, sample_weight)`, raw text too, or a dataset.
            shuffle: default True for arrays and raw text, False for a TensorFlow `Dataset`,
                a generator or a `PyDataset` (shuffled by their maker; Keras ignores it there
                and warns).
            validation_split: the share of the last examples held out; for arrays and raw
                text lists, not datasets.
            **kwargs: Keras' `fit` arguments (`epochs`, `callbacks`, `class_weight`, ...).

        Returns:
            Keras' `History`.
        """
        text, packed_here, data = packed_for_fit(self, x, y, batch_size, sample_weight,
                                                 validation_data, shuffle, validation_split)
        epochs = kwargs.get("epochs", 1) - kwargs.get("initial_epoch", 0)
        per_epoch = kwargs.get("steps_per_epoch") or xla.count_batches(data["x"],
                                                                        data["batch_size"])
        self.match_xla_to(data["x"], "train", None if per_epoch is None else epochs * per_epoch)
        self._build_optimizer()
        if kwargs.get("class_weight") is not None:
            data["x"], data["sample_weight"], kwargs["class_weight"] = self._weigh_classes(
                data["x"], data["y"], data["sample_weight"], kwargs["class_weight"])
        self._fitting_on(text)
        with expected_warnings_hidden(packed_here, kwargs.get("steps_per_epoch")):
            return super().fit(**data, **kwargs)

    def train_on_batch(self, x, y=None, sample_weight=None, *args, **kwargs):
        """Keras' `train_on_batch` on packed inputs, tuple labels and weights paired with the
        outputs as `fit` pairs them (`by_output`). Inputs are not checked, for loops that time
        the step; raw text raises `ValueError`."""
        refuse_text_batch(x, "train_on_batch")
        return super().train_on_batch(x, by_output(self.output, y), by_output(
            self.output, sample_weight, "sample weight"), *args, **kwargs)

    def test_on_batch(self, x, y=None, sample_weight=None, *args, **kwargs):
        """Keras' `test_on_batch` on packed inputs, labels paired as `train_on_batch` pairs
        them."""
        refuse_text_batch(x, "test_on_batch")
        return super().test_on_batch(x, by_output(self.output, y), by_output(
            self.output, sample_weight, "sample weight"), *args, **kwargs)

    def predict_on_batch(self, x):
        """Keras' `predict_on_batch` on packed inputs."""
        refuse_text_batch(x, "predict_on_batch")
        return super().predict_on_batch(x)

    def _build_optimizer(self):
        """Creates the optimizer's moments before the first step. Keras' TensorFlow trainer,
        outside a distribution strategy's scope, leaves them to the traced step, and a step that
        creates variables is traced twice, which delays the start of `fit`."""
        if (self.built and getattr(self, "optimizer", None) is not None  # None: not compiled
                and not self.optimizer.built
                and keras.backend.backend() == "tensorflow"
                and tensorflow_backend.outside_distribution(self)):
            self.optimizer.build(self.trainable_variables)

    def evaluate(self, x=None, y=None, batch_size=None, sample_weight=None, **kwargs):
        """Keras' `evaluate`, with raw text and input checks (arguments as for `fit`).

        Returns:
            The loss and metrics, as Keras returns them (`return_dict=True` for a dict).
        """
        x, y = self._check(x, y)
        sample_weight = checked_weights(self, sample_weight)
        raw = is_raw_text(self, x)
        if raw:
            x = self._text_dataset(x, y, sample_weight, batch_size or 32)
            y = sample_weight = batch_size = None
        self.match_xla_to(x, "test", kwargs.get("steps"), batch_size)
        with expected_warnings_hidden([x] if raw else [], kwargs.get("steps")):
            return super().evaluate(x, y, batch_size=batch_size, sample_weight=sample_weight,
                                    **kwargs)

    def predict(self, x, batch_size=None, **kwargs):
        """Keras' `predict`, with raw text and input checks.

        Args:
            x: raw text (with a preprocessor), packed inputs or a dataset of them.
            batch_size: rows a batch (default 32).
            **kwargs: Keras' `predict` arguments (e.g. `verbose=0`).

        Returns:
            The head's outputs as numpy arrays.
        """
        x = self._check(x)[0]
        raw = is_raw_text(self, x)
        if raw:
            x = self._text_dataset(x, batch_size=batch_size or 32)
            batch_size = None
        self.match_xla_to(x, "predict", kwargs.get("steps"), batch_size)
        with expected_warnings_hidden([x] if raw else [], kwargs.get("steps")):
            return super().predict(x, batch_size=batch_size, **kwargs)

