"""The main job on a built-in default: pretrained MiniLM → movie-review sentiment → a served model.

`quickstart()` fine-tunes the pretrained MiniLM on the movie-review sentiment data for a few
minutes, scores the dev and test splits, exports a versioned SavedModel that takes raw text,
then answers a few held-out test sentences through that export, loaded the way TensorFlow
Serving loads it, each beside its gold label.
"""

import pathlib
import random
import time

LABELS = ("negative", "positive")
EXAMPLES = 5
"""How many test sentences the export answers at the end."""
EXAMPLE_SEED = 1
"""The seed that picks them from the test split."""
SHOWN_CHARACTERS = 70
"""A longer sentence is printed cut to this many characters."""


def held_out_examples(count=EXAMPLES, seed=EXAMPLE_SEED):
    """Sentences of the sentiment task's test split, picked at random by `seed`.

    Args:
        count: how many.
        seed: the `random.Random` seed of the choice.

    Returns:
        A list of `(sentence, gold label id)` pairs, the same for the same arguments.

    Examples:
        >>> from kbert.quickstart import held_out_examples
        >>> examples = held_out_examples()
        >>> len(examples), examples == held_out_examples(), {label for _, label in examples}
        (5, True, {0, 1})
    """
    from kbert.data.tasks.sentiment import sentiment_task

    return random.Random(seed).sample(sentiment_task().splits["test"], count)


def _shown(text, width=SHOWN_CHARACTERS):
    """`text`, cut to `width` characters with "..." where longer."""
    return text if len(text) <= width else text[:width - 3].rstrip() + "..."


def quickstart(output_dir="runs/quickstart", export_dir="saved_models/sentiment", steps=400,
               batch_size=32, learning_rate=5e-5, max_eval_examples=None, verbose=1):
    """Runs the whole path and returns a summary dict (metrics, export path, answers)."""
    import tensorflow as tf

    from kbert.export.from_path import export_from_cli
    from kbert.outputs import check_output
    from kbert.runs import RunDirectory
    from kbert.training.finetune import finetune

    start = time.time()
    # each quickstart replaces the last one's run, and nothing else
    check_output(output_dir, "finetune", unmarked=RunDirectory.is_run)
    metrics = finetune(task="sentiment", init="minilm_l6_h384_uncased", output_dir=output_dir,
                       steps=steps, batch_size=batch_size, learning_rate=learning_rate,
                       max_eval_examples=max_eval_examples, verbose=verbose,
                       overwrite=True)
    export_path = export_from_cli(output_dir, export_dir, label_names=list(LABELS))
    serving = tf.saved_model.load(str(export_path)).signatures["serving_default"]
    examples = held_out_examples()
    result = serving(text=tf.constant([text for text, _ in examples]))
    answers = [
        {"text": text, "gold": LABELS[gold], "label": label.decode(),
         "probability": float(max(probs))}
        for (text, gold), label, probs in zip(examples, result["label"].numpy(),
                                              result["probabilities"].numpy())
    ]
    summary = {"metrics": metrics, "export": str(export_path), "answers": answers,
               "output_dir": str(pathlib.Path(output_dir)), "seconds": time.time() - start}
    if verbose:
        _print_summary(summary)
    return summary


def _print_summary(summary):
    metrics = summary["metrics"]
    print("\nkbert quickstart: done in %.1f min" % (summary["seconds"] / 60))
    for split in ("dev", "test"):
        if split in metrics:
            print(f"  {split:4s} accuracy {metrics[split]['accuracy']:.4f}  "
                  f"f1 {metrics[split]['f1']:.4f}")
    print(f"  SavedModel for TF Serving: {summary['export']}")
    print(f"  metrics, model and TensorBoard logs: {summary['output_dir']}/")
    print("  held-out test sentences, answered by the export:")
    for answer in summary["answers"]:
        print(f"    gold {answer['gold'][:3]}  ->  {answer['label'][:3]} "
              f"{answer['probability']:.2f}  \"{_shown(answer['text'])}\"")
