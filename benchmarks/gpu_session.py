"""Every GPU measurement still owed, in one command, most important first, within a deadline.

A lent GPU comes for a few minutes of device time, start-up included, and each call to it is
one command: this runs the owed measurements one after another, each in a process group of
its own, and stops starting new ones when the deadline is near, so that one call brings back
whatever fitted. `OUT_DIR/session.json` records each step's command, exit code, seconds and
status (done, failed, timed out, not started), so a second call can run what is left
(`--steps`); `OUT_DIR/session.log` holds every step's output. Eight files in all, what a
device call returns. Results keep the names the README cites under
`benchmarks/results/gpu/`.

On the GPU machine, after the README's "On a GPU" recipe (Keras from wheels, PYTHONPATH):
    python3 -m benchmarks.gpu_session --out-dir "$OUT" --seconds 540
    python3 -m benchmarks.gpu_session --out-dir "$OUT" --steps no-triton-gemm base-seq128-batch64
    python3 -m benchmarks.gpu_session --dry-run       # the commands, nothing run
"""

import argparse
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

MIN_START_SECONDS = 60
"""A step starts only with this much of the deadline left: less fits no compile of BERT-base."""


@dataclasses.dataclass(frozen=True)
class Step:
    name: str
    module: str
    args: tuple  # the module's flags, without --out (the session sets it)

    def argv(self, out_dir):
        return ["-m", self.module, *self.args, "--out", os.path.join(out_dir, f"{self.name}.json")]


PLAN = (
    # The report: BERT-base pre-training and inference, sequence 128, batch 256, with
    # "auto"'s kernels (flash in training since the H200 of 2026-12-04, cuDNN at inference).
    Step("base-seq128", "benchmarks.gpu", ()),
    # Where the time goes now (fit / predict against the bare step, GPU kernels by kind and the
    # layers fused into each): what the way to the 1.3x and 50% MFU goes through. Never
    # yet run with flash.
    Step("profile", "benchmarks.gpu_profile", ("train", "infer", "--trace-dir", "/tmp/trace")),
    # Four batches a compiled call (Keras' steps_per_execution), never measured on a GPU: does
    # it take fit's and predict's per-batch cost (2% and 10% on the H100) off the step?
    Step("steps-per-execution", "benchmarks.gpu",
         ("--steps-per-execution", "4", "--contestants", "kbert")),
    # XLA's Triton GEMMs off, cuBLAS for every matmul: in the H100's training profile (einsum
    # era) single Triton GEMM fusions (`gemm_fusion_dot*`) took 0.8-2.1 ms a step each, where
    # the step's largest matmul (the MLM decoder's, 240 GFLOP) needs 0.4 ms at the bf16 peak.
    # Which matmuls they are, with flash in place, the profile above says.
    Step("no-triton-gemm", "benchmarks.gpu",
         ("--xla-flags=--xla_gpu_enable_triton_gemm=false", "--contestants", "kbert")),
    Step("base-seq512-batch64", "benchmarks.gpu", ("--seq", "512", "--batch", "64")),
    Step("base-seq128-batch64", "benchmarks.gpu", ("--batch", "64")),
)
MAX_STEPS = 6
"""A device call brings back 8 files: `session.json`, `session.log` and one result a step."""
# Measured and kept out of the plan: `flash-attention` (`benchmarks.gpu_attention
# --implementation flash --tiles ...`), which chose the flash kernel's tiles, and
# `einsum-training` (`benchmarks.gpu --attention einsum --contestants kbert`), against which
# flash was chosen in training: both on the H200 of 2026-12-04.


def run(steps, out_dir, seconds, extra=(), min_start=MIN_START_SECONDS):
    """Runs `steps` (each with the flags `extra` too) in order, starting none with less than
    `min_start` of `seconds` left; returns one record per step, also written to
    OUT_DIR/session.json after each."""
    os.makedirs(out_dir, exist_ok=True)
    deadline = time.monotonic() + seconds
    records = []
    for step in steps:
        command = [sys.executable, *step.argv(out_dir), *extra]
        left = deadline - time.monotonic()
        record = {"step": step.name, "command": command[1:], "returncode": None, "seconds": 0.0}
        if left < min_start:
            record["status"] = "not started"
        else:
            with open(os.path.join(out_dir, "session.log"), "a") as log:
                log.write(f"==> {step.name}: {' '.join(command)}\n")
                log.flush()
                record.update(_run_one(command, left, log))
            print(f"{step.name}: {record['status']} in {record['seconds']:.0f} s", flush=True)
        records.append(record)
        with open(os.path.join(out_dir, "session.json"), "w") as f:
            json.dump({"seconds": seconds, "steps": records}, f, indent=1)
    return records


def _run_one(command, timeout, log):
    """One step in a process group of its own, its output to the file `log`: on timeout the
    whole group goes (the harness's workers too, which would otherwise keep the GPU). A group,
    not a session: the device machine ends a command's leftover processes unless they started
    a session of their own."""
    start = time.monotonic()
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, process_group=0,
                               cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        code = process.wait(timeout=timeout)
        status = "done" if code == 0 else "failed"
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        code, status = process.wait(), "timed out"
    return {"returncode": code, "status": status, "seconds": time.monotonic() - start}


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    names = [step.name for step in PLAN]
    parser.add_argument("--out-dir", default=os.path.join("benchmarks", "results", "gpu"))
    parser.add_argument("--seconds", type=float, default=540,
                        help="deadline for the whole session (default 540: one 10-minute call)")
    parser.add_argument("--steps", nargs="+", choices=names, default=names,
                        help="the steps to run, in the plan's order (default: all)")
    parser.add_argument("--smoke", action="store_true",
                        help="each step at its module's smoke size (checks the plan on a CPU)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands only")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    steps = [step for step in PLAN if step.name in args.steps]
    extra = ("--smoke",) if args.smoke else ()
    if args.dry_run:
        for step in steps:
            print(" ".join(["python3", *step.argv(args.out_dir), *extra]))
        return 0
    records = run(steps, args.out_dir, args.seconds, extra=extra)
    return 0 if all(r["status"] == "done" for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
