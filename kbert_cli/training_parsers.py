"""The parsers of the two training commands, `kbert pretrain` and `kbert finetune`: their options
(length, optimizer, precision, attention kernel, task-specific windows) outnumber all the other
commands' together. `kbert_cli.parser` puts them in the `kbert` tree."""

import argparse

from kbert_cli.option_types import (allow_pickle_option, batch_range, dropout_rate,
                                    finite_float, non_negative_int, positive_float, positive_int,
                                    subcommand)

ATTENTION_KERNELS = ("auto", "einsum", "fused", "xla", "flash")
"""`kbert.layers.attention_kernel.IMPLEMENTATIONS`, spelled here so that --help needs no
TensorFlow (tests/test_cli_help.py checks they agree)."""

ATTENTION_HELP = ("the attention kernel (kbert.layers.attention_kernel). Default auto: on an "
                  "NVIDIA GPU under JAX, cuDNN's, or kbert's flash kernel in training with "
                  "attention dropout; the einsum elsewhere")


def pretrain_parser(commands):
    pretrain = subcommand(
        commands, "pretrain", "pre-train with masked LM + next sentence prediction",
        "Pre-train BERT on a text corpus (default: the built-in Wikipedia lead "
        "sections). Checkpoints every N steps; re-run the same command to resume. "
        "Writes OUTPUT/metrics.json, OUTPUT/model and TensorBoard logs.",
        "  kbert pretrain --preset mini --steps 2000 --output runs/pretrain\n"
        "  kbert pretrain --corpus my_docs/ --whole-word --optimizer lamb --steps 10000 "
        "--output runs/wwm\n"
        "  TF_CONFIG=... kbert pretrain --strategy multi_worker --steps 10000 --output runs/mw")
    start = pretrain.add_mutually_exclusive_group()
    start.add_argument("--preset", default="mini", help="size of a fresh model (default mini)")
    start.add_argument("--init", help="a checkpoint dir or weights preset to continue from: "
                                      "its encoder, and its masked-LM and next-sentence heads "
                                      "where it has them")
    pretrain.add_argument("--corpus", help="text file, folder of .txt files, glob, or TFRecord "
                                           "folder (default: Wikipedia lead sections)")
    length = pretrain.add_mutually_exclusive_group(required=True)
    length.add_argument("--steps", type=positive_int)
    length.add_argument("--epochs", type=positive_int)
    pretrain.add_argument("--batch-size", type=positive_int, default=32)
    pretrain.add_argument("--sequence-length", type=positive_int, default=128)
    pretrain.add_argument("--learning-rate", type=positive_float, default=1e-4)
    pretrain.add_argument("--optimizer", choices=("adamw", "lamb"), default="adamw")
    pretrain.add_argument("--gradient-accumulation-steps", type=positive_int, default=1)
    pretrain.add_argument("--mixed-precision", choices=("bf16", "fp16"))
    pretrain.add_argument("--xla", action=argparse.BooleanOptionalAction, default=None,
                          help="compile train steps with XLA or not. Default: kbert chooses: "
                               "on, except for bf16/fp16 on a CPU and several replicas")
    pretrain.add_argument("--attention", choices=ATTENTION_KERNELS, default="auto",
                          help=ATTENTION_HELP)
    pretrain.add_argument("--checkpoint-every", type=non_negative_int, default=1000)
    pretrain.add_argument("--strategy", default=None,
                          help="TensorFlow: default, mirrored, multi_worker (from TF_CONFIG), "
                               "tpu[:NAME], or auto; JAX (KERAS_BACKEND=jax): "
                               "data_parallel, model_parallel[:N], or auto")
    pretrain.add_argument("--whole-word", action="store_true", help="whole-word masking")
    pretrain.add_argument("--no-nsp", action="store_true", help="the paper's No-NSP ablation")
    pretrain.add_argument("--causal", action="store_true",
                          help="a left-to-right LM (next-token targets, causal attention); with "
                               "--no-nsp, the paper's LTR ablation")
    pretrain.add_argument("--seed", type=non_negative_int, default=0)
    pretrain.add_argument("--profile-batches", type=batch_range, default=None,
                          metavar="FIRST,LAST",
                          help="write a profiler trace of these batches to TensorBoard's "
                               "Profile tab, e.g. 10,20")
    allow_pickle_option(pretrain, "an --init directory's pytorch_model.bin")
    pretrain.add_argument("--output", default="runs/pretrain")
    pretrain.add_argument("--overwrite", action="store_true",
                          help="replace a folder in --output that is not this run's, once the "
                               "new run is complete")
    return pretrain


