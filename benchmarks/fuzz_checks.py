"""The requests and answer checks of the serving fuzz (`benchmarks/fuzz_serving.py`'s worker).
Runs in a process with TensorFlow and tensorflow-text's ops only: no kbert, no Keras."""

import random

import numpy as np

from benchmarks.fuzz import NUM_CHOICES, random_text, texts_for

CLEAR = ("InvalidArgumentError", "TypeError", "ValueError")
ENTITY_TYPES = {"PER", "ORG", "LOC", "MISC"}
NORMAL = {"text": ["the river flows through paris ."], "text_pair": ["who was born in 1990 ?"],
          "choices": [["the river", "a museum", "berlin"]], "question": ["who was born ?"],
          "context": ["peter smith was born in paris in 1990 ."]}
TYPES = 2  # segment types of every BERT here


class Checks:
    """Requests for each entry point, and whether each answer keeps its invariants."""

    def __init__(self, tf, signatures, vocab_size, max_positions):
        self.tf, self.signatures = tf, signatures
        self.vocab_size, self.max_positions = vocab_size, max_positions

    def _strings(self, texts):
        return self.tf.constant(texts, self.tf.string)

    def _call(self, entry, texts, rng):
        """The answer of entry's `serving_default` to `texts` (+ generated other inputs)."""
        s, n = self._strings, len(texts)
        seconds = [random_text(rng)[1] for _ in range(n * (NUM_CHOICES if entry == "choices"
                                                           else 1))]
        fn = self.signatures[entry]["serving_default"]
        if entry == "pair":
            return fn(text=s(texts), text_pair=s(seconds)), seconds
        if entry == "choices":
            return fn(text=s(texts), choices=self.tf.reshape(s(seconds), [n, NUM_CHOICES])), \
                seconds
        if entry == "span":  # hostile questions with a word: a blank one is refused
            questions = [b"who " + q for q in seconds]  # (`_malformed` asks one)
            return fn(question=s(questions), context=s(texts)), seconds
        return fn(text=s(texts)), seconds

    def normal(self, entry):
        """A normal request's answer (the serving process must still give it at the end)."""
        if entry == "token_ids":
            ids = self.tf.constant([[101, 1996, 2314, 102]])
            out = self.signatures["classifier"]["serve_token_ids"](
                token_ids=ids, segment_ids=self.tf.zeros_like(ids),
                padding_mask=self.tf.ones_like(ids))
        elif entry == "examples":
            text = self.tf.train.Feature(bytes_list=self.tf.train.BytesList(
                value=[t.encode() for t in NORMAL["text"]]))
            example = self.tf.train.Example(features=self.tf.train.Features(
                feature={"text": text})).SerializeToString()
            out = self.signatures["classifier"]["serve_examples"](
                examples=self.tf.constant([example]))
        else:
            fn = self.signatures[entry]["serving_default"]
            args = {"classifier": ("text",), "pair": ("text", "text_pair"),
                    "choices": ("text", "choices"), "span": ("question", "context"),
                    "token": ("text",)}[entry]
            out = fn(**{k: self._strings(NORMAL[k]) for k in args})
        return {k: np.round(v.numpy().astype(float), 4).tolist() if v.dtype.is_floating
                else v.numpy().astype(str).tolist() for k, v in out.items()}

    def huge(self, megabytes):
        """{entry: {"seconds", "rss_growth_mb"}}: one request of `megabytes` MB of text to each
        text signature, before any other request: the time, and how far the process's peak
        resident memory rose beyond its earlier peak (0: within what it already used)."""
        import resource
        import time

        text = ("the river flows through paris . " * (megabytes * 40_000))[:megabytes * 10**6]
        rng, result = random.Random(0), {}
        for entry in ("classifier", "pair", "choices", "span", "token"):
            self.normal(entry)  # a loaded function's first call sets itself up: not measured
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            began = time.perf_counter()
            self._call(entry, [text.encode()], rng)
            result[entry] = {"seconds": round(time.perf_counter() - began, 2), "rss_growth_mb":
                             (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) // 1024}
        return result

    def request(self, entry, seed, index, batch, megabyte_every):
        """One request: {"entry", "index", "verdicts": one per case, "failures"}."""
        if entry == "token_ids":
            verdict, failure = self._ids_request(random.Random(f"{seed}:ids:{index}"))
            verdicts, failures = [verdict], [failure] if failure else []
        elif entry == "examples":
            verdicts, failures = self._examples_request(seed, index, batch, megabyte_every)
        elif index % 25 == 24:
            verdict, failure = self._malformed(entry, index)
            verdicts, failures = [verdict], [failure] if failure else []
        else:
            verdicts, failures = self._texts_request(entry, seed, index, batch, megabyte_every)
        for f in failures:
            f.update(entry=entry, index=index)
        return {"entry": entry, "index": index, "verdicts": verdicts, "failures": failures}

    def _texts_request(self, entry, seed, index, batch, megabyte_every):
        cases, rng = texts_for(seed, entry, index, megabyte_every, batch)
        texts = [t for _, t in cases]
        try:
            out, seconds = self._call(entry, texts, rng)
        except Exception as e:  # noqa: BLE001 - every exception is counted
            verdict = "error" if type(e).__name__ in CLEAR and str(e).strip() else "crash"
            return [verdict] * max(len(texts), 1), [{"kind": "exception", "error": str(e)[:300],
                                                     "texts": _show(texts)}]
        out = {k: v.numpy() for k, v in out.items()}
        if not texts:
            ok = all(v.shape[0] == 0 for v in out.values())
            return ["ok" if ok else "wrong"], [] if ok else [{"kind": "empty_batch"}]
        verdicts, failures = [], []
        for i, (kind, text) in enumerate(cases):
            problem = getattr(self, f"_{entry}_row", self._class_row)(out, i, text, entry)
            verdicts.append("wrong" if problem else "ok")
            if problem:
                failures.append({"kind": kind, "problem": problem, "text": _show([text])[0]})
        return verdicts, failures

    # --- invariants of one row ------------------------------------------------------------

    @staticmethod
    def _class_row(out, i, text, entry):
        p = out["probabilities"][i]
        if not (np.isfinite(p).all() and abs(p.sum() - 1) < 1e-4 and (p >= 0).all()):
            return f"probabilities {p.tolist()}"
        if int(out["label_id"][i]) != int(out["logits"][i].argmax()):
            return "label_id is not the largest logit"
        if entry != "choices" and out["label"][i].decode() != ("negative", "positive")[
                int(out["label_id"][i])]:
            return f"label {out['label'][i]!r}"
        if entry == "choices" and p.shape != (NUM_CHOICES,):
            return f"shape {p.shape}"
        return None

    def _characters(self, text):
        """The text's characters as the export counts them: invalid UTF-8 → one U+FFFD each."""
        points = self.tf.strings.unicode_decode(text, "UTF-8", errors="replace",
                                                replacement_char=0xFFFD).numpy()
        return "".join(map(chr, points))

    def _span_row(self, out, i, text, entry):
        start, end = int(out["start_char"][i]), int(out["end_char"][i])
        answer = out["answer"][i]
        if start == -1:
            return None if answer == b"" and end == -1 else f"no answer but {answer!r}, {end}"
        chars = self._characters(text)
        if not 0 <= start < end <= len(chars):
            return f"span {start}:{end} outside {len(chars)} characters"
        if answer != chars[start:end].encode("utf-8", "surrogatepass"):
            return f"answer {answer[:80]!r} is not characters {start}:{end} of the context"
        return None if np.isfinite(out["score"][i]) else f"score {out['score'][i]}"

    def _token_row(self, out, i, text, entry):
        count, chars = int(out["entity_count"][i]), None
        if not 0 <= count <= out["entity_text"].shape[1]:
            return f"entity_count {count}"
        for j in range(out["entity_text"].shape[1]):
            got = out["entity_text"][i, j], out["entity_label"][i, j].decode(), \
                int(out["entity_start"][i, j]), int(out["entity_end"][i, j])
            if j >= count:
                if got != (b"", "", -1, -1):
                    return f"padding entity {got}"
                continue
            chars = chars or self._characters(text)
            if got[1] not in ENTITY_TYPES or not 0 <= got[2] < got[3] <= len(chars) or \
                    got[0] != chars[got[2]:got[3]].encode("utf-8", "surrogatepass"):
                return f"entity {got[:2]} at {got[2]}:{got[3]} of {len(chars)} characters"
        return None

    # --- requests that are wrong in themselves --------------------------------------------

    def _malformed(self, entry, index):
        """A request no signature may answer: mismatched batch sizes, numbers for strings, a
        blank question, strings of another rank than [batch] (a scalar, [batch, 1])."""
        s, tf = self._strings, self.tf
        fn = self.signatures[entry]["serving_default"]
        two, one = s(["a", "b"]), s(["a"])
        rank = "is not compatible with expected shape"
        first = "question" if entry == "span" else "text"
        other = {"pair": {"text_pair": one}, "choices": {"choices": s([["a"] * NUM_CHOICES])},
                 "span": {"context": one}}.get(entry, {})
        calls = {"classifier": [(lambda: fn(text=tf.constant([1, 2])), "")],
                 "token": [(lambda: fn(text=tf.constant([1.5])), "")],
                 "pair": [(lambda: fn(text=two, text_pair=one), "")],
                 "choices": [(lambda: fn(text=two, choices=s([["a"] * NUM_CHOICES])), "")],
                 "span": [(lambda: fn(question=two, context=one), ""),
                          (lambda: fn(question=s(["a", " \u200b"]), context=two),
                           "[question of row] [1] [is blank")]}[entry] + [
            (lambda: fn(**{first: s([["a"]])}, **other), rank),
            (lambda: fn(**{first: tf.constant(b"a")}, **other), rank)]
        call, words = calls[index % len(calls)]
        return _expect_error(call, words)

    def _ids_request(self, rng):
        """Random ids, valid or with one input out of range / of the wrong shape."""
        batch, seq = rng.randint(0, 4), rng.randint(1, 40)
        ids = np.array([[rng.randrange(self.vocab_size) for _ in range(seq)] for _ in range(batch)],
                       np.int32).reshape(batch, seq)
        inputs = {"token_ids": ids, "segment_ids": (ids % 2).astype(np.int32),
                  "padding_mask": np.ones_like(ids)}
        spoil = rng.choice([None, None, "token_ids", "segment_ids", "padding_mask", "shape",
                            "length"]) if batch else None
        bad = {"token_ids": [-1, -5, self.vocab_size, 2**31 - 1, -2**31],
               "segment_ids": [-1, TYPES, 7], "padding_mask": [-1, 2, 5]}
        if spoil in bad:
            inputs[spoil][rng.randrange(batch), rng.randrange(seq)] = rng.choice(bad[spoil])
        elif spoil == "shape":
            inputs["segment_ids"] = inputs["segment_ids"][:, :-1]
            spoil = "segment_ids must have the shape"
        elif spoil == "length":
            inputs = {k: np.tile(v, (1, self.max_positions // seq + 1)) for k, v in inputs.items()}
            spoil = "at most"
        fn = self.signatures["classifier"]["serve_token_ids"]
        call = lambda: fn(**{k: self.tf.constant(v) for k, v in inputs.items()})  # noqa: E731
        if spoil is None:
            try:
                out = call()
            except Exception as e:  # noqa: BLE001
                return "crash" if type(e).__name__ not in CLEAR else "wrong", {
                    "kind": "valid ids refused", "error": str(e)[:300]}
            p = out["probabilities"].numpy()
            ok = p.shape == (batch, 2) and np.isfinite(p).all()
            return ("ok", None) if ok else ("wrong", {"kind": "ids", "problem": str(p.shape)})
        return _expect_error(call, spoil)


    def _examples_request(self, seed, index, batch, megabyte_every):
        """The classifier's `serve_examples` on the texts of a request as tf.Examples: answered
        as `serving_default` answers the texts; with one example's `text` feature missing, of
        another type or count, refused naming it; with one example's bytes cut, changed or
        replaced by noise, refused or (where they still parse) answered within the invariants.
        One case per text of a valid request, one per spoiled request."""
        cases, rng = texts_for(seed, "examples", index, megabyte_every, batch)
        texts = [t for _, t in cases]
        feature = lambda **kind: self.tf.train.Feature(**kind)  # noqa: E731
        features = [{"text": feature(bytes_list=self.tf.train.BytesList(value=[t]))}
                    for t in texts]
        spoil = rng.choice([None, None, "missing", "type", "count", "cut", "change", "noise"])
        spoil = spoil if texts else None
        if spoil in ("missing", "type", "count"):
            row = rng.randrange(len(texts))
            features[row] = {
                "missing": {"sentence": features[row]["text"]},
                "type": {"text": feature(int64_list=self.tf.train.Int64List(value=[7]))},
                "count": {"text": feature(bytes_list=self.tf.train.BytesList(
                    value=[texts[row], b"more"]))}}[spoil]
        examples = [self.tf.train.Example(features=self.tf.train.Features(feature=f))
                    .SerializeToString() for f in features]
        if spoil in ("cut", "change", "noise"):
            row = rng.randrange(len(texts))
            spoiled = bytearray(examples[row])
            if spoil == "cut":
                spoiled = spoiled[:rng.randrange(len(spoiled))]
            elif spoil == "change":
                for _ in range(rng.randint(1, 5)):
                    spoiled[rng.randrange(len(spoiled))] = rng.randrange(256)
            else:
                spoiled = bytearray(rng.randbytes(rng.randint(0, 200)))
            examples[row] = bytes(spoiled)
        fn = self.signatures["classifier"]["serve_examples"]
        call = lambda: fn(examples=self.tf.constant(examples, self.tf.string))  # noqa: E731
        if spoil in ("missing", "type", "count"):
            verdict, failure = _expect_error(call, "text")
            return [verdict], [failure] if failure else []
        if spoil is not None:
            return self._parsed_or_refused(call, spoil)
        try:
            out = {k: v.numpy() for k, v in call().items()}
        except Exception as e:  # noqa: BLE001 - every exception is counted
            return ["crash"] * max(len(texts), 1), [{"kind": "valid examples refused",
                                                     "error": str(e)[:300]}]
        want = {k: v.numpy() for k, v in self._call("classifier", texts, rng)[0].items()}
        if not texts:
            ok = out["probabilities"].shape == (0, 2)
            return ["ok" if ok else "wrong"], [] if ok else [{"kind": "empty_batch"}]
        verdicts, failures = [], []
        for i, text in enumerate(texts):
            same = (out["label"][i] == want["label"][i]
                    and np.allclose(out["probabilities"][i], want["probabilities"][i], atol=1e-6))
            verdicts.append("ok" if same else "wrong")
            if not same:
                failures.append({"kind": "examples differ from serving_default",
                                 "text": _show([text])[0]})
        return verdicts, failures

    def _parsed_or_refused(self, call, spoil):
        """One verdict for a request with corrupted bytes: a clear error, or answers within the
        classifier's invariants.

        TensorFlow's parser refuses bytes that are no tf.Example with an InvalidArgument status
        that quotes them ("Could not parse example input, value: '...'"), which is what a model
        server returns; in a Python process TensorFlow then fails to decode that message as
        UTF-8 and raises a UnicodeDecodeError instead (tensorflow/tensorflow#5234). That is
        counted as an error, of its own kind ("error_message_not_utf8")."""
        try:
            out = {k: v.numpy() for k, v in call().items()}
        except UnicodeDecodeError:
            return ["error_message_not_utf8"], []
        except Exception as e:  # noqa: BLE001
            if type(e).__name__ in CLEAR and str(e).strip():
                return ["error"], []
            return ["crash"], [{"kind": f"{spoil} bytes", "error": f"{type(e).__name__}: {e}"[:300]}]
        problems = [self._class_row(out, i, None, "classifier")
                    for i in range(len(out["probabilities"]))]
        problems = [p for p in problems if p]
        return (["wrong"], [{"kind": f"{spoil} bytes", "problem": problems[0]}]) if problems \
            else (["ok"], [])


def _expect_error(call, words):
    """("error", None) when `call` raises a clear error whose message holds `words`."""
    try:
        call()
    except Exception as e:  # noqa: BLE001
        if type(e).__name__ not in CLEAR:
            return "crash", {"kind": "unclear error", "error": f"{type(e).__name__}: {e}"[:300]}
        if words not in str(e):
            return "wrong", {"kind": "error not naming the input", "error": str(e)[:300]}
        return "error", None
    return "wrong", {"kind": "answered a bad request", "expected": words}


def _show(texts):
    return [t[:120].decode("utf-8", "backslashreplace") for t in texts]
