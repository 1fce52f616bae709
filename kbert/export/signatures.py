"""Serving signatures: what each kind of model's signatures take and return (which kind a
model is: `kbert.export.serving_kinds`).

Every export has these signatures, with method name "tensorflow/serving/predict" unless said:

* `serving_default`: raw text in, answers out. Inputs are DT_STRING [batch]: `text`, plus
  `text_pair` for sentence-pair models, or `text` (the question / context) and `choices`
  [batch, num_choices] for multiple choice; a string input of another rank (a scalar,
  [batch, 1] for `text`) is an InvalidArgument error. Tokenization and packing run in the graph
  (`BertPreprocessor`), then padding beyond the batch's longest sequence is cut off before the
  model runs, so short requests do not pay for the full `sequence_length`.
* `serve_examples` (with a preprocessor): `examples`, DT_STRING [batch] serialized
  `tf.train.Example` protos whose bytes features carry `serving_default`'s inputs, one string
  each (`choices`: num_choices strings), other features ignored; same outputs. For clients that
  send tf.Examples: TFX's BulkInferrer and TFMA (set the signature name), Model Garden
  habits (its `serve_text_examples`). An example without one of them, or with another count
  or type, gets an InvalidArgument error naming the feature.
* `classify` (classifiers with a preprocessor) and `regress` (regression): TF Serving's
  Classify and Regress APIs (method names "tensorflow/serving/classify" / "regress", set after
  saving: TensorFlow 2 writes every signature as predict). Input `inputs`: serialized
  tf.Examples as for `serve_examples`; outputs `classes` string and `scores` float32
  [batch, num_classes] (every label name, each with its probability), or `outputs` float32
  [batch]. So `POST /v1/models/NAME:classify` with `{"signature_name": "classify",
  "examples": [{"text": "..."}]}` answers with labels and scores.
* `serve_token_ids`: the model's own inputs, int32 `token_ids`, `segment_ids`, `padding_mask`
  ([batch, seq], or [batch, num_choices, seq] for multiple choice), for clients that tokenize
  themselves. Same outputs. Ids outside the vocabulary, segments outside the model's types, a
  mask not 0/1, rows empty or longer than the model's positions, inputs of different shapes
  or, for multiple choice, another number of choices get an InvalidArgument error naming the
  input (`kbert.tensorflow_inputs`; loaders do not enforce a signature's shape).

Work per request is bounded: each text is cut, before tokenization, to the bytes its kept
tokens can come from (`kbert.text.preprocessor_base`), and a span labeler's context or a token
classifier's text to its first `max_context_length` sub-tokens (`BertSpanPreprocessor`,
`BertTokenPreprocessor`).

Outputs, by task:
* classifier: `label_id` int32 [batch], `label` string [batch] (from `label_names`, default
  "0", "1", ...), `probabilities` float32 [batch, num_classes], `logits`;
  regression (num_classes=1): `score` float32 [batch].
* multiple choice: `label_id` (the index of the best choice), `probabilities` and `logits`
  [batch, num_choices].
* backbone (sentence embeddings): `pooled_output` [batch, hidden], `mean_pooled_output`
  [batch, hidden] (mean of the token vectors under the mask: the sentence-transformers
  embedding of the MiniLM checkpoint), `sequence_output` [batch, seq, hidden] and its
  `padding_mask` [batch, seq].
* feature extractor: `features` [batch, seq, features] and `padding_mask`.
* token classifier (NER): `serving_default` splits `text` into CoNLL-style words
  (`kbert.text.word_split`), packs them in windows (`BertTokenPreprocessor.windows`: a text
  longer than a row is tagged to its end, each word in its max-context window) and returns the
  entities of each input, padded to the batch's most: `entity_text`, `entity_label` string
  [batch, max_entities] ("" padding), `entity_start`, `entity_end` int32 (character
  [start, end) in `text`, -1 padding) and `entity_count` int32 [batch]. `label_names` (default:
  the model's own) must be its IOB tags. `serve_token_ids` returns per-token `label_id`,
  `label`, `probabilities`, `logits` [batch, seq, ...] and `padding_mask`.
* span labeler (SQuAD): `serving_default` takes `question` and `context` strings [batch], cuts
  each context into windows (`BertSpanPreprocessor`), runs the model on all windows and decodes
  one answer per question (`kbert.text.span_decoding.decode_spans`, as
  tests/spans/reference_squad.py's `decode_answers`): `answer` string [batch] (the context's
  characters, "" for none), `start_char`, `end_char` int32 (code points, -1 for none), `score`
  float32 (best start + end logit), `null_score_diff` float32. `squad_version="2.0"` answers ""
  when the null score beats the best by more than `null_threshold`. A question without a word
  piece (empty, blank) is an InvalidArgument error naming its row, as `kbert predict` refuses
  it; a context without one answers "" (score -inf). `serve_token_ids` returns
  the windows' `start_logits`, `end_logits` float32 [batch, seq].
* masked LM (fill-mask; a `BertPretrainer`): each "[MASK]" in `text` is a blank, the text
  around it tokenized as text (`BertFillMaskPreprocessor`); outputs the `top_k` likeliest word
  pieces of each blank, likeliest first: `token` string, `token_id` int32, `score` float32
  (probability) [batch, max_blanks, top_k] ("", -1, 0 past a text's blanks), `blank_count`
  int32 [batch] and `filled` string [batch] (the text with each blank replaced by its likeliest
  piece). A blank past `sequence_length` is an InvalidArgument error. `serve_token_ids` takes
  the blanks as [MASK] ids and gives the same outputs but `filled`.
"""

