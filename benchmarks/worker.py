"""One benchmark contestant per process, timing steps on request.

Each package runs in a process of its own so that thread pools never compete and a package's
imports or caches never slow another. The driver (`benchmarks.run`) sends one JSON request per
line on stdin and reads one JSON answer per line from this process's original stdout; anything
the libraries print goes to stderr.

Requests:
  {"op": "measure", "case", "preset", "batch", "seq", "xla", "seconds"}
      → {"times": [seconds per step, ...], "sequences": per step, "build_s": first-call cost}
  {"op": "drop"}  → forget built models (their memory goes back to the package's allocator;
                   TensorFlow's keeps it pooled for the next models, not for the system)
  {"op": "peak", "seconds"}  → {"gflops": best fp32 matmul of this package}
  {"op": "dense", "preset", "tokens", "seconds"}
      → {"gflops": {mode: GFLOP/s of one encoder layer's dense projections at those sizes}}
        (flops.dense_layer_gflops)
  {"op": "rss"}   → {"peak_rss_mb": peak resident memory of this process so far}

    python -m benchmarks.worker {kbert,keras_hub,hugging_face} [--dtype mixed_bfloat16]
                                [--peer-optimizer keras]
"""

import argparse
import gc
import json
import os
import resource
import sys
import time

from benchmarks import contestants, flops


def measure(step, seconds, min_steps=2, max_steps=50):
    """Seconds per step, for as many steps as fit in `seconds` (between `min_steps` and
    `max_steps`)."""
    times = []
    while len(times) < min_steps or (sum(times) < seconds and len(times) < max_steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return times


def serve(framework, options):
    """Answers requests until stdin closes; `options` go to every builder call."""
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # library output goes to stderr; answers keep the original stdout
    steps = {}
    for line in sys.stdin:
        try:
            answer = _answer(framework, options, json.loads(line), steps)
        except Exception as error:  # reported to the driver, which shows it and goes on
            answer = {"error": f"{type(error).__name__}: {error}"}
        answers.write(json.dumps(answer) + "\n")


def _answer(framework, options, request, steps):
    op = request["op"]
    if op == "measure":
        step, build_s = _step(framework, options, request, steps)
        step()  # re-warms caches the other contestants have just used
        return {"times": measure(step, request.get("seconds", 3.0)),
                "sequences": step.sequences, "build_s": build_s}
    if op == "drop":
        steps.clear()
        gc.collect()
        return {}
    if op == "peak":
        seconds = request.get("seconds", flops.MATMUL_SECONDS)
        return {"gflops": flops.best_matmul_gflops(framework, seconds=seconds)}
    if op == "dense":
        from kbert.config import BertConfig

        config = BertConfig.preset(request["preset"])
        seconds = request.get("seconds", flops.MATMUL_SECONDS)
        return {"gflops": flops.dense_layer_gflops(framework, config, request["tokens"], seconds)}
    if op == "rss":
        return {"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    raise ValueError(f"unknown op {op!r}")


def _step(framework, options, request, steps):
    """The cached step for this request, built (and called once) if new; with its build time."""
    from kbert.config import BertConfig

    xla = request.get("xla")
    key = (request["case"], request["preset"], request["batch"], request["seq"], xla)
    if key in steps:
        return steps[key], 0.0
    start = time.perf_counter()
    config = BertConfig.preset(request["preset"])
    kwargs = {} if framework == "hugging_face" else {"xla": xla}
    kwargs.update(options)
    step = contestants.BUILDERS[framework](request["case"], config, request["batch"],
                                           request["seq"], **kwargs)
    step()  # first call: tracing, XLA compilation, allocator warm-up
    steps[key] = step
    return step, time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("framework", choices=sorted(contestants.BUILDERS))
    parser.add_argument("--dtype", default=None, help="Keras dtype policy for kbert")
    parser.add_argument("--peer-optimizer", choices=["kbert", "keras"], default="kbert",
                        help="whose AdamW keras-hub trains with")
    args = parser.parse_args()
    options = {}
    if args.framework == "kbert" and args.dtype:
        options["dtype"] = args.dtype
    if args.framework == "keras_hub":
        options["optimizer"] = args.peer_optimizer
    serve(args.framework, options)


if __name__ == "__main__":
    main()
