"""The same BERT in three packages, each as one timed step: kbert, keras-hub (TensorFlow) and
Hugging Face transformers (PyTorch).

A builder returns a `Step`: calling it runs one step on a batch prepared beforehand and returns
only once the result is on the host, so wall-clock time around the call is the step's time.
Every contestant gets the same sizes, the same random batch and the same optimizer algorithm
(AdamW, weight decay 0.01, ε 1e-6, global-norm clipping at 1.0); weights are random, since
speed does not depend on them. keras-hub trains with kbert's AdamW class unless asked for
Keras' own (`optimizer="keras"`), the one its users would reach for.

Cases:
  train     backbone + 2-class classifier on the pooled output, one AdamW step
  infer     the encoder's sequence_output, no gradients: a model with that one output (kbert's
            `BertFeatureExtractor` of the last layer; keras-hub's backbone cut to it), since a
            backbone's own `predict` also computes the pooled output (kbert's runs its last
            block a second time at [CLS] for it, 2-3% of a mini step on a 2-core CPU)
  classify  the 2-class classifier's logits from the pooled output, no gradients (what a
            served sentence classifier computes)
  pretrain  MLM at 20 masked positions (+ NSP where the package has it), one AdamW step
  finetune  end to end on the real movie-review sentences: raw text → each package's own
            preprocessing in tf.data → `model.fit` at sequence_length 128 (TensorFlow only);
            one call is a `fit` of FINETUNE_STEPS steps, pipeline start-up included; the
            contestants run at batch 32, the paper's fine-tuning batch
"""

import dataclasses
import os

import numpy as np

CASES = ("train", "infer", "classify", "pretrain", "finetune")
MASKED_POSITIONS = 20  # Google's max_predictions_per_seq at length 128
FINETUNE_STEPS = 10  # optimizer steps per timed `fit` call in the finetune case


@dataclasses.dataclass
class Step:
    run: callable
    sequences: int  # sequences processed by one call

    def __call__(self):
        return self.run()


