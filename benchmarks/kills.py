"""`kill -9` of `kbert pretrain`, `kbert finetune` and `kbert export` at random (seeded)
moments, each killed run rerun until it finishes, and what is left checked:

- pretrain / finetune: the finished run took as many optimizer steps as an uninterrupted run
  of the same command; pre-training, deterministic for a fresh run, also ends with the same
  weights (sha256) when no attempt got as far as a checkpoint (a resumed attempt draws a fresh
  data order from its start step, so later resumes are checked on their step count only);
  no staging directory of a killed save survives the finishing run.
- finetune --overwrite of a finished run: after every kill the old run is whole (its files'
  sha256 unchanged) until the new one completes; the rerun resumes from the new run's own
  checkpoints and ends with the steps of an uninterrupted run, with no staging left.
- export: after every kill, every all-digit directory under the base is a complete version
  (the files of an uninterrupted export); after the next finished export no staging or
  scratch directory of a killed one is left. Half the kills hit `--version 1 --overwrite`.

    python -m benchmarks.kills --kills 20 --seed 0 --command all
writes benchmarks/results/kills.json (counts per command); `--command overwrite --kills 10`
runs the killed `--overwrite` alone.
"""

import argparse
import itertools
import json
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

_SCRIPT = pathlib.Path(sys.executable).parent / "kbert"
KBERT = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "kbert_cli"]
RESULTS = pathlib.Path(__file__).parent / "results" / "kills.json"
CHECKPOINT_EVERY = {"pretrain": 4, "finetune": 4}
"""Steps between checkpoints of the runs below (finetune: one epoch of 32 examples / 8)."""
KILLS_PER_RUN = 4
"""A killed run gets up to this many kills before it is let finish."""
FINISHED = {"finetune": "run.json", "pretrain": "model"}
"""What a run writes last (pretrain's model/ folder appears whole, by a rename): once it is
there the run is done and a kill would hit only the process's exit (a finetune rerun would train
afresh), so the run is let finish instead."""


def _corpus(work):
    from kbert.data.pretraining import wikipedia_documents, write_documents

    path = work / "wiki.txt"
    if not path.exists():
        write_documents(itertools.islice(wikipedia_documents(), 200), path)
    return path


def command_line(command, work, output):
    """The CLI call of one `command` writing to `output` (tiny model, small data)."""
    if command == "pretrain":
        return KBERT + ["pretrain", "--preset", "tiny", "--corpus", _corpus(work),
                        "--steps", "24", "--checkpoint-every", "4", "--batch-size", "8",
                        "--sequence-length", "32", "--learning-rate", "1e-3",
                        "--output", output]
    if command == "finetune":
        return KBERT + ["finetune", "--task", "sentiment", "--preset", "tiny", "--epochs", "4",
                        "--batch-size", "8", "--max-train-examples", "32",
                        "--sequence-length", "32", "--max-eval-examples", "16",
                        "--output", output]
    raise ValueError(command)


def _env():
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONWARNINGS": "ignore"}


def _start(cmd):
    """A running `cmd`; its stderr goes to a file (a pipe nobody reads could fill and block)."""
    err = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen([str(c) for c in cmd], env=_env(), stdout=subprocess.DEVNULL,
                            stderr=err, text=True)
    proc.err_file = err
    return proc


def _stderr(proc):
    proc.err_file.seek(0)
    return proc.err_file.read()[-3000:]


def _finish(cmd, timeout=900):
    done = subprocess.run([str(c) for c in cmd], env=_env(), capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{cmd} failed:\n{done.stderr[-3000:]}")


def _timed_reference(cmd, checkpoints):
    """Runs `cmd` to the end: (seconds to its first checkpoint, seconds in all)."""
    began, first = time.perf_counter(), None
    proc = _start(cmd)
    while proc.poll() is None:
        if first is None and checkpoints.is_dir() and any(checkpoints.glob("step-*")):
            first = time.perf_counter() - began
        time.sleep(0.05)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd} failed:\n{_stderr(proc)}")
    duration = time.perf_counter() - began
    return first or duration, duration


