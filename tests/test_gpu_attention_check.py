"""`benchmarks.gpu_attention`, the GPU's check of the fused attention, run tiny on this CPU
(where it compares JAX's `xla` form of the same call with the einsum)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


@pytest.mark.parametrize("implementation", ["xla", "flash"])
def test_smoke_check_compares_the_kernel_with_the_einsum(tmp_path, implementation):
    """xla: JAX's form of the fused call, no dropout; flash: kbert's kernels (interpreted
    here), with the paper's dropout on both sides, also at two other tile sizes."""
    pytest.importorskip("jax")
    out = tmp_path / "attention.json"
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    extra = [] if implementation == "xla" else ["--implementation", "flash",
                                                "--tiles", "16x16/16", "32x16/32"]
    done = subprocess.run([sys.executable, "-m", "benchmarks.gpu_attention", "--smoke",
                           "--out", str(out), *extra], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert (report["device"], report["implementation"], report["ran"]) == (
        "cpu", implementation, [implementation])
    # float32, the same weights: equal up to the order of float32 sums.
    assert report["max_abs_diff_sequence_output"] < 1e-5
    assert report["max_relative_grad_diff"] < 1e-5
    assert set(report["step_ms"]) == {"einsum", implementation}
    assert min(report["step_ms"].values()) > 0
    if implementation == "flash":
        assert [(t["forward"], t["backward"]) for t in report["tiles"]] == [
            ([16, 16], 16), ([32, 16], 32)]
        for tiled in report["tiles"]:
            assert tiled["max_abs_diff_sequence_output"] < 1e-5
            assert tiled["max_relative_grad_diff"] < 1e-5
            assert tiled["step_ms"] > 0


def test_tiles_are_refused_unless_named_well():
    for bad in (["--tiles", "128x128/32"], ["--implementation", "flash", "--tiles", "128x96/32"],
                ["--implementation", "flash", "--tiles", "128/32"]):
        done = subprocess.run([sys.executable, "-m", "benchmarks.gpu_attention", *bad],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and "error:" in done.stderr, (bad, done.stderr[-500:])
