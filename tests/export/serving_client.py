"""Runs exports the way a server would: in a fresh process with TensorFlow and the tensorflow-text
op libraries only (no kbert, no Keras: both are made unimportable before TensorFlow loads).

    python serving_client.py JOB.json RESULT.json

JOB: {"exports": {name: version_dir}, "texts": [...], "pairs": {name: [...]},
"inputs": {name: {input name: [...]}}}: an export's `serving_default` inputs are its entry in
"inputs" if it has one, else `text` (the texts) plus `text_pair` (its pairs). RESULT holds,
per export: the ops not registered by TensorFlow itself (checked before any tensorflow-text op
library is loaded), the `serving_default` outputs of `tf.saved_model.load` on the texts, the
answers to bad requests, and the answers of an emulated TF Serving `PredictionService` (gRPC on
127.0.0.1) that loads the export session-based, as the model server does, and runs each
request's signature by tensor name (plus a replay of the export's warm-up requests, and the
same request as tf.Examples to `serve_examples` where the export has it).

This is an emulation: the real `tensorflow_model_server` binary is not available here. What it
shares with the real server is the loading path (SavedModel loader with a Session, restore op,
init op, SignatureDef tensor names), the gRPC API and protos, and the op set.
"""

import glob
import importlib.util
import json
import os
import sys
import time
import traceback
from concurrent import futures

for _name in ("kbert", "keras", "tf_keras", "keras_hub"):
    sys.modules[_name] = None  # `import keras` now fails, as on a machine without it

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.core.protobuf import saved_model_pb2  # noqa: E402
from tensorflow.python.framework import op_def_registry  # noqa: E402


def non_core_ops(export_dir):
    """Ops of every graph (top level + function library) not registered by TensorFlow."""
    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    ops = set()
    for meta_graph in proto.meta_graphs:
        graph = meta_graph.graph_def
        functions = {fn.signature.name for fn in graph.library.function}
        nodes = list(graph.node) + [n for fn in graph.library.function for n in fn.node_def]
        ops.update(n.op for n in nodes if n.op not in functions)
    return sorted(ops), sorted(op for op in ops if op_def_registry.get(op) is None)


def load_text_op_libraries():
    """Registers tensorflow-text's C++ ops without importing its Python package (which needs
    Keras), as the model server links them."""
    spec = importlib.util.find_spec("tensorflow_text")
    root = list(spec.submodule_search_locations)[0]
    for library in sorted(glob.glob(os.path.join(root, "python", "ops", "_*.so"))):
        tf.load_op_library(library)


def decoded(array):
    """An array of UTF-8 bytes as nested lists of str (numpy's astype(str) reads ASCII only,
    and answers hold any text: a masked LM's pieces, an entity, an answer span)."""
    return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(array).tolist() \
        if array.size else array.astype(str).tolist()


def to_json(outputs):
    return {k: (decoded(v.numpy()) if v.dtype == tf.string else v.numpy().tolist())
            for k, v in outputs.items()}


def attempt(fn):
    """Calls fn; returns {"ok": outputs} or {"error": exception type}."""
    try:
        return {"ok": fn()}
    except Exception as e:  # noqa: BLE001 - any Python exception is a defined answer
        return {"error": type(e).__name__, "message": str(e)[:300]}


def bad_requests(fn, inputs):
    """Defined answers to malformed requests: each case spoils the first input and sends one
    valid string for the others."""
    first, *rest = inputs
    extra = {k: tf.constant(inputs[k][:1]) for k in rest}
    cases = {
        "wrong_dtype": lambda: to_json(fn(**{first: tf.constant([1, 2])}, **extra)),
        "wrong_key": lambda: to_json(fn(sentence=tf.constant(["x"]), **extra)),
        "rank_2": lambda: to_json(fn(**{first: tf.constant([["x"]])}, **extra)),
        "invalid_utf8": lambda: to_json(fn(**{first: tf.constant([b"\xff\xfe caf\xc3"])},
                                           **extra)),
    }
    cases["empty_batch"] = lambda: {k: list(v.shape) for k, v in fn(
        **{k: tf.constant([], tf.string) for k in inputs}).items()}
    big = ("word " * 200_000 + "end")[:1_000_000]
    result = {k: attempt(v) for k, v in cases.items()}
    start = time.perf_counter()
    result["one_megabyte"] = attempt(lambda: to_json(fn(**{first: tf.constant([big])},
                                                        **extra)))
    result["one_megabyte"]["seconds"] = time.perf_counter() - start
    return result


