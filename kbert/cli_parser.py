"""The `kbert` command's argparse tree: one small function per subcommand, each giving its
options, help texts and examples. The functions that carry the commands out live in
`kbert.cli`; `build_parser(runs)` takes them by subcommand name, so this module needs no
part of the library."""

import argparse

from kbert.cli_config import add_config_options
from kbert.cli_types import (batch_range, finite_float, non_negative_int, positive_float,
                             positive_int)
from kbert.layers.attention_kernel import IMPLEMENTATIONS

FORMATS = ("huggingface", "google", "keras_hub")


ATTENTION_HELP = ("the attention kernel (kbert.layers.attention_kernel). Default auto: cuDNN's "
                  "on an NVIDIA GPU under JAX, except in training with attention dropout; the "
                  "einsum elsewhere. flash (JAX) keeps the dropout")


def build_parser(runs) -> argparse.ArgumentParser:
    """The whole `kbert` parser; `runs` maps each subcommand's name to its function."""
    parser = _Parser(
        prog="kbert", description="BERT for Keras 3 and TensorFlow.",
        epilog="TensorFlow's C++ start-up notices are hidden; KBERT_LOG=1 shows its whole log.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, add in (("convert", _convert_parser), ("vocab", _vocab_parser),
                      ("pretrain", _pretrain_parser), ("finetune", _finetune_parser),
                      ("evaluate", _evaluate_parser), ("predict", _predict_parser),
                      ("export", _export_parser), ("quickstart", _quickstart_parser)):
        add(commands).set_defaults(run=runs[name])
    add_config_options(parser, commands)
    return parser


