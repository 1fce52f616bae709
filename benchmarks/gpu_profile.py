"""Where kbert's time goes in a GPU step: the Keras loop around the compiled step, and the
kernels inside it.

For each case of the GPU harness (`train`: the pre-training step; `infer`: the classifier's
logits), at the harness's sizes and dtype, on Keras' JAX backend:
- `keras`: sequences/s through `fit` / `predict`, timed as `benchmarks.gpu` times them;
- `step`: the same compiled step (Keras' `train_step` / `predict_step` under `jax.jit`) called
  in a Python loop on one batch already on the device. What `fit` / `predict` add around the
  step (batching, host-to-device copies, callbacks, dispatch) is the difference;
- `trace`: a JAX profiler trace of one window of each: GPU kernel time per step by kind
  (matmul, attention, reduction, elementwise, copy), the kernels that take longest, and the
  share of the window's wall time in which the GPU ran a kernel;
- `top_kernel_origins`: for each of those kernels that XLA generated, the model ops fused into
  it (JAX's op names, which carry Keras' layer names; `transpose(jvp(...))` is the backward
  pass), read from the optimized HLO that XLA dumps under `--trace-dir`.

    python3 -m benchmarks.gpu_profile train infer --batch 256 \\
        --out benchmarks/results/gpu/profile-base-seq128.json --trace-dir /tmp/trace
"""

import argparse
import functools
import glob
import gzip
import json
import os
import re
import sys
import time

from benchmarks import contestants, gpu_worker
from benchmarks.gpu_worker import kbert_module, timed_windows

KINDS = (  # first match wins: cuDNN's attention kernels have "gemm" in their names too
    ("attention", ("cudnn", "flash", "fmha", "sdpa")),
    ("matmul", ("gemm", "cutlass", "xmma", "nvjet", "cublas", "wgmma", "triton_gemm")),
    ("copy", ("memcpy", "memset", "copy", "transpose")),  # layout changes count as copies
    ("reduction", ("reduce", "reduction")),
    ("elementwise", ("fusion", "loop", "convert", "add", "multiply", "select")),
)


def kind_of(kernel):
    name = kernel.lower()
    return next((kind for kind, marks in KINDS if any(m in name for m in marks)), "other")


def compiled_step(model, case, data):
    """A function `state -> (state, outputs)` running one compiled step on `data` (on the
    device), and the model's current state."""
    import jax

    if case == "infer":
        state = model._get_jax_state(trainable_variables=True, non_trainable_variables=True)
        predict = jax.jit(model.predict_step)

        def step(state):
            outputs, _ = predict(state, data)
            return state, outputs

        return step, state
    state = model._get_jax_state(trainable_variables=True, non_trainable_variables=True,
                                 optimizer_variables=True, metrics_variables=True)
    train = jax.jit(model.train_step, donate_argnums=0)

    def step(state):
        logs, state = train(state, data)
        return state, logs

    return step, state


def step_window(step, state, steps):
    """A zero-argument callable running `steps` compiled steps, returning once they are done."""
    import jax

    box = [state]

    def window():
        for _ in range(steps):
            box[0], outputs = step(box[0])
        jax.block_until_ready((box[0], outputs))

    return window


def traced(window, folder):
    """Runs `window` under the JAX profiler: its wall seconds and the Chrome trace written (None
    where the profiler wrote none)."""
    import jax

    os.makedirs(folder, exist_ok=True)
    with jax.profiler.trace(folder, create_perfetto_trace=True):
        start = time.perf_counter()
        window()
        seconds = time.perf_counter() - start
    found = glob.glob(os.path.join(folder, "**", "perfetto_trace.json.gz"), recursive=True)
    return seconds, found[0] if found else None


def kernel_summary(trace_file, seconds, steps, top=25):
    """GPU kernel milliseconds per step by kind and by kernel, from a Chrome trace."""
    with gzip.open(trace_file, "rt") as f:
        events = json.load(f)
    events = events["traceEvents"] if isinstance(events, dict) else events
    named = lambda what: {(e["pid"], e.get("tid")) if what == "thread_name" else e["pid"]:
                          e.get("args", {}).get("name", "")
                          for e in events if e.get("ph") == "M" and e.get("name") == what}
    processes, threads = named("process_name"), named("thread_name")
    on_gpu = lambda e: "gpu" in processes.get(e.get("pid"), "").lower()
    thread = lambda e: threads.get((e.get("pid"), e.get("tid")), "")
    spans = [e for e in events if e.get("ph") == "X" and on_gpu(e)]
    kernels = [e for e in spans if "stream" in thread(e).lower()]
    by_kind = {}
    for name, ms in _summed_ms(kernels, steps).items():
        by_kind[kind_of(name)] = by_kind.get(kind_of(name), 0.0) + ms
    top_ms = lambda spans: dict(sorted(_summed_ms(spans, steps).items(),
                                       key=lambda kv: -kv[1])[:top])
    busy, end = 0.0, float("-inf")  # the union of the kernels' intervals, in µs
    for start, stop in sorted((e["ts"], e["ts"] + e["dur"]) for e in kernels):
        busy += max(0.0, stop - max(start, end))
        end = max(end, stop)
    return {
        "ms_per_step": seconds * 1000 / steps,
        "gpu_busy_ms_per_step": busy / 1000 / steps,
        "gpu_busy_share": busy / 1e6 / seconds,
        "kernels_per_step": len(kernels) / steps,
        "ms_per_step_by_kind": dict(sorted(by_kind.items(), key=lambda kv: -kv[1])),
        "top_kernels_ms_per_step": top_ms(kernels),
        "top_xla_ops_ms_per_step": top_ms([e for e in spans if thread(e) == "XLA Ops"]),
        "top_python_ms_per_step": top_ms([e for e in events if e.get("ph") == "X"
                                          and thread(e).startswith("python")]),
        "gpu_threads": sorted({thread(e) for e in spans}),
    }