def request_inputs(job, name):
    """{input name: list of strings} of export `name`'s `serving_default` request."""
    if name in job.get("inputs", {}):
        return job["inputs"][name]
    inputs = {"text": job["texts"]}
    if name in job.get("pairs", {}):
        inputs["text_pair"] = job["pairs"][name]
    return inputs


def examples(inputs):
    """Serialized tf.Examples [batch]: row i holds each input's row i as a bytes feature."""
    rows = len(next(iter(inputs.values())))
    out = []
    for i in range(rows):
        example = tf.train.Example()
        for key, values in inputs.items():
            row = values[i] if isinstance(values[i], (list, np.ndarray)) else [values[i]]
            example.features.feature[key].bytes_list.value.extend(
                [str(v).encode("utf-8") for v in row])
        out.append(example.SerializeToString())
    return np.array(out, dtype=object)


# --- emulated TF Serving ------------------------------------------------------------------

class SessionServable:
    """An export loaded as the model server loads it: a Session, the SavedModel loader's
    restore + init ops, and requests run by the SignatureDef's tensor names."""

    def __init__(self, export_dir):
        self.graph = tf.Graph()
        self.session = tf.compat.v1.Session(graph=self.graph)
        with self.graph.as_default():
            meta = tf.compat.v1.saved_model.loader.load(self.session, ["serve"], export_dir)
        self.signatures = dict(meta.signature_def)

    def predict(self, signature_name, inputs):
        sig = self.signatures[signature_name or "serving_default"]
        if sig.method_name != "tensorflow/serving/predict":
            raise ValueError(f"not a predict signature: {sig.method_name}")
        if set(inputs) != set(sig.inputs):
            raise KeyError(f"inputs {sorted(inputs)} do not match the signature's "
                           f"{sorted(sig.inputs)}")
        feed = {}
        for key, value in inputs.items():
            info = sig.inputs[key]
            if tf.as_dtype(info.dtype) != tf.as_dtype(value.dtype):
                raise TypeError(f"input {key}: expects {tf.as_dtype(info.dtype).name}, got "
                                f"{tf.as_dtype(value.dtype).name}")
            feed[info.name] = value
        names = sorted(sig.outputs)
        values = self.session.run([sig.outputs[n].name for n in names], feed_dict=feed)
        return dict(zip(names, values))


    def run_examples(self, signature_name, method, serialized):
        """TF Serving's Classify (method "tensorflow/serving/classify") or Regress ("...regress")
        on serialized tf.Examples, with the checks and output rules of
        tensorflow_serving/servables/tensorflow/classifier.cc (GetClassificationSignatureDef,
        PreProcessClassification, PostProcessClassificationResult) and regressor.cc (the
        Regression ones): {"classes": [n][k] labels, "scores": [n][k]} or {"outputs": [n]}."""
        name = signature_name or "serving_default"
        if name not in self.signatures:
            raise KeyError(f"No signature was found with the name: {name}")
        sig = self.signatures[name]
        if sig.method_name != method:
            raise ValueError(f"Expected signature method_name to be {method}. Was: "
                             f"{sig.method_name}")
        if len(sig.inputs) != 1 or "inputs" not in sig.inputs:
            raise ValueError("Expected one input Tensor, named inputs.")
        if not serialized:
            raise ValueError("Input is empty.")
        classify = method.endswith("classify")
        names = [n for n in (("classes", "scores") if classify else ("outputs",))
                 if n in sig.outputs]
        if not names or len(sig.outputs) != len(names):
            raise ValueError(f"Expected outputs {'classes and/or scores' if classify else 'outputs'}"
                             f", found {sorted(sig.outputs)}.")
        values = self.session.run([sig.outputs[n].name for n in names],
                                  {sig.inputs["inputs"].name: np.array(serialized, object)})
        out = dict(zip(names, values))
        for key, value in out.items():
            want = {"classes": np.object_, "scores": np.float32, "outputs": np.float32}[key]
            shape_ok = (value.ndim == 2 if classify else
                        value.ndim == 1 or (value.ndim == 2 and value.shape[1] == 1))
            if value.dtype.type != want or not shape_ok or value.shape[0] != len(serialized):
                raise ValueError(f"{key}: {value.dtype} {value.shape} for {len(serialized)} "
                                 "examples")
        return out


