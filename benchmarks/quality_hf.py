"""The Hugging Face side of `benchmarks/quality.py`: MiniLM fine-tuned with `transformers` on
PyTorch in a plain torch loop (no Trainer), on kbert's recipe and kbert's examples.

The recipe is kbert's `make_optimizer` (kbert/training/optimizer.py) written for torch:
  * AdamW, β (0.9, 0.999), ε 1e-6, decoupled weight decay 0.01 (torch applies it as
    `p *= 1 - lr·wd`, Keras as `p -= p·wd·lr`: the same), none on LayerNorm weights and biases;
  * global-norm gradient clipping at 1.0;
  * lr(s) = peak·s/w for s < w, then peak·(1 - (s - w)/(T - w)), s counted from 0 (the first
    update has lr 0, as in kbert and in `transformers.get_linear_schedule_with_warmup`),
    w = round(0.1·T).
One difference is left as the libraries have it: Keras scales ε by √(1 - β2^t) (ε inside the
bias-corrected denominator), torch does not; it only matters in the first steps.

Batches are drawn like kbert's `repeat()`ed tf.data stream: a fresh permutation per pass,
consecutive full batches across pass boundaries, T = epochs·ceil(N / batch) steps, each padded
to its longest row (kbert also buckets by length; that changes speed, not the recipe).
"""

import math
import random
import time

import numpy as np

PAD_LABEL = -100  # torch's cross-entropy ignore index: sub-tokens after a word's first


def schedule_value(step, peak, total_steps, warmup_steps):
    """kbert's `WarmupPolynomialDecay` (power 1, end 0) at optimizer step `step`."""
    if step < warmup_steps:
        return peak * step / max(warmup_steps, 1)
    progress = min(max((step - warmup_steps) / max(total_steps - warmup_steps, 1), 0.0), 1.0)
    return peak * (1.0 - progress)


def make_optimizer(model, budget, total_steps):
    """(AdamW, LambdaLR) on kbert's recipe; no decay for LayerNorm weights and biases."""
    import torch

    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
    ids = {id(p) for p in no_decay}
    decay = [p for p in model.parameters() if id(p) not in ids]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": budget["weight_decay"]},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=budget["learning_rate"], betas=(0.9, 0.999), eps=1e-6)
    warmup = int(round(budget["warmup_fraction"] * total_steps))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: schedule_value(s, 1.0, total_steps, warmup))
    return optimizer, scheduler


def batch_stream(count, batch_size, seed):
    """Endless index batches: a fresh permutation per pass, full batches across passes."""
    rng = random.Random(seed)
    pending = []
    while True:
        if len(pending) < batch_size:
            order = list(range(count))
            rng.shuffle(order)
            pending.extend(order)
        yield pending[:batch_size]
        pending = pending[batch_size:]


def pad_batch(rows, keys, pad_values):
    """Tensors of the rows' values for `keys`, lists padded to the batch's longest row."""
    import torch

    longest = max(len(r[keys[0]]) for r in rows)

    def column(k):
        if not isinstance(rows[0][k], (list, tuple)):
            return torch.tensor([r[k] for r in rows])
        return torch.tensor([list(r[k]) + [pad_values.get(k, 0)] * (longest - len(r[k]))
                             for r in rows])
    return {k: column(k) for k in keys}


def train(model, features, budget, collate):
    """Trains `model` on the feature rows; returns the run's training record (steps, per-step
    lr, final loss, seconds)."""
    import torch

    steps = budget["epochs"] * math.ceil(len(features) / budget["batch_size"])
    optimizer, scheduler = make_optimizer(model, budget, steps)
    model.train()
    rates, losses = [], []
    stream = batch_stream(len(features), budget["batch_size"], budget["seed"])
    start = time.perf_counter()
    for _ in range(steps):
        batch = collate([features[i] for i in next(stream)])
        rates.append(scheduler.get_last_lr()[0])
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    seconds = time.perf_counter() - start
    return {"steps": steps, "learning_rates": rates, "final_train_loss": losses[-1],
            "train_seconds": round(seconds, 1), "train_rows": len(features)}


