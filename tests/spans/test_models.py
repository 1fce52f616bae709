import pathlib
import sys

import keras
import numpy as np
import pytest

from kbert import BertBackbone
from kbert.data.conll import TaggedSentence
from tests.spans.reference_conll import conll_features, decode_tags, tagging_dataset
from kbert.data.squad import SquadExample
from tests.spans.reference_squad import span_dataset, squad_features
from kbert.models.span_labeler import BertSpanLabeler
from kbert.models.token_classifier import BertTokenClassifier
from tests.conftest import make_inputs
from tests.spans.helpers import VOCAB, tiny_config, tokenizer

ROOT = pathlib.Path(__file__).resolve().parents[2]
LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
SENTENCES = [TaggedSentence("Peter Smith visited Paris .".split(),
                            ["B-PER", "I-PER", "O", "B-LOC", "O"]),
             TaggedSentence("John lives in unbelievable Berlin".split(),
                            ["B-PER", "O", "O", "O", "B-LOC"])]


def test_span_labeler_outputs_and_masking(tiny_config):
    model = BertSpanLabeler(BertBackbone(tiny_config))
    x = make_inputs()
    out = model(x)
    assert set(out) == {"start_logits", "end_logits"}
    for logits in out.values():
        logits = np.asarray(logits)
        assert logits.shape == (3, 10)
        assert (logits[x["padding_mask"] == 0] == -1e4).all()
        assert (np.abs(logits[x["padding_mask"] == 1]) < 100).all()


def test_span_logits_are_the_heads_columns_in_every_call(tiny_config, tmp_path):
    """start_logits is the span head's column 0 and end_logits its column 1 (Hugging Face's
    `qa_outputs` split), whichever way the model is called, and after a save and load. (Both
    outputs once shared one output tensor, and `predict` returned another start.)"""
    model = BertSpanLabeler(BertBackbone(tiny_config))
    x = make_inputs()
    sequence = np.asarray(model.backbone(x)["sequence_output"])
    kernel, bias = model.span_head.get_weights()
    expected = sequence @ kernel + bias
    real = x["padding_mask"] == 1
    path = tmp_path / "span.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    for out in (model(x), model.predict_on_batch(x), model.predict(x, verbose=0),
                loaded.predict_on_batch(x)):
        np.testing.assert_allclose(np.asarray(out["start_logits"])[real], expected[..., 0][real],
                                   atol=1e-5)
        np.testing.assert_allclose(np.asarray(out["end_logits"])[real], expected[..., 1][real],
                                   atol=1e-5)


@pytest.mark.slow
def test_span_loss_and_gradients_equal_transformers_over_real_positions(minilm_dir):
    """`compile()`'s default span loss (the mean of the start and end cross-entropies) and its
    gradients are those of transformers' `BertForQuestionAnswering` on the same MiniLM weights
    and batch (its `qa_outputs` copied in, dropout off), once transformers' softmax leaves the
    padding out; `BertForQuestionAnswering` itself runs it over the padding too (its
    modeling_bert.py), which this test shows changes the loss."""
    import tensorflow as tf

    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoModelForQuestionAnswering.from_pretrained(str(minilm_dir)).eval()
    model = BertSpanLabeler(BertBackbone.from_pretrained(str(minilm_dir)))
    model.span_head.set_weights([hf.qa_outputs.weight.detach().numpy().T,
                                 hf.qa_outputs.bias.detach().numpy()])
    model.compile(optimizer="sgd")
    rng = np.random.default_rng(0)
    lengths = np.array([24, 17, 9, 24])
    mask = (np.arange(24)[None] < lengths[:, None]).astype("int32")
    x = {"token_ids": (rng.integers(1000, 30000, (4, 24)) * mask).astype("int32"),
         "segment_ids": ((np.arange(24)[None] >= 6) * mask).astype("int32"),
         "padding_mask": mask}
    y = {"start_logits": np.array([7, 10, 0, 20], "int32"),
         "end_logits": np.array([9, 12, 0, 23], "int32")}
    with tf.GradientTape() as tape:
        loss = model.compute_loss(x=x, y=y, y_pred=model(x, training=False))
    grads = tape.gradient(loss, model.trainable_weights)
    kernel_grad = grads[[w.path for w in model.trainable_weights].index(
        model.span_head.kernel.path)]

    out = hf(**{name: torch.tensor(x[key]).long() for name, key in (
        ("input_ids", "token_ids"), ("token_type_ids", "segment_ids"),
        ("attention_mask", "padding_mask"))})
    real = torch.tensor(mask).bool()
    ce = torch.nn.functional.cross_entropy
    hf_loss = 0.5 * sum(ce(logits.masked_fill(~real, -1e4), torch.tensor(y[key]).long())
                        for logits, key in ((out.start_logits, "start_logits"),
                                            (out.end_logits, "end_logits")))
    hf_loss.backward()
    np.testing.assert_allclose(float(loss), float(hf_loss), rtol=1e-5)
    hf_norm = torch.sqrt(sum((p.grad ** 2).sum() for p in hf.parameters()
                             if p.grad is not None))
    assert float(tf.linalg.global_norm([tf.convert_to_tensor(g) for g in grads if g is not None])
                 ) == pytest.approx(float(hf_norm), rel=1e-4)
    np.testing.assert_allclose(np.asarray(kernel_grad), hf.qa_outputs.weight.grad.numpy().T,
                               rtol=1e-5, atol=1e-6)  # float32 sums: seen 1.04e-6 at 0.125
    unmasked = 0.5 * sum(ce(logits, torch.tensor(y[key]).long()) for logits, key in (
        (out.start_logits, "start_logits"), (out.end_logits, "end_logits")))
    assert float(unmasked) > float(hf_loss) + 0.01

    # benchmarks/quality.py's `--hf-squad-loss masked` trains the HF side on kbert's loss; on
    # rows without padding it is BertForQuestionAnswering's own.
    from benchmarks.quality_squad_hf import masked_span_loss

    arrays = {**x, **y}
    batch = {name: torch.tensor(arrays[key]).long() for name, key in (
        ("input_ids", "token_ids"), ("token_type_ids", "segment_ids"),
        ("attention_mask", "padding_mask"), ("start_positions", "start_logits"),
        ("end_positions", "end_logits"))}
    assert float(masked_span_loss(hf)(**batch).loss) == pytest.approx(float(loss), rel=1e-5)
    full = {k: v[lengths == 24] for k, v in batch.items()}
    assert float(masked_span_loss(hf)(**full).loss) == pytest.approx(
        float(hf(**full).loss), rel=1e-6)