def finetune_parser(commands):
    finetune = subcommand(
        commands, "finetune", "fine-tune on a sentence, pair, choice, span or tagging task",
        "Fine-tune BERT end to end (AdamW, 10% warmup, linear decay) and score "
        "the held-out split. Writes OUTPUT/metrics.json, OUTPUT/model.keras (with "
        "its preprocessor), OUTPUT/run.json and TensorBoard logs in OUTPUT/logs.",
        "  kbert finetune --task sentiment --steps 300 --output runs/sentiment\n"
        "  kbert finetune --task sentiment --preset mini --epochs 3 --output runs/random\n"
        "  kbert finetune --task qnli --max-train-examples 20000 --output runs/qnli\n"
        "  kbert finetune --task conll --steps 400 --learning-rate 1e-4 --output runs/ner\n"
        "  kbert finetune --task squad --max-train-examples 4000 --output runs/squad\n"
        "  kbert finetune --task glue:SST-2 --data-dir glue/SST-2 --output runs/sst2\n"
        "  kbert finetune --steps 300 --attention-images 'A warm, funny film.' "
        "--output runs/sentiment\n"
        "  kbert finetune --config sentiment.yaml --seed 1   # flags beat the file")
    finetune.add_argument("--task", default="sentiment",
                          help="sentiment, sentiment_score, qnli, mmlu, squad, squad2, conll, "
                               "or glue:<NAME> with --data-dir (default: sentiment)")
    start = finetune.add_mutually_exclusive_group()
    start.add_argument("--init", help="pretrained weights: a checkpoint dir, a weights preset "
                                      "(default: minilm_l6_h384_uncased) or a kbert run dir; "
                                      "one fine-tuned for the task brings its head too")
    start.add_argument("--preset", help="train from random weights of this size preset "
                                        "(tiny, mini, small, medium, base, large)")
    finetune.add_argument("--epochs", type=positive_int, default=3)
    finetune.add_argument("--steps", type=positive_int,
                          help="train this many steps instead of --epochs")
    finetune.add_argument("--batch-size", type=positive_int, default=32)
    finetune.add_argument("--sequence-length", type=positive_int,
                          help="default 128 (SQuAD: 384)")
    finetune.add_argument("--learning-rate", type=positive_float,
                          help="peak learning rate (default 5e-5; 1e-3 for --mode feature)")
    finetune.add_argument("--max-train-examples", type=positive_int,
                          help="train on a random subset")
    finetune.add_argument("--max-eval-examples", type=positive_int, help="score a fixed subset")
    finetune.add_argument("--mode", choices=("finetune", "feature"), default="finetune",
                          help="feature: frozen BERT, last four layers into a BiLSTM")
    finetune.add_argument("--data-dir", help="directory of a GLUE task's TSV files")
    _squad_options(finetune)
    _conll_options(finetune)
    finetune.add_argument("--seed", type=non_negative_int, default=0)
    _finetune_extras(finetune)
    allow_pickle_option(finetune, "an --init directory's pytorch_model.bin")
    finetune.add_argument("--output", default="runs/finetune")
    finetune.add_argument("--overwrite", action="store_true",
                          help="replace a finished run in --output (its evaluations and logs "
                               "too) by training afresh; without it such a directory is refused")
    return finetune


def _squad_options(finetune):
    """The options only SQuAD's windows and decoding read (others refuse them by name)."""
    finetune.add_argument("--doc-stride", type=positive_int,
                          help="SQuAD: sub-tokens between the starts of a context's windows "
                               "(default 128)")
    finetune.add_argument("--max-query-length", type=positive_int,
                          help="SQuAD: questions are cut to this many sub-tokens (default 64)")
    finetune.add_argument("--null-threshold", type=finite_float,
                          help="SQuAD v2.0: answer \"\" when the null score beats the best "
                               "span by more than this (default 0)")


def _conll_options(finetune):
    """The option only CoNLL's training reads (others refuse it by name)."""
    finetune.add_argument("--batching", choices=("length", "random"),
                          help="CoNLL: training batches drawn uniformly (as Hugging Face; "
                               "default) or of similar-length sentences (least padding, "
                               "faster, scores lower)")


def _finetune_extras(finetune):
    """Attention heatmaps, validation and the best epoch, XLA, the attention kernel, dropout
    rates and mixed precision: how the run trains, not which task or data."""
    finetune.add_argument("--attention-images", metavar="SENTENCE",
                          help="write SENTENCE's attention heatmaps to TensorBoard while "
                               "training (OUTPUT/logs/attention)")
    finetune.add_argument("--validation", action=argparse.BooleanOptionalAction, default=None,
                          help="score the dev split after every epoch (TensorBoard's validation "
                               "run; default without --keep-best, whose dev pass is then the "
                               "epoch's one) or not; the final dev / test scores run either way")
    finetune.add_argument("--keep-best", action="store_true",
                          help="score dev with the task's metric after every epoch (with "
                               "--steps, every checkpoint) and end with the best one's weights "
                               "(Hugging Face's load_best_model_at_end)")
    finetune.add_argument("--xla", action=argparse.BooleanOptionalAction, default=None,
                          help="compile with XLA or not (batches padded to a multiple of 16). "
                               "Default: kbert chooses: on JAX; on TensorFlow the trimmed "
                               "batches run without it")
    finetune.add_argument("--attention", choices=ATTENTION_KERNELS, default="auto",
                          help=ATTENTION_HELP)
    finetune.add_argument("--hidden-dropout", type=dropout_rate,
                          help="the encoder's dropout rate after embeddings and each sub-layer "
                               "(default: the checkpoint's, 0.1)")
    finetune.add_argument("--attention-dropout", type=dropout_rate,
                          help="dropout on the attention probabilities (default: the "
                               "checkpoint's, 0.1)")
    finetune.add_argument("--mixed-precision", choices=("bf16", "fp16"),
                          help="compute in bfloat16 (on a CPU faster than float32 on some "
                               "models, slower on others) or float16 (GPUs; loss scaling); "
                               "weights stay float32")
