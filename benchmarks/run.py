"""kbert against keras-hub and Hugging Face transformers (PyTorch) on this machine.

Each package runs in a worker process of its own (`benchmarks.worker`); the driver asks them in
turn for the same measurement, round after round (the starting contestant rotates), and keeps
the median of the per-round medians, so slow drifts of a shared machine hit everyone alike.
The same run measures each package's best fp32 matmul; the best of them is the machine's peak,
and every result is also given as model FLOPs utilisation (MFU) against it. With the cases, it
also measures each package's matmuls at the model's own shapes (one layer's dense projections,
`flops.dense_layer_gflops`): no model code can run faster than its package's matmuls.

The peak is each worker's first job, and it leaves Hugging Face at its faster state: freeing
its large operands raises glibc malloc's mmap and trim thresholds (they adapt to the largest
block freed), after which PyTorch, which takes each step's tensors from malloc, reuses heap
memory instead of faulting in fresh pages every step. TensorFlow pools its own memory and is
unaffected. (Mini inference on the Intel machine: 203 sequences/s in a fresh process, 250 after
the peak or with MALLOC_TRIM_THRESHOLD_ and MALLOC_MMAP_THRESHOLD_ raised.)

Parts (all on by default):
  cases   train / infer / classify / pretrain at sequence 128, batch 16, for each preset (mini,
          base), and finetune: real movie-review sentences through each package's own pipeline
  sweep   sequence 64–512 at batch 16 and batch 1–64 at sequence 128 (mini, train and infer;
          kbert in its default mode, each peer in every mode)
  memory  peak RSS of a base training step at batch 32, sequence 128, each in a fresh process

kbert runs in its default mode (`compile()` with no speed flags: kbert chooses XLA on the
TensorFlow and JAX backends, `kbert.models.xla`) and, on TensorFlow, without XLA; keras-hub with
and without XLA. The ratios compare kbert's default mode with each peer's best mode. Under
KERAS_BACKEND=jax (e.g. on a GPU machine without TensorFlow) only kbert runs.
`--dtype mixed_bfloat16` makes kbert compute in bf16 (on either backend; the peers stay
float32, and MFU is still against the fp32 matmul peak). keras-hub trains with kbert's AdamW
class, so that the ratios compare models (Keras' own AdamW squares an embedding gradient's
repeated rows before summing them); `--peer-optimizer keras` gives it Keras' AdamW instead, as
its users would train.

    python -m benchmarks.run                  # everything, ~1 h on 2 cores (< 24 GB: see --skip)
    python -m benchmarks.run --parts cases --presets mini
    python -m benchmarks.run --parts cases --presets base --cases train infer pretrain \
        --skip "kbert (no XLA)"  # < 24 GB; the end-to-end case runs at the first preset
    python -m benchmarks.run --quick          # tiny sizes, seconds: checks the harness

On a GPU, `--gpu` runs `benchmarks.gpu` instead (kbert on JAX against Hugging Face eager and
`torch.compile`; the rest of the command line is its own): see that module.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import keras

from benchmarks import contestants, flops

DEFAULT = "kbert (default)"
"""kbert's mode with no speed flags (`compile()` as a user writes it): what the ratios report."""
SWEEP_SEQ = (64, 128, 256, 512)
SWEEP_BATCH = (1, 4, 16, 64)


def entries(backend, names):
    """(label, framework, xla) of every contestant mode this backend can run."""
    if backend == "jax":
        return [(DEFAULT, "kbert", None)]
    modes = {"kbert": [(DEFAULT, None), ("kbert (no XLA)", False)],
             "keras_hub": [("keras-hub (XLA)", True), ("keras-hub", False)],
             "hugging_face": [("HF PyTorch", None)]}
    return [(label, name, xla) for name in names for label, xla in modes[name]]


