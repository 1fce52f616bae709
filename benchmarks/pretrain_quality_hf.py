"""The Hugging Face side of `benchmarks/pretrain_quality.py`: `transformers`'
`BertForPreTraining` on PyTorch, pre-trained in a plain torch loop (no Trainer) from the
initial weights kbert wrote (`init/`, a Hugging Face directory with both heads) on the batches
kbert's pipeline wrote (`train.npz`), scored on its held-out batches (`heldout.npz`).

The loss is transformers' own: cross-entropy over the labels that are not -100, averaged over
the batch's real predictions, plus the NSP cross-entropy averaged over the batch. It is kbert's
(`BertPretrainer.compile`: the MLM loss averaged over the weighted predictions, NSP averaged),
because kbert's prediction weights are 1 at real predictions and 0 at padding: the labels here
are the masked ids at weight-1 slots and -100 everywhere else. Both sides label NSP 0 = IsNext,
1 = NotNext (kbert's `IS_NEXT`, transformers' `next_sentence_label`).

The optimizer is `benchmarks.quality_hf.make_optimizer`, kbert's `make_optimizer` written for
torch (AdamW, ε 1e-6 as Algorithm 1 puts it, decay off LayerNorm weights and biases, linear
warmup then linear decay), with global-norm clipping at 1.0.
"""

import sys
import time

import numpy as np

from benchmarks.quality_hf import make_optimizer

IGNORE = -100  # torch's cross-entropy ignore index: the positions that are not predicted


def load_batches(path):
    """{name: array} of an .npz written by the data step (rows of all batches, in order)."""
    with np.load(path) as arrays:
        return {k: arrays[k] for k in arrays.files}


def mlm_labels(arrays, rows):
    """transformers' `labels` [rows, length]: the masked ids at the predicted positions, -100
    elsewhere."""
    positions, ids = arrays["masked_positions"][rows], arrays["masked_ids"][rows]
    labels = np.full(arrays["token_ids"][rows].shape, IGNORE, np.int64)
    row, slot = np.nonzero(arrays["masked_weights"][rows] > 0)
    labels[row, positions[row, slot]] = ids[row, slot]
    return labels


def model_inputs(arrays, rows, labelled=True):
    import torch

    batch = {"input_ids": torch.from_numpy(arrays["token_ids"][rows].astype(np.int64)),
             "token_type_ids": torch.from_numpy(arrays["segment_ids"][rows].astype(np.int64)),
             "attention_mask": torch.from_numpy(arrays["padding_mask"][rows].astype(np.int64))}
    if labelled:
        batch["labels"] = torch.from_numpy(mlm_labels(arrays, rows))
        batch["next_sentence_label"] = torch.from_numpy(arrays["nsp_labels"][rows].astype(np.int64))
    return batch


def evaluate(model, arrays, batch_size):
    """Held-out MLM and NSP accuracy and loss, weighted as Keras' `evaluate` weighs them:
    accuracies over all the predictions (MLM: the weighted ones), each head's loss as the
    plain mean of the batches' mean losses."""
    import torch

    model.eval()
    count = len(arrays["token_ids"])
    batches = -(-count // batch_size)
    hits = weight = nsp_hits = mlm_loss = nsp_loss = 0.0
    with torch.no_grad():
        for start in range(0, count, batch_size):
            rows = slice(start, min(start + batch_size, count))
            out = model(**model_inputs(arrays, rows, labelled=False))
            positions = torch.from_numpy(arrays["masked_positions"][rows].astype(np.int64))
            logits = torch.take_along_dim(out.prediction_logits, positions[..., None], dim=1)
            ids = torch.from_numpy(arrays["masked_ids"][rows].astype(np.int64))
            w = torch.from_numpy(arrays["masked_weights"][rows]).to(logits.dtype)
            hits += float(((logits.argmax(-1) == ids) * w).sum())
            mlm_loss += float((torch.nn.functional.cross_entropy(
                logits.transpose(1, 2), ids, reduction="none") * w).sum() / w.sum().clamp(
                    min=1.0))
            weight += float(w.sum())
            nsp = torch.from_numpy(arrays["nsp_labels"][rows].astype(np.int64))
            nsp_logits = out.seq_relationship_logits
            nsp_hits += float((nsp_logits.argmax(-1) == nsp).sum())
            nsp_loss += float(torch.nn.functional.cross_entropy(nsp_logits, nsp))
    model.train()
    return {"mlm_accuracy": hits / max(weight, 1.0), "nsp_accuracy": nsp_hits / count,
            "mlm_loss": mlm_loss / batches, "nsp_loss": nsp_loss / batches}


def progress(side, point):
    """One line on stderr per held-out scoring: a long run's log shows where it is."""
    print(f"[pretrain_quality] {side} step {point['step']}: mlm_accuracy "
          f"{point['mlm_accuracy']:.4f}, nsp_accuracy {point['nsp_accuracy']:.4f}",
          file=sys.stderr, flush=True)


def no_decay_count(optimizer):
    """The number of parameter values the optimizer does not decay (the group with decay 0)."""
    return sum(p.numel() for group in optimizer.param_groups if group["weight_decay"] == 0
               for p in group["params"])


def pretrain(init_dir, train_file, heldout_file, budget, dtype="float32"):
    """Trains `budget["steps"]` steps; returns the side's record: per-step losses, step
    seconds, held-out scores at the evaluation steps, the final scores and sequences/s."""
    import torch
    import transformers

    torch.manual_seed(budget["seed"])
    model = transformers.BertForPreTraining.from_pretrained(str(init_dir))
    if dtype == "float64":
        model = model.double()
    model.train()
    train, heldout = load_batches(train_file), load_batches(heldout_file)
    steps, batch_size, every = budget["steps"], budget["batch_size"], budget["eval_every"]
    optimizer, scheduler = make_optimizer(model, budget, steps)
    losses, mlm_losses, rates, seconds, curve = [], [], [], [], []
    for step in range(steps):
        if step % every == 0:
            curve.append({"step": step, **evaluate(model, heldout, batch_size)})
            progress(f"hf ({dtype})", curve[-1])
        batch = model_inputs(train, slice(step * batch_size, (step + 1) * batch_size))
        rates.append(scheduler.get_last_lr()[0])
        start = time.perf_counter()
        out = model(**batch)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), budget["clipnorm"])
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(out.loss.item())
        seconds.append(time.perf_counter() - start)
    final = evaluate(model, heldout, batch_size)
    curve.append({"step": steps, **final})
    progress(f"hf ({dtype})", curve[-1])
    return {**final, "losses": losses, "learning_rates": rates, "step_seconds": seconds,
            "curve": curve, "no_decay_values": no_decay_count(optimizer),
            "parameters": sum(p.numel() for p in model.parameters()), "dtype": dtype}