def hlo_dump_flags(folder):
    """XLA_FLAGS that make XLA write the train and predict steps it compiles (`jit_train_step`,
    `jit_predict_step`; not the eager ops around them) as text to `folder`."""
    return f"--xla_dump_to={folder} --xla_dump_hlo_as_text --xla_dump_hlo_module_re=.*_step"


def fusion_origins(folder):
    """{dumped module: {kernel name: op names}} from XLA's dump in `folder` (`module_origins`
    of each module; one read per module while a run profiles its cases)."""
    return {os.path.basename(path): module_origins(path)
            for path in glob.glob(os.path.join(folder, "*after_optimizations.txt"))}


@functools.lru_cache(maxsize=None)
def module_origins(path, most=6):
    """Each fusion of the optimized HLO module in `path`, under the name its GPU kernel gets
    (dots as underscores), and the op names (`most` of them, the leading `jit(...)/` dropped)
    of what it fused, its own and its computation's."""
    ops, calls, current = {}, {}, None  # computation → op names; fusion → (computation, op)
    with open(path) as f:
        for line in f:
            header = re.match(r"(?:ENTRY )?%(\S+) .*\{$", line)
            if header:
                current = ops.setdefault(header.group(1), set())
                continue
            op = re.search(r'op_name="(?:jit\([^/"]*\)/)?([^"]*)"', line)
            if op and current is not None:
                current.add(op.group(1))
            fusion = re.match(r"\s+(?:ROOT )?%(\S+) = .* fusion\(.*calls=%([\w.-]+)", line)
            if fusion:
                calls[fusion.group(1)] = (fusion.group(2), op and op.group(1))
    origins = {}
    for name, (computation, own) in calls.items():
        found = sorted(ops.get(computation, set()) | ({own} if own else set()))
        origins[name.replace(".", "_")] = found[:most] + (
            [f"(+{len(found) - most} more)"] if len(found) > most else [])
    return origins


def kernel_origins(kernels, modules):
    """The op names behind each of `kernels` (names) that the dumped module holding the most
    of them generated (other modules' fusions may share a name)."""
    best = max(modules.values(), key=lambda found: len(set(kernels) & set(found)), default={})
    return {kernel: best[kernel] for kernel in kernels if kernel in best}


def _summed_ms(spans, steps):
    """Milliseconds per step spent in each span name (inclusive of nested spans)."""
    summed = {}
    for e in spans:
        summed[e["name"]] = summed.get(e["name"], 0.0) + e["dur"] / 1000 / steps
    return summed


def profile(case, config, args):
    """The report for one case: `fit`/`predict` against the bare compiled step, and traces."""
    import jax

    data = contestants.random_batch(config, args.batch, args.seq, masked=args.masked)
    model, inputs, targets, weights = gpu_worker.kbert_model(case, config, data, args)
    keras_window = gpu_worker.keras_window(model, case, inputs, targets, weights, args.batch)
    sequences = args.steps * args.batch
    keras_rate, keras_rates = timed_windows(keras_window, sequences, args.windows)
    keras_seconds, keras_trace = traced(keras_window, os.path.join(args.trace_dir,
                                                                   f"{case}-keras"))
    one = lambda tree: jax.tree.map(lambda a: jax.device_put(a[:args.batch]), tree)
    batch = (one(inputs),) if case == "infer" else (one(inputs), one(targets), one(weights))
    window = step_window(*compiled_step(model, case, batch), args.steps)
    step_rate, step_rates = timed_windows(window, sequences, args.windows)
    step_seconds, step_trace = traced(window, os.path.join(args.trace_dir, f"{case}-step"))
    report = {"case": case, "keras": keras_rate, "keras_windows": keras_rates,
              "step": step_rate, "step_windows": step_rates,
              "keras_overhead_ms_per_batch": 1000 * args.batch * (1 / keras_rate - 1 / step_rate),
              "device": jax.devices()[0].device_kind,
              "compute_dtype": model.backbone.compute_dtype}
    modules = fusion_origins(os.path.join(args.trace_dir, "hlo"))
    for name, seconds, trace in (("keras", keras_seconds, keras_trace),
                                 ("step", step_seconds, step_trace)):
        summary = (kernel_summary(trace, seconds, args.steps) if trace
                   else {"error": "the profiler wrote no Chrome trace"})
        summary["top_kernel_origins"] = kernel_origins(
            list(summary.get("top_kernels_ms_per_step", {})), modules)
        report[f"trace_{name}"] = summary
    return report


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cases", nargs="+", choices=("train", "infer"))
    gpu_worker.add_model_options(parser)
    parser.add_argument("--out", required=True)
    parser.add_argument("--trace-dir", required=True, help="where the profiler writes")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    os.environ["KERAS_BACKEND"] = "jax"  # before Keras loads: the GPU image has no TensorFlow
    # Before JAX starts XLA: the optimized HLO whose fusions `top_kernel_origins` names.
    flags = hlo_dump_flags(os.path.join(args.trace_dir, "hlo"))
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip()
    import keras

    config = kbert_module("config").BertConfig.preset(args.preset)
    result = {"settings": vars(args), "cases": {}}
    for case in args.cases:
        result["cases"][case] = report = profile(case, config, args)
        print(json.dumps({k: v for k, v in report.items() if not k.startswith("trace")}),
              flush=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        keras.backend.clear_session()
    return 0


if __name__ == "__main__":
    sys.exit(main())