import tensorflow as tf

from kbert.tensorflow_inputs import check_token_inputs
from kbert.models.input_limits import check_preprocessor, model_limits
from kbert.export.serving_kinds import label_names_for, num_choices, num_classes, serving_kind_for
from kbert.config import INPUT_KEYS
from kbert.text.trim import trim_to_longest

TOKEN_KEYS = INPUT_KEYS
PREDICT_METHOD = "tensorflow/serving/predict"
EXAMPLES_INPUT = "examples"  # `serve_examples`' input: serialized tf.Examples
# TF Serving's Classify / Regress signatures: their method names, and the input name both take
# (tensorflow_serving/servables/tensorflow/classifier.cc, regressor.cc).
SERVING_METHODS = {"classify": "tensorflow/serving/classify",
                   "regress": "tensorflow/serving/regress"}
CLASSIFY_INPUT = "inputs"


def unique_variables(variables):
    """`variables` without repeats, in first-seen order: what concrete functions capture, for a
    SavedModel to track (tf.Variables do not hash by identity)."""
    found = {}
    for v in variables:
        found.setdefault(id(v), v)
    return list(found.values())


def _rank_checked(fn, specs):
    """`fn` on string inputs refused unless each has its spec's rank (`text`: [batch]): the
    loaders do not enforce a signature's shapes, and a rank-2 or scalar `text` was answered.
    `tf.ensure_shape` checks the tensor given at run time (a rank test is folded away: the
    declared shape says what the rank is)."""
    def checked(*inputs):
        return fn(*(tf.ensure_shape(x, [None] * spec.shape.rank, name=f"{spec.name}_rank")
                    for x, spec in zip(inputs, specs)))

    return checked