def random_batch(config, batch, seq, seed=0, masked=MASKED_POSITIONS):
    """Token ids over the vocabulary (avoiding the special ids), two segments, no padding, and
    targets for every case (`masked` predictions per sequence)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1000, config.vocab_size, (batch, seq)).astype("int32")
    segments = (np.arange(seq) >= seq // 2).astype("int32")[None].repeat(batch, 0)
    positions = np.sort(np.stack([rng.choice(np.arange(1, seq), masked, replace=False)
                                  for _ in range(batch)]), axis=1).astype("int32")
    return {
        "inputs": {"token_ids": ids, "segment_ids": segments,
                   "padding_mask": np.ones((batch, seq), "int32")},
        "labels": rng.integers(0, 2, batch).astype("int32"),
        "masked_positions": positions,
        "masked_ids": np.take_along_axis(ids, positions, 1),
        "masked_weights": np.ones((batch, masked), "float32"),
    }


def sentiment_texts():
    """The training sentences and labels of the movie-review sentiment set, and MiniLM's
    vocab.txt (the same WordPiece vocabulary for both TensorFlow packages)."""
    from kbert.data.tasks import load_task
    from kbert.presets import resolve

    train = load_task("sentiment").splits["train"]
    return train, str(resolve("minilm_l6_h384_uncased") / "vocab.txt")


def optimizer_for(model, keras_class=False):
    """BERT's AdamW (kbert's `make_optimizer`), or with `keras_class` the same settings in
    `keras.optimizers.AdamW`."""
    from kbert.training.optimizer import make_optimizer, no_decay_variables

    optimizer = make_optimizer(1e-4, total_steps=100_000, model=model)
    if not keras_class:
        return optimizer
    import keras

    config = optimizer.get_config()
    for own in ("no_decay_paths", "no_decay_names"):  # kbert's saved exclusions, set below
        config.pop(own)
    native = keras.optimizers.AdamW.from_config(config)
    native.exclude_from_weight_decay(var_list=no_decay_variables(model))
    return native


def kbert_step(case, config, batch, seq, xla=None, dtype=None):
    """kbert on the current Keras backend. `xla=None` is kbert's default path: `compile()`
    with no speed flags, as a user writes it (`kbert.models.xla` chooses)."""
    import keras

    from kbert import BertBackbone, BertClassifier, BertFeatureExtractor, BertPretrainer

    keras.utils.set_random_seed(0)
    speed = {} if xla is None else {"jit_compile": xla}
    if case == "finetune":
        return _kbert_finetune(config, batch, seq, speed, dtype)
    data = random_batch(config, batch, seq)
    backbone = BertBackbone(config, dtype=dtype)
    if case == "infer":
        model = BertFeatureExtractor(backbone, layers=-1)
        model.compile(**speed)
        return Step(lambda: model.predict_on_batch(data["inputs"]), batch)
    if case == "classify":
        model = BertClassifier(backbone, num_classes=2)
        model.compile(**speed)
        return Step(lambda: model.predict_on_batch(data["inputs"]), batch)
    if case == "train":
        model = BertClassifier(backbone, num_classes=2)
        model.compile(optimizer=optimizer_for(model), **speed)
        return Step(lambda: model.train_on_batch(data["inputs"], data["labels"]), batch)
    model = BertPretrainer(backbone)
    model.compile(optimizer=optimizer_for(model), **speed)
    inputs = {**data["inputs"], "masked_positions": data["masked_positions"]}
    targets = {"mlm": data["masked_ids"], "nsp": data["labels"]}
    weights = {"mlm": data["masked_weights"], "nsp": np.ones(batch, "float32")}
    return Step(lambda: model.train_on_batch(inputs, targets, sample_weight=weights), batch)


def _kbert_finetune(config, batch, seq, speed, dtype=None):
    from kbert import BertBackbone, BertClassifier, BertPreprocessor, BertTokenizer
    from kbert.data.tasks.pipeline import make_dataset
    from kbert.models.xla import pad_multiple

    train, vocab = sentiment_texts()
    preprocessor = BertPreprocessor(BertTokenizer(vocabulary=vocab, lowercase=True),
                                    sequence_length=seq)
    model = BertClassifier(BertBackbone(config, dtype=dtype), num_classes=2)
    model.compile(optimizer=optimizer_for(model), **speed)
    # As kbert.finetune trains: shuffled, length-bucketed, padded to each batch's longest
    # (under XLA rounded up, so that it compiles a few shapes).
    data = make_dataset(train, preprocessor, batch, shuffle=True, bucket=True, repeat=True,
                        pad_to_multiple_of=pad_multiple(model))
    return Step(lambda: model.fit(data, steps_per_epoch=FINETUNE_STEPS, verbose=0),
                FINETUNE_STEPS * batch)


def keras_hub_step(case, config, batch, seq, xla=True, optimizer="kbert"):
    """keras-hub's BertBackbone and task models at the same sizes, training with kbert's AdamW
    or (`optimizer="keras"`) Keras' own."""
    import keras
    import keras_hub

    keras.utils.set_random_seed(0)
    keras_class = {"kbert": False, "keras": True}[optimizer]
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_layers,
        num_heads=config.num_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=config.hidden_dropout,
        max_sequence_length=config.max_position_embeddings, num_segments=config.type_vocab_size)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    if case == "finetune":
        import tensorflow as tf

        train, vocab = sentiment_texts()
        tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocab, lowercase=True)
        preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer,
                                                                       sequence_length=seq)
        model = keras_hub.models.BertTextClassifier(backbone, num_classes=2,
                                                    preprocessor=preprocessor)
        model.compile(optimizer=optimizer_for(model, keras_class), loss=loss, jit_compile=xla)
        texts = np.asarray([text for text, _ in train], object)
        labels = np.asarray([label for _, label in train], "int32")
        # keras-hub maps its preprocessor over a dataset of raw strings inside fit().
        data = tf.data.Dataset.from_tensor_slices((texts, labels)).shuffle(len(labels), seed=0)
        data = data.repeat().batch(batch)
        return Step(lambda: model.fit(data, steps_per_epoch=FINETUNE_STEPS, verbose=0),
                    FINETUNE_STEPS * batch)
    data = random_batch(config, batch, seq)
    if case == "infer":
        model = keras.Model(backbone.input, backbone.output["sequence_output"])
        model.compile(jit_compile=xla)
        return Step(lambda: model.predict_on_batch(data["inputs"]), batch)
    if case == "classify":
        model = keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=None)
        model.compile(jit_compile=xla)
        return Step(lambda: model.predict_on_batch(data["inputs"]), batch)
    if case == "train":
        model = keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=None)
        model.compile(optimizer=optimizer_for(model, keras_class), loss=loss, jit_compile=xla)
        return Step(lambda: model.train_on_batch(data["inputs"], data["labels"]), batch)
    # keras-hub's pre-training model is MLM only (it has no NSP head).
    model = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    model.compile(optimizer=optimizer_for(model, keras_class), loss=loss, jit_compile=xla)
    inputs = {**data["inputs"], "mask_positions": data["masked_positions"]}
    return Step(lambda: model.train_on_batch(inputs, data["masked_ids"],
                                             sample_weight=data["masked_weights"]), batch)