@pytest.mark.slow
def test_span_labeler_round_trip_and_fit(tmp_path):
    tok = tokenizer()
    model = BertSpanLabeler(BertBackbone(tiny_config()))
    context = "peter smith was born in paris in 1990."
    examples = [SquadExample("q", "who was born in paris?", context,
                             [("peter smith", 0)])] * 4
    features = squad_features(examples, tok, sequence_length=32, max_query_length=8)
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    history = model.fit(span_dataset(features, batch_size=2), epochs=2, verbose=0)
    assert {"start_logits_accuracy", "end_logits_accuracy"} <= set(history.history)
    x = {k: features[k][:2] for k in ("token_ids", "segment_ids", "padding_mask")}
    model.save(tmp_path / "span.keras")
    loaded = keras.saving.load_model(tmp_path / "span.keras")
    assert isinstance(loaded, BertSpanLabeler)
    for key in ("start_logits", "end_logits"):
        np.testing.assert_allclose(loaded(x)[key], model(x)[key], atol=1e-5)


def test_token_features_label_first_sub_tokens_only():
    tok = tokenizer()
    f = conll_features(SENTENCES, tok, sequence_length=16, label_names=LABELS)
    # "unbelievable" → un ##believ ##able: one label, two ignored sub-tokens
    row = f["word_index"][1]
    assert list(row[row >= 0]) == [0, 1, 2, 3, 4]
    first = np.nonzero(row == 3)[0][0]
    assert f["label_weights"][1, first] == 1
    assert (f["label_weights"][1, first + 1:first + 3] == 0).all()
    assert [LABELS[i] for i in f["labels"][1][row >= 0]] == SENTENCES[1].tags
    assert f["label_weights"][:, 0].sum() == 0  # [CLS]
    assert f["truncated_words"] == 0
    # the gold labels decode back to the gold tags
    logits = np.eye(len(LABELS))[f["labels"]]
    assert decode_tags(logits, f["word_index"], [5, 5], LABELS) == [s.tags for s in SENTENCES]
    # a sentence longer than the sequence: the cut-off words decode to "O"
    short = conll_features(SENTENCES, tok, sequence_length=6, label_names=LABELS)
    assert short["truncated_words"] == 2  # "." and "Berlin"
    tags = decode_tags(np.eye(len(LABELS))[short["labels"]], short["word_index"], [5, 5], LABELS)
    assert tags[0] == ["B-PER", "I-PER", "O", "B-LOC", "O"] and tags[1][3:] == ["O", "O"]


def test_ignored_sub_tokens_do_not_change_loss_or_accuracy():
    tok = tokenizer()
    model = BertTokenClassifier(BertBackbone(tiny_config()), label_names=LABELS)
    model.compile()
    f = conll_features(SENTENCES, tok, sequence_length=16, label_names=LABELS)
    before = model.evaluate(tagging_dataset(f, 2), verbose=0, return_dict=True)
    changed = dict(f, labels=np.where(f["label_weights"] > 0, f["labels"], 3))
    after = model.evaluate(tagging_dataset(changed, 2), verbose=0, return_dict=True)
    assert before == pytest.approx(after)
    logits = np.asarray(model({k: f[k] for k in ("token_ids", "segment_ids", "padding_mask")}))
    assert logits.shape == (2, 16, 5)