class ServingModule(tf.Module):
    """A `tf.Module` holding a Keras model (and preprocessor) with its serving tf.functions
    (`functions`, by signature name).

    `signatures()` gives the dict for `tf.saved_model.save`. Without a preprocessor there is
    no text signature and `serving_default` is `serve_token_ids`. `trim_padding=False` runs
    the text signature at the full `sequence_length` (for comparisons). `squad_version`
    ("1.1" or "2.0") and `null_threshold` apply to span labelers.
    """

    def __init__(self, model, preprocessor=None, task=None, label_names=None,
                 sentence_pair=False, trim_padding=True, name=None, squad_version="1.1",
                 null_threshold=0.0, top_k=5):
        super().__init__(name=name)
        if str(squad_version) not in ("1.1", "2.0"):
            raise ValueError(f"squad_version must be '1.1' or '2.0', got {squad_version!r}.")
        self.squad_version, self.null_threshold = str(squad_version), float(null_threshold)
        self.trim_padding = bool(trim_padding)
        self.task = serving_kind_for(model, task)
        if self.task.serve_ids is not None:  # a masked LM: blanks are [MASK] ids of its tokens
            if preprocessor is None:
                raise ValueError("A masked LM's export needs its tokenizer: pass a preprocessor.")
            vocabulary = preprocessor.tokenizer.get_vocabulary()
            if not 1 <= int(top_k) <= len(vocabulary):
                raise ValueError(f"top_k must be in [1, {len(vocabulary)}], got {top_k}.")
            self.top_k, self.vocabulary = int(top_k), tf.constant(vocabulary)
        # The Keras model is not tracked as an object: only the tf.Variables the signatures
        # capture are (see `signatures`), the way Keras' own export does it. Tracking the model
        # object saves each variable twice (its Keras wrapper and the tf.Variable inside), and
        # a session-based loader (TF Serving, `saved_model_cli run`) then restores one copy
        # while the graph reads the other: "Could not find variable ...".
        self.__dict__["model"] = model
        self.__dict__["limits"] = model_limits(model)
        if preprocessor is not None:
            check_preprocessor(self.limits, preprocessor)
        # The preprocessor holds no variables, only lookup tables, which must be tracked.
        self.preprocessor = preprocessor
        self.sentence_pair = bool(sentence_pair)
        if self.task.inputs == "choices" and self.sentence_pair:
            raise ValueError("sentence_pair does not apply to multiple choice: its inputs are "
                             "`text` and `choices`.")
        self.num_choices = num_choices(model) if self.task.inputs == "choices" else None
        self.label_names = label_names_for(self.task, model, label_names)
        self._label_table = tf.constant(self.label_names or [""], tf.string)

        # The tf.functions by signature name, in a dict the module does not track:
        # `tf.saved_model.save` traces every tf.function attribute again in its own context
        # (half of an export's time) and saves the `signatures()` it is given anyway.
        functions = self.__dict__["functions"] = {}
        seq = [None, self.num_choices, None] if self.num_choices else [None, None]
        functions["serve_token_ids"] = tf.function(self._serve_token_ids, input_signature=[
            tf.TensorSpec(seq, tf.int32, name=k) for k in INPUT_KEYS])
        self._text_specs = ()
        if preprocessor is not None:
            fn, specs = self._text_graph()
            self._text_specs = tuple(specs)
            # The tf.Example signatures call the text graph (traced once) as a function.
            text = functions["serving_default"] = tf.function(_rank_checked(fn, specs),
                                                              input_signature=specs)
            examples = functions["serve_examples"] = tf.function(
                lambda examples: text(*self._parse_examples(examples, specs)),
                input_signature=[tf.TensorSpec([None], tf.string, name=EXAMPLES_INPUT)])
            if self.classify_signature:
                functions[self.classify_signature] = tf.function(
                    lambda inputs: self._classify(examples(inputs)),
                    input_signature=[tf.TensorSpec([None], tf.string, name=CLASSIFY_INPUT)])
        functions.setdefault("serving_default", functions["serve_token_ids"])

    def _text_graph(self):
        """`(fn, specs)` of `serving_default`: the graph of the string inputs this task takes,
        and their specs."""
        if self.num_choices:
            specs = [tf.TensorSpec([None], tf.string, name="text"),
                     tf.TensorSpec([None, self.num_choices], tf.string, name="choices")]
            fn = self._serve_choices
        elif self.task.inputs == "question_context":
            specs = [tf.TensorSpec([None], tf.string, name="question"),
                     tf.TensorSpec([None], tf.string, name="context")]
            fn = lambda question, context: self.task.serve_text(  # noqa: E731
                self, question, context)
        elif self.sentence_pair:
            specs = [tf.TensorSpec([None], tf.string, name="text"),
                     tf.TensorSpec([None], tf.string, name="text_pair")]
            fn = self._serve_pair
        else:
            specs = [tf.TensorSpec([None], tf.string, name="text")]
            fn = self._serve_single
            if self.task.serve_text is not None:
                fn = lambda text: self.task.serve_text(self, text)  # noqa: E731
        return fn, specs

    @staticmethod
    def _parse_examples(examples, specs):
        """The string inputs of `specs` ([batch] or [batch, n]), read from the bytes features of
        the same names in serialized tf.Examples."""
        features = tf.io.parse_example(examples, {
            spec.name: tf.io.FixedLenFeature(spec.shape[1:].as_list(), tf.string)
            for spec in specs})
        return [features[spec.name] for spec in specs]

    @property
    def classify_signature(self):
        """The name of the Classify / Regress API's signature ("classify" or "regress"; None
        where the export has none)."""
        if self.task.name != "classifier" or self.preprocessor is None:
            return None
        return "regress" if num_classes(self.model) == 1 else "classify"

    def _classify(self, answers):
        """`serve_examples`' answers as the Classify API's outputs, or the Regress API's."""
        if "score" in answers:
            return {"outputs": answers["score"]}
        batch = tf.shape(answers["probabilities"])[0]
        return {"classes": tf.tile(self._label_table[tf.newaxis], [batch, 1]),
                "scores": answers["probabilities"]}

    @property
    def text_inputs(self):
        """The names of `serving_default`'s string inputs (empty without a preprocessor)."""
        return tuple(spec.name for spec in self._text_specs)

    def signatures(self):
        """{"serving_default": ..., "serve_token_ids": ...} concrete functions, with a
        preprocessor also "serve_examples" and a classifier's "classify" or "regress"; tracks
        the variables they use."""
        signatures = {name: fn.get_concrete_function() for name, fn in self.functions.items()}
        self.model_variables = unique_variables(v for fn in signatures.values()
                                                for v in fn.variables)
        return signatures

    # --- graphs -----------------------------------------------------------------------------

    def _run(self, features):
        if self.task.serve_ids is not None:
            return self.task.serve_ids(self, features)
        outputs = self.model(features, training=False)
        return self.task.outputs(outputs, features, self._label_table)

    def _serve_token_ids(self, token_ids, segment_ids, padding_mask):
        if self.num_choices:
            token_ids = self._check_choice_count(token_ids, "token_ids")
        return self._run(check_token_inputs({"token_ids": token_ids, "segment_ids": segment_ids,
                                             "padding_mask": padding_mask}, self.limits))

    def _check_choice_count(self, tensor, name):
        """`tensor` with a check that its dimension 1 holds `num_choices`: a signature's
        declared shape is not enforced by the loaders (TF Serving, `tf.saved_model.load`)."""
        check = tf.debugging.assert_equal(
            tf.shape(tensor)[1], self.num_choices,
            message=f"`{name}` must hold {self.num_choices} choices per question (this model "
                    f"scores {self.num_choices}, its num_choices); got another count")
        with tf.control_dependencies([check]):
            return tf.identity(tensor)

    def _pack(self, inputs):
        packed = self.preprocessor(inputs)
        packed = {k: packed[k] for k in INPUT_KEYS}
        return trim_to_longest(packed) if self.trim_padding else packed

    def _serve_single(self, text):
        return self._run(self._pack(text))

    def _serve_pair(self, text, text_pair):
        check = tf.debugging.assert_equal(
            tf.shape(text)[0], tf.shape(text_pair)[0],
            message="`text` and `text_pair` must hold the same number of strings")
        with tf.control_dependencies([check]):
            text = tf.identity(text)
        return self._run(self._pack((text, text_pair)))

    def _serve_choices(self, text, choices):
        check = tf.debugging.assert_equal(
            tf.shape(text)[0], tf.shape(choices)[0],
            message="`choices` needs one row of choices per `text`")
        with tf.control_dependencies([check]):
            text = tf.identity(text)
        choices = self._check_choice_count(choices, "choices")
        questions = tf.repeat(text, self.num_choices)
        packed = self._pack((questions, tf.reshape(choices, [-1])))
        seq = tf.shape(packed["token_ids"])[-1]
        return self._run({k: tf.reshape(v, [-1, self.num_choices, seq])
                          for k, v in packed.items()})
