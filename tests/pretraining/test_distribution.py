"""Distribution: MultiWorkerMirrored over two local worker processes (with kbert's fix for
keras-team/keras#20585), Mirrored over two logical CPUs against one device with AdamW, the
update from embedding gradients with repeated indices, and float16 loss scaling over replicas."""

import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest

WORKER = textwrap.dedent("""
    import json, os, sys
    index, ports, out, corpus = int(sys.argv[1]), sys.argv[2].split(","), sys.argv[3], sys.argv[4]
    os.environ["TF_CONFIG"] = json.dumps({
        "cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
        "task": {"type": "worker", "index": index}})
    from kbert.config import BertConfig
    from kbert.training.pretrain import pretrain
    result = pretrain(out, config=BertConfig(**{small}), corpus=corpus, steps=4, batch_size=8,
                      sequence_length=32, learning_rate=1e-3, warmup_steps=1,
                      checkpoint_every=2, eval_examples=16, verbose=0, save_model=False,
                      strategy="multi_worker")
    print("RESULT" + json.dumps(result))
""")


def free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def small():
    from tests.pretraining.test_pretrain import SMALL

    return dict(SMALL, hidden_dropout=0.0, attention_dropout=0.0)


def test_multi_worker_mirrored_two_processes(tmp_path, corpus_file):
    ports = ",".join(map(str, free_ports(2)))
    script = WORKER.replace("{small}", repr(small()))
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    procs = [subprocess.Popen([sys.executable, "-c", script, str(i), ports,
                               str(tmp_path / f"w{i}"), str(corpus_file)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        line = [x for x in out.splitlines() if x.startswith("RESULT")][-1]
        results.append(json.loads(line[len("RESULT"):]))
    assert all(r["multi_worker"] and r["replicas"] == 2 and r["steps"] == 4 for r in results)
    assert results[0]["weights_sha256"] == results[1]["weights_sha256"]
    assert results[0]["mlm_loss"] == pytest.approx(results[1]["mlm_loss"])
    # Only the chief writes the run's files.
    assert (tmp_path / "w0/metrics.json").is_file()
    assert not (tmp_path / "w1/metrics.json").exists()


MIRRORED = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    from kbert.config import BertConfig
    from kbert.data.pretraining import MaskedLM, pretraining_dataset, read_documents, \\
        tokenize_documents
    from kbert.models.backbone import BertBackbone
    from kbert.models.pretrainer import BertPretrainer
    from kbert.presets import resolve
    from kbert.text import BertTokenizer
    from kbert.compat import check_jit_compile
    from kbert.training.distribution import get_strategy
    from kbert.training.optimizer import make_optimizer
    
    tokenizer = BertTokenizer.from_pretrained(resolve("minilm_l6_h384_uncased"))
    documents = list(tokenize_documents(read_documents(sys.argv[1]), tokenizer))
    masker = MaskedLM.from_tokenizer(tokenizer, max_predictions=4)
    rows = pretraining_dataset(documents, tokenizer, masker, 32, 64, seed=0,
                               shuffle_buffer=0).unbatch()  # unshuffled: any rows do
    # Rows with exactly 4 predictions: each replica's MLM mean then equals the global mean.
    rows = rows.filter(lambda x, y, w: tf.reduce_sum(w["mlm"]) == 4).take(24).batch(24)
    data = next(iter(rows))
    config = BertConfig(**{small})
    keras.utils.set_random_seed(0)
    start = BertPretrainer(BertBackbone(config)).get_weights()

    def train(strategy):
        with strategy.scope():
            model = BertPretrainer(BertBackbone(config))
            model.set_weights(start)
            # BERT's AdamW: weight decay, and a global-norm clip at 1.0 that binds at the
            # first step (the gradient's norm there is about 1.9).
            model.compile(optimizer=make_optimizer(1e-3, 3, warmup_fraction=0.0, model=model))
        ds = tf.data.Dataset.from_tensor_slices(data).batch(8)
        model.fit(ds, epochs=1, steps_per_epoch=3, shuffle=False, verbose=0)
        return model.get_weights(), strategy.num_replicas_in_sync

    single, n1 = train(get_strategy(None))
    mirrored, n2 = train(get_strategy("mirrored"))
    moved = max(float(np.abs(a - b).max()) for a, b in zip(single, start))
    differ = max(float(np.abs(a - b).max()) for a, b in zip(single, mirrored))
    close = all(np.allclose(b, a, rtol=1e-5, atol=1e-6) for a, b in zip(single, mirrored))
    try:  # XLA under two replicas is refused up front (keras-team/keras#19005)
        check_jit_compile(get_strategy("mirrored"), True)
        refused = ""
    except ValueError as error:
        refused = str(error)
    print("RESULT" + json.dumps({"moved": moved, "differ": differ, "close": close,
                                 "replicas": [n1, n2], "xla_refused": refused}))
""")


def test_mirrored_two_logical_cpus_matches_single_device(tmp_path, corpus_file):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-c", MIRRORED.replace("{small}", repr(small())),
                           str(corpus_file)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    line = [x for x in done.stdout.splitlines() if x.startswith("RESULT")][-1]
    result = json.loads(line[len("RESULT"):])
    assert result["replicas"] == [1, 2]
    # Same start, same global batches of 8 (4 per replica), AdamW with clipping: the same
    # weights up to float summation order (measured: differ ~2e-7 after moves of 2e-3; before
    # kbert summed and densified gradients first — `SummedDenseGradients` — it was 8e-4).
    # Adam turns rounding in a near-zero gradient into up to lr·δg/ε of update; with ε added
    # to √v̂ (Algorithm 1), not Keras' 30x larger effective ε at step 1, that is ~1e-7, not 1e-8.
    assert result["moved"] > 1e-3
    assert result["close"] and result["differ"] < 1e-6, result
    assert "keras-team/keras#19005" in result["xla_refused"]


@pytest.mark.parametrize("name", ["adam", "adamw", "lamb"])
def test_update_from_repeated_embedding_indices_equals_dense(name):
    """An embedding gradient whose slices repeat an index (as a segment id's does) updates like
    its dense sum, clipped by the sum's norm. Keras' own Adam would square each slice for the
    second moment (a first step of 1.4·lr here) and clip by the slices' norm (5, not 7)."""
    import keras
    import numpy as np
    import tensorflow as tf

    from kbert.optimizers import Adam, AdamW, Lamb

    def make(clip):
        if name == "adam":  # the task models' compile() default
            return Adam(0.1, epsilon=0.1, global_clipnorm=clip)
        if name == "adamw":
            return AdamW(0.1, weight_decay=0.0, epsilon=0.1, global_clipnorm=clip)
        return Lamb(0.1, weight_decay_rate=0.0, epsilon=0.1, global_clipnorm=clip)

    slices = tf.IndexedSlices(tf.constant([[3.0], [4.0]]), tf.constant([0, 0]),
                              tf.constant([2, 1]))

    def step(grad, clip):
        variable = keras.Variable(np.zeros((2, 1), "float32"))
        make(clip).apply_gradients([(grad, variable)])
        return variable.numpy()

    expected = step(tf.constant([[1.0], [0.0]]), None)  # [[7], [0]] clipped to norm 1
    assert abs(expected[0, 0]) > 0.01 and expected[1, 0] == 0
    np.testing.assert_allclose(step(slices, 1.0), expected, rtol=1e-6)
    np.testing.assert_allclose(step(tf.convert_to_tensor(slices), 1.0), expected, rtol=1e-6)


FLOAT16 = textwrap.dedent("""
    import json
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    from kbert.optimizers import AdamW
    from kbert.training.optimizer import LossScaleOptimizer
    keras.mixed_precision.set_global_policy("mixed_float16")
    x = np.ones((4, 2), "float32")
    x[2:] = 3e4  # the second replica's rows: its float16 gradients overflow
    with tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]).scope():
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        start = model.get_weights()
        model.compile(optimizer=LossScaleOptimizer(AdamW(1e-2)), loss="mse")
    model.fit(tf.data.Dataset.from_tensors((x, np.zeros((4, 1), "float32"))), verbose=0,
              shuffle=False)
    print("RESULT" + json.dumps({
        "unchanged": all(np.array_equal(a, b) for a, b in zip(model.get_weights(), start)),
        "scale": float(model.optimizer.dynamic_scale.numpy()),
        "steps": int(model.optimizer.iterations.numpy())}))
""")


def test_float16_overflow_on_one_replica_skips_the_step():
    """Keras alone looks at the first replica only, applies the step, and every weight turns
    NaN (kbert's `LossScaleOptimizer` all-reduces the check)."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-c", FLOAT16], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    line = [x for x in done.stdout.splitlines() if x.startswith("RESULT")][-1]
    result = json.loads(line[len("RESULT"):])
    assert result == {"unchanged": True, "scale": 2.0 ** 14, "steps": 1}, result