def test_token_classifier_round_trip(tmp_path):
    model = BertTokenClassifier(BertBackbone(tiny_config()), label_names=LABELS, dropout=0.2)
    assert model.num_classes == 5
    x = make_inputs(vocab_size=len(VOCAB))
    model.save(tmp_path / "tok.keras")
    loaded = keras.saving.load_model(tmp_path / "tok.keras")
    assert loaded.label_names == LABELS and loaded.dropout == 0.2
    np.testing.assert_allclose(loaded(x), model(x), atol=1e-5)
    with pytest.raises(ValueError, match="label_names"):
        BertTokenClassifier(BertBackbone(tiny_config()), num_classes=3, label_names=LABELS)


@pytest.mark.slow
def test_feature_based_tagger_trains_only_the_bilstm_and_head(tmp_path):
    tok = tokenizer()
    backbone = BertBackbone(tiny_config())
    model = BertTokenClassifier(backbone, label_names=LABELS, feature_layers=(-2, -1),
                                lstm_units=8)
    assert model.is_feature_based
    trainable = {v.path.split("/")[0] for v in model.trainable_weights}
    assert trainable == {"bilstm", "classifier"}
    frozen = [np.array(w) for w in model.backbone.weights]
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    f = conll_features(SENTENCES, tok, sequence_length=16, label_names=LABELS)
    model.fit(tagging_dataset(f, 2), epochs=2, verbose=0)
    for w, before in zip(model.backbone.weights, frozen):
        np.testing.assert_array_equal(np.array(w), before)
    x = {k: f[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    model.save(tmp_path / "feat.keras")
    loaded = keras.saving.load_model(tmp_path / "feat.keras")
    assert loaded.feature_layers == (-2, -1)
    np.testing.assert_allclose(loaded(x), model(x), atol=1e-5)


@pytest.mark.slow
def test_span_fine_tuning_steps_equal_transformers_and_torch_adamw(minilm_dir):
    """Six steps of kbert's SQuAD fine-tuning (the span loss, `make_optimizer`: AdamW, warmup
    and decay, decay exclusions, global-norm clipping) give the losses of transformers'
    `BertForQuestionAnswering` trained by `benchmarks/quality_hf.py`'s torch recipe from the
    same weights and batches, dropout off and the padding out of the softmax on both sides.
    (With Keras' own ε placement the third step's losses part by 2e-4.)"""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    sys.path.insert(0, str(ROOT))  # benchmarks/ is not a package of kbert
    from benchmarks.quality_hf import make_optimizer as hf_recipe
    from kbert.layers.dropout import Dropout
    from kbert.training import make_optimizer

    steps, rate = 6, 5e-5
    hf = transformers.AutoModelForQuestionAnswering.from_pretrained(
        str(minilm_dir), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertSpanLabeler(BertBackbone.from_pretrained(str(minilm_dir)))
    for layer in model._flatten_layers():
        if isinstance(layer, Dropout):
            layer.rate = 0.0  # read at call time: off before the step is traced
    model.span_head.set_weights([hf.qa_outputs.weight.detach().numpy().T,
                                 hf.qa_outputs.bias.detach().numpy()])
    model.compile(optimizer=make_optimizer(rate, steps, model=model), jit_compile=False)
    optimizer, schedule = hf_recipe(
        hf, {"learning_rate": rate, "weight_decay": 0.01, "warmup_fraction": 0.1}, steps)
    hf.train()
    rng = np.random.default_rng(0)
    ce = torch.nn.functional.cross_entropy
    for step in range(steps):
        lengths = rng.integers(20, 48, 4)
        mask = (np.arange(48)[None] < lengths[:, None]).astype("int32")
        x = {"token_ids": (rng.integers(1000, 30000, (4, 48)) * mask).astype("int32"),
             "segment_ids": ((np.arange(48)[None] >= 10) * mask).astype("int32"),
             "padding_mask": mask}
        starts = rng.integers(10, 18, 4).astype("int32")
        y = {"start_logits": starts, "end_logits": starts + 2}
        ours = model.train_on_batch(x, y, return_dict=True)["loss"]
        out = hf(input_ids=torch.tensor(x["token_ids"]).long(),
                 token_type_ids=torch.tensor(x["segment_ids"]).long(),
                 attention_mask=torch.tensor(mask).long())
        real = torch.tensor(mask).bool()
        loss = 0.5 * sum(ce(logits.masked_fill(~real, -1e4), torch.tensor(y[key]).long())
                         for logits, key in ((out.start_logits, "start_logits"),
                                             (out.end_logits, "end_logits")))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(hf.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        assert float(ours) == pytest.approx(loss.item(), abs=2e-5), step
    np.testing.assert_allclose(model.span_head.get_weights()[0],
                               hf.qa_outputs.weight.detach().numpy().T, atol=1e-6)