class Worker:
    """A `benchmarks.worker` process and its request/answer pipe."""

    def __init__(self, framework, options=(), log=None, env=None):
        command = [sys.executable, "-m", "benchmarks.worker", framework, *options]
        self.framework = framework
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=log or subprocess.DEVNULL, text=True, env=env,
                                        cwd=os.path.dirname(os.path.dirname(__file__)))

    def ask(self, **request):
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            line = self.process.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            code = self.process.wait(timeout=60)
            why = " (SIGKILL: out of memory?)" if code == -9 else ""
            raise WorkerDied(f"the {self.framework} worker died with exit code {code}{why}; "
                             "see its log")
        return json.loads(line)

    def close(self):
        try:
            self.process.stdin.close()
        except BrokenPipeError:  # it has died already
            pass
        self.process.wait(timeout=60)


class WorkerDied(RuntimeError):
    pass


def alternating_rounds(labels, measure, rounds):
    """({label: [sequences/s, one a round]}, {label: error}): `measure(label)` (a worker's
    answer) for every label in turn, round after round, the first label rotating so that slow
    drifts of a shared machine hit each alike. A label whose answer is an error is not asked
    again."""
    per_round, errors = {label: [] for label in labels}, {}
    for r in range(rounds):
        for label in labels[r % len(labels):] + labels[:r % len(labels)]:
            if label in errors:
                continue
            answer = measure(label)
            if "error" in answer:
                errors[label] = answer["error"]
                continue
            per_round[label].append(answer["sequences"] / statistics.median(answer["times"]))
            time.sleep(0.5)  # lets the last worker's spinning threads go to sleep
    return per_round, errors


class Bench:
    def __init__(self, args):
        self.args = args
        self.backend = keras.backend.backend()
        self.entries = [e for e in entries(self.backend, args.contestants)
                        if e[0] not in args.skip]
        self.log = open(args.log, "w") if args.log else None
        self.options = ["--peer-optimizer", args.peer_optimizer]
        if args.dtype:
            self.options += ["--dtype", args.dtype]
        self.workers = {}
        self.results = []

    def worker(self, framework):
        if framework not in self.workers:
            self.workers[framework] = Worker(framework, self.options, self.log)
        return self.workers[framework]

    def compare(self, case, preset, batch, seq, which=None, rounds=None, seconds=None):
        """Alternating rounds of one measurement over the contestants; appends the results."""
        chosen = [e for e in self.entries if (which is None or e[0] in which)
                  and not (case == "finetune" and e[1] == "hugging_face")]
        modes = {label: (framework, xla) for label, framework, xla in chosen}

        def measure(label):
            framework, xla = modes[label]
            try:
                return self.worker(framework).ask(
                    op="measure", case=case, preset=preset, batch=batch, seq=seq, xla=xla,
                    seconds=seconds or self.args.seconds)
            except WorkerDied as died:  # the others go on; a later request starts afresh
                self.workers.pop(framework).close()
                return {"error": str(died)}

        per_round, errors = alternating_rounds(list(modes), measure, rounds or self.args.rounds)
        for label, error in errors.items():
            print(f"  {label}: {error}", flush=True)
        for worker in self.workers.values():
            worker.ask(op="drop")
        from kbert.config import BertConfig  # not at the top: `--gpu` runs without TensorFlow

        # The finetune case trains on real sentences that kbert cuts to their batch's longest:
        # FLOPs at the nominal length would overstate its work, so it gets no utilisation.
        model_flops = (None if case == "finetune"
                       else flops.case_flops(case, BertConfig.preset(preset), seq))
        for label, framework, xla in chosen:
            if not per_round[label]:
                continue
            throughput = statistics.median(per_round[label])
            self.results.append({
                "case": case, "preset": preset, "batch": batch, "seq": seq,
                "contestant": label, "framework": framework, "xla": xla,
                "sequences_per_s": throughput, "rounds": per_round[label],
                "gflops_per_s": model_flops and throughput * model_flops / 1e9})
        shown = "  ".join(f"{label} {statistics.median(v):.1f}"
                          for label, v in per_round.items() if v)
        print(f"{case:9s} {preset:5s} b{batch:<3d} s{seq:<4d} seq/s: {shown}", flush=True)

    def gflops_of_each(self, **request):
        """{package: the GFLOP/s its worker answers to `request`}."""
        found = {}
        for framework in sorted({framework for _, framework, _ in self.entries}):
            answer = self.worker(framework).ask(**request)
            if "error" in answer:
                raise RuntimeError(f"{framework} worker, {request}: {answer['error']}")
            found[framework] = answer["gflops"]
        return found

    def peak(self):
        found = self.gflops_of_each(op="peak", seconds=self.args.matmul_seconds)
        print("best fp32 matmul GFLOP/s: "
              + ", ".join(f"{f} {g:.0f}" for f, g in found.items()), flush=True)
        return found

    def dense(self, preset, tokens):
        """{package: {mode: GFLOP/s}} on one encoder layer's dense projections at `tokens` rows."""
        found = self.gflops_of_each(op="dense", preset=preset, tokens=tokens,
                                    seconds=self.args.matmul_seconds)
        print(f"dense-layer matmuls, {preset}, {tokens} tokens, GFLOP/s: "
              + ", ".join(f"{f} {mode} {g:.0f}" for f, modes in found.items()
                          for mode, g in modes.items()), flush=True)
        return found

    def memory(self, preset, batch, seq):
        """Peak RSS of training steps, each contestant in a fresh process."""
        found = {}
        for label, framework, xla in self.entries:
            worker = Worker(framework, self.options, self.log)
            try:
                answer = worker.ask(op="measure", case="train", preset=preset, batch=batch,
                                    seq=seq, xla=xla, seconds=0.0)
                if "error" in answer:
                    print(f"  {label}: {answer['error']}", flush=True)
                    continue
                found[label] = worker.ask(op="rss")["peak_rss_mb"]
            finally:
                worker.close()
            print(f"memory {preset} b{batch} s{seq} {label}: peak RSS {found[label]:.0f} MB",
                  flush=True)
        return found

    def close(self):
        for worker in self.workers.values():
            worker.close()
        self.workers = {}


