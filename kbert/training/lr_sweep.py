"""`lr_sweep`: the paper's fine-tuning recipe picks the learning rate on dev (section 4.1:
5e-5, 4e-5, 3e-5, 2e-5), one `finetune` run per rate."""

import json
import os
import pathlib

from kbert.training.finetune import finetune


def lr_sweep(task="sentiment", learning_rates=(5e-5, 4e-5, 3e-5, 2e-5),
             output_dir="runs/sweep", **kwargs):
    """`finetune` once per learning rate (into OUTPUT/lr_<rate>/) and keep the best on dev.

    The choice uses dev only (the task's metric: accuracy; pearson for regression); the chosen
    run's metrics, test included, are written to OUTPUT/metrics.json with `best_learning_rate`
    and every run's dev score (also returned). A sweep into an OUTPUT that holds finished runs
    needs `overwrite=True` (passed on to `finetune`).
    """
    output_dir = pathlib.Path(output_dir)
    runs, best = {}, None
    for rate in learning_rates:
        run_dir = output_dir / f"lr_{rate:g}"
        metrics = finetune(task=task, output_dir=run_dir, learning_rate=rate, **kwargs)
        key = "pearson" if metrics["kind"] == "regression" else "accuracy"
        runs[f"{rate:g}"] = {"dev": metrics["dev"], "output_dir": os.fspath(run_dir)}
        if best is None or metrics["dev"][key] > best[1]["dev"][key]:
            best = (rate, metrics)
    summary = {**best[1], "best_learning_rate": best[0],
               "best_output_dir": os.fspath(output_dir / f"lr_{best[0]:g}"), "runs": runs}
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "metrics.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return summary
