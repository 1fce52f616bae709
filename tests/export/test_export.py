"""SavedModel export for TensorFlow Serving (kbert.export).

The real checks run the exports of a classifier on the pretrained MiniLM backbone and of the
backbone itself in a fresh process with TensorFlow + tensorflow-text's op libraries only
(`serving_client.py`), through `saved_model_cli`, and behind an emulated gRPC PredictionService.
Versioning, atomicity and the other model types use a tiny random model (fast).
"""

import json
import os
import pathlib
import re
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from kbert.config import BertConfig
from kbert.export import export_from_cli, export_saved_model, next_version, serving_ops
from kbert.export import warmup
from kbert.models.backbone import BertBackbone
from kbert.models.classifier import BertClassifier
from kbert.text import BertPreprocessor, BertTokenizer

HERE = pathlib.Path(__file__).parent
LABELS = ["negative", "neutral", "positive"]
TEXTS = [
    "A gripping, beautifully acted film.",
    "The plot made no sense and the dialogue was worse.",
    "It was fine, I guess.",
    "Caf\u00e9 society in Par\u00eds: na\u00efve, charming, \u201cdelightful\u201d!",
    "x",
]
PAIRS = [t[::-1] for t in TEXTS]
TINY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "movie", "was",
              "good", "bad", "film", "it", "is", "not", "great", "##s", "?", ".", "!"]


def _env():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("KERAS_BACKEND", None)
    return env


# --- the MiniLM exports, and what a fresh serving process makes of them --------------------

@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    base = tmp_path_factory.mktemp("saved_models")
    backbone = BertBackbone.from_pretrained("minilm_l6_h384_uncased")
    tokenizer = BertTokenizer.from_pretrained("minilm_l6_h384_uncased")
    pre = BertPreprocessor(tokenizer, sequence_length=128)
    keras.utils.set_random_seed(1234)
    classifier = BertClassifier(backbone, num_classes=3)
    features = pre(tf.constant(TEXTS))
    logits = classifier(features, training=False)
    embedded = backbone(features, training=False)
    mask = tf.cast(features["padding_mask"], tf.float32)[:, :, None]
    mean = tf.reduce_sum(embedded["sequence_output"] * mask, 1) / tf.reduce_sum(mask, 1)
    return {
        "tokenizer": tokenizer,
        "classifier": export_saved_model(classifier, base / "sentiment", preprocessor=pre,
                                         label_names=LABELS),
        "backbone": export_saved_model(backbone, base / "embedder", preprocessor=pre),
        "probabilities": tf.nn.softmax(logits).numpy(),
        "pooled_output": embedded["pooled_output"].numpy(),
        "mean_pooled_output": mean.numpy(),
    }