def best(results, case, preset, batch, seq, framework):
    rows = [r for r in results if (r["case"], r["preset"], r["batch"], r["seq"],
                                   r["framework"]) == (case, preset, batch, seq, framework)]
    return max(rows, key=lambda r: r["sequences_per_s"]) if rows else None


def default(results, case, preset, batch, seq):
    """kbert's default-mode result (its best mode where the default was not measured)."""
    rows = [r for r in results if (r["case"], r["preset"], r["batch"], r["seq"],
                                   r["contestant"]) == (case, preset, batch, seq, DEFAULT)]
    return rows[0] if rows else best(results, case, preset, batch, seq, "kbert")


def summary(results, peak):
    """kbert's default mode against each peer's best mode, and utilisation, per case."""
    lines, ratios = [], []
    keys = sorted({(r["case"], r["preset"], r["batch"], r["seq"]) for r in results},
                  key=lambda k: (k[1], contestants.CASES.index(k[0]), k[3], k[2]))
    for key in keys:
        ours = default(results, *key)
        if ours is None:
            continue
        row = {"case": key[0], "preset": key[1], "batch": key[2], "seq": key[3],
               "kbert": ours["contestant"], "kbert_sequences_per_s": ours["sequences_per_s"],
               "kbert_mfu": ours["gflops_per_s"] and ours["gflops_per_s"] / peak}
        text = (f"{key[0]:9s} {key[1]:5s} b{key[2]:<3d} s{key[3]:<4d} "
                f"kbert {ours['sequences_per_s']:7.1f} seq/s  MFU {_percent(row['kbert_mfu'])}")
        for peer in ("keras_hub", "hugging_face"):
            theirs = best(results, *key, peer)
            if theirs:
                row[f"vs_{peer}"] = ours["sequences_per_s"] / theirs["sequences_per_s"]
                mfu = theirs["gflops_per_s"] and theirs["gflops_per_s"] / peak
                text += (f"  ×{row[f'vs_{peer}']:.2f} {theirs['contestant']} "
                         f"({theirs['sequences_per_s']:.1f}, MFU {_percent(mfu)})")
        ratios.append(row)
        lines.append(text)
    return lines, ratios


