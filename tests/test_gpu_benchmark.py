"""The GPU benchmark harness (`benchmarks.gpu`), run for real at tiny sizes on this CPU.

The GPU image has no TensorFlow, so the harness runs here with TensorFlow made unimportable
(KBERT_TESTS_WITHOUT, read by tests/user_site/sitecustomize.py, which every process of the run
loads).
"""

import gzip
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import flops, gpu
from kbert.config import BertConfig

ROOT = Path(__file__).parents[1]


def without_tensorflow():
    """The environment of a harness process on the GPU image: no TensorFlow, this repository
    importable, Keras on JAX's CPU backend."""
    return {**os.environ, "KBERT_TESTS_WITHOUT": "tensorflow,tensorflow_text,tf_keras",
            "PYTHONPATH": f"{os.environ['PYTHONPATH']}{os.pathsep}{ROOT}",
            "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    for package in ("jax", "torch", "transformers"):
        pytest.importorskip(package)
    folder = tmp_path_factory.mktemp("gpu")
    env = without_tensorflow()
    blocked = subprocess.run([sys.executable, "-c", "import tensorflow"], env=env,
                             capture_output=True, text=True)
    assert "ModuleNotFoundError" in blocked.stderr
    out = folder / "smoke.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--gpu", "--smoke", "--out", str(out),
         "--log", str(folder / "workers.log")],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    log = (folder / "workers.log").read_text()
    assert done.returncode == 0, done.stdout[-2000:] + log[-3000:]
    return json.loads(out.read_text())


def test_smoke_run_reports_every_contestant(smoke):
    assert smoke["device"] == "cpu" and "errors" not in smoke and smoke["settings"]["smoke"]
    assert set(smoke["train"]) == {*gpu.CONTESTANTS, "kbert_mfu"}
    assert set(smoke["infer"]) == set(gpu.CONTESTANTS)
    for case in ("train", "infer"):
        for who in gpu.CONTESTANTS:
            windows = smoke["windows"][f"{who}/{case}"]
            assert len(windows) == gpu.SMOKE["windows"] and min(windows) > 0
            assert smoke[case][who] == statistics.median(windows)
        for peer in ("hf_eager", "hf_compile"):
            assert smoke["kbert_vs"][f"{case}_{peer}"] == pytest.approx(
                smoke[case]["kbert"] / smoke[case][peer])
    assert {"jax", "keras", "torch", "transformers"} <= set(smoke["versions"])
    assert smoke["compute_dtype"] == {f"{who}/{case}": "float32" for who in gpu.CONTESTANTS
                                      for case in ("train", "infer")}


def test_kbert_worker_keeps_its_dtype_after_the_first_case():
    """`keras.backend.clear_session()` between cases resets Keras' global dtype policy: the
    first H200 run timed kbert's training and inference in float32 after the bf16 peak.
    Two batches per compiled call over three batches: `--steps-per-execution` runs too."""
    pytest.importorskip("jax")
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu_worker", "kbert", "peak", "train", "infer",
         "--preset", "tiny", "--batch", "2", "--seq", "16", "--masked", "3", "--steps", "3",
         "--steps-per-execution", "2", "--windows", "1", "--dtype", "bfloat16",
         "--matmul-sizes", "64",
         "--matmul-seconds", "0.01"],
        env={**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}, cwd=ROOT,
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [a["case"] for a in answers] == ["peak", "train", "infer"]
    assert [a["compute_dtype"] for a in answers[1:]] == ["bfloat16", "bfloat16"]


def test_smoke_mfu_is_model_flops_over_the_measured_peak(smoke):
    settings = smoke["settings"]
    assert settings["masked"] == math.ceil(0.15 * settings["seq"])
    model_flops = flops.case_flops("pretrain", BertConfig.preset(settings["preset"]),
                                   settings["seq"], settings["masked"])
    peak = max(smoke["peak_tflops"].values()) * 1e12
    assert set(smoke["peak_tflops"]) == {"kbert", "hf_eager"}
    assert smoke["train"]["kbert_mfu"] == pytest.approx(smoke["train"]["kbert"] * model_flops
                                                        / peak)
    assert 0 < smoke["train"]["kbert_mfu"] < 1


def test_options_and_file_names():
    args = gpu.parse([])
    assert (args.preset, args.seq, args.batch, args.masked) == ("base", 128, 256, 20)
    assert args.out == os.path.join("benchmarks", "results", "gpu", "base-seq128.json")
    args = gpu.parse(["--seq", "512", "--batch", "64"])
    assert args.masked == 77 and args.out.endswith("base-seq512-batch64.json")
    with pytest.raises(SystemExit):
        gpu.parse(["--smoke"])  # a smoke run never writes a result file by default


def test_matmul_peak_in_bfloat16():
    pytest.importorskip("torch")
    assert flops.best_matmul_gflops("hugging_face", sizes=(64,), seconds=0.01,
                                    dtype="bfloat16") > 0


