"""The `kbert` command's argparse tree: one small function per subcommand, each giving its
options, help texts and examples. The functions that carry the commands out live in
`kbert_cli.commands`; this module imports no part of the library, so --help needs no
TensorFlow."""

import argparse

from kbert_cli.config_file import add_config_options
from kbert_cli.option_types import allow_pickle_option, finite_float, positive_int, subcommand
from kbert_cli.training_parsers import finetune_parser, pretrain_parser

FORMATS = ("huggingface", "google", "keras_hub", "tf_hub")


def build_parser() -> argparse.ArgumentParser:
    """The whole `kbert` parser; `args.command` names the subcommand given."""
    parser = _Parser(
        prog="kbert", description="BERT for Keras 3 and TensorFlow.",
        epilog="TensorFlow's C++ start-up notices are hidden; KBERT_LOG=1 shows its whole log.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_Version)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_convert_parser, _vocab_parser, pretrain_parser, finetune_parser,
                _evaluate_parser, _predict_parser, _export_parser, _quickstart_parser):
        add(commands)
    add_config_options(parser, commands)
    return parser


class _Parser(argparse.ArgumentParser):
    """Errors in one line, `kbert CMD: error: ...` (exit 2), pointing at --help instead of
    printing the whole usage; the subcommands' parsers are of this class too."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


class _Version(argparse.Action):
    """`kbert --version`: kbert's version and those of the packages it runs on (what a bug
    report needs), read from their installed metadata."""

    PACKAGES = ("tensorflow", "tensorflow-text", "keras", "keras-hub")

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, help="show kbert's version and those "
                         "of TensorFlow, tensorflow-text, Keras and keras-hub, then exit")

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"kbert {_installed('kbert')} ("
              + ", ".join(f"{name} {_installed(name)}" for name in self.PACKAGES) + ")")
        parser.exit()


def _installed(package):
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _convert_parser(commands):
    convert = subcommand(
        commands, "convert",
        "convert a checkpoint between Hugging Face, Google TF1 and keras-hub, or to TF Hub",
        "Convert a BERT checkpoint. SOURCE is a Hugging Face directory, an original "
        "Google checkpoint directory, a keras-hub preset directory or a kbert "
        "weights preset name; its format is detected. --to tf_hub writes DEST/preprocessor "
        "and DEST/encoder, the two SavedModels of TF Hub's BERT models (for "
        "hub.KerasLayer / tf.saved_model.load). SOURCE may also be a kbert finetune run: "
        "--to tf_hub exports its fine-tuned encoder, --to huggingface its whole model as "
        "transformers' class for the task (BertForSequenceClassification, "
        "BertForTokenClassification, BertForMultipleChoice, BertForQuestionAnswering) "
        "with the run's label names, --to keras_hub a classifier run as keras-hub's "
        "BertTextClassifier (TextClassifier.from_preset takes raw text), --to google a "
        "classifier or SQuAD run with the head of Google's run_classifier.py / run_squad.py.",
        "  kbert convert minilm_l6_h384_uncased out/minilm_google --to google\n"
        "  kbert convert out/minilm_google out/minilm_hf --to huggingface  # any Google TF1 dir\n"
        "  kbert convert out/minilm_hf out/minilm_hub --to keras_hub --allow-approximation\n"
        "  kbert convert out/minilm_hf out/minilm_tfhub --to tf_hub --sequence-length 64")
    convert.add_argument("source")
    convert.add_argument("dest")
    convert.add_argument("--to", choices=FORMATS, required=True)
    convert.add_argument("--overwrite", action="store_true",
                         help="replace DEST even if it holds other files")
    allow_pickle_option(convert, "a pytorch_model.bin")
    convert.add_argument("--allow-approximation", action="store_true",
                         help="for keras_hub: accept its fixed tanh-GELU for an exact-GELU model")
    convert.add_argument("--sequence-length", type=positive_int,
                         help="for tf_hub: the preprocessor's default seq_length (default: a "
                         "run's, else 128)")
    return convert


def _vocab_parser(commands):
    vocab = subcommand(
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
    vocab.add_argument("--overwrite", action="store_true",
                       help="replace an existing --output file")
    return vocab


def _evaluate_parser(commands):
    evaluate = subcommand(
        commands, "evaluate", "score a fine-tuned model on a task split",
        "Load a `kbert finetune` output directory, or a checkpoint directory holding a "
        "fine-tuned head (transformers, keras-hub, Google's scripts), and score it with the "
        "task's standard metrics. Writes OUTPUT/metrics.json and, for SQuAD (the official "
        "scripts' {id: answer}) and CoNLL, OUTPUT/predictions.json.",
        "  kbert evaluate runs/sentiment                  # its own task, test split\n"
        "  kbert evaluate runs/sentiment --split dev --max-eval-examples 500\n"
        "  kbert evaluate my_hf_squad_model/ --task squad # SQuAD v1.1 dev, official metric")
    evaluate.add_argument("model", help="a kbert finetune output directory, or a fine-tuned "
                                        "checkpoint directory (as for export)")
    evaluate.add_argument("--task", help="default: the task the model was trained on (a "
                                         "checkpoint needs one)")
    evaluate.add_argument("--split", choices=("train", "dev", "test"),
                          help="default: test (SQuAD: dev, its only public split)")
    evaluate.add_argument("--data-dir", help="directory of a GLUE task's TSV files")
    evaluate.add_argument("--max-eval-examples", type=positive_int, help="score a fixed subset")
    evaluate.add_argument("--output", help="default: MODEL/eval_SPLIT")
    evaluate.add_argument("--overwrite", action="store_true",
                          help="replace a folder in --output that is not a kbert evaluation")
    _null_threshold(evaluate)
    allow_pickle_option(evaluate)
    return evaluate


def _predict_parser(commands):
    predict = subcommand(
        commands, "predict", "answer raw text with a fine-tuned run or checkpoint",
        "Raw text in, answers out: a label with probabilities for sentence tasks "
        "(--text, plus --text-pair for pairs or --choice for multiple choice), the "
        "answer and its character span for SQuAD (--question, --context), the "
        "entities with character spans for CoNLL (--text); for a pre-trained masked LM "
        "(kbert pretrain's OUTPUT/model, a BertForMaskedLM checkpoint) the likeliest word "
        "pieces for each [MASK] in --text.",
        "  kbert predict runs/sentiment --text 'A joy to watch.'\n"
        "  kbert predict runs/squad --question 'Who wrote it?' --context 'Ann wrote it.'\n"
        "  kbert predict runs/ner --text 'Angela Merkel visited Paris.'\n"
        "  kbert predict runs/mmlu --text 'What is 2 + 2?' --choice 3 --choice 4 "
        "--choice 5 --choice 22\n"
        "  kbert predict runs/sentiment --input reviews.jsonl --output answers.jsonl\n"
        "  kbert predict my_hf_classifier/ --text 'A joy to watch.'   # transformers' labels\n"
        "  kbert predict my_hf_squad_model/ --task squad2 --question ... --context ...\n"
        "  kbert predict runs/pretrain/model --text 'Paris is the [MASK] of France.' --top-k 3")
    predict.add_argument("model", help="a kbert finetune output directory, a fine-tuned "
                                       "checkpoint directory (as for export), or a checkpoint "
                                       "with a masked-LM head")
    predict.add_argument("--text")
    predict.add_argument("--text-pair", help="the second text of a sentence-pair task")
    predict.add_argument("--choice", action="append",
                         help="one answer choice of a multiple-choice task (repeat it)")
    allow_pickle_option(predict)
    predict.add_argument("--question")
    predict.add_argument("--context")
    predict.add_argument("--task", help="answer as this task (default: as the run was trained; "
                                        "a checkpoint as its head says, SQuAD v1.1 for spans; "
                                        "squad2 lets it answer nothing)")
    predict.add_argument("--data-dir", help="with --task glue: its directory of TSV files")
    _null_threshold(predict)
    _top_k(predict)
    predict.add_argument(
        "--input", metavar="FILE",
        help="many inputs instead: a JSON-lines file (- for standard input), one object a line "
             "with the keys text, text_pair, choices (a list), question, context as the task "
             "needs; answers come out one a line")
    predict.add_argument("--output", metavar="FILE",
                         help="with --input: write the answers here (default, or -: standard "
                              "output)")
    predict.add_argument("--batch-size", type=positive_int,
                         help="with --input: lines run through the model at once (default 64)")
    predict.add_argument("--overwrite", action="store_true",
                         help="with --output: replace an existing file (never the --input)")
    return predict


def _export_parser(commands):
    export = subcommand(
        commands, "export", "export a fine-tuned model for TensorFlow Serving",
        "Write OUTPUT_DIR/<version>/, a SavedModel whose serving_default signature "
        "takes raw strings (tokenization in the graph), plus serve_token_ids, serve_examples "
        "(the strings as tf.Examples) and, for classifiers, TF Serving's classify (or "
        "regress) API.",
        "  kbert export runs/sentiment saved_models/sentiment --labels negative,positive\n"
        "  kbert export runs/qnli saved_models/qnli --pair --version 3\n"
        "  kbert export my_hf_classifier/ saved_models/mine   # transformers' id2label names\n"
        "  kbert export my_hf_squad_model/ saved_models/qa --task squad2\n"
        "  kbert export runs/pretrain/model saved_models/fill_mask --top-k 10   # fills [MASK]")
    export.add_argument("model", help="a kbert finetune output dir, a fine-tuned checkpoint "
                                      "dir (transformers task class, keras-hub "
                                      "BertTextClassifier, Google run_classifier/run_squad), "
                                      "or a .keras file")
    export.add_argument("output_dir", help="the model's base dir, e.g. saved_models/NAME")
    export.add_argument("--vocab", help="vocab.txt, checkpoint dir or weights preset "
                                        "for a model saved without one (default: the run's own)")
    export.add_argument("--cased", action="store_true", help="the vocabulary is cased")
    export.add_argument("--sequence-length", type=positive_int)
    export.add_argument("--version", type=positive_int,
                        help="default: one more than the latest")
    export.add_argument("--labels", help="comma-separated label names, in label-id order")
    export.add_argument("--pair", action="store_true", dest="sentence_pair",
                        help="inputs are text + text_pair (default: as the run was trained)")
    export.add_argument("--task", help="export a run or checkpoint as this kbert task (e.g. "
                                       "squad2: answers may be empty); for a plain Keras "
                                       "model, classifier, multiple_choice, backbone or "
                                       "feature_extractor")
    allow_pickle_option(export)
    _null_threshold(export)
    _top_k(export)
    export.add_argument("--no-warmup", action="store_true",
                        help="write no TF Serving warm-up requests")
    export.add_argument("--overwrite", action="store_true")
    return export


def _quickstart_parser(commands):
    quick = subcommand(
        commands, "quickstart", "the whole path in one go: fine-tune, evaluate, export, serve",
        "Fine-tune the pretrained MiniLM on the movie-review sentiment data for a "
        "few minutes, print dev/test accuracy, export saved_models/sentiment/<ver>/ "
        "and answer a few sentences through the export.",
        "  kbert quickstart\n"
        "  kbert quickstart --steps 50 --max-eval-examples 200   # a two-minute taste")
    quick.add_argument("--steps", type=positive_int, default=400,
                       help="training steps (default 400)")
    quick.add_argument("--max-eval-examples", type=positive_int, help="score a fixed subset only")
    quick.add_argument("--output", default="runs/quickstart",
                       help="its run directory, replaced by each quickstart")
    quick.add_argument("--export-dir", default="saved_models/sentiment")
    return quick


def _top_k(command):
    command.add_argument("--top-k", type=positive_int,
                         help="a masked LM: the word pieces given for each [MASK] (default 5)")


def _null_threshold(command):
    command.add_argument("--null-threshold", type=finite_float,
                         help="SQuAD v2.0 (squad2): answer \"\" when the null score beats the "
                              "best span by more than this (default: the run's, else 0)")