def input_examples(request_input):
    """The serialized tf.Examples of a Classify / Regress request's `Input`, as
    tensorflow_serving/servables/tensorflow/util.cc's InputToSerializedExampleTensor makes them:
    each example, or the context's serialization followed by each example's (a merge)."""
    kind = request_input.WhichOneof("kind")
    if kind == "example_list":
        return [e.SerializeToString() for e in request_input.example_list.examples]
    if kind == "example_list_with_context":
        listed = request_input.example_list_with_context
        context = listed.context.SerializeToString()
        return [context + e.SerializeToString() for e in listed.examples]
    return []


def serve(servables):
    import grpc
    from tensorflow_serving.apis import (classification_pb2, predict_pb2,
                                         prediction_service_pb2_grpc, regression_pb2)

    class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
        def Predict(self, request, context):
            servable = servables.get(request.model_spec.name)
            if servable is None:
                context.abort(grpc.StatusCode.NOT_FOUND, "no such model")
            inputs = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
            try:
                outputs = servable.predict(request.model_spec.signature_name, inputs)
            except (KeyError, TypeError, ValueError, tf.errors.OpError) as e:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e)[:500])
            response = predict_pb2.PredictResponse(model_spec=request.model_spec)
            for key, value in outputs.items():
                response.outputs[key].CopyFrom(tf.make_tensor_proto(value))
            return response

        def _examples(self, request, context, method):
            servable = servables.get(request.model_spec.name)
            if servable is None:
                context.abort(grpc.StatusCode.NOT_FOUND, "no such model")
            try:
                return servable.run_examples(request.model_spec.signature_name, method,
                                             input_examples(request.input))
            except (KeyError, TypeError, ValueError, tf.errors.OpError) as e:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e)[:500])

        def Classify(self, request, context):
            out = self._examples(request, context, "tensorflow/serving/classify")
            response = classification_pb2.ClassificationResponse(model_spec=request.model_spec)
            rows = len(next(iter(out.values())))
            for i in range(rows):
                row = response.result.classifications.add()
                for c in range(next(iter(out.values())).shape[1]):
                    entry = row.classes.add()
                    if "classes" in out:
                        entry.label = out["classes"][i, c].decode()
                    if "scores" in out:
                        entry.score = float(out["scores"][i, c])
            return response

        def Regress(self, request, context):
            out = self._examples(request, context, "tensorflow/serving/regress")
            response = regression_pb2.RegressionResponse(model_spec=request.model_spec)
            for value in out["outputs"].reshape(-1):
                response.result.regressions.add(value=float(value))
            return response

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2),
                         options=[("grpc.max_receive_message_length", 8 << 20)])
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        PredictionService(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


def grpc_checks(job):
    import grpc
    from tensorflow_serving.apis import (classification_pb2, predict_pb2, prediction_log_pb2,
                                         prediction_service_pb2_grpc, regression_pb2)

    exports = job["exports"]
    servables = {name: SessionServable(path) for name, path in exports.items()}
    server, port = serve(servables)
    results = {}
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)

        def call(name, inputs, signature="serving_default"):
            request = predict_pb2.PredictRequest()
            request.model_spec.name = name
            request.model_spec.signature_name = signature
            for key, value in inputs.items():
                request.inputs[key].CopyFrom(tf.make_tensor_proto(value))
            try:
                response = stub.Predict(request, timeout=60)
            except grpc.RpcError as e:
                return {"error": e.code().name}
            return {"ok": {k: decoded(tf.make_ndarray(v))
                           if v.dtype == tf.string.as_datatype_enum
                           else tf.make_ndarray(v).tolist()
                           for k, v in response.outputs.items()}}

        def call_api(name, api, signature, serialized, context=None):
            """Classify or Regress with these serialized examples (after `context`)."""
            request = (classification_pb2.ClassificationRequest() if api == "classify"
                       else regression_pb2.RegressionRequest())
            request.model_spec.name = name
            request.model_spec.signature_name = signature
            listed = (request.input.example_list if context is None
                      else request.input.example_list_with_context)
            if context is not None:
                listed.context.ParseFromString(context)
            for example in serialized:
                listed.examples.add().ParseFromString(example)
            try:
                response = (stub.Classify if api == "classify" else stub.Regress)(request,
                                                                                 timeout=60)
            except grpc.RpcError as e:
                return {"error": e.code().name}
            if api == "classify":
                return {"ok": [[[c.label, c.score] for c in row.classes]
                               for row in response.result.classifications]}
            return {"ok": [r.value for r in response.result.regressions]}

        for name, path in exports.items():
            inputs = {k: np.array(v, dtype=object) for k, v in request_inputs(job, name).items()}
            first = next(iter(inputs))
            out = {"predict": call(name, inputs),
                   "wrong_dtype": call(name, {**inputs, first: np.array([1, 2], np.int32)}),
                   "wrong_key": call(name, {"sentence": inputs[first]}),
                   "after_errors": call(name, inputs)}
            if "serve_examples" in servables[name].signatures:
                # The same rows as tf.Examples; then with the first input's feature misnamed.
                out["examples"] = call(name, {"examples": examples(inputs)}, "serve_examples")
                misnamed = {("sentence" if k == first else k): v for k, v in inputs.items()}
                out["examples_missing_feature"] = call(
                    name, {"examples": examples(misnamed)}, "serve_examples")
            api = next((a for a in ("classify", "regress") if a in servables[name].signatures),
                       None)
            if api:
                # TF Serving's Classify / Regress API: the rows as Examples; every row from
                # one context; and the API on a predict signature, which the server refuses.
                rows = examples(inputs)
                out[api] = call_api(name, api, api, rows)
                out[f"{api}_from_context"] = call_api(
                    name, api, api, [b""] * len(rows),  # empty examples: all from the context
                    context=examples({k: v[:1] for k, v in inputs.items()})[0])
                out[f"{api}_on_predict_signature"] = call_api(name, api, "serving_default", rows)
            warmup = os.path.join(path, "assets.extra", "tf_serving_warmup_requests")
            replies = []
            for record in tf.compat.v1.io.tf_record_iterator(warmup):
                log = prediction_log_pb2.PredictionLog.FromString(record)
                kind = log.WhichOneof("log_type")  # predict_log, classify_log or regress_log
                request = getattr(log, kind).request
                request.model_spec.name = name
                try:
                    if kind == "predict_log":
                        replies.append(sorted(stub.Predict(request, timeout=60).outputs))
                    elif kind == "classify_log":
                        result = stub.Classify(request, timeout=60).result
                        replies.append([f"classify:{len(result.classifications)}"])
                    else:
                        result = stub.Regress(request, timeout=60).result
                        replies.append([f"regress:{len(result.regressions)}"])
                except grpc.RpcError as e:
                    replies.append(e.code().name)
            out["warmup"] = replies
            results[name] = out
    finally:
        server.stop(None)
    return results


def main(job_path, result_path):
    with open(job_path) as f:
        job = json.load(f)
    exports = job["exports"]
    result = {"ops": {}, "serving_default": {}, "bad": {}, "errors": []}
    for name, path in exports.items():
        all_ops, extra = non_core_ops(path)
        result["ops"][name] = {"all": all_ops, "non_core": extra}
    load_text_op_libraries()
    for name, path in exports.items():
        fn = tf.saved_model.load(path).signatures["serving_default"]
        inputs = request_inputs(job, name)
        result["serving_default"][name] = to_json(fn(**{k: tf.constant(v)
                                                        for k, v in inputs.items()}))
        result["bad"][name] = bad_requests(fn, inputs)
    try:
        result["grpc"] = grpc_checks(job)
    except Exception:  # noqa: BLE001 - reported to the test
        result["errors"].append(traceback.format_exc())
    result["modules"] = sorted(k for k, v in sys.modules.items()
                               if v is not None and k.split(".")[0] in
                               ("kbert", "keras", "tf_keras", "keras_hub", "tensorflow_text"))
    with open(result_path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