def test_profile_kernel_summary_of_a_known_trace(tmp_path):
    """Two steps on a GPU stream: kernel time by kind and name per step, and the GPU's busy time
    as the union of overlapping kernels; host and op-level spans are not counted as kernels."""
    from benchmarks import gpu_profile

    meta = lambda kind, pid, name, tid=None: {"ph": "M", "name": kind, "pid": pid, "tid": tid,
                                              "args": {"name": name}}
    span = lambda name, ts, dur, pid=1, tid=7: {"ph": "X", "name": name, "pid": pid,
                                                "tid": tid, "ts": ts, "dur": dur}
    events = [meta("process_name", 1, "/device:GPU:0"), meta("process_name", 2, "/host:CPU"),
              meta("thread_name", 1, "Stream #14(Compute)", 7),
              meta("thread_name", 1, "XLA Ops", 8), meta("thread_name", 2, "python3", 9),
              span("nvjet_sm90_tst_128x160_NNT", 0, 600), span("loop_multiply_fusion", 500, 200),
              span("cudnn_generated_sdpa_flash_fprop", 1000, 100),
              span("input_add_reduce_fusion", 2000, 300), span("fusion.3", 0, 999, tid=8),
              span("$trainer.py predict", 0, 4000, pid=2, tid=9)]
    path = tmp_path / "trace.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)
    found = gpu_profile.kernel_summary(str(path), seconds=0.004, steps=2)
    assert found["ms_per_step_by_kind"] == pytest.approx(
        {"matmul": 0.3, "elementwise": 0.1, "attention": 0.05, "reduction": 0.15})
    assert found["gpu_busy_ms_per_step"] == pytest.approx((700 + 100 + 300) / 1000 / 2)
    assert found["gpu_busy_share"] == pytest.approx(1.1 / 4)
    assert found["kernels_per_step"] == 2
    assert found["top_xla_ops_ms_per_step"] == {"fusion.3": pytest.approx(0.4995)}
    assert found["top_python_ms_per_step"] == {"$trainer.py predict": pytest.approx(2.0)}


def test_profile_script_reports_the_keras_loop_and_the_bare_step(tmp_path):
    pytest.importorskip("jax")
    from benchmarks import gpu_profile

    out = tmp_path / "profile.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu_profile", "train", "infer", "--preset", "tiny",
         "--batch", "2", "--seq", "16", "--masked", "3", "--steps", "2", "--windows", "1",
         "--dtype", "float32", "--out", str(out), "--trace-dir", str(tmp_path / "trace")],
        env={**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}, cwd=ROOT,
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    cases = json.loads(out.read_text())["cases"]
    assert set(cases) == {"train", "infer"}
    for report in cases.values():
        assert report["keras"] > 0 and report["step"] > 0 and report["device"] == "cpu"
        assert report["keras_overhead_ms_per_batch"] == pytest.approx(
            1000 * 2 * (1 / report["keras"] - 1 / report["step"]))
        for trace in ("trace_keras", "trace_step"):  # a CPU has no GPU stream: no kernels
            assert report[trace]["ms_per_step"] > 0 and report[trace]["kernels_per_step"] == 0
        assert any("predict" in name or "fit" in name or "step" in name
                   for name in report["trace_keras"]["top_python_ms_per_step"])
        assert report["trace_step"]["top_kernel_origins"] == {}  # no kernels to name here
    # What names a GPU's kernels: the steps' optimized HLO, dumped while the profile ran. Each
    # fusion, under its kernel's name, comes from the model's layers (forward and backward).
    modules = gpu_profile.fusion_origins(tmp_path / "trace" / "hlo")
    train, = [m for m in modules if ".jit_train_step." in m]
    assert any(".jit_predict_step." in m for m in modules) and len(modules) <= 3
    kernels = [name for name in modules[train] if "fusion" in name]
    assert len(kernels) > 20 and "." not in "".join(kernels)
    origins = gpu_profile.kernel_origins([*kernels, "nvjet_sm90_tst_128x128"], modules)
    assert set(origins) == set(kernels)  # the train step's module, not a predict step's
    named = " ".join(op for ops in origins.values() for op in ops)
    for layer in ("jvp(bert_backbone)/embeddings/layer_norm", "jvp(mlm_head)", "adam_w/",
                  "transpose(jvp(bert_backbone))/transformer_layer_1/attention_layer_norm"):
        assert layer in named


def test_a_kbert_only_command_line_works_here(tmp_path):
    """The GPU session's kbert-only steps (`--contestants kbert` with `--attention` or
    `--xla-flags`), at smoke sizes on this CPU without TensorFlow: a GPU session's few minutes
    should not go on a broken command line. `--xla-flags` is XLA's setting in kbert's worker:
    here a flag that works on a CPU, a dump of what XLA compiled, lands in its folder."""
    pytest.importorskip("jax")
    out, dump = tmp_path / "flash.json", tmp_path / "dump"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu", "--smoke", "--attention", "flash",
         "--contestants", "kbert", f"--xla-flags=--xla_dump_to={dump}", "--out", str(out),
         "--log", str(tmp_path / "workers.log")],
        env=without_tensorflow(), cwd=ROOT, capture_output=True, text=True, timeout=600)
    log = (tmp_path / "workers.log").read_text()
    assert done.returncode == 0, done.stdout[-2000:] + log[-3000:]
    report = json.loads(out.read_text())
    assert report["settings"]["attention"] == "flash" and "errors" not in report
    assert report["train"]["kbert"] > 0 and report["infer"]["kbert"] > 0
    assert report["settings"]["xla_flags"] == f"--xla_dump_to={dump}" and any(dump.glob("*.txt"))
