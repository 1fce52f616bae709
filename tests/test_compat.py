"""Each upstream bug that `kbert.compat` works around, shown with the upstream library alone.

Each test asserts the bug is still there, so it fails on the day upstream fixes it: then the
workaround in `kbert.compat` goes, with this test. The tests of kbert's side (that the
workaround gives the right answer) sit with the code that uses it, e.g.
tests/pretraining/test_distribution.py. `without_autotune` has no test here: the stall it
avoids (a destroyed tf.data iterator waiting for the autotuning thread) came and went between
runs, so no test could show it reliably.
"""

import json
import os
import socket
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

import kbert


def test_keras_adam_squares_an_embedding_gradients_slices():
    """`SummedDenseGradients`: an embedding row read k times in a batch gets k slices. Adam's
    first step moves a weight by the rate (m / sqrt(v) = g / |g|); Keras' squares each slice
    before the slices are summed, so the row moves by the rate times sqrt(k)."""
    gradient = tf.IndexedSlices(tf.ones((4, 2)), tf.constant([1, 1, 1, 1]), tf.constant([3, 2]))

    def first_step(optimizer):
        table = keras.Variable(np.zeros((3, 2), "float32"))
        optimizer.apply_gradients([(gradient, table)])
        return -table.numpy()[1]

    np.testing.assert_allclose(first_step(keras.optimizers.Adam(0.1)), [0.2, 0.2], rtol=1e-3)
    np.testing.assert_allclose(first_step(kbert.optimizers.Adam(0.1)), [0.1, 0.1], rtol=1e-3)


def test_keras_forgets_the_weight_decay_exclusions_of_a_saved_optimizer(tmp_path):
    """`SavedDecayExclusions`: Keras keeps `exclude_from_weight_decay` in memory only, so a
    model loaded from a .keras file decays its excluded weights again."""

    def saved_and_loaded(optimizer):
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        optimizer.exclude_from_weight_decay(var_names=["bias"])
        model.compile(optimizer=optimizer, loss="mse")
        model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=1, verbose=0)
        assert not model.optimizer._use_weight_decay(model.layers[0].bias)
        model.save(tmp_path / "model.keras")
        loaded = keras.saving.load_model(tmp_path / "model.keras")
        loaded.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=1, verbose=0)  # builds the optimizer
        return loaded.optimizer._use_weight_decay(loaded.layers[0].bias)

    assert saved_and_loaded(keras.optimizers.AdamW(1e-3, weight_decay=0.1))
    assert not saved_and_loaded(kbert.optimizers.AdamW(1e-3, weight_decay=0.1))


REPLICAS = textwrap.dedent("""
    import json
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras

    x = np.random.default_rng(0).normal(size=(8, 3)).astype("float32")
    y = (x.sum(1, keepdims=True) * 10).astype("float32")

    def trained(strategy, jit_compile=False, **clipping):
        with strategy.scope():
            keras.utils.set_random_seed(0)
            model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
            model.compile(optimizer=keras.optimizers.SGD(0.1, **clipping), loss="mse",
                          jit_compile=jit_compile)
        model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
        return model.get_weights()[0]

    mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    one = tf.distribute.get_strategy()
    result = {
        "unclipped": float(np.abs(trained(mirrored) - trained(one)).max()),
        "clipped": float(np.abs(trained(mirrored, global_clipnorm=1.0)
                                - trained(one, global_clipnorm=1.0)).max())}
    try:
        trained(mirrored, jit_compile=True)
        result["xla"] = "trained"
    except tf.errors.InvalidArgumentError:
        result["xla"] = "failed"
    print("RESULT" + json.dumps(result))
""")


def run(script, *args):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.Popen([sys.executable, "-c", script, *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def result_of(process):
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-3000:]
    return json.loads([line for line in out.splitlines() if line.startswith("RESULT")][-1][6:])


@pytest.mark.slow
def test_keras_under_two_replicas_clips_each_replica_and_fails_under_xla():
    """`SummedDenseGradients` clips after the replicas' sum, and `check_jit_compile` refuses
    XLA under several replicas (keras-team/keras#19005). With Keras alone, two replicas train
    one batch as one device does, until each replica clips its own half of the gradient; and
    the compiled step fails."""
    result = result_of(run(REPLICAS))
    assert result["unclipped"] == 0.0
    assert result["clipped"] > 1e-3
    assert result["xla"] == "failed"


WORKER = textwrap.dedent("""
    import json, os, sys
    index, ports = int(sys.argv[1]), sys.argv[2].split(",")
    os.environ["TF_CONFIG"] = json.dumps({
        "cluster": {"worker": [f"127.0.0.1:{port}" for port in ports]},
        "task": {"type": "worker", "index": index}})
    import numpy as np
    import tensorflow as tf
    import keras
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
    data = tf.data.Dataset.from_tensor_slices((np.ones((16, 3)), np.ones((16, 1)))).batch(8)
    try:
        model.fit(data, epochs=1, verbose=0)
        print("RESULT" + json.dumps("trained"))
    except ValueError as error:
        print("RESULT" + json.dumps(str(error)[:38]))
""")


@pytest.mark.slow
def test_keras_fit_fails_under_multi_worker_mirrored():
    """`patch_keras_for_multi_worker` (keras-team/keras#20585): with Keras alone, `fit` under
    `MultiWorkerMirroredStrategy` over two workers fails before its first step."""
    sockets = [socket.socket() for _ in range(2)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = ",".join(str(s.getsockname()[1]) for s in sockets)
    for s in sockets:
        s.close()
    workers = [run(WORKER, str(index), ports) for index in range(2)]
    expected = "Attempt to convert a value (PerReplica"
    assert [result_of(worker) for worker in workers] == [expected] * 2