def _kill_at(cmd, delay, latest=None, after_step=0, finished=None):
    """Starts `cmd`; once `latest/state.json` records `after_step` or more (at once when
    `after_step` is 0), waits `delay` s more and kills it with SIGKILL. True if it was killed,
    False if it finished first (or had written `finished`, its last file, by then)."""
    proc = _start(cmd)
    while after_step and proc.poll() is None and _latest_step(latest) < after_step:
        time.sleep(0.05)
    try:
        proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        if finished is None or not finished.exists():
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            return True
        proc.wait()  # the run is done: let it exit
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd} failed:\n{_stderr(proc)}")
    return False


def _latest_step(latest):
    try:
        return json.loads((latest / "state.json").read_text())["step"]
    except (OSError, ValueError, KeyError):
        return -1


def _leftovers(directory):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # before `import kbert` loads TF
    from kbert.atomic import staging_entries

    directory = pathlib.Path(directory)
    names = [p.name for p, *_ in staging_entries(directory)] if directory.is_dir() else []
    return names + [p.name for p in directory.glob(".kbert-export-*")]


def _steps(metrics, command):
    return metrics["steps"] if command == "pretrain" else metrics["optimizer_steps"]


def kill_training(command, kills, rng, work):
    """Kills runs of `command` `kills` times in all; returns the counts."""
    reference = work / f"{command}-reference"
    first, duration = _timed_reference(command_line(command, work, reference),
                                       reference / "checkpoints")
    expected = json.loads((reference / "metrics.json").read_text())
    total, every = _steps(expected, command), CHECKPOINT_EVERY[command]
    counts = {"kills": 0, "runs": 0, "attempts": 0, "step_mismatches": 0,
              "weights_checked": 0, "weight_mismatches": 0, "resumed_runs": 0,
              "leftover_staging": 0, "reference_seconds": round(duration, 1),
              "reference_first_checkpoint_seconds": round(first, 1)}
    while counts["kills"] < kills:
        output = work / f"{command}-{counts['runs']}"
        cmd = command_line(command, work, output)
        finished = False
        for _ in range(min(KILLS_PER_RUN, kills - counts["kills"])):
            counts["attempts"] += 1
            # during start-up, or at a random moment after a random checkpoint of the run
            step = rng.choice(range(0, total, every))
            delay = rng.uniform(0, first if step == 0 else (duration - first) * every / total)
            finished = not _kill_at(cmd, delay, output / "checkpoints" / "latest", step,
                                    output / FINISHED[command] if command in FINISHED else None)
            if finished:
                break
            counts["kills"] += 1
        if not finished:
            counts["attempts"] += 1
            _finish(cmd)
        counts["runs"] += 1
        metrics = json.loads((output / "metrics.json").read_text())
        counts["step_mismatches"] += _steps(metrics, command) != _steps(expected, command)
        counts["resumed_runs"] += metrics.get("resumed_from_step") is not None
        if command == "pretrain" and metrics.get("resumed_from_step") is None:
            counts["weights_checked"] += 1
            counts["weight_mismatches"] += (metrics["weights_sha256"]
                                            != expected["weights_sha256"])
        counts["leftover_staging"] += len(_leftovers(output / "checkpoints"))
        shutil.rmtree(output, ignore_errors=True)
    return counts