class _Parser(argparse.ArgumentParser):
    """Errors in one line, `kbert CMD: error: ...` (exit 2), pointing at --help instead of
    printing the whole usage; the subcommands' parsers are of this class too."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _subcommand(commands, name, help, description, examples):
    """A subcommand whose --help shows `description` and then `examples`, as written."""
    return commands.add_parser(
        name, help=help, formatter_class=argparse.RawDescriptionHelpFormatter,
        description=description, epilog="examples:\n" + examples)


def _convert_parser(commands):
    convert = _subcommand(
        commands, "convert",
        "convert a checkpoint between Hugging Face, Google TF1 and keras-hub",
        "Convert a BERT checkpoint. SOURCE is a Hugging Face directory, an original "
        "Google checkpoint directory, a keras-hub preset directory or a kbert "
        "weights preset name; its format is detected.",
        "  kbert convert minilm_l6_h384_uncased out/minilm_google --to google\n"
        "  kbert convert out/minilm_google out/minilm_hf --to huggingface  # any Google TF1 dir\n"
        "  kbert convert out/minilm_hf out/minilm_hub --to keras_hub --allow-approximation")
    convert.add_argument("source")
    convert.add_argument("dest")
    convert.add_argument("--to", choices=FORMATS, required=True)
    convert.add_argument("--overwrite", action="store_true",
                         help="replace DEST even if it holds other files")
    convert.add_argument("--allow-pickle", action="store_true",
                         help="read a pytorch_model.bin (unpickling runs code: trusted files only)")
    convert.add_argument("--allow-approximation", action="store_true",
                         help="for keras_hub: accept its fixed tanh-GELU for an exact-GELU model")
    return convert


def _vocab_parser(commands):
    vocab = _subcommand(
        commands, "vocab", "train a WordPiece vocabulary in BERT's layout",
        "Learn a WordPiece vocabulary: [PAD]=0, [unused0-98], [UNK]=100, [CLS]=101, "
        "[SEP]=102, [MASK]=103, then characters and word pieces by frequency.",
        "  kbert vocab --output out/vocab.txt          # built-in corpus: 28,708 (all it has)\n"
        "  kbert vocab --corpus a.txt b.txt --size 8000 --cased --output out/vocab.txt")
    vocab.add_argument("--corpus", nargs="+", metavar="FILE",
                       help="UTF-8 text files, one text per line (default: the built-in "
                            "Wikipedia lead sections)")
    vocab.add_argument("--size", type=positive_int, default=30522,
                       help="tokens in the vocabulary (default 30522, as Google's; fewer only "
                            "when the corpus has no more word pieces seen twice)")
    vocab.add_argument("--cased", action="store_true", help="keep case and accents")
    vocab.add_argument("--output", required=True, help="where to write vocab.txt")
    return vocab


def _pretrain_parser(commands):
    pretrain = _subcommand(
        commands, "pretrain", "pre-train with masked LM + next sentence prediction",
        "Pre-train BERT on a text corpus (default: the built-in Wikipedia lead "
        "sections). Checkpoints every N steps; re-run the same command to resume. "
        "Writes OUTPUT/metrics.json, OUTPUT/model and TensorBoard logs.",
        "  kbert pretrain --preset mini --steps 2000 --output runs/pretrain\n"
        "  kbert pretrain --corpus my_docs/ --whole-word --optimizer lamb --output runs/wwm\n"
        "  TF_CONFIG=... kbert pretrain --strategy multi_worker --output runs/mw")
    start = pretrain.add_mutually_exclusive_group()
    start.add_argument("--preset", default="mini", help="size of a fresh model (default mini)")
    start.add_argument("--init", help="a checkpoint dir or weights preset to continue from")
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
    pretrain.add_argument("--attention", choices=IMPLEMENTATIONS, default="auto",
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
    pretrain.add_argument("--output", default="runs/pretrain")
    return pretrain


def _finetune_parser(commands):
    finetune = _subcommand(
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
    start.add_argument("--init", help="pretrained weights: a checkpoint dir or weights preset "
                                      "(default: minilm_l6_h384_uncased)")
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
    finetune.add_argument("--output", default="runs/finetune")
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
                               "faster, scored lower in the README's side-by-side run)")


def _finetune_extras(finetune):
    """Attention heatmaps, validation, XLA, the attention kernel and mixed precision: how the
    run trains, not what it learns."""
    finetune.add_argument("--attention-images", metavar="SENTENCE",
                          help="write SENTENCE's attention heatmaps to TensorBoard while "
                               "training (OUTPUT/logs/attention)")
    finetune.add_argument("--validation", action=argparse.BooleanOptionalAction, default=True,
                          help="score the dev split after every epoch (TensorBoard's validation "
                               "run; default) or not; the final dev / test scores run either "
                               "way")
    finetune.add_argument("--xla", action=argparse.BooleanOptionalAction, default=None,
                          help="compile with XLA or not (batches padded to a multiple of 16). "
                               "Default: kbert chooses: on JAX; on TensorFlow the trimmed "
                               "batches run without it")
    finetune.add_argument("--attention", choices=IMPLEMENTATIONS, default="auto",
                          help=ATTENTION_HELP)
    finetune.add_argument("--mixed-precision", choices=("bf16", "fp16"),
                          help="compute in bfloat16 (on a CPU, without XLA: faster on the "
                               "AMD EPYC measured, slower on the Intel Xeon without AMX; see "
                               "README) or float16 (GPUs; loss scaling), weights float32")


def _evaluate_parser(commands):
    evaluate = _subcommand(
        commands, "evaluate", "score a fine-tuned model on a task split",
        "Load a `kbert finetune` output directory and score it with the task's "
        "standard metrics. Writes OUTPUT/metrics.json.",
        "  kbert evaluate runs/sentiment                  # its own task, test split\n"
        "  kbert evaluate runs/sentiment --split dev --max-eval-examples 500")
    evaluate.add_argument("model", help="a kbert finetune output directory")
    evaluate.add_argument("--task", help="default: the task the model was trained on")
    evaluate.add_argument("--split", choices=("train", "dev", "test"),
                          help="default: test (SQuAD: dev, its only public split)")
    evaluate.add_argument("--data-dir", help="directory of a GLUE task's TSV files")
    evaluate.add_argument("--max-eval-examples", type=positive_int, help="score a fixed subset")
    evaluate.add_argument("--output", help="default: MODEL/eval_SPLIT")
    return evaluate


def _predict_parser(commands):
    predict = _subcommand(
        commands, "predict", "answer raw text with a fine-tuned run",
        "Raw text in, answers out: a label with probabilities for sentence tasks "
        "(--text, plus --text-pair for pairs or --choice for multiple choice), the "
        "answer and its character span for SQuAD (--question, --context), the "
        "entities with character spans for CoNLL (--text).",
        "  kbert predict runs/sentiment --text 'A joy to watch.'\n"
        "  kbert predict runs/squad --question 'Who wrote it?' --context 'Ann wrote it.'\n"
        "  kbert predict runs/ner --text 'Angela Merkel visited Paris.'\n"
        "  kbert predict runs/mmlu --text 'What is 2 + 2?' --choice 3 --choice 4 "
        "--choice 5 --choice 22")
    predict.add_argument("model", help="a kbert finetune output directory")
    predict.add_argument("--text")
    predict.add_argument("--text-pair", help="the second text of a sentence-pair task")
    predict.add_argument("--choice", action="append",
                         help="one answer choice of a multiple-choice task (repeat it)")
    predict.add_argument("--question")
    predict.add_argument("--context")
    return predict


def _export_parser(commands):
    export = _subcommand(
        commands, "export", "export a fine-tuned model for TensorFlow Serving",
        "Write OUTPUT_DIR/<version>/, a SavedModel whose serving_default signature "
        "takes raw strings (tokenization in the graph), plus serve_token_ids.",
        "  kbert export runs/sentiment saved_models/sentiment --labels negative,positive\n"
        "  kbert export runs/qnli saved_models/qnli --pair --version 3")
    export.add_argument("model", help="a kbert finetune output dir, or a .keras file")
    export.add_argument("output_dir", help="the model's base dir, e.g. saved_models/NAME")
    export.add_argument("--vocab", help="vocab.txt, checkpoint dir or weights preset "
                                        "for a model saved without one (default: the run's own)")
    export.add_argument("--cased", action="store_true", help="the vocabulary is cased")
    export.add_argument("--sequence-length", type=positive_int)
    export.add_argument("--version", type=positive_int,
                        help="default: one more than the latest")
    export.add_argument("--labels", help="comma-separated label names, in label-id order")
    export.add_argument("--pair", action="store_true",
                        help="inputs are text + text_pair (default: as the run was trained)")
    export.add_argument("--task", help="classifier, multiple_choice, backbone or features, "
                                       "for a plain Keras model")
    export.add_argument("--no-warmup", action="store_true",
                        help="write no TF Serving warm-up requests")
    export.add_argument("--overwrite", action="store_true")
    return export


def _quickstart_parser(commands):
    quick = _subcommand(
        commands, "quickstart", "the whole path in one go: fine-tune, evaluate, export, serve",
        "Fine-tune the pretrained MiniLM on the movie-review sentiment data for a "
        "few minutes, print dev/test accuracy, export saved_models/sentiment/<ver>/ "
        "and answer a few sentences through the export.",
        "  kbert quickstart\n"
        "  kbert quickstart --steps 50 --max-eval-examples 200   # a two-minute taste")
    quick.add_argument("--steps", type=positive_int, default=400,
                       help="training steps (default 400)")
    quick.add_argument("--max-eval-examples", type=positive_int, help="score a fixed subset only")
    quick.add_argument("--output", default="runs/quickstart")
    quick.add_argument("--export-dir", default="saved_models/sentiment")
    return quick
