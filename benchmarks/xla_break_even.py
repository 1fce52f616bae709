"""How many steps XLA needs to pay for its compilation, on this machine (TensorFlow backend).

For each preset and case, kbert's model is built, called once and timed in a fresh worker
process (`benchmarks.worker`), once compiled with XLA and once without, alternating which goes
first. The first call's cost (tracing, and XLA's compilation) and the steady step give

    break-even steps = (first call under XLA - first call without) / (step without - step under XLA)

A run of fewer steps than that is faster without XLA; `kbert.models.xla` reads its rule for
short runs from these numbers.

    python -m benchmarks.xla_break_even --out benchmarks/results/cpu-xla-break-even.json
    python -m benchmarks.xla_break_even --presets tiny --cases infer --rounds 1 --seconds 1
"""

import argparse
import json
import os
import statistics

from benchmarks.run import Worker, cpu


def measure(case, preset, batch, seq, xla, seconds):
    """(first-call seconds, median step seconds) of one kbert step in a fresh process."""
    worker = Worker("kbert")
    try:
        answer = worker.ask(op="measure", case=case, preset=preset, batch=batch, seq=seq,
                            xla=xla, seconds=seconds)
    finally:
        worker.close()
    if "error" in answer:
        raise RuntimeError(f"{case} {preset} xla={xla}: {answer['error']}")
    return answer["build_s"], statistics.median(answer["times"])


def break_even(case, preset, batch, seq, rounds, seconds):
    """Medians over `rounds` of each mode's first call and step, and the steps that pay XLA."""
    firsts, steps = {True: [], False: []}, {True: [], False: []}
    for r in range(rounds):
        for xla in ((True, False) if r % 2 == 0 else (False, True)):
            first, step = measure(case, preset, batch, seq, xla, seconds)
            firsts[xla].append(first)
            steps[xla].append(step)
    first = {xla: statistics.median(v) for xla, v in firsts.items()}
    step = {xla: statistics.median(v) for xla, v in steps.items()}
    saved = step[False] - step[True]
    extra = first[True] - first[False]
    return {"case": case, "preset": preset, "batch": batch, "seq": seq,
            "first_call_s": {"xla": first[True], "no_xla": first[False]},
            "step_s": {"xla": step[True], "no_xla": step[False]},
            "break_even_steps": (max(extra, 0.0) / saved) if saved > 0 else None}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--presets", nargs="+", default=["tiny", "mini", "small", "base"])
    parser.add_argument("--cases", nargs="+", default=["train", "infer", "pretrain"])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=5.0, help="timed steps per measurement")
    parser.add_argument("--out", help="JSON file for the results")
    args = parser.parse_args(argv)
    results = []
    for preset in args.presets:
        for case in args.cases:
            result = break_even(case, preset, args.batch, args.seq, args.rounds, args.seconds)
            results.append(result)
            print(f"{preset:6} {case:9} first call {result['first_call_s']['xla']:6.2f} s XLA,"
                  f" {result['first_call_s']['no_xla']:6.2f} s without; step "
                  f"{1e3 * result['step_s']['xla']:8.1f} ms XLA, "
                  f"{1e3 * result['step_s']['no_xla']:8.1f} ms without; break-even "
                  f"{result['break_even_steps']} steps", flush=True)
    if args.out:
        report = {"machine": {**cpu(), "cores": os.cpu_count()}, "results": results}
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
