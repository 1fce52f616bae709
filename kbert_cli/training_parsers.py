"""The parsers of the two training commands, `kbert pretrain` and `kbert finetune`. Their options
are the fields of `PretrainConfig` and `FinetuneConfig`, read from `settings.json`
(`kbert_cli.generate` writes it from the dataclasses); the task's own options are added here.
`kbert_cli.parser` puts them in the `kbert` tree."""

import argparse
import json
import pathlib

from kbert_cli.option_types import (batch_range, dropout_rate, finite_float, fraction,
                                    non_negative_int, positive_float, positive_int, subcommand)

SETTINGS = json.loads(pathlib.Path(__file__).with_name("settings.json").read_text("utf-8"))
"""{command: its options}, one for each field of its config dataclass."""

TYPES = {"count": positive_int, "index": non_negative_int, "positive": positive_float,
         "number": finite_float, "rate": dropout_rate, "fraction": fraction,
         "batches": batch_range, "text": None}
"""The check of each kind of value (`kbert.settings.KINDS`)."""


def add_settings(command, name, beside=None):
    """Adds the options of command `name`'s config fields to `command`.

    Args:
        command: an argparse (sub)parser.
        name: "finetune", "files" (finetune's own data files) or "pretrain".
        beside: {field: [(flag, add_argument keywords)]}: options of the command's own added
            right after that field's, in its group.
    """
    groups = {}
    for option in SETTINGS[name]:
        target = command
        if option["group"]:
            if option["group"] not in groups:
                groups[option["group"]] = command.add_mutually_exclusive_group(
                    required=option["required"])
            target = groups[option["group"]]
        kwargs = {"dest": option["dest"], "help": option["help"].replace("%", "%%")}
        if option["kind"] != "switch":
            kwargs.update(type=TYPES[option["kind"]], default=option["default"],
                          choices=option["choices"], metavar=option["metavar"])
        elif option["negated"] or option["default"] is False:
            kwargs["action"] = "store_true"
        else:
            kwargs.update(action=argparse.BooleanOptionalAction, default=option["default"])
        target.add_argument(option["flag"], **kwargs)
        for flag, extra in (beside or {}).get(option["field"], []):
            target.add_argument(flag, **extra)


def config_kwargs(args, name):
    """{config field: value} of the parsed `args` of command `name`."""
    return {option["field"]: (not value if option["negated"] else value)
            for option in SETTINGS[name]
            for value in [getattr(args, option["dest"])]}


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
    add_settings(pretrain, "pretrain")
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
        "  kbert finetune --train-file reviews.csv --text-column review --label-column "
        "sentiment --output runs/reviews\n"
        "  kbert finetune --steps 300 --attention-images 'A warm, funny film.' "
        "--output runs/sentiment\n"
        "  kbert finetune --config sentiment.yaml --seed 1   # flags beat the file")
    finetune.add_argument("--task",
                          help="sentiment, sentiment_score, qnli, mmlu, squad, squad2, conll, "
                               "or glue:<NAME> with --data-dir (default: sentiment); with "
                               "--train-file: sentence, multiple_choice, squad, squad2 or "
                               "conll (default: what the file's format makes)")
    preset = ("--preset", {"help": "train from random weights of this size preset (tiny, mini, "
                                   "small, medium, base, large)"})
    add_settings(finetune, "finetune", beside={"init": [preset]})
    add_settings(finetune, "files")
    finetune.add_argument("--data-dir", help="directory of a GLUE task's TSV files")
    _squad_options(finetune)
    _conll_options(finetune)
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