def predict(model, features, keys, batch_size=64, logits_of=lambda out: out.logits):
    """Logits (numpy, one array per row, padding cut; `logits_of` picks them from the model's
    output) for the rows, in order; batches are formed over rows sorted by length."""
    import torch

    model.eval()
    order = sorted(range(len(features)), key=lambda i: len(features[i][keys[0]]))
    out = [None] * len(features)
    with torch.no_grad():
        for i in range(0, len(order), batch_size):
            part = order[i:i + batch_size]
            batch = pad_batch([features[j] for j in part], keys, {})
            logits = logits_of(model(**batch)).float().numpy()
            for row, j in enumerate(part):
                out[j] = (logits[row] if logits.ndim == 2
                          else logits[row, :len(features[j][keys[0]])])
    return out


ENCODER_KEYS = ("input_ids", "token_type_ids", "attention_mask")


def sentiment(checkpoint, examples, budget):
    """Sentence classification: dev and test accuracy."""
    import torch
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(checkpoint)
    torch.manual_seed(budget["seed"])
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        checkpoint, num_labels=2)

    def encode(rows):
        enc = tok([t for t, _ in rows], truncation=True, max_length=budget["sequence_length"])
        return [{**{k: enc[k][i] for k in ENCODER_KEYS}, "labels": y}
                for i, (_, y) in enumerate(rows)]

    def collate(rows):
        return pad_batch(rows, (*ENCODER_KEYS, "labels"), {})

    record = train(model, encode(examples["train"]), budget, collate)
    scores = {}
    for split in ("dev", "test"):
        rows = encode(examples[split])
        logits = predict(model, rows, ENCODER_KEYS)
        labels = np.array([r["labels"] for r in rows])
        scores[f"{split}_accuracy"] = float((np.argmax(logits, -1) == labels).mean())
    return scores, record


def conll(checkpoint, examples, budget, label_names):
    """Token tagging, the first sub-token of each word labelled: seqeval entity F1."""
    import torch
    import transformers
    from seqeval.metrics import f1_score

    tok = transformers.AutoTokenizer.from_pretrained(checkpoint)
    torch.manual_seed(budget["seed"])
    model = transformers.AutoModelForTokenClassification.from_pretrained(
        checkpoint, num_labels=len(label_names))
    index = {name: i for i, name in enumerate(label_names)}

    def encode(sentences):
        enc = tok([s.words for s in sentences], is_split_into_words=True, truncation=True,
                  max_length=budget["sequence_length"])
        rows = []
        for i, s in enumerate(sentences):
            words = enc.word_ids(i)
            first = [w is not None and (p == 0 or words[p - 1] != w) for p, w in enumerate(words)]
            labels = [index[s.tags[w]] if f else PAD_LABEL for w, f in zip(words, first)]
            rows.append({**{k: enc[k][i] for k in ENCODER_KEYS}, "labels": labels,
                         "first": [w if f else None for w, f in zip(words, first)]})
        return rows

    def collate(rows):
        return pad_batch(rows, (*ENCODER_KEYS, "labels"), {"labels": PAD_LABEL})

    record = train(model, encode(examples["train"]), budget, collate)
    scores = {}
    for split in ("dev", "test"):
        rows = encode(examples[split])
        logits = predict(model, rows, ENCODER_KEYS)
        predicted = []
        for s, row, out in zip(examples[split], rows, logits):
            tags = ["O"] * len(s.words)  # words cut off by the sequence length: "O"
            for position, word in enumerate(row["first"]):
                if word is not None:
                    tags[word] = label_names[int(np.argmax(out[position]))]
            predicted.append(tags)
        scores[f"{split}_f1"] = float(f1_score([s.tags for s in examples[split]], predicted))
    return scores, record