@pytest.fixture(scope="module")
def served(minilm, tmp_path_factory):
    work = tmp_path_factory.mktemp("serving")
    job = {"exports": {"classifier": str(minilm["classifier"]),
                       "backbone": str(minilm["backbone"])},
           "texts": TEXTS}
    (work / "job.json").write_text(json.dumps(job))
    proc = subprocess.run([sys.executable, str(HERE / "serving_client.py"),
                           str(work / "job.json"), str(work / "result.json")],
                          env=_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((work / "result.json").read_text())


@pytest.mark.slow
def test_layout(minilm):
    path = minilm["classifier"]
    assert path.name == "1" and path.parent.name == "sentiment"
    assert sorted(os.listdir(path.parent)) == ["1"]  # no staging or scratch left behind
    for name in ("saved_model.pb", "variables/variables.index", "assets/vocab.txt",
                 "assets.extra/tf_serving_warmup_requests", "assets.extra/kbert_export.json"):
        assert (path / name).is_file(), name
    vocab = (path / "assets" / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert vocab == minilm["tokenizer"].get_vocabulary()
    meta = json.loads((path / "assets.extra" / "kbert_export.json").read_text())
    assert meta["label_names"] == LABELS and meta["sequence_length"] == 128

    from tensorflow_serving.apis import prediction_log_pb2

    records = list(tf.data.TFRecordDataset(
        str(path / "assets.extra" / "tf_serving_warmup_requests")).as_numpy_iterator())
    assert len(records) == 4
    logs = [prediction_log_pb2.PredictionLog.FromString(r) for r in records]
    assert [log.WhichOneof("log_type") for log in logs] == ["predict_log"] * 3 + ["classify_log"]
    assert len(logs[3].classify_log.request.input.example_list.examples) == 4
    requests = [log.predict_log.request for log in logs[:3]]
    assert [r.model_spec.signature_name for r in requests] == [
        "serving_default", "serving_default", "serve_examples"]
    assert [tf.make_ndarray(r.inputs["text"]).shape for r in requests[:2]] == [(1,), (4,)]
    examples = tf.io.parse_example(tf.make_ndarray(requests[2].inputs["examples"]),
                                   {"text": tf.io.FixedLenFeature([], tf.string)})
    np.testing.assert_array_equal(examples["text"], tf.make_ndarray(requests[1].inputs["text"]))
    assert meta["signatures"]["serve_examples"] == {"inputs": ["examples"],
                                                    "example_features": ["text"]}
    assert meta["signatures"]["classify"] == {"inputs": ["inputs"],
                                              "method": "tensorflow/serving/classify",
                                              "example_features": ["text"]}


@pytest.mark.slow
def test_fresh_process_imports_no_kbert_or_keras(served):
    assert served["errors"] == []
    assert served["modules"] == []


@pytest.mark.slow
@pytest.mark.parametrize("name", ["classifier", "backbone"])
def test_ops_are_all_in_stock_tf_serving(served, name):
    ops = served["ops"][name]
    # Judged in a process that registered TensorFlow's ops only: the rest must be tf_text's.
    assert set(ops["non_core"]) <= serving_ops.TF_TEXT_SERVING_OPS, ops["non_core"]
    assert "FastWordpieceTokenizeWithOffsets" in ops["non_core"]
    assert not set(ops["all"]) & serving_ops.FORBIDDEN_OPS


@pytest.mark.slow
def test_fresh_process_predictions_match(served, minilm):
    out = served["serving_default"]["classifier"]
    np.testing.assert_allclose(out["probabilities"], minilm["probabilities"], atol=1e-5, rtol=0)
    expected = minilm["probabilities"].argmax(-1)
    assert out["label_id"] == expected.tolist()
    assert out["label"] == [LABELS[i] for i in expected]
    emb = served["serving_default"]["backbone"]
    for key in ("pooled_output", "mean_pooled_output"):
        np.testing.assert_allclose(emb[key], minilm[key], atol=1e-5, rtol=0)
    assert np.array(emb["sequence_output"]).shape[::2] == (len(TEXTS), 384)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["classifier", "backbone"])
def test_bad_requests_get_defined_answers(served, name):
    bad = served["bad"][name]
    assert bad["wrong_dtype"]["error"] == "InvalidArgumentError"
    assert bad["wrong_key"]["error"] == "TypeError"
    assert bad["rank_2"]["error"] == "InvalidArgumentError"  # a loader reads it as given
    assert "Shape of tensor text [1,1] is not compatible" in bad["rank_2"]["message"]
    empty = bad["empty_batch"]["ok"]
    big = bad["one_megabyte"]
    assert "ok" in bad["invalid_utf8"] and "ok" in big, big
    assert big["seconds"] < 30
    if name == "classifier":
        assert empty == {"label": [0], "label_id": [0], "logits": [0, 3],
                         "probabilities": [0, 3]}
        assert abs(sum(big["ok"]["probabilities"][0]) - 1) < 1e-5
    else:
        assert empty["pooled_output"] == [0, 384] and empty["sequence_output"][::2] == [0, 384]


@pytest.mark.slow
def test_emulated_grpc_prediction_service(served, minilm):
    """Emulates TF Serving (session-based load, gRPC PredictionService); not the real binary."""
    grpc = served["grpc"]["classifier"]
    np.testing.assert_allclose(grpc["predict"]["ok"]["probabilities"], minilm["probabilities"],
                               atol=1e-5, rtol=0)
    assert grpc["predict"]["ok"]["label"] == served["serving_default"]["classifier"]["label"]
    assert grpc["wrong_dtype"] == {"error": "INVALID_ARGUMENT"}
    assert grpc["wrong_key"] == {"error": "INVALID_ARGUMENT"}
    assert "ok" in grpc["after_errors"]
    assert grpc["warmup"] == [["label", "label_id", "logits", "probabilities"]] * 3 + [
        ["classify:4"]]
    # The same texts as tf.Examples (serve_examples): the same answers; a missing feature is
    # refused.
    assert grpc["examples"] == grpc["predict"]
    assert grpc["examples_missing_feature"] == {"error": "INVALID_ARGUMENT"}
    # TF Serving's Classify API: every label with its probability, per example; an example
    # list with a context merges it into each example; a predict signature is refused.
    classified = grpc["classify"]["ok"]
    assert [[label for label, _ in row] for row in classified] == [LABELS] * len(TEXTS)
    np.testing.assert_allclose([[score for _, score in row] for row in classified],
                               minilm["probabilities"], atol=1e-5, rtol=0)
    np.testing.assert_allclose([[score for _, score in row]
                                for row in grpc["classify_from_context"]["ok"]],
                               minilm["probabilities"][[0] * len(TEXTS)], atol=1e-5, rtol=0)
    assert grpc["classify_on_predict_signature"] == {"error": "INVALID_ARGUMENT"}
    emb = served["grpc"]["backbone"]
    np.testing.assert_allclose(emb["predict"]["ok"]["pooled_output"], minilm["pooled_output"],
                               atol=1e-5, rtol=0)
    assert emb["examples"] == emb["predict"] and "classify" not in emb
    assert len(emb["warmup"]) == 3 and all(isinstance(r, list) for r in emb["warmup"])


@pytest.mark.slow
def test_saved_model_cli_show(minilm):
    # The console script of the TensorFlow in this interpreter's environment (not PATH's).
    cli = pathlib.Path(sys.executable).parent / "saved_model_cli"
    proc = subprocess.run([str(cli), "show", "--dir", str(minilm["classifier"]),
                           "--all"], env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = proc.stdout
    default = text.split("signature_def['serving_default']")[1]
    assert re.search(r"inputs\['text'\] tensor_info:\s+dtype: DT_STRING\s+shape: \(-1\)",
                     default)
    assert "outputs['label'] tensor_info:\n        dtype: DT_STRING" in default
    assert "Method name is: tensorflow/serving/predict" in default
    tokens = text.split("signature_def['serve_token_ids']")[1]
    assert "inputs['token_ids'] tensor_info:\n        dtype: DT_INT32" in tokens
    assert "Method name is: tensorflow/serving/predict" in tokens
    examples = text.split("signature_def['serve_examples']")[1]
    assert re.search(r"inputs\['examples'\] tensor_info:\s+dtype: DT_STRING\s+shape: \(-1\)",
                     examples)
    assert "outputs['label'] tensor_info:\n        dtype: DT_STRING" in examples
    classify = text.split("signature_def['classify']")[1].split("signature_def[")[0]
    assert "Method name is: tensorflow/serving/classify" in classify
    assert sorted(re.findall(r"outputs\['(\w+)'\]", classify)) == ["classes", "scores"]


@pytest.mark.slow
def test_saved_model_cli_run(minilm):
    """`saved_model_cli run` loads with a Session, as TF Serving does."""
    proc = subprocess.run(
        [sys.executable, str(HERE / "saved_model_cli_text.py"), "run",
         "--dir", str(minilm["classifier"]), "--tag_set", "serve",
         "--signature_def", "serving_default",
         "--input_exprs", f"text={json.dumps(TEXTS[:2])}"],
        env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    labels = re.search(r"Result for output key label:\n\[(.*)\]", proc.stdout).group(1)
    expected = [LABELS[i] for i in minilm["probabilities"][:2].argmax(-1)]
    assert labels == " ".join(f"b'{x}'" for x in expected)


@pytest.mark.slow
def test_saved_model_cli_run_on_examples(minilm):
    """`saved_model_cli run --input_examples` builds the tf.Examples a TFX client sends."""
    examples = json.dumps([{"text": [t], "label": ["ignored"]} for t in TEXTS[:2]])
    proc = subprocess.run(
        [sys.executable, str(HERE / "saved_model_cli_text.py"), "run",
         "--dir", str(minilm["classifier"]), "--tag_set", "serve",
         "--signature_def", "serve_examples", "--input_examples", f"examples={examples}"],
        env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    labels = re.search(r"Result for output key label:\n\[(.*)\]", proc.stdout).group(1)
    expected = [LABELS[i] for i in minilm["probabilities"][:2].argmax(-1)]
    assert labels == " ".join(f"b'{x}'" for x in expected)


@pytest.mark.slow
def test_in_process_op_check(minilm):
    for key in ("classifier", "backbone"):
        assert serving_ops.unservable_ops(minilm[key]) == {}


# --- tiny models: versions, atomicity, the other model types ------------------------------

@pytest.fixture(scope="module")
def tiny():
    keras.utils.set_random_seed(0)
    config = BertConfig(vocab_size=len(TINY_VOCAB), hidden_size=32, num_layers=2, num_heads=4,
                        intermediate_size=64, max_position_embeddings=64)
    tokenizer = BertTokenizer(vocabulary=TINY_VOCAB, lowercase=True)
    return BertBackbone(config), BertPreprocessor(tokenizer, sequence_length=16)


def _load(path):
    return tf.saved_model.load(str(path)).signatures


def _example(**features):
    """A serialized tf.Example with these bytes features (lists of strings)."""
    return tf.train.Example(features=tf.train.Features(feature={
        name: tf.train.Feature(bytes_list=tf.train.BytesList(value=[v.encode() for v in values]))
        for name, values in features.items()})).SerializeToString()


@pytest.mark.slow
def test_versions_count_up(tiny, tmp_path):
    backbone, pre = tiny
    model = BertClassifier(backbone, num_classes=2)
    base = tmp_path / "m"
    assert next_version(base) == 1
    assert export_saved_model(model, base, preprocessor=pre, warmup_texts=[]).name == "1"
    assert export_saved_model(model, base, preprocessor=pre, warmup_texts=[]).name == "2"
    assert export_saved_model(model, base, preprocessor=pre, version=7,
                              warmup_texts=[]).name == "7"
    assert next_version(base) == 8
    with pytest.raises(FileExistsError):
        export_saved_model(model, base, preprocessor=pre, version=2)
    export_saved_model(model, base, preprocessor=pre, version=2, overwrite=True)
    assert sorted(os.listdir(base)) == ["1", "2", "7"]
    with pytest.raises(ValueError):
        export_saved_model(model, base, preprocessor=pre, version=0)


def test_each_serving_graph_is_traced_once(tiny, tmp_path, monkeypatch):
    """`tf.saved_model.save` traces a module's tf.function attributes again in its own context;
    none of the export's functions is an attribute, and its tf.Example signatures call the
    text graph, so the preprocessor's graph is built once per export (it was 7 times)."""
    backbone, pre = tiny
    model = BertClassifier(backbone, num_classes=2)
    pre(tf.constant(["a good movie"]))  # built (Keras traces a layer's first call for shapes)
    calls = []
    call = BertPreprocessor.call
    monkeypatch.setattr(BertPreprocessor, "call",
                        lambda self, inputs: calls.append(1) or call(self, inputs))
    export_saved_model(model, tmp_path / "m", preprocessor=pre, warmup_texts=[])
    assert len(calls) == 1


@pytest.mark.slow
@pytest.mark.parametrize("where", ["write_requests", "check_servable"])
def test_failed_export_leaves_nothing(tiny, tmp_path, monkeypatch, where):
    backbone, pre = tiny
    model = BertClassifier(backbone, num_classes=2)
    base = tmp_path / "m"
    export_saved_model(model, base, preprocessor=pre, warmup_texts=[])

    def fail(*args, **kwargs):
        raise RuntimeError("disk full")

    target = warmup if where == "write_requests" else serving_ops
    monkeypatch.setattr(target, where, fail)
    with pytest.raises(RuntimeError, match="disk full"):
        export_saved_model(model, base, preprocessor=pre)
    assert sorted(os.listdir(base)) == ["1"]  # no "2", no staging or scratch directory
    assert next_version(base) == 2


def test_unservable_ops_are_refused(tmp_path):
    class WithPython(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
        def f(self, x):
            return tf.py_function(lambda v: v * 2, [x], tf.float32)

    module = WithPython()
    tf.saved_model.save(module, str(tmp_path), signatures={"serving_default": module.f})
    assert "EagerPyFunc" in serving_ops.unservable_ops(tmp_path)
    with pytest.raises(ValueError, match="EagerPyFunc"):
        serving_ops.check_servable(tmp_path)


@pytest.mark.slow
def test_a_classifier_fit_on_pairs_exports_for_pairs(tiny, tmp_path):
    """A classifier fit on raw pairs knows it (`sentence_pair`, saved with it), and its export
    takes pairs without being told: it served single sentences, answers about other input."""
    backbone, pre = tiny
    model = BertClassifier(backbone, num_classes=2, preprocessor=pre)
    assert model.sentence_pair is None
    model.compile()
    texts, pairs = ["the movie was good", "a bad film !"], ["it is great", "not good ."]
    model.fit((texts, pairs), [1, 0], verbose=0)
    model.save(tmp_path / "pair.keras")
    loaded = keras.saving.load_model(tmp_path / "pair.keras")
    assert loaded.sentence_pair is True
    sig = _load(export_saved_model(loaded, tmp_path / "served"))
    out = sig["serving_default"](text=tf.constant(texts), text_pair=tf.constant(pairs))
    expected = tf.nn.softmax(model.predict((texts, pairs), verbose=0)).numpy()
    np.testing.assert_allclose(out["probabilities"], expected, atol=1e-5)
    model.fit(texts, [1, 0], verbose=0)  # its last raw-text fit: single sentences
    assert model.sentence_pair is False
    single = _load(export_saved_model(model, tmp_path / "served_single"))["serving_default"]
    assert set(single.structured_input_signature[1]) == {"text"}
    # From a file (no run's record), as `kbert export` runs: the model's own form decides.
    served = _load(export_from_cli(tmp_path / "pair.keras", tmp_path / "cli", warmup_texts=[]))
    assert set(served["serving_default"].structured_input_signature[1]) == {"text", "text_pair"}
    model.save(tmp_path / "single.keras")
    with pytest.raises(ValueError, match="with single sentences, as it was trained"):
        export_from_cli(tmp_path / "single.keras", tmp_path / "cli_pair", sentence_pair=True)


@pytest.mark.slow
def test_pair_classifier_and_regression(tiny, tmp_path):
    backbone, pre = tiny
    texts, pairs = ["the movie was good", "a bad film !"], ["it is great", "not good ."]
    pair_model = BertClassifier(backbone, num_classes=2)
    sig = _load(export_saved_model(pair_model, tmp_path / "pair", preprocessor=pre,
                                   sentence_pair=True, label_names=["no", "yes"]))
    out = sig["serving_default"](text=tf.constant(texts), text_pair=tf.constant(pairs))
    expected = tf.nn.softmax(pair_model(pre((tf.constant(texts), tf.constant(pairs))))).numpy()
    np.testing.assert_allclose(out["probabilities"], expected, atol=1e-5)
    assert out["label"].numpy().tolist() == [[b"no", b"yes"][i] for i in expected.argmax(-1)]
    with pytest.raises(tf.errors.InvalidArgumentError):
        sig["serving_default"](text=tf.constant(texts), text_pair=tf.constant(pairs[:1]))
    from_examples = sig["serve_examples"](examples=tf.constant(
        [_example(text=[t], text_pair=[p]) for t, p in zip(texts, pairs)]))
    np.testing.assert_allclose(from_examples["probabilities"], out["probabilities"], atol=1e-6)
    with pytest.raises(tf.errors.InvalidArgumentError, match="text_pair"):
        sig["serve_examples"](examples=tf.constant([_example(text=texts[:1])]))

    regression = BertClassifier(backbone, num_classes=1)
    sig = _load(export_saved_model(regression, tmp_path / "reg", preprocessor=pre))
    out = sig["serving_default"](text=tf.constant(texts))
    assert sorted(out) == ["score"]
    np.testing.assert_allclose(out["score"], regression(pre(tf.constant(texts)))[:, 0],
                               atol=1e-5)
    ids = pre(tf.constant(texts))
    np.testing.assert_allclose(sig["serve_token_ids"](**ids)["score"], out["score"], atol=1e-5)


def test_regression_answers_the_regress_api(tiny, tmp_path):
    """A regression export's `regress` signature, through the emulated TF Serving's Regress
    API in a fresh process: the scores `serving_default` gives."""
    backbone, pre = tiny
    model = BertClassifier(backbone, num_classes=1)
    path = export_saved_model(model, tmp_path / "reg", preprocessor=pre)
    texts = ["the movie was good", "a bad film !", "it"]
    job = {"exports": {"reg": str(path)}, "texts": texts}
    (tmp_path / "job.json").write_text(json.dumps(job))
    proc = subprocess.run([sys.executable, str(HERE / "serving_client.py"),
                           str(tmp_path / "job.json"), str(tmp_path / "result.json")],
                          env=_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["errors"] == [], result["errors"]
    grpc = result["grpc"]["reg"]
    scores = grpc["predict"]["ok"]["score"]
    np.testing.assert_allclose(scores, model(pre(tf.constant(texts)))[:, 0], atol=1e-5)
    np.testing.assert_allclose(grpc["regress"]["ok"], scores, atol=1e-6)
    np.testing.assert_allclose(grpc["regress_from_context"]["ok"], scores[:1] * 3, atol=1e-6)
    assert grpc["warmup"][-1] == ["regress:4"]
    assert grpc["regress_on_predict_signature"] == {"error": "INVALID_ARGUMENT"}


@pytest.mark.slow
def test_multiple_choice(tiny, tmp_path):
    from kbert.models.multiple_choice import BertMultipleChoice

    backbone, pre = tiny
    model = BertMultipleChoice(backbone, num_choices=3)
    path = export_saved_model(model, tmp_path / "mc", preprocessor=pre)
    sig = _load(path)
    question = ["which film was good ?", "is it a movie ?"]
    choices = [["the movie", "a film", "it"], ["not good", "great", "bad"]]
    out = sig["serving_default"](text=tf.constant(question), choices=tf.constant(choices))
    packed = pre((tf.constant(np.repeat(question, 3)), tf.constant(np.reshape(choices, -1))))
    packed = {k: tf.reshape(v, [2, 3, -1]) for k, v in packed.items()}
    expected = tf.nn.softmax(model(packed)).numpy()
    np.testing.assert_allclose(out["probabilities"], expected, atol=1e-5)
    assert out["label_id"].numpy().tolist() == expected.argmax(-1).tolist()
    from_examples = sig["serve_examples"](examples=tf.constant(
        [_example(text=[q], choices=c) for q, c in zip(question, choices)]))
    np.testing.assert_allclose(from_examples["probabilities"], expected, atol=1e-5)
    with pytest.raises(tf.errors.InvalidArgumentError, match="choices"):  # two of three
        sig["serve_examples"](examples=tf.constant([_example(text=question[:1],
                                                             choices=choices[0][:2])]))
    empty = sig["serving_default"](text=tf.constant([], tf.string),
                                   choices=tf.zeros([0, 3], tf.string))
    assert empty["probabilities"].shape == (0, 3)
    # A loaded signature does not enforce its declared [None, 3]: another count is named
    # (it was TensorFlow's "Incompatible shapes: [3] vs. [2]" or a reshape error).
    with pytest.raises(tf.errors.InvalidArgumentError, match="`choices` must hold 3 choices"):
        sig["serving_default"](text=tf.constant(question), choices=tf.constant(
            [row[:2] for row in choices]))
    ids = tf.ones([2, 2, 4], tf.int32)
    with pytest.raises(tf.errors.InvalidArgumentError, match="`token_ids` must hold 3 choices"):
        sig["serve_token_ids"](token_ids=ids, segment_ids=ids * 0, padding_mask=ids)
    assert serving_ops.unservable_ops(path) == {}


def test_backbone_without_preprocessor_serves_token_ids(tiny, tmp_path):
    backbone, pre = tiny
    sig = _load(export_saved_model(backbone, tmp_path / "ids"))
    ids = pre(tf.constant(["the movie was good"]))
    out = sig["serving_default"](**ids)
    np.testing.assert_allclose(out["pooled_output"], backbone(ids)["pooled_output"], atol=1e-5)
    assert not (tmp_path / "ids" / "1" / "assets.extra" / "tf_serving_warmup_requests").exists()


@pytest.mark.slow
def test_export_from_cli(tiny, tmp_path):
    from kbert.runs import RunDirectory

    backbone, pre = tiny
    texts = tf.constant(["the movie was good"])
    # A run directory: the model holds its preprocessor, run.json the label names.
    model = BertClassifier(backbone, num_classes=2, preprocessor=pre)
    RunDirectory(tmp_path / "run").save(model, {"task": "toy", "kind": "classification",
                                                "settings": {}, "label_names": ["bad", "good"],
                                                "num_classes": 2, "sentence_pair": False},
                                        {})
    path = export_from_cli(tmp_path / "run", tmp_path / "served", warmup_texts=[])
    expected = tf.nn.softmax(model(pre(texts))).numpy()
    np.testing.assert_allclose(_load(path)["serving_default"](text=texts)["probabilities"],
                               expected, atol=1e-5)
    meta = json.loads((path / "assets.extra" / "kbert_export.json").read_text())
    assert meta["sequence_length"] == 16 and meta["label_names"] == ["bad", "good"]
    with pytest.raises(ValueError, match="answers task 'toy' with single sentences"):
        export_from_cli(tmp_path / "run", tmp_path / "served_pair", sentence_pair=True)
    # The run's own model.keras named as a file: still the run's label names (were "0", "1").
    path = export_from_cli(tmp_path / "run" / "model.keras", tmp_path / "served_file",
                           warmup_texts=[])
    out = _load(path)["serving_default"](text=texts)
    assert out["label"].numpy().tolist() == [[b"bad", b"good"][int(expected.argmax())]]

    # A bare .keras file saved without a preprocessor, given a vocabulary and a length.
    bare = BertClassifier(backbone, num_classes=2)
    bare.save(tmp_path / "bare.keras")
    (tmp_path / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n", encoding="utf-8")
    path = export_from_cli(tmp_path / "bare.keras", tmp_path / "served2",
                           vocabulary=tmp_path / "vocab.txt", sequence_length=16,
                           label_names="bad,good", warmup_texts=[])
    with pytest.raises(FileNotFoundError, match="No vocabulary at .*missing.txt: the "
                       "vocabulary is a vocab.txt"):  # was "No checkpoint at ..."
        export_from_cli(tmp_path / "bare.keras", tmp_path / "served3",
                        vocabulary=tmp_path / "missing.txt", warmup_texts=[])
    out = _load(path)["serving_default"](text=texts)
    expected = tf.nn.softmax(bare(pre(texts))).numpy()  # its own head
    np.testing.assert_allclose(out["probabilities"], expected, atol=1e-5)
    assert out["label"].numpy().tolist() == [[b"bad", b"good"][int(expected.argmax())]]


@pytest.mark.slow
def test_feature_extractor_and_feature_classifier(tiny, tmp_path):
    from kbert.models.feature_extractor import BertFeatureClassifier, BertFeatureExtractor

    backbone, pre = tiny
    extractor = BertFeatureExtractor(backbone, layers=(-2, -1))
    texts = tf.constant(["the movie was good", "bad"])
    out = _load(export_saved_model(extractor, tmp_path / "features", preprocessor=pre,
                                   warmup_texts=[]))["serving_default"](text=texts)
    full = extractor(pre(texts)).numpy()
    length = out["features"].shape[1]  # padding beyond the longest text is cut
    np.testing.assert_allclose(out["features"], full[:, :length], atol=1e-5)
    assert out["features"].shape[-1] == extractor.feature_size

    model = BertFeatureClassifier(backbone, num_classes=2, layers=(-2, -1), lstm_units=4)
    out = _load(export_saved_model(model, tmp_path / "fc", preprocessor=pre,
                                   warmup_texts=[]))["serving_default"](text=texts)
    np.testing.assert_allclose(out["probabilities"], tf.nn.softmax(model(pre(texts))),
                               atol=1e-5)