def hugging_face_step(case, config, batch, seq):
    """transformers' BertModel / BertForSequenceClassification / BertForPreTraining on PyTorch
    (its default attention implementation), eager, all CPU threads."""
    import torch
    import transformers

    torch.manual_seed(0)
    torch.set_num_threads(os.cpu_count())
    hf_config = transformers.BertConfig(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size,
        num_hidden_layers=config.num_layers, num_attention_heads=config.num_heads,
        intermediate_size=config.intermediate_size,
        hidden_act={"gelu": "gelu", "gelu_tanh": "gelu_new"}.get(config.hidden_act, "relu"),
        hidden_dropout_prob=config.hidden_dropout,
        attention_probs_dropout_prob=config.attention_dropout,
        max_position_embeddings=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size, layer_norm_eps=config.layer_norm_eps,
        num_labels=2)
    data = random_batch(config, batch, seq)
    inputs = {"input_ids": torch.from_numpy(data["inputs"]["token_ids"]).long(),
              "token_type_ids": torch.from_numpy(data["inputs"]["segment_ids"]).long(),
              "attention_mask": torch.from_numpy(data["inputs"]["padding_mask"]).long()}
    if case == "infer":
        model = transformers.BertModel(hf_config, add_pooling_layer=False).eval()

        def infer():
            with torch.inference_mode():
                return model(**inputs).last_hidden_state.numpy()

        return Step(infer, batch)
    if case == "classify":
        model = transformers.BertForSequenceClassification(hf_config).eval()

        def classify():
            with torch.inference_mode():
                return model(**inputs).logits.numpy()

        return Step(classify, batch)
    if case == "train":
        model = transformers.BertForSequenceClassification(hf_config).train()
        targets = {"labels": torch.from_numpy(data["labels"]).long()}
    elif case == "pretrain":
        model = transformers.BertForPreTraining(hf_config).train()
        labels = torch.full((batch, seq), -100, dtype=torch.long)  # -100: not predicted
        labels.scatter_(1, torch.from_numpy(data["masked_positions"]).long(),
                        torch.from_numpy(data["masked_ids"]).long())
        targets = {"labels": labels,
                   "next_sentence_label": torch.from_numpy(data["labels"]).long()}
    else:
        raise ValueError(f"Case {case!r} is not measured for Hugging Face.")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, eps=1e-6)

    def train():
        optimizer.zero_grad(set_to_none=True)
        loss = model(**inputs, **targets).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss.item()

    return Step(train, batch)


BUILDERS = {"kbert": kbert_step, "keras_hub": keras_hub_step, "hugging_face": hugging_face_step}
