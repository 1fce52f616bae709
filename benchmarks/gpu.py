"""kbert (Keras 3 on JAX) against Hugging Face BERT (PyTorch, eager and `torch.compile`) on one GPU.

Each contestant runs in a process of its own (`benchmarks.gpu_worker`), one after the other, on
the same random batch for the same number of steps: BERT pre-training (MLM + NSP, AdamW) and
classifier inference, in bf16, as each package's users run them (kbert through `model.fit` and
`model.predict`). The device's peak is the best bf16 matmul that JAX or PyTorch runs on it, and
kbert's training throughput is also given as model FLOPs utilisation (MFU) against it.

The report, `benchmarks/results/gpu/<preset>-seq<seq>[-batch<batch>].json`:
    {"device": "...", "train": {"kbert": s, "hf_eager": s, "hf_compile": s, "kbert_mfu": f},
     "infer": {"kbert": s, "hf_eager": s, "hf_compile": s}, ...}
in sequences per second, with the ratios, every window, the settings and the versions beside.

On the GPU machine (JAX, PyTorch and transformers, no TensorFlow; Keras from a wheel, see the
README's "On a GPU"):
    KERAS_BACKEND=jax python -m benchmarks.run --gpu                # base, seq 128, batch 256
    KERAS_BACKEND=jax python -m benchmarks.run --gpu --batch 64
    KERAS_BACKEND=jax python -m benchmarks.run --gpu --seq 512 --batch 64
    python -m benchmarks.gpu --smoke --out /tmp/smoke.json     # tiny, any machine: the harness
"""

import argparse
import json
import math
import os
import subprocess
import sys

CONTESTANTS = ("kbert", "hf_eager", "hf_compile")
MEASURED_BY = {"kbert": "peak", "hf_eager": "peak"}  # the matmul peak: JAX's and PyTorch's
SMOKE = {"preset": "tiny", "batch": 4, "seq": 32, "steps": 1, "windows": 2, "dtype": "float32",
         "compile_backend": "eager", "matmul_sizes": [256], "matmul_seconds": 0.05}
"""`--smoke`: sizes that run in seconds on a CPU; `torch.compile` captures the graph but runs it
eagerly (Inductor would compile C++ for minutes)."""


def run_worker(contestant, cases, args):
    """The worker's answers, one per case it finished, and its error (None if it finished)."""
    command = [sys.executable, "-m", "benchmarks.gpu_worker", contestant, *cases,
               "--preset", args.preset, "--batch", str(args.batch), "--seq", str(args.seq),
               "--masked", str(args.masked), "--steps", str(args.steps),
               "--windows", str(args.windows), "--dtype", args.dtype,
               "--attention", args.attention, "--compile-backend", args.compile_backend,
               "--steps-per-execution", str(args.steps_per_execution),
               "--matmul-seconds", str(args.matmul_seconds),
               "--matmul-sizes", *map(str, args.matmul_sizes)]
    env = dict(os.environ)
    if args.xla_flags and contestant == "kbert":  # Hugging Face's workers run no XLA
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {args.xla_flags}".strip()
    log = open(args.log, "a") if args.log else None
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=log, text=True, env=env,
                              cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    finally:
        if log:
            log.close()
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    error = None if done.returncode == 0 else (
        f"exit code {done.returncode} after {len(answers)} of {len(cases)} cases")
    return answers, error