def _percent(fraction):
    return "  n/a" if fraction is None else f"{fraction:5.1%}"


def plot(results, path, preset):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    for row, case in enumerate(("train", "infer")):
        for col, (axis, fixed, values) in enumerate((("seq", ("batch", 16), SWEEP_SEQ),
                                                     ("batch", ("seq", 128), SWEEP_BATCH))):
            ax = axes[row][col]
            for label in dict.fromkeys(r["contestant"] for r in results):
                found = {}  # x → throughputs (the shared point may be measured twice)
                for r in results:
                    if (r["contestant"] == label and r["case"] == case and r["preset"] == preset
                            and r[fixed[0]] == fixed[1] and r[axis] in values):
                        found.setdefault(r[axis], []).append(r["sequences_per_s"])
                points = sorted((x, statistics.median(v)) for x, v in found.items())
                if len(points) > 1:
                    ax.plot(*zip(*points), marker="o", label=label)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("sequence length" if axis == "seq" else "batch size")
            ax.set_ylabel("sequences / s")
            ax.set_title(f"{case}, {preset}, {fixed[0]} {fixed[1]}")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)


def cpu():
    """The CPU's model name and its widest vector extension, from /proc/cpuinfo where there is
    one: results from different machines are not comparable, and the report should say which."""
    found = {"cpu": platform.processor() or platform.machine()}
    try:
        with open("/proc/cpuinfo") as info:
            fields = {key.strip(): value.strip()
                      for key, value in (line.split(":", 1) for line in info if ":" in line)}
    except OSError:
        return found
    found["cpu"] = fields.get("model name", found["cpu"])
    # Virtual machines often hide the model name ("Intel(R) Xeon(R) Processor"); family and
    # model still tell one generation from another.
    found["family_model"] = f"{fields.get('cpu family', '?')}/{fields.get('model', '?')}"
    flags = set(fields.get("flags", "").split())
    found["vector"] = next((isa for isa in ("avx512f", "avx2", "avx") if isa in flags), None)
    return found


