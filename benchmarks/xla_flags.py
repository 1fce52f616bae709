"""kbert's default path under several sets of XLA flags, on this machine (TensorFlow backend).

XLA reads `XLA_FLAGS` once per process, so each set runs in a worker process of its own
(`benchmarks.worker`); the driver asks them in turn for the same measurement, round after
round (the first one rotates), and keeps each set's median, as `benchmarks.run` does. The
flags a set names are added to any `XLA_FLAGS` already set. Which set is fastest depends on
the CPU: the README's "On an Intel Xeon" has the numbers.

    python -m benchmarks.xla_flags --out benchmarks/results/intel/xla-flags-mini.json
    python -m benchmarks.xla_flags --cases infer --sets default= \\
        eigen=--xla_cpu_experimental_ynn_fusion_type= --out /tmp/xla-flags.json
"""

import argparse
import json
import os
import statistics

from benchmarks.run import Worker, WorkerDied, alternating_rounds, cpu

SETS = {
    "default": "",
    "eigen dots": "--xla_cpu_experimental_ynn_fusion_type=",  # YNNPACK off: XLA's own dots
    "oneDNN dot fusions": ("--xla_cpu_experimental_onednn_fusion_type=dot "
                           "--xla_cpu_experimental_ynn_fusion_type="),
    "oneDNN custom calls": "--xla_cpu_use_onednn=true --xla_cpu_experimental_ynn_fusion_type=",
}


def compare(sets, cases, preset, batch, seq, rounds, seconds):
    """{case: {set: {"sequences_per_s": median, "rounds": [...]} or {"error": ...}}}."""
    workers = {}
    for name, flags in sets.items():
        env = {**os.environ, "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip()}
        workers[name] = Worker("kbert", env=env)
    results = {}
    try:
        for case in cases:
            def measure(name):
                try:
                    return workers[name].ask(op="measure", case=case, preset=preset,
                                             batch=batch, seq=seq, seconds=seconds)
                except WorkerDied as died:
                    return {"error": str(died)}

            per_set, errors = alternating_rounds(list(sets), measure, rounds)
            results[case] = {name: ({"error": errors[name]} if name in errors else
                                    {"sequences_per_s": statistics.median(v), "rounds": v})
                             for name, v in per_set.items()}
            print(case, {n: round(r.get("sequences_per_s", 0), 1) for n, r in
                         results[case].items()}, flush=True)
    finally:
        for worker in workers.values():
            worker.close()
    return results


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--sets", nargs="+", metavar="NAME=FLAGS", default=None,
                        help="flag sets to compare (default: " + ", ".join(SETS) + ")")
    parser.add_argument("--cases", nargs="+", default=["train", "infer", "classify"],
                        choices=["train", "infer", "classify", "pretrain"])
    parser.add_argument("--preset", default="mini")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.sets is None:
        args.sets = dict(SETS)
    else:
        if not all("=" in s for s in args.sets):
            parser.error("each --sets entry is NAME=FLAGS (FLAGS may be empty)")
        args.sets = dict(s.split("=", 1) for s in args.sets)
    return args


def main(argv=None):
    args = parse(argv)
    results = compare(args.sets, args.cases, args.preset, args.batch, args.seq, args.rounds,
                      args.seconds)
    report = {"machine": {**cpu(), "cores": os.cpu_count()}, "sets": args.sets,
              "settings": {k: getattr(args, k) for k in
                           ("preset", "batch", "seq", "rounds", "seconds")},
              "results": results}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"wrote {args.out}")
    return report


if __name__ == "__main__":
    main()
