"""`PretrainConfig`: every setting of one pre-training run, checked before any work starts."""

import dataclasses
import math
import numbers
import os

from kbert.config import BertConfig
from kbert.layers.attention_kernel import IMPLEMENTATIONS, check_implementation
from kbert.settings import setting
from kbert.text.masking import default_max_predictions
from kbert.training.optimizer import OPTIMIZERS
from kbert.training.optimizer import dtype_policy

CORPUS_FORMATS = ("auto", "sentences", "text")
_MAY_BE_ZERO = ("warmup_steps", "checkpoint_every")


@dataclasses.dataclass
class PretrainConfig:
    """The settings of one `pretrain()` run.

    `kbert pretrain` takes each as an option of the same name (`kbert.settings`), but
    bert_config, vocabulary and verbose, which are Python objects.

    Args:
        output_dir: the run folder (metrics.json, logs/, checkpoints/, model/).
        overwrite: replace a folder in the output that is not this run's, once the new run is
            complete (`kbert.outputs`).
        preset: the size of a fresh model (tiny ... large), or random:NAME for random weights
            of a checkpoint's shape.
        init: a checkpoint directory or weights preset to continue from: its encoder, and its
            masked-LM and next-sentence heads where it has them.
        allow_pickle: read an init directory's pytorch_model.bin (unpickling runs code:
            trusted files only).
        bert_config: a `BertConfig`, the fresh model's shape, in place of preset.
        vocabulary: a vocab.txt, token list or `BertTokenizer` for a fresh model, in place of
            BERT's uncased vocabulary.
        corpus: a text file, folder of .txt files, glob, or TFRecord folder (default: the
            built-in Wikipedia lead sections).
        corpus_format: how text files hold documents: sentences (one a line, a blank line
            between documents), text (paragraphs), or auto.
        steps: optimizer updates.
        epochs: passes over the training pairs, in place of steps.
        batch_size: sequences an update (the global batch).
        sequence_length: the packed length.
        learning_rate: the peak learning rate.
        optimizer: adamw or lamb.
        warmup_steps: updates of linear warmup (default: warmup_fraction of them).
        warmup_fraction: the share of the updates that warm up, without warmup_steps.
        decay_power: the power of the decay after warmup (1: linear).
        weight_decay: decoupled weight decay (not on LayerNorm and biases).
        clipnorm: the global gradient norm clipped to.
        gradient_accumulation_steps: batches an update consumes (the same update on less
            memory).
        mixed_precision: compute in bfloat16 (bf16) or float16 (fp16, with dynamic loss
            scaling); weights stay float32.
        jit_compile: compile train steps with XLA or not. Default: kbert chooses: on, except
            for bf16/fp16 on a CPU and several replicas.
        checkpoint_every: updates between checkpoints (0: one at the end). Rerunning the same
            command resumes from the newest.
        strategy: TensorFlow: default, mirrored, multi_worker (from TF_CONFIG), tpu[:NAME],
            or auto; JAX (KERAS_BACKEND=jax): data_parallel, model_parallel[:N], or auto.
        whole_word: whole-word masking.
        mask_rate: the share of the tokens masked.
        max_predictions: masked positions a sequence (default 20 at length 128).
        nsp: train next-sentence prediction (without it: the paper's No-NSP ablation).
        causal: a left-to-right LM (next-token targets, causal attention); without nsp, the
            paper's LTR ablation. Masking settings do not apply to it.
        attention: the attention kernel (`kbert.layers.attention_kernel`). Default auto: on
            an NVIDIA GPU under JAX, cuDNN's, or kbert's flash kernel in training with
            attention dropout; the einsum elsewhere.
        short_seq_prob: the chance that a pair is cut shorter than the length (Google's).
        heldout_documents: documents held out for evaluation (default 5%, at most 500).
        eval_examples: held-out pairs scored.
        seed: the seed of the weights, the pairs and the masks.
        log_every: batches between TensorBoard step logs.
        profile_batches: a batch or a FIRST,LAST pair, counted from this call's first batch,
            traced to TensorBoard's Profile tab.
        save_model: write the trained model to OUTPUT/model.
        verbose: Keras' progress output.
    """

    output_dir: str | os.PathLike = setting(dataclasses.MISSING, flag="--output",
                                            cli_default="runs/pretrain")
    overwrite: bool = False
    preset: str = setting("mini", group="start")
    init: str | os.PathLike | None = setting(None, group="start")
    allow_pickle: bool = False
    bert_config: BertConfig | None = setting(None, command_line=False)
    vocabulary: object = setting(None, command_line=False)
    corpus: object = None
    corpus_format: str = setting("auto", choices=CORPUS_FORMATS)
    steps: int | None = setting(None, group="length", required=True)
    epochs: int | None = setting(None, group="length", required=True)
    batch_size: int = 32
    sequence_length: int = 128
    learning_rate: float = 1e-4
    optimizer: str = setting("adamw", choices=OPTIMIZERS)
    warmup_steps: int | None = setting(None, kind="index")
    warmup_fraction: float = setting(0.01, kind="fraction")
    decay_power: float = setting(1.0, kind="number")
    weight_decay: float = setting(0.01, kind="number")
    clipnorm: float | None = 1.0
    gradient_accumulation_steps: int = 1
    mixed_precision: str | None = setting(None, choices=("bf16", "fp16"))
    jit_compile: bool | None = setting(None, flag="--xla")
    checkpoint_every: int | None = setting(1000, kind="index")
    strategy: object = setting(None, kind="text")
    whole_word: bool = False
    mask_rate: float = setting(0.15, kind="fraction")
    max_predictions: int | None = None
    nsp: bool = setting(True, negated=True)
    causal: bool = False
    attention: str = setting("auto", choices=IMPLEMENTATIONS)
    short_seq_prob: float = setting(0.1, kind="fraction")
    heldout_documents: int | None = None
    eval_examples: int = 2048
    seed: int = setting(0, kind="index")
    log_every: int = 10
    profile_batches: int | tuple | None = setting(None, kind="batches", metavar="FIRST,LAST")
    save_model: bool = True
    verbose: object = setting("auto", command_line=False)

    def __post_init__(self):
        if self.output_dir is None:
            raise ValueError("output_dir is required: the folder the run writes to.")
        if (self.steps is None) == (self.epochs is None):
            raise ValueError("Give exactly one of `steps` and `epochs`.")
        for name in ("steps", "epochs", "batch_size", "sequence_length", "eval_examples",
                     "gradient_accumulation_steps", "log_every", "checkpoint_every",
                     "max_predictions", "heldout_documents", "warmup_steps"):
            _check_int(self, name, minimum=0 if name in _MAY_BE_ZERO else 1)
        _check_int(self, "seed", minimum=0)
        if not _is_number(self.mask_rate) or not 0 < self.mask_rate < 1:
            raise ValueError(f"mask_rate must be in (0, 1), got {self.mask_rate!r}.")
        for name, low, high in (("short_seq_prob", 0, 1),
                                ("warmup_fraction", 0, 1), ("weight_decay", 0, math.inf),
                                ("decay_power", 0, math.inf)):
            _check_range(self, name, low, high)
        if not _is_number(self.learning_rate) or not 0 < self.learning_rate < math.inf:
            raise ValueError(f"learning_rate must be positive and finite, got "
                             f"{self.learning_rate!r}.")
        if self.clipnorm is not None and (not _is_number(self.clipnorm)
                                          or not 0 < self.clipnorm < math.inf):
            raise ValueError(f"clipnorm must be positive and finite, or None, got "
                             f"{self.clipnorm!r}.")
        check_implementation(self.attention, "attention")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}.")
        if self.corpus_format not in CORPUS_FORMATS:
            raise ValueError(f"corpus_format must be one of {CORPUS_FORMATS}, got "
                             f"{self.corpus_format!r}.")
        dtype_policy(self.mixed_precision)  # raises for an unknown name
        if self.causal and (self.whole_word or self.max_predictions is not None):
            raise ValueError("causal=True trains a left-to-right LM on every next token; "
                             "whole_word and max_predictions are masking settings.")
        self._check_model()
        self._check_profile_batches()
        self.model_config.check_sequence_length(self.sequence_length)
        self._check_corpus()

    def _check_model(self):
        if self.bert_config is not None and not isinstance(self.bert_config, BertConfig):
            raise ValueError(f"bert_config must be a BertConfig, got "
                             f"{type(self.bert_config).__name__}.")
        if self.init and self.bert_config is not None:
            raise ValueError("Give `init` (pretrained weights) or `bert_config` (a fresh "
                             "model), not both.")
        if self.init and self.vocabulary is not None:
            raise ValueError("`vocabulary` is for a fresh model; `init` brings its own.")
        if not self.init and self.bert_config is None:
            from kbert.presets import resolve_preset

            if resolve_preset(self.preset).load_weights:
                raise ValueError(f"preset {self.preset!r} has pretrained weights: pass it as "
                                 "`init`; `preset` names a fresh model.")

    def _check_corpus(self):
        """A corpus path that names no file fails here, before the run creates its folder."""
        if isinstance(self.corpus, (str, os.PathLike)):
            from kbert.data.pretraining.documents import corpus_files
            from kbert.training.pretrain_data import is_tfrecord_dir

            if not is_tfrecord_dir(self.corpus):
                corpus_files(self.corpus)

    def _check_profile_batches(self):
        batches = self.profile_batches
        if batches is None:
            return
        pair = (batches, batches) if isinstance(batches, int) else tuple(batches)
        if len(pair) != 2 or not all(isinstance(b, int) and b >= 1 for b in pair) or \
                pair[0] > pair[1]:
            raise ValueError(f"profile_batches must be a batch number or a (first, last) pair "
                             f"counted from 1, got {batches!r}.")

    @property
    def accumulation(self) -> int:
        return self.gradient_accumulation_steps

    @property
    def policy(self):
        """The Keras dtype policy name (None: float32)."""
        return dtype_policy(self.mixed_precision)

    @property
    def predictions(self) -> int:
        """Predictions per sequence: `max_predictions` or its default for the length; for a
        causal LM every position but the last."""
        if self.causal:
            return self.sequence_length - 1
        return self.max_predictions or default_max_predictions(self.sequence_length,
                                                               self.mask_rate)

    @property
    def model_config(self) -> BertConfig:
        """The shape of the model this run trains, read without building it."""
        from kbert.presets import resolve_preset

        return resolve_preset(self.model_name).config

    @property
    def model_name(self):
        """What `kbert.presets` builds: the checkpoint, the config, or the preset."""
        return self.init or self.bert_config or self.preset


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _check_int(config, name, minimum):
    value = getattr(config, name)
    if value is None:
        return
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        kind = "a positive integer" if minimum else "a non-negative integer"
        raise ValueError(f"{name} must be {kind}, got {value!r}.")


def _check_range(config, name, low, high):
    value = getattr(config, name)
    if not _is_number(value) or not math.isfinite(value) or not low <= value <= high:
        raise ValueError(f"{name} must be a number in [{low}, {high}], got {value!r}.")