def versions():
    found = {"python": platform.python_version(), "keras": keras.__version__,
             "backend": keras.backend.backend()}
    for name in ("tensorflow", "keras_hub", "torch", "transformers", "jax"):
        try:
            found[name] = __import__(name).__version__
        except ImportError:
            pass
    return found


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--parts", nargs="+", default=["cases", "sweep", "memory"],
                        choices=["cases", "sweep", "memory"])
    parser.add_argument("--cases", nargs="+", default=list(contestants.CASES),
                        choices=contestants.CASES)
    parser.add_argument("--presets", nargs="+", default=["mini", "base"])
    parser.add_argument("--contestants", nargs="+", default=list(contestants.BUILDERS),
                        choices=list(contestants.BUILDERS))
    parser.add_argument("--skip", nargs="+", default=[], metavar="LABEL",
                        help='contestant modes to leave out, e.g. "kbert (no XLA)" (saves '
                             "memory at base size)")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0,
                        help="minimum timed seconds per measurement (default 3)")
    parser.add_argument("--dtype", default=None, help="kbert dtype policy, e.g. mixed_bfloat16")
    parser.add_argument("--peer-optimizer", choices=["kbert", "keras"], default="kbert",
                        help="keras-hub trains with kbert's AdamW (default: the comparison is "
                             "of models) or with Keras' own, as its users would")
    parser.add_argument("--quick", action="store_true",
                        help="tiny preset, one round, short timings (checks the harness)")
    parser.add_argument("--out", default="benchmarks/results/cpu.json")
    parser.add_argument("--plot", default="docs/benchmarks.png")
    parser.add_argument("--log", default=None, help="file for the workers' stderr")
    args = parser.parse_args(argv)
    args.matmul_seconds = flops.MATMUL_SECONDS
    if args.quick:
        args.presets, args.rounds, args.seconds, args.matmul_seconds = ["tiny"], 1, 0.2, 0.05
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--gpu" in argv:  # kbert on JAX against Hugging Face on one GPU: benchmarks/gpu.py
        from benchmarks import gpu

        sys.exit(gpu.main([a for a in argv if a != "--gpu"]))
    args = parse(argv)
    bench = Bench(args)
    if bench.backend == "jax":
        args.cases = [c for c in args.cases if c != "finetune"]  # tf.data needs TensorFlow
    started = time.time()
    report = {"machine": {**cpu(), "cores": os.cpu_count()},
              "versions": versions(), "dtype": args.dtype or "float32",
              "keras_hub_optimizer": args.peer_optimizer}
    try:
        matmul = bench.peak()
        peak = max(matmul.values())
        report["machine"].update(matmul_gflops=matmul, peak_gflops=peak)
        if "cases" in args.parts:
            report["machine"]["dense_layer_gflops"] = {
                preset: bench.dense(preset, args.batch * args.seq) for preset in args.presets}
            for preset in args.presets:
                for case in args.cases:
                    if case == "finetune" and preset != args.presets[0]:
                        continue  # the end-to-end comparison runs at the first preset only
                    batch = 32 if case == "finetune" else args.batch
                    bench.compare(case, preset, batch, args.seq)
                    save(report, bench, peak, args.out)
                bench.close()  # fresh workers per preset: memory a process freed stays its own
        if "sweep" in args.parts:
            preset = args.presets[0]
            # kbert in its default mode, each peer in every mode: which of a peer's modes is
            # faster depends on the machine and the size.
            which = [bench.entries[0][0]] + [label for label, fw, _ in bench.entries
                                             if fw != "kbert"]
            seqs, batches = ((32, 64), (1, 4)) if args.quick else (SWEEP_SEQ, SWEEP_BATCH)
            for case in ("train", "infer"):
                for seq in seqs:
                    if args.quick or seq != args.seq or "cases" not in args.parts:
                        bench.compare(case, preset, args.batch, seq, which, rounds=2,
                                      seconds=min(args.seconds, 2.0))
                for batch in batches:  # (args.batch, args.seq) was measured just above
                    if args.quick or batch != args.batch:
                        bench.compare(case, preset, batch, args.seq, which, rounds=2,
                                      seconds=min(args.seconds, 2.0))
                save(report, bench, peak, args.out)
            plot(bench.results, args.plot, preset)
            report["plot"] = args.plot
        if "memory" in args.parts:
            bench.close()  # the sweep's workers would hold their memory beside the fresh processes
            preset = "tiny" if args.quick else "base"
            report["memory"] = {"preset": preset, "batch": 32, "seq": args.seq,
                                "peak_rss_mb": bench.memory(preset, 32, args.seq)}
    finally:
        bench.close()
    report["minutes"] = (time.time() - started) / 60
    lines = save(report, bench, peak, args.out)
    print("\nkbert's default mode against each peer's best mode (× > 1: kbert faster); "
          f"MFU against {peak:.0f} GFLOP/s")
    print("\n".join(lines))
    print(f"\nwrote {args.out}" + (f" and {args.plot}" if "plot" in report else ""))
    return report


def save(report, bench, peak, path):
    """Writes the report with every result so far (a long run keeps what it measured)."""
    lines, ratios = summary(bench.results, peak)
    report.update(results=bench.results, summary=ratios)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
    return lines


if __name__ == "__main__":
    main()