def _hashes(folder):
    import hashlib

    folder = pathlib.Path(folder)
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def kill_overwrite(kills, rng, work, run_dir=None):
    """Kills `kbert finetune --overwrite` of a finished run `kills` times (during start-up, or
    at a random moment after a random checkpoint of the new run); returns the counts."""
    from kbert.outputs import stage_path

    reference = run_dir or work / "finetune-reference"
    if not (reference / "metrics.json").is_file():
        _finish(command_line("finetune", work, reference))
    expected = json.loads((reference / "metrics.json").read_text())
    target = work / "overwritten"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(reference, target)
    cmd = command_line("finetune", work, target) + ["--overwrite"]
    staging = stage_path(target)
    first, duration = _timed_reference(cmd, staging / "checkpoints")
    total, every = expected["optimizer_steps"], CHECKPOINT_EVERY["finetune"]
    counts = {"kills": 0, "old_run_whole": 0, "old_run_lost": 0, "replacements": 0,
              "resumed_replacements": 0, "step_mismatches": 0, "leftover_staging": 0,
              "reference_seconds": round(duration, 1)}
    old = _hashes(target)

    def replaced():
        metrics = json.loads((target / "metrics.json").read_text())
        counts["replacements"] += 1
        counts["resumed_replacements"] += metrics.get("resumed_from_step") is not None
        counts["step_mismatches"] += metrics["optimizer_steps"] != total
        counts["leftover_staging"] += os.path.lexists(staging)
        return _hashes(target)

    while counts["kills"] < kills:
        step = rng.choice(range(0, total, every))
        delay = rng.uniform(0, first if step == 0 else (duration - first) * every / total)
        killed = _kill_at(cmd, delay, staging / "checkpoints" / "latest", step)
        now = _hashes(target)
        if now == old:
            counts["kills"] += killed
            counts["old_run_whole"] += killed
        elif os.path.lexists(staging) or not (target / "run.json").is_file():
            counts["kills"] += 1
            counts["old_run_lost"] += 1
            old = now
        else:  # the new run was complete and swapped in
            old = replaced()
    _finish(cmd)  # the replacement the last kill interrupted
    replaced()
    return counts


def _files(version):
    return sorted(str(p.relative_to(version)) for p in pathlib.Path(version).rglob("*"))


def kill_export(kills, rng, work, run_dir=None):
    """Kills `kbert export` `kills` times; returns the counts."""
    if run_dir is None:
        run_dir = work / "export-run"
        _finish(command_line("finetune", work, run_dir))
    base = work / "served"
    began = time.perf_counter()
    _finish(KBERT + ["export", run_dir, base, "--no-warmup"])
    duration = time.perf_counter() - began
    complete = _files(base / "1")
    counts = {"kills": 0, "exports_finished": 0, "incomplete_versions": 0,
              "leftover_staging_after_next_export": 0, "missing_after_next_export": 0,
              "reference_seconds": round(duration, 1)}
    while counts["kills"] < kills:
        overwrite = rng.random() < 0.5
        cmd = KBERT + ["export", run_dir, base, "--no-warmup"] + (
            ["--version", "1", "--overwrite"] if overwrite else [])
        killed = _kill_at(cmd, rng.uniform(0.1, 1.0) * duration)
        counts["kills"] += killed
        counts["exports_finished"] += not killed
        versions = [p for p in base.iterdir() if p.name.isdigit()]
        counts["incomplete_versions"] += sum(_files(v) != complete for v in versions)
        if killed and rng.random() < 0.5:  # the next export cleans up after the killed ones
            _finish(KBERT + ["export", run_dir, base, "--no-warmup", "--version", "1",
                             "--overwrite"])
            counts["leftover_staging_after_next_export"] += len(_leftovers(base))
            counts["missing_after_next_export"] += not (base / "1" / "saved_model.pb").is_file()
    return counts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20, help="kills per command")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--command", default="all",
                        choices=("pretrain", "finetune", "overwrite", "export", "all"))
    parser.add_argument("--output", default=str(RESULTS), help="where the counts go (JSON)")
    args = parser.parse_args(argv)
    commands = (("pretrain", "finetune", "overwrite", "export") if args.command == "all"
                else (args.command,))
    output = pathlib.Path(args.output)  # the commands not run keep their last counts
    results = json.loads(output.read_text()) if output.is_file() else {}
    with tempfile.TemporaryDirectory(prefix="kbert-kills-") as work:
        work = pathlib.Path(work)
        for command in commands:
            rng = random.Random(f"{args.seed}-{command}")
            if command == "overwrite":
                results[command] = kill_overwrite(args.kills, rng, work)
            elif command == "export":
                reference = work / "finetune-reference"  # a run to export, when there is one
                results[command] = kill_export(args.kills, rng, work,
                                               reference if reference.is_dir() else None)
            else:
                results[command] = kill_training(command, args.kills, rng, work)
            results[command].update(seed=args.seed, kills_asked=args.kills)
            print(command, json.dumps(results[command]), flush=True)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