def report(answers, errors, args):
    """The result file's content from every worker's answers."""
    found = {(a["contestant"], a["case"]): a for a in answers}
    rate = lambda who, case: found.get((who, case), {}).get("sequences_per_s")
    peaks = {who: found[(who, "peak")]["gflops"] for who in MEASURED_BY if (who, "peak") in found}
    peak = max(peaks.values(), default=None)
    result = {"device": next((a["device"] for a in answers), None)}
    for case in ("train", "infer"):
        result[case] = {who: rate(who, case) for who in CONTESTANTS}
    kbert_train = found.get(("kbert", "train"))
    result["train"]["kbert_mfu"] = (kbert_train and peak and kbert_train["sequences_per_s"]
                                    * kbert_train["flops_per_sequence"] / (peak * 1e9))
    result["kbert_vs"] = {f"{case}_{peer}": rate("kbert", case) / rate(peer, case)
                          for case in ("train", "infer") for peer in ("hf_eager", "hf_compile")
                          if rate("kbert", case) and rate(peer, case)}
    result["peak_tflops"] = {who: g / 1000 for who, g in peaks.items()}
    result["windows"] = {f"{a['contestant']}/{a['case']}": a["windows"]
                         for a in answers if "windows" in a}
    result["compute_dtype"] = {f"{a['contestant']}/{a['case']}": a["compute_dtype"]
                               for a in answers if "compute_dtype" in a}
    result["versions"] = {name: version for a in answers
                          for name, version in a["versions"].items()}
    result["settings"] = {key: getattr(args, key) for key in (
        "preset", "batch", "seq", "masked", "steps", "windows", "dtype", "attention",
        "steps_per_execution", "xla_flags", "compile_backend", "smoke")}
    if errors:
        result["errors"] = errors
    return result


def default_out(args):
    batch = "" if args.batch == 256 else f"-batch{args.batch}"
    return os.path.join("benchmarks", "results", "gpu", f"{args.preset}-seq{args.seq}{batch}.json")


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--preset", default="base")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--masked", type=int, default=None,
                        help="MLM predictions per sequence (default: 15%% of --seq, rounded "
                             "up: 20 at 128, Google's setting)")
    parser.add_argument("--steps", type=int, default=20, help="batches per timed window")
    parser.add_argument("--windows", type=int, default=5, help="timed windows (median kept)")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16",
                                                                "float32"])
    parser.add_argument("--attention", default="auto",
                        help="kbert's attention_implementation (auto, einsum, fused, xla, flash)")
    parser.add_argument("--steps-per-execution", type=int, default=1,
                        help="kbert's compile(steps_per_execution=): batches per compiled call "
                             "(Keras' default 1; fit and predict then return to Python after "
                             "each batch)")
    parser.add_argument("--xla-flags", default="",
                        help="added to XLA_FLAGS for kbert's worker, a compiler setting to time "
                             "against the default (write --xla-flags=--xla_gpu_...)")
    parser.add_argument("--compile-backend", default="inductor")
    parser.add_argument("--matmul-sizes", type=int, nargs="+", default=[2048, 4096, 8192])
    parser.add_argument("--matmul-seconds", type=float, default=0.5,
                        help="least time of one timing of a matmul rate")
    parser.add_argument("--contestants", nargs="+", default=list(CONTESTANTS),
                        choices=CONTESTANTS)
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes and few steps, to check the harness (needs --out)")
    parser.add_argument("--out", default=None, help="default: " + default_out(
        argparse.Namespace(preset="<preset>", seq="<seq>", batch=256)))
    parser.add_argument("--log", default=None, help="file for the workers' stderr")
    args = parser.parse_args(argv)
    if args.smoke:
        if args.out is None:
            parser.error("--smoke needs --out: a smoke run is no result")
        for key, value in SMOKE.items():
            setattr(args, key, value)
    args.masked = args.masked or math.ceil(0.15 * args.seq)
    args.out = args.out or default_out(args)
    return args


def main(argv=None):
    args = parse(argv)
    answers, errors = [], {}
    for contestant in args.contestants:
        cases = ([MEASURED_BY[contestant]] if contestant in MEASURED_BY else []) + [
            "train", "infer"]
        found, error = run_worker(contestant, cases, args)
        answers += found
        for answer in found:
            shown = (f"{answer['gflops'] / 1000:.1f} TFLOP/s matmul peak" if "gflops" in answer
                     else f"{answer['sequences_per_s']:.1f} sequences/s")
            print(f"{contestant:10s} {answer['case']:5s} {shown}", flush=True)
        if error:
            errors[contestant] = error
            print(f"{contestant}: {error}", flush=True)
        result = save(report(answers, errors, args), args.out)  # a cut-off run keeps the rest
    mfu = result["train"]["kbert_mfu"]
    print(f"kbert against HF: {json.dumps(result['kbert_vs'])}; training MFU "
          f"{'n/a' if mfu is None else f'{mfu:.1%}'}\nwrote {args.out}")
    return 1 if errors else 0


def save(result, path):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    sys.exit(main())
