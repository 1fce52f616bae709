"""The `kbert` command: a thin layer over the library, one subcommand per job."""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

FORMATS = ("huggingface", "google", "keras_hub")


def _convert(args) -> int:
    """Reads any supported checkpoint and writes it in another format."""
    import shutil

    from kbert.convert import read_checkpoint, write_google_checkpoint, write_hf_checkpoint
    from kbert.presets import resolve

    source = resolve(args.source)
    config, weights = read_checkpoint(source, allow_pickle=args.allow_pickle)
    vocab = source / "vocab.txt" if (source / "vocab.txt").is_file() else None
    if args.to == "huggingface":
        write_hf_checkpoint(args.dest, config, weights, vocab_file=vocab, overwrite=args.overwrite)
    elif args.to == "google":
        write_google_checkpoint(args.dest, config, weights, vocab_file=vocab,
                                overwrite=args.overwrite)
    else:
        from kbert.convert.keras_hub import to_keras_hub

        if os.path.exists(args.dest) and not args.overwrite:
            raise FileExistsError(f"{args.dest} exists; pass --overwrite to replace it.")
        shutil.rmtree(args.dest, ignore_errors=True)
        to_keras_hub(config, weights, allow_approximation=args.allow_approximation
                     ).save_to_preset(str(args.dest))
    heads = sorted({n.split(".")[1] for n in weights if n.startswith("cls.")})
    print(f"Wrote {args.to} checkpoint to {args.dest}: {config.num_layers} layers, hidden "
          f"{config.hidden_size}, {config.hidden_act}"
          + (f", heads: {', '.join(heads)}" if heads else "") + ".")
    return 0


def _vocab(args) -> int:
    """Trains a WordPiece vocabulary in BERT's layout."""
    from kbert.data.corpus import text_lines, wikipedia_articles
    from kbert.text.vocab import train_vocabulary

    texts = list(text_lines(args.corpus)) if args.corpus else wikipedia_articles()
    vocab = train_vocabulary(texts, vocab_size=args.size, lowercase=not args.cased,
                             output_path=args.output)
    source = ", ".join(args.corpus) if args.corpus else "Wikipedia lead sections"
    print(f"Wrote {len(vocab)} tokens ({'cased' if args.cased else 'uncased'}) learned from "
          f"{len(texts)} texts of {source} to {args.output}.")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kbert", description="BERT for Keras 3 and TensorFlow.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    convert = commands.add_parser(
        "convert", help="convert a checkpoint between Hugging Face, Google TF1 and keras-hub",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Convert a BERT checkpoint. SOURCE is a Hugging Face directory, an original "
                    "Google checkpoint directory, a keras-hub preset directory or a kbert "
                    "weights preset name; its format is detected.",
        epilog="examples:\n"
               "  kbert convert minilm_l6_h384_uncased out/minilm_google --to google\n"
               "  kbert convert uncased_L-12_H-768_A-12 out/bert_base_hf --to huggingface\n"
               "  kbert convert out/bert_base_hf out/bert_base_hub --to keras_hub")
    convert.add_argument("source")
    convert.add_argument("dest")
    convert.add_argument("--to", choices=FORMATS, required=True)
    convert.add_argument("--overwrite", action="store_true",
                         help="replace DEST even if it holds other files")
    convert.add_argument("--allow-pickle", action="store_true",
                         help="read a pytorch_model.bin (unpickling runs code: trusted files only)")
    convert.add_argument("--allow-approximation", action="store_true",
                         help="for keras_hub: accept its fixed tanh-GELU for an exact-GELU model")
    convert.set_defaults(run=_convert)

    vocab = commands.add_parser(
        "vocab", help="train a WordPiece vocabulary in BERT's layout",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Learn a WordPiece vocabulary: [PAD]=0, [unused0-98], [UNK]=100, [CLS]=101, "
                    "[SEP]=102, [MASK]=103, then characters and word pieces by frequency.",
        epilog="examples:\n"
               "  kbert vocab --output out/vocab.txt                     # Wikipedia, 30,522\n"
               "  kbert vocab --corpus a.txt b.txt --size 8000 --cased --output out/vocab.txt")
    vocab.add_argument("--corpus", nargs="+", metavar="FILE",
                       help="UTF-8 text files, one text per line (default: the built-in "
                            "Wikipedia lead sections)")
    vocab.add_argument("--size", type=int, default=30522, help="target size (default 30522)")
    vocab.add_argument("--cased", action="store_true", help="keep case and accents")
    vocab.add_argument("--output", required=True, help="where to write vocab.txt")
    vocab.set_defaults(run=_vocab)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except (FileNotFoundError, FileExistsError, ValueError) as error:
        print(f"kbert {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
