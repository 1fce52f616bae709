"""What the paper's attention dropout is worth in accuracy: `kbert finetune` on the movie-review
sentiment task with the checkpoint's rate (0.1) and with `--attention-dropout 0`, the setting
under which "auto" may run cuDNN's fused attention in training on a GPU (README, "On a GPU").

Each run is the CLI in a process of its own, as a user runs it (pretrained MiniLM, 3 epochs,
batch 32, length 128, no dev scoring between epochs), for every seed; the report holds each
run's dev and test accuracy and the per-rate means.

    python -m benchmarks.attention_dropout --seeds 0 1 2   # ~7 min a run on 2 CPU cores
    python -m benchmarks.attention_dropout --smoke --out /tmp/a.json
"""

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile

RATES = (0.1, 0.0)
SMOKE = ["--preset", "tiny", "--steps", "2", "--batch-size", "4", "--sequence-length", "32",
         "--max-train-examples", "8", "--max-eval-examples", "8"]


def finetune(rate, seed, output, extra):
    """dev / test accuracy and training seconds of one `kbert finetune` run."""
    command = [sys.executable, "-m", "kbert_cli", "finetune", "--task", "sentiment",
               "--attention-dropout", str(rate), "--seed", str(seed), "--no-validation",
               "--output", str(output), *extra]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["settings"]["attention_dropout"] == rate  # the flag reached the model
    return {"rate": rate, "seed": seed, "dev_accuracy": metrics["dev"]["accuracy"],
            "test_accuracy": metrics["test"]["accuracy"],
            "train_seconds": metrics["train_seconds"]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--smoke", action="store_true", help="tiny random model, 2 steps")
    parser.add_argument("--out", default="benchmarks/results/attention-dropout.json")
    args = parser.parse_args(argv)
    runs = []
    with tempfile.TemporaryDirectory() as folder:
        for seed in args.seeds:
            for rate in RATES:  # alternating, so slow spells of the machine hit both
                output = pathlib.Path(folder) / f"rate{rate}-seed{seed}"
                runs.append(finetune(rate, seed, output, SMOKE if args.smoke else []))
                print(json.dumps(runs[-1]), flush=True)
    means = {str(rate): {key: statistics.mean(r[key] for r in runs if r["rate"] == rate)
                         for key in ("dev_accuracy", "test_accuracy")} for rate in RATES}
    report = {"task": "sentiment", "smoke": args.smoke, "runs": runs, "means": means}
    pathlib.Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(means))
    return report


if __name__ == "__main__":
    main()
