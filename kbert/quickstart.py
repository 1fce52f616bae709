"""The main job on a built-in default: pretrained MiniLM → movie-review sentiment → a served model.

`quickstart()` fine-tunes the pretrained MiniLM on the movie-review sentiment data for a few
minutes, scores the dev and test splits, exports a versioned SavedModel that takes raw text,
then answers a few sentences through that export, loaded the way TensorFlow Serving loads it.
"""

import pathlib
import time

SENTENCES = (
    "A gorgeous, moving film with a terrific cast.",
    "Dull, overlong and completely predictable.",
    "The jokes land and the story never drags.",
    "I wanted to walk out after twenty minutes.",
)
LABELS = ("negative", "positive")


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
    result = serving(text=tf.constant(SENTENCES))
    answers = [
        {"text": text, "label": label.decode(), "probability": float(max(probs))}
        for text, label, probs in zip(SENTENCES, result["label"].numpy(),
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
    print("  answers from the export:")
    for answer in summary["answers"]:
        print(f"    {answer['label']:8s} {answer['probability']:.2f}  {answer['text']}")
